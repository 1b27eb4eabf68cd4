package main

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sync"
)

// The journal (-journal FILE) makes a run resumable: one JSON line per
// record sent, uploaded or failed, or refused unsent by the transport,
// appended and fsynced before the record counts as done. A run stopped at any point — Ctrl-C, a crash, SIGKILL,
// the power — loses at most the lines of the records under way; run again
// with the same journal, it skips the records the journal lists as
// uploaded and sends the others: those that failed, those never sent, and
// those whose line was not yet written (the server may have taken these:
// they go again with the same Idempotency-Key).
//
// A record is known by its id and the SHA-256 of its bytes, so a record
// edited since (to fix what made it fail) is sent again, with an
// Idempotency-Key of its own (the key holds the id and the digest), and
// two identical records are two uploads. A last line without its "\n" was being written
// when the run stopped: it is dropped, and the file cut back to the last
// whole line before anything is appended. Any other line that is not an
// entry is an error: the file is then not a journal, and left as it is.
//
// Lines are fsynced in groups: a worker whose line is written waits for one
// fsync that covers the lines of every worker that came meanwhile, so the
// journal costs about one fsync per round of workers, not one per record.

// entry is one line of the journal.
type entry struct {
	ID       string `json:"id"`
	Line     int    `json:"line,omitempty"` // in the input, 0 for made-up records
	SHA256   string `json:"sha256"`
	Uploaded bool   `json:"uploaded"`
	Status   int    `json:"status,omitempty"` // 0: no response
	Error    string `json:"error,omitempty"`
}

func entryFor(r result) entry {
	e := entry{ID: r.rec.id, Line: r.rec.line, SHA256: hex.EncodeToString(r.rec.hash[:]), Uploaded: r.ok(), Status: r.status}
	if r.err != nil {
		e.Error = r.err.Error()
	}
	return e
}

type journal struct {
	path     string
	f        *os.File
	uploaded map[string]int // by id and hash: uploaded records listed
	torn     bool           // a torn last line was dropped

	mu       sync.Mutex
	cond     sync.Cond
	buf      []byte // lines appended, not yet written
	appended int64  // lines appended
	synced   int64  // lines written and fsynced
	flushing bool   // a worker is writing and syncing
	err      error  // the first failure: no line is written after it
}

func recordKey(id, sha string) string { return id + "\x00" + sha }

// openJournal opens (or creates) the journal at path and reads what it
// lists; in is the input file (empty: none), which the journal must not be.
func openJournal(path, in string) (*journal, error) {
	_, err := os.Stat(path)
	created := errors.Is(err, fs.ErrNotExist)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o666)
	if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
		err = pe.Err // the path is in the message already
	}
	if err != nil {
		return nil, fmt.Errorf("journal %s: %w", path, err)
	}
	j := &journal{path: path, f: f, uploaded: map[string]int{}}
	j.cond.L = &j.mu
	if err := j.open(created, in); err != nil {
		f.Close()
		return nil, fmt.Errorf("journal %s: %w", path, err)
	}
	return j, nil
}

func (j *journal) open(created bool, in string) error {
	fi, err := j.f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return errors.New("not a regular file")
	}
	if err := lockJournal(j.f); err != nil {
		return err
	}
	if in != "" {
		if ini, err := os.Stat(in); err == nil && os.SameFile(fi, ini) {
			return errors.New("is the input file (-in)")
		}
	}
	if created {
		// The file's name must survive a crash too. (Not every system can
		// sync a directory: Windows cannot, and needs not.)
		if err := syncDir(filepath.Dir(j.path)); err != nil && runtime.GOOS != "windows" {
			return err
		}
	}
	whole, err := j.read()
	if err != nil {
		return err
	}
	if whole < fi.Size() {
		j.torn = true
		if err := j.f.Truncate(whole); err != nil {
			return err
		}
		return j.f.Sync()
	}
	return nil
}

// read reads the entries and returns the length of the whole lines.
func (j *journal) read() (whole int64, err error) {
	sc := bufio.NewScanner(j.f)
	sc.Buffer(make([]byte, 64<<10), 8*maxLine) // an id escaped in JSON can grow 6-fold
	sc.Split(splitLines)
	for n := 1; sc.Scan(); n++ {
		line, ok := bytes.CutSuffix(sc.Bytes(), []byte("\n"))
		if !ok {
			break // torn
		}
		var e entry
		if err := json.Unmarshal(line, &e); err != nil || e.ID == "" || !isSHA256(e.SHA256) {
			return 0, fmt.Errorf("line %d is not a journal entry: is this the right file?", n)
		}
		if e.Uploaded {
			j.uploaded[recordKey(e.ID, e.SHA256)]++
		}
		whole += int64(len(line)) + 1
	}
	return whole, sc.Err()
}

func isSHA256(s string) bool {
	b, err := hex.DecodeString(s)
	return err == nil && len(b) == 32
}

// skip returns the records the journal does not list as uploaded, and how
// many it does.
func (j *journal) skip(recs []record) (rest []record, skipped int) {
	for _, r := range recs {
		k := recordKey(r.id, hex.EncodeToString(r.hash[:]))
		if j.uploaded[k] > 0 {
			j.uploaded[k]--
			skipped++
			continue
		}
		rest = append(rest, r)
	}
	return rest, skipped
}

// append writes e and returns once it is fsynced. Safe for concurrent use.
func (j *journal) append(e entry) error {
	line, err := json.Marshal(e)
	if err != nil {
		return err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.buf = append(append(j.buf, line...), '\n')
	j.appended++
	mine := j.appended
	for j.synced < mine && j.err == nil {
		if j.flushing {
			j.cond.Wait()
			continue
		}
		buf, upto := j.buf, j.appended
		j.buf, j.flushing = nil, true
		j.mu.Unlock()
		err := j.writeSync(buf)
		j.mu.Lock()
		j.flushing = false
		if err != nil {
			j.err = fmt.Errorf("journal %s: %w", j.path, err)
		} else {
			j.synced = upto
		}
		j.cond.Broadcast()
	}
	if j.synced >= mine {
		return nil
	}
	return j.err
}

// failure is the error that stopped the journal, if any.
func (j *journal) failure() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.err
}

func (j *journal) writeSync(b []byte) error {
	if _, err := j.f.Write(b); err != nil {
		return err
	}
	return j.f.Sync()
}

func (j *journal) close() error { return j.f.Close() }

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
