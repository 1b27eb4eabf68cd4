package throttle

import (
	"math"
	"time"

	"golang.org/x/time/rate"
)

// policy is a validated Policy, ready to make key states from.
type policy struct {
	Policy
	limit Limit  // the pacer: LimitRate, or LimitQueue for a leaky bucket
	keys  *table // the states of the keys under it
	gen   uint64 // replacements of its slot's Policy before it (swap.go)
}

func compile(p Policy) *policy {
	p.Windows = append([]Window(nil), p.Windows...)
	if p.Rate > rate.Inf { // +Inf: unpaced, as rate.Inf
		p.Rate = rate.Inf
	}
	cp := &policy{Policy: p, limit: LimitRate, keys: newTable()}
	if p.Queue > 0 {
		cp.limit = LimitQueue
	}
	return cp
}

// newLimiter returns the key's pacer: a token bucket of depth Burst-1 (one
// token is held in reserve, see Policy.Burst), or, for a leaky bucket, one
// of depth 1 (an idle queue releases at once, then one every 1/Rate, never
// two closer). nil: unpaced.
func (p *policy) newLimiter() *rate.Limiter {
	switch {
	case !p.paced():
		return nil
	case p.Queue > 0:
		return rate.NewLimiter(p.Rate, 1)
	default:
		return rate.NewLimiter(p.Rate, max(1, p.Burst-1))
	}
}

// tokenDelay is how long after at the limiter will hold the k-th token from
// now (k >= 1), if nothing else takes any. It takes nothing.
func tokenDelay(lim *rate.Limiter, at time.Time, k int) time.Duration {
	missing := float64(k) - lim.TokensAt(at)
	if missing <= 1e-6 {
		return 0 // a millionth of a token short is float error, not a wait
	}
	secs := missing / float64(lim.Limit())
	if secs >= math.MaxInt64/1e9 {
		return math.MaxInt64
	}
	return max(1, time.Duration(math.Round(secs*1e9)))
}

// windowLog is an exact sliding window: the last N admissions, oldest first
// in a ring, as offsets from the transport's epoch.
//
// It admits at most n (N, or fewer while the server objects: see adapt.go)
// in any interval of length Per at the server. The server counts a request
// when it arrives, at some time between its sending and its answer, which the
// client cannot know. So an entry counts from when it was sent until its
// answer comes back, and from the answer on it counts as if the server had
// seen it then, for another Per: never early, whatever the network does, and
// exact but for the round trip on a quiet one. An entry with no answer yet
// holds the window until it has one (the attempt ends with a response or an
// error, either way).
type windowLog struct {
	*Window               // the policy's
	n       int           // admitted per window now, <= N
	movedAt time.Duration // when n was last cut or raised
	log     []winEntry    // len <= N
	start   int           // index of the oldest when len == N
	latest  time.Duration
}

// winEntry is one admission.
type winEntry struct {
	at   time.Duration // the send time while open; the answer's time once closed
	id   uint32        // the key's admission number (low bits), to find it again
	open bool          // no answer yet
}

func newWindowLog(w *Window) windowLog {
	return windowLog{Window: w, n: w.N}
}

// entry returns the j-th oldest entry.
func (w *windowLog) entry(j int) *winEntry { return &w.log[(w.start+j)%len(w.log)] }

// holdsForAnswer is what nextAt returns when the next admission must wait for
// an answer: no time is known.
const holdsForAnswer = time.Duration(math.MaxInt64)

// nextAt is the earliest time >= now at which the k-th further admission
// (k = 0: the next) can happen, if none of the k before it is later than
// needed: never more than n in any interval of length Per. It is
// holdsForAnswer when that depends on an answer not yet in, unless bound is
// set: then an open entry counts from its sending, and the result is a lower
// bound.
func (w *windowLog) nextAt(now time.Duration, k int, bound bool) time.Duration {
	at := now
	outlive := func(e *winEntry) bool {
		if e.open && !bound {
			return false
		}
		at = max(at, e.at+w.Per)
		return true
	}
	c := min(len(w.log), w.n) // the logged admissions that can count
	// The admission must outlive the one n before it, and, with the log
	// full, the oldest, which it overwrites (with n < N, a cut window, that
	// one may still count: its answer came late).
	if j := k - (w.n - c); j >= 0 && j < c && !outlive(w.entry(len(w.log)-c+j)) {
		return holdsForAnswer
	}
	if len(w.log) == w.N && k < w.N && !outlive(w.entry(k)) {
		return holdsForAnswer
	}
	return at
}

// add logs the admission numbered id, sent at now.
func (w *windowLog) add(now time.Duration, id uint64) {
	e := winEntry{at: now, id: uint32(id), open: true}
	if len(w.log) < w.N {
		w.log = append(w.log, e)
		return
	}
	w.log[w.start] = e
	w.start = (w.start + 1) % w.N
}

// answered moves the admission numbered id (from 1) to the time its answer
// came back. The k-th admission of a key sits at index (k-1) mod N: every
// window of the key logs every admission, from the first.
func (w *windowLog) answered(id uint64, now time.Duration) {
	e := &w.log[(id-1)%uint64(w.N)]
	if e.id != uint32(id) || !e.open {
		return // overwritten: no longer counted
	}
	e.at, e.open = max(e.at, now), false
	w.latest = max(w.latest, e.at)
}

// count is how many logged admissions still count at now, open ones included.
func (w *windowLog) count(now time.Duration) int {
	c := 0
	for i := range w.log {
		if e := &w.log[i]; e.open || e.at+w.Per > now {
			c++
		}
	}
	return c
}

// expired reports whether no logged admission still counts at now. It
// assumes no entry is open (the key has nothing on the wire).
func (w *windowLog) expired(now time.Duration) bool {
	return len(w.log) == 0 || w.latest+w.Per <= now
}

func (w *windowLog) String() string { return w.Window.String() }
