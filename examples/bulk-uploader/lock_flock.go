//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package main

import (
	"errors"
	"os"
	"syscall"
)

// lockJournal takes an exclusive lock on f, held until f is closed, so that
// two runs never share a journal: each would read it before the other wrote,
// and upload every record the other did.
func lockJournal(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EWOULDBLOCK):
			return errors.New("in use by another run (a second run with the same journal would upload every record again): wait for it, or give another -journal")
		}
		return err
	}
}
