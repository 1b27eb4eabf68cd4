package throttle

import (
	"math"
	"slices"
	"sort"
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

// tokensFor is how many tokens lim must hold for an attempt of the cost
// given to go: its cost, or all lim can hold if that is less. So an attempt
// that costs more than a leaky bucket's one token, or more than a token
// bucket holds once its reserve against jitter has grown (latency.go), goes
// when the bucket is full, and leaves it owing the rest (see takeTokens):
// the attempts after it wait for what it took.
func tokensFor(lim *rate.Limiter, cost int) int {
	if cost <= 1 {
		return 1
	}
	return min(cost, lim.Burst())
}

// windowLog is an exact sliding window: the last N admissions, oldest first
// in a ring, as offsets from the transport's epoch. An admission is a unit:
// an attempt of cost c (see Cost) is c admissions, numbered in a row, sent
// together.
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
//
// Every entry that still counts is in the log: an admission overwrites the
// oldest entry only once that one no longer counts. Entries the server says
// it never counted (see WithCost) are dropped from among the others; the
// log closes up, so that their room is free at once.
type windowLog struct {
	*Window               // the policy's
	n       int           // admitted per window now, <= N
	movedAt time.Duration // when n was last cut or raised
	log     []winEntry    // len <= N; while len < N, the oldest is at index 0
	start   int           // index of the oldest when len == N
	off     uint64        // the admission numbered k sits at index (k-off) mod N, unless logged before a drop
	packed  bool          // entries were dropped: those logged before sit where a search finds them
	latest  time.Duration
}

// winEntry is one admission.
type winEntry struct {
	at time.Duration // the send time while open; the answer's time once closed
	id uint64        // the key's admission number, to find it again; with openBit while open (no answer yet)
}

const openBit = 1 << 63

func (e *winEntry) open() bool  { return e.id&openBit != 0 }
func (e *winEntry) num() uint64 { return e.id &^ openBit }

func newWindowLog(w *Window) windowLog {
	return windowLog{Window: w, n: w.N, off: 1}
}

// entry returns the j-th oldest entry.
func (w *windowLog) entry(j int) *winEntry { return &w.log[(w.start+j)%len(w.log)] }

// holdsForAnswer is what nextAt returns when the next admission must wait for
// an answer: no time is known.
const holdsForAnswer = time.Duration(math.MaxInt64)

// nextAt is the earliest time >= now at which an attempt of the cost given
// can be admitted with ahead admissions before it (ahead = 0: the next), if
// none of those is later than needed: never more than n in any interval of
// length Per. It is holdsForAnswer when that depends on an answer not yet
// in, unless bound is set: then an open entry counts from its sending, and
// the result is a lower bound. An attempt that costs more than a cut n (but
// no more than N: see tooCostly) waits until nothing logged counts.
func (w *windowLog) nextAt(now time.Duration, ahead, cost int, bound bool) time.Duration {
	at := now
	// outlive makes at outlive the entries from the from-th oldest to the
	// to-th, or reports that one of them awaits its answer.
	outlive := func(from, to int) bool {
		for j := max(from, 0); j <= to; j++ {
			e := w.entry(j)
			if e.open() && !bound {
				return false
			}
			at = max(at, e.at+w.Per)
		}
		return true
	}
	size := len(w.log)
	// Each of its admissions must outlive the one n before it (an entry's
	// answer may come after a later one's: each is outlived, not only the
	// last)…
	lo := size - w.n + ahead
	if !outlive(max(lo, size-min(size, w.n)), min(lo+min(cost, w.n)-1, size-1)) {
		return holdsForAnswer
	}
	// …and, with the log full, the entry it overwrites (with n < N, a cut
	// window, that one may still count: its answer came late; with n = N,
	// it is the same).
	if w.n < w.N && size == w.N && !outlive(ahead, min(ahead+cost-1, size-1)) {
		return holdsForAnswer
	}
	return at
}

// put logs the c admissions numbered up to last, at at: sent then and
// open, or answered then. Of more than N, only the last N are written.
func (w *windowLog) put(at time.Duration, last uint64, c int, open bool) {
	flag := uint64(0)
	if open {
		flag = openBit
	} else {
		w.latest = max(w.latest, at)
	}
	if c >= w.N { // a new log
		first := last - uint64(w.N) + 1
		w.log = append(w.log[:0], make([]winEntry, w.N)...)
		for j := range w.log {
			w.log[j] = winEntry{at: at, id: (first + uint64(j)) | flag}
		}
		w.start, w.off, w.packed = 0, first, false
		return
	}
	for id := last - uint64(c) + 1; id <= last; id++ {
		e := winEntry{at: at, id: id | flag}
		if len(w.log) < w.N {
			w.off = id - uint64(len(w.log))
			w.log = append(w.log, e)
			continue
		}
		w.log[w.start] = e
		w.start = (w.start + 1) % w.N
	}
}

// logged returns the entry of the admission numbered id, or nil once it is
// overwritten (it no longer counted) or dropped.
func (w *windowLog) logged(id uint64) *winEntry {
	if len(w.log) == 0 {
		return nil
	}
	if i := (id - w.off) % uint64(w.N); i < uint64(len(w.log)) && w.log[i].num() == id {
		return &w.log[i]
	}
	if !w.packed {
		return nil
	}
	// Logged before a drop closed up the log: the numbers still rise
	// from the oldest.
	j := sort.Search(len(w.log), func(j int) bool { return w.entry(j).num() >= id })
	if j < len(w.log) && w.entry(j).num() == id {
		return w.entry(j)
	}
	return nil
}

// answered moves the c admissions numbered up to last to the time their
// answer came back.
func (w *windowLog) answered(last uint64, c int, now time.Duration) {
	for id := last - uint64(min(c, w.N)) + 1; id <= last; id++ {
		if e := w.logged(id); e != nil && e.open() {
			e.at, e.id = max(e.at, now), id
			w.latest = max(w.latest, e.at)
		}
	}
}

// drop takes out of the log the c admissions numbered up to last, which the
// server says it did not count (see WithCost), and the entries that never
// count (gone: see rewindow), and closes it up: their room is free at once.
// That is safe, as what is left still holds every entry that counts.
func (w *windowLog) drop(last uint64, c int) {
	first := last - uint64(c) + 1
	if w.start > 0 { // oldest first, from index 0: each entry moves start back
		slices.Reverse(w.log[:w.start])
		slices.Reverse(w.log[w.start:])
		slices.Reverse(w.log)
		w.off += uint64(w.start)
		w.start = 0
	}
	kept := w.log[:0]
	for _, e := range w.log {
		if id := e.num(); id >= first && id <= last || e.at == gone {
			continue
		}
		kept = append(kept, e)
	}
	if len(kept) < len(w.log) {
		w.log, w.packed = kept, true // the next put sets off
	}
}

// count is how many logged admissions still count at now, open ones included.
func (w *windowLog) count(now time.Duration) int {
	c := 0
	for i := range w.log {
		if e := &w.log[i]; e.open() || e.at+w.Per > now {
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
