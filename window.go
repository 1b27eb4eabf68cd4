package throttle

import (
	"math"
	"slices"
	"sort"
	"time"
)

// windowLog is an exact sliding window: the attempts that still count in
// it, each one run of units (its cost: see Cost), as offsets from the
// transport's epoch. Its memory is bounded by the attempts that count in a
// window, whatever their units.
//
// It admits at most n units (N, or fewer while the server objects: see
// adapt.go) in any interval of length Per at the server. The server counts
// a request when it arrives, at some time between its sending and its
// answer, which the client cannot know. So an attempt counts from when it
// was sent until its answer comes back, and from the answer on it counts
// as if the server had seen it then, for another Per: never early, whatever
// the network does, and exact but for the round trip on a quiet one. An
// attempt with no answer yet counts until it has one (it ends with a
// response or an error, either way).
//
// An attempt goes when, with its units, no more than n count: then no
// interval of length Per holds more than n at the server (the units the
// server counted within one all count when the last of them was sent).
// From its answer on, an attempt counts what the server's figure says it
// cost, if WithCost read one: more from the answer, or less (the units the
// server says it did not count have their room at once).
type windowLog struct {
	*Window               // the policy's
	n       int           // admitted per window now, <= N
	movedAt time.Duration // when n was last cut or raised
	sent    []sentRun     // the attempts on their way, by number and by sending
	sending int64         // their units
	done    runLog        // the answered attempts, by answer: each counts until its answer and Per
}

// sentRun is an attempt on its way.
type sentRun struct {
	at    time.Duration // its sending (or a moment before: see put)
	id    uint64        // the key's admission number of its last unit, to find it again
	units int64
}

func newWindowLog(w *Window) windowLog {
	return windowLog{Window: w, n: w.N}
}

// holdsForAnswer is what nextAt returns when the next admission must wait for
// an answer: no time is known.
const holdsForAnswer = time.Duration(math.MaxInt64)

// nextAt is the earliest time >= now at which an attempt of the cost given
// can be admitted with ahead admissions before it (ahead = 0: the next), if
// none of those is later than needed: never more than n units counting at
// once. It is holdsForAnswer when that depends on an answer not yet in,
// unless bound is set: then an attempt on its way counts from its sending,
// and the result is a lower bound. An attempt that costs more than a cut n
// (but no more than N: see tooCostly) waits until nothing logged counts.
//
// Those ahead, a unit each at least, go first: if it goes within Per of
// now, they all still count then; if later, they may have aged out; and
// more than a window holds of them take a Per for each N (see chain).
func (w *windowLog) nextAt(now time.Duration, ahead, cost int, bound bool) time.Duration {
	c := int64(min(cost, w.n))
	at := w.when(now, int64(w.n)-c-int64(ahead), bound)
	if ahead > 0 {
		at = min(at, max(now+w.Per, w.when(now, int64(w.n)-c, true)))
		if bound {
			at = max(at, w.chain(now, int64(ahead)+int64(min(cost, w.N))))
		}
	}
	return at
}

// chain is a lower bound of when the last of k units, to be sent in turn
// from now on after those logged, can go (found in review: a wait behind
// more units than N was bounded by one Per, and a request whose turn came
// Per·(ahead/N) later waited out its deadline rather than fail at once).
//
// Number the units that count at now, oldest first (as they age out),
// then the k: a unit i of the k cannot go less than Per after the unit
// i-N, for an admission at t needs no more than n <= N units counting at
// t, its own included, and an attempt whose units exceed n goes when none
// count. So the last, K, goes no sooner than Per·m after the unit K-N·m,
// stepping back from units of the k alone, as far as a unit is left: a
// logged one, counting from when it was sent or answered, or one of the
// k, sent at now at the soonest. (No step starts from a logged unit: a
// run of them larger than N, a figure of WithCost, all ages out at once.)
func (w *windowLog) chain(now time.Duration, k int64) time.Duration {
	logged := w.count(now)
	total, n := logged+k, int64(w.N)
	m := min((total-1)/n, (k-1)/n+1)
	switch {
	case m < 1:
		return now
	case m >= int64((holdsForAnswer/2-now)/w.Per):
		return holdsForAnswer / 2 // past any deadline, and no overflow
	}
	if i := total - m*n; i <= logged {
		// the i-th unit counting at now ages out at when(now, logged-i)
		return w.when(now, logged-i, true) + time.Duration(m-1)*w.Per
	}
	return now + time.Duration(m)*w.Per
}

