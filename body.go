package throttle

import (
	"bytes"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// A discarded response body is drained so its connection can be reused, but
// only so far: a large or slow body is closed instead.
const (
	drainMax     = 4 << 10
	drainTimeout = 100 * time.Millisecond
)

// discard drains (bounded in bytes and time) and closes the body of a
// response a retry replaces, and returns the response with what it read
// as its body, should the retry be refused before it is sent: the caller
// gets the response obtained, as the net/http contract asks. A body that
// did not end within drainMax bytes and drainTimeout is kept cut: its
// first bytes, at most drainMax, then ErrBodyDiscarded (regression, found
// in review 46: such a response was dropped, and the caller of a retry
// refused at once got the refusal, not the 503 with its 8 KiB error page
// it had obtained). A body that failed on its own is kept with what it
// read, then its error, as the caller would have read it. It returns nil
// only when resp is.
func discard(resp *http.Response) *http.Response {
	if resp == nil {
		return nil
	}
	kept := *resp
	if resp.Body == nil || resp.Body == http.NoBody {
		return &kept
	}
	body := resp.Body
	var once sync.Once // closed once, by the timer or here, even should Read or Close panic
	closeIt := func() { once.Do(func() { body.Close() }) }
	stop := time.AfterFunc(drainTimeout, func() {
		// A Close that panics here, on the timer's goroutine, has no
		// caller to reach: it must not end the process (found in review).
		defer func() { _ = recover() }()
		closeIt()
	})
	defer closeIt() // should Read panic
	var buf bytes.Buffer
	n, err := io.Copy(&buf, io.LimitReader(body, drainMax+1))
	late := !stop.Stop() // drainTimeout passed: the body was closed under the read
	closeIt()
	switch {
	case n > drainMax:
		buf.Truncate(drainMax) // (the byte read past it, to tell the body longer, is cut with the rest)
		err = ErrBodyDiscarded
	case err != nil && late:
		err = ErrBodyDiscarded
	}
	if err == nil {
		kept.Body = io.NopCloser(&buf)
	} else {
		kept.Body = io.NopCloser(io.MultiReader(&buf, failing{err}))
	}
	return &kept
}

// failing is a reader that fails with its error.
type failing struct{ err error }

func (f failing) Read([]byte) (int, error) { return 0, f.err }

// closeBody closes a request body the base RoundTripper never received.
func closeBody(req *http.Request) {
	if req != nil && req.Body != nil {
		req.Body.Close()
	}
}

// slotBody gives back an in-flight slot of its key when the caller closes
// the body or reads it to its end, whichever comes first. It is the one
// allocation of an answer with a body under MaxInFlight: the caller owns
// the body, and may hold it (and close it again) long after, so a body is
// never reused. It is 24 bytes, the smallest size class that holds it: the
// key, swapped for nil when the slot goes back, is also its done flag.
//
// The key is an unsafe.Pointer read and swapped with sync/atomic's
// functions, not an atomic.Pointer, so that a new body is made with it,
// as any value is, before the caller has the body: an atomic.Pointer is set
// by its Store, an exchange with the whole machine (XCHG on amd64), one of
// the window's row's four of its kind an answer (with the Swap that gives
// the slot back and the key's lock then).
type slotBody struct {
	io.ReadCloser
	ks unsafe.Pointer // *keyState; nil once the slot is given back
}

func (b *slotBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.release()
	}
	return n, err
}

func (b *slotBody) Close() error {
	// Given back even if the base's body panics in its Close (found in
	// review: the caller recovered, and the key stayed at MaxInFlight for
	// good).
	defer b.release()
	return b.ReadCloser.Close()
}

func (b *slotBody) release() {
	if atomic.LoadPointer(&b.ks) == nil {
		return // given back already (a body read to its end is closed too: one atomic write)
	}
	if ks := (*keyState)(atomic.SwapPointer(&b.ks, nil)); ks != nil {
		ks.freeSlot()
	}
}

// rwSlotBody keeps the io.Writer of a 101 Switching Protocols body, and its
// CloseWrite, if it has one: httputil.ReverseProxy half-closes the tunnel
// with it, and without it closed the whole tunnel when the client
// half-closed, and lost the backend's answer (found in review).
type rwSlotBody struct {
	slotBody
	w io.Writer
}

func (b *rwSlotBody) Write(p []byte) (int, error) { return b.w.Write(p) }

// cwSlotBody is an rwSlotBody whose connection closes its write side alone.
type cwSlotBody struct {
	rwSlotBody
	cw interface{ CloseWrite() error }
}

func (b *cwSlotBody) CloseWrite() error { return b.cw.CloseWrite() }

// holdsSlot reports whether resp has a body to hold an in-flight slot until
// it is done; without one, the slot goes back with the answer.
func holdsSlot(resp *http.Response) bool {
	return resp != nil && resp.Body != nil && resp.Body != http.NoBody
}

// holdSlot makes resp's body give back ks's slot (holdsSlot(resp) must be
// true).
func holdSlot(resp *http.Response, ks *keyState) {
	if resp.StatusCode == http.StatusSwitchingProtocols {
		if rw, ok := resp.Body.(io.ReadWriteCloser); ok {
			if cw, ok := rw.(interface{ CloseWrite() error }); ok {
				resp.Body = &cwSlotBody{rwSlotBody: rwSlotBody{slotBody: slotBody{rw, unsafe.Pointer(ks)}, w: rw}, cw: cw}
				return
			}
			resp.Body = &rwSlotBody{slotBody: slotBody{rw, unsafe.Pointer(ks)}, w: rw}
			return
		}
	}
	resp.Body = &slotBody{resp.Body, unsafe.Pointer(ks)}
}