// room reports whether an attempt of the cost given fits in the window
// with every unit logged, as most do: then nextAt(now, 0, cost, false) is
// now, whatever now, told without nextAt's call and when's (some 45
// instructions of the usual admission under a window).
func (w *windowLog) room(cost int) bool {
	return w.sending+w.done.units()+int64(min(cost, w.n)) <= int64(w.n)
}

// when is the earliest time >= now at which no more than k logged units
// count: holdsForAnswer when that waits for an answer (or k < 0), unless
// bound (see nextAt). The oldest answers age out first.
func (w *windowLog) when(now time.Duration, k int64, bound bool) time.Duration {
	if k < 0 {
		return holdsForAnswer
	}
	excess := w.sending + w.done.units() - k
	switch {
	case excess <= 0:
		return now
	case !bound && w.sending > k:
		return holdsForAnswer
	case !bound: // the answered must age out by excess units
		return max(now, w.done.ageOut(excess)+w.Per)
	}
	// Bound: the attempts on their way age out from their sending, among
	// the answered ones, the oldest first (both are in time order).
	d := &w.done
	at, i, j, prev := now, d.head, 0, d.base
	for excess > 0 {
		if j < len(w.sent) && (i == len(d.runs) || w.sent[j].at <= d.runs[i].at) {
			excess -= w.sent[j].units
			at = max(at, w.sent[j].at+w.Per)
			j++
			continue
		}
		excess -= d.runs[i].cum - prev
		prev = d.runs[i].cum
		at = max(at, d.runs[i].at+w.Per)
		i++
	}
	return at
}

// put logs c units numbered up to last at at: an attempt sent then (open),
// or units counted from then (answered). The runs no longer counting at
// at are let go.
//
// The attempts on their way stay in the order of their numbers and of their
// sending: one sent at a time read a moment before that of the one before
// it (times are read before the key's lock) moves the other back to it. A
// sending time is only ever a lower bound of when the server saw it.
func (w *windowLog) put(at time.Duration, last uint64, c int, open bool) {
	w.done.prune(at - w.Per)
	if !open {
		w.done.add(at, int64(c))
		return
	}
	for j := len(w.sent) - 1; j >= 0 && w.sent[j].at > at; j-- {
		w.sent[j].at = at
	}
	w.sent = append(w.sent, sentRun{at: at, id: last, units: int64(c)})
	w.sending += int64(c)
}

// answered moves the attempt numbered last (its last unit's number) to the
// time its answer came back, now, from when it counts units: its charge,
// or what the server's figure says it cost.
func (w *windowLog) answered(last uint64, units int, now time.Duration) {
	if j, ok := w.find(last); ok {
		now = max(now, w.sent[j].at)
		w.sending -= w.sent[j].units
		if j < len(w.sent)-1 { // (the last, as when one is on its way, moves none)
			copy(w.sent[j:], w.sent[j+1:])
		}
		w.sent = w.sent[:len(w.sent)-1]
		if cap(w.sent) >= 256 && 8*len(w.sent) <= cap(w.sent) { // mostly free: give the room back
			w.sent = append(make([]sentRun, 0, 2*len(w.sent)), w.sent...)
		}
	}
	w.done.add(now, int64(units))
}

// find returns the index of the attempt on its way numbered id, if it is
// one: most often the oldest.
func (w *windowLog) find(id uint64) (int, bool) {
	if len(w.sent) > 0 && w.sent[0].id == id {
		return 0, true
	}
	j := sort.Search(len(w.sent), func(j int) bool { return w.sent[j].id >= id })
	return j, j < len(w.sent) && w.sent[j].id == id
}

// count is how many logged units still count at now, those on their way
// included.
func (w *windowLog) count(now time.Duration) int64 {
	return w.sending + w.done.after(now-w.Per)
}

// expired reports whether no logged unit still counts at now. It assumes
// none is on its way (the key has nothing on the wire).
func (w *windowLog) expired(now time.Duration) bool {
	latest, ok := w.done.last()
	return len(w.sent) == 0 && (!ok || latest+w.Per <= now)
}

// clone returns a copy of w's entries for the window v: a window of a
// Policy that replaces w's (see rewindow).
func (w *windowLog) clone(v *Window) windowLog {
	c := newWindowLog(v)
	c.sent, c.sending, c.done = slices.Clone(w.sent), w.sending, w.done.clone()
	return c
}

func (w *windowLog) String() string { return w.Window.String() }
