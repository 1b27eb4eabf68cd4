package throttle

import (
	"time"

	"golang.org/x/time/rate"
)

// The pace adapts to what the server says, in proportion to the evidence.
//
// A quota signal (see pause.go) says the pace was too fast, once per
// episode: only an answer to an attempt sent after the pace was last cut,
// and not a probe, cuts it again; answers to attempts that were already on
// their way say nothing new.
//
// A cut lowers a configured pace to 0.8 of itself, but never below what the
// server has just been seen to accept: the answers accepted since the key
// last resumed (or began), less one Burst (the server's bucket may have been
// full then), over that time. The count is evidence once that time is at
// least a second and ten times Burst/pace, so that the Burst is at most a
// tenth of it. When it shows the server accepted less than 0.9 of the pace,
// the quota is proven lower: the count becomes the pace's ceiling. Otherwise
// (an isolated collision, network jitter, a random refusal) the ceiling
// stays, and the pace is back at it within seconds. A quota less than a
// tenth below the pace is not told from noise this way: its 429s come back
// every few seconds, each costing a pause.
//
// Each quiet second (no cut, no pause) raises the pace by a tenth of
// Policy.Rate, up to the ceiling: a pace cut by one collision is back within
// two or three seconds. The ceiling itself climbs back by a twentieth of
// Policy.Rate per quiet 30 seconds, so a quota that grows is found again.
// A cut never takes a configured pace below a tenth of Policy.Rate.
//
// A window's N is cut likewise (to 0.8, at most once per episode), but only
// a window that held at least 0.9 of what it admits when the throttled
// attempt was sent: a window far from its limit was not what the server
// objected to. A window cut again within 10 seconds of its last cut keeps
// the lower N as its ceiling.
//
// A cut that did not help is not repeated: when the server refuses again at
// a pace no faster than the one the last cut lowered, after no more than 1.1
// times the answers it accepted before that cut, slowing down changed
// nothing (a server that refuses one request in twenty whatever the pace),
// and the refusal only pauses the key, as the server asks. (Against a real
// quota, a slower pace always lengthens the run of accepted answers before
// the next refusal, by more than that unless the pace is several times the
// quota.)
//
// A key with no pace at all that is throttled twice learns one: between two
// throttled answers the server's bucket went from empty to empty, so the
// requests it accepted in between, over that time, are a rate it can bear (a
// lower bound: its bucket overflowed during the pause). From there the
// learned pace doubles each quiet second until the server objects again,
// then is cut and raised like a configured one, without a ceiling.
const (
	slowFactor     = 0.8              // a cut takes the pace to this share of itself
	slowestShare   = 0.1              // a configured pace never drops below this share of Rate
	climbEvery     = time.Second      // a quiet spell this long raises the pace
	climbShare     = 0.1              // by this share of Rate (of N for windows)
	ceilEvery      = 30 * time.Second // a quiet spell this long raises the ceiling
	ceilShare      = 0.05             // by this share of Rate (of N)
	minEvidence    = time.Second      // accepted answers counted this long are evidence,
	evidenceBursts = 10               // and over at least this many Bursts' worth of the pace
	provenShare    = 0.9              // a server that accepted less than this share of the pace proves the quota lower
	nearShare      = 0.9              // a window this full is near its limit
	recurWithin    = 10 * time.Second // a window cut this soon after the last keeps it
	helpedShare    = 1.1              // a cut helped if the next refusal came after more than this share of the answers before it

	growEvery   = time.Second     // a learned pace doubles after this long quiet
	slowestRate = rate.Limit(0.1) // a learned pace never drops below this
	fastestRate = rate.Limit(1e6) // nor grows above this
	forgetAfter = time.Minute     // an adapted pace is kept this long after its last change
)

// adaptation is a key's record of the server's objections.
type adaptation struct {
	ceil     rate.Limit // a configured pace climbs back quickly up to this (<= Policy.Rate)
	cutAdm   uint64     // admissions up to this one were sent before the last cut
	cutFrom  rate.Limit // the pace the last cut lowered; 0 before the first
	run      int        // answers accepted since the last cut
	lastRun  int        // answers accepted before it, since the one before
	calming  bool       // a cut began the pause in force: its end restarts the quiet spell
	quietAt  time.Time  // the pace and windows climb from here: the last cut, climb or pause end
	ceilAt   time.Time  // when the ceiling last moved
	adjusted time.Time  // when anything was last lowered or raised

	spanAt  time.Time // accepted answers are counted from here: the first answer, the last cut or resume
	spanOK  int
	spanAdm uint64 // the key's admissions then

	// For a key that learns its pace.
	since    time.Time // when the last pause began; zero before the first
	accepted int       // answers that were not throttled since then
	learned  bool      // lim was learned, not configured
	growing  bool      // a learned pace still doubling
}

// accept counts an answer the server accepted, at now.
func (a *adaptation) accept(now time.Time) {
	if a.spanAt.IsZero() {
		a.spanAt = now // a count from the first answer (admissions from 0)
	}
	a.spanOK++
	a.accepted++
	a.run++
}

// restart begins a new count of accepted answers: the pace was cut, or the
// key resumed after a pause (the server's bucket is full again). admitted is
// the key's admissions so far.
func (a *adaptation) restart(now time.Time, admitted uint64) {
	a.spanAt, a.spanOK, a.spanAdm = now, 0, admitted
}

// accepting is the rate the server has been seen to accept since the count
// began, at a pace p with a bucket of burst, and whether that tells anything:
// counted long enough, and while the key sent at its pace (a key that sent
// less says nothing of what the server would have taken). admitted is the
// key's admissions so far.
func (a *adaptation) accepting(now time.Time, p rate.Limit, burst int, admitted uint64) (rate.Limit, bool) {
	span := now.Sub(a.spanAt).Seconds()
	switch {
	case a.spanAt.IsZero(), span < minEvidence.Seconds(),
		span*float64(p) < evidenceBursts*float64(burst),
		float64(admitted-a.spanAdm) < provenShare*span*float64(p):
		return 0, false
	}
	return rate.Limit(float64(max(a.spanOK-burst, 0)) / span), true
}

// slow reacts to a quota signal for the attempt tk, answered at now: it cuts
// the pace and the windows near their limit, or learns a pace, once per
// episode.
func (ks *keyState) slow(tk ticket, now time.Time, mono time.Duration) {
	a := &ks.adapt
	if tk.probe || tk.adm <= a.cutAdm {
		return // the probe's pace is no pace; older attempts are the same episode
	}
	a.cutAdm = ks.admitted
	run := a.run
	a.run = 0
	if a.cutFrom > 0 && ks.lim != nil && ks.lim.Limit() <= a.cutFrom && float64(run) <= helpedShare*float64(a.lastRun) {
		return // the last cut did not help
	}
	a.lastRun = run
	a.quietAt, a.adjusted, a.calming = now, now, true
	for i := range ks.wins {
		ks.wins[i].cut(tk.mono, now)
	}
	switch {
	case ks.lim == nil:
		ks.learn(now)
	case a.learned:
		a.growing = false
		a.cutFrom = ks.lim.Limit()
		ks.lim.SetLimitAt(now, max(ks.lim.Limit()*slowFactor, slowestRate))
	default:
		p := ks.lim.Limit()
		a.cutFrom = p
		to := p * slowFactor
		if got, ok := a.accepting(now, p, ks.pol.Burst, ks.admitted); ok {
			to = min(p, max(to, got))
			if got < p*provenShare && got < a.ceil {
				a.ceil, a.ceilAt = max(got, ks.pol.Rate*slowestShare), now
			}
		}
		ks.lim.SetLimitAt(now, max(to, ks.pol.Rate*slowestShare))
	}
	a.restart(now, ks.admitted)
	a.since, a.accepted = now, 0
}

// learn gives an unpaced key without windows a pace, from the answers
// accepted since its last pause; the first pause (the server's bucket was
// full when we began) teaches nothing.
func (ks *keyState) learn(now time.Time) {
	a := &ks.adapt
	if len(ks.wins) > 0 || a.since.IsZero() || a.accepted == 0 {
		return
	}
	r := rate.Limit(float64(a.accepted) / now.Sub(a.since).Seconds())
	ks.lim = rate.NewLimiter(min(max(r, slowestRate), fastestRate), 1)
	a.learned, a.growing = true, true
}

// cut lowers the window's n after a throttled answer to an attempt sent at
// sent, if the window was near its limit then.
func (w *windowLog) cut(sent time.Duration, now time.Time) {
	if float64(w.count(sent)) < nearShare*float64(w.n) {
		return
	}
	n := max(int(float64(w.n)*slowFactor), int(float64(w.N)*slowestShare), 1)
	if !w.cutAt.IsZero() && now.Sub(w.cutAt) < recurWithin {
		w.ceil = n
	}
	w.n, w.cutAt = n, now
}

// climb raises what was cut, after a quiet spell: called with each accepted
// answer. A learned pace grows only while it holds requests back (otherwise
// raising it would prove nothing).
func (ks *keyState) climb(now time.Time) {
	a := &ks.adapt
	switch {
	case ks.lim == nil, a.learned && ks.waiting == 0:
	case a.growing:
		if now.Sub(a.adjusted) >= growEvery {
			ks.lim.SetLimitAt(now, min(2*ks.lim.Limit(), fastestRate))
			a.adjusted = now
		}
	case a.learned:
		if now.Sub(a.adjusted) >= ceilEvery {
			ks.lim.SetLimitAt(now, min(ks.lim.Limit()*(1+ceilShare), fastestRate))
			a.adjusted = now
		}
	}
	if now.Sub(a.quietAt) < climbEvery {
		return
	}
	raised := ks.climbWindows(now)
	if ks.lim != nil && !a.learned {
		raised = ks.climbPace(now) || raised
	}
	if raised {
		a.quietAt, a.adjusted = now, now
	}
}

// climbPace raises a configured pace toward its ceiling, and the ceiling
// toward Policy.Rate, and reports whether either moved.
func (ks *keyState) climbPace(now time.Time) bool {
	a, r := &ks.adapt, ks.pol.Rate
	raised := false
	if a.ceil < r && now.Sub(a.ceilAt) >= ceilEvery && now.Sub(a.quietAt) >= ceilEvery {
		a.ceil, a.ceilAt, raised = min(r, a.ceil+r*ceilShare), now, true
	}
	if p := ks.lim.Limit(); p < a.ceil {
		ks.lim.SetLimitAt(now, min(a.ceil, p+r*climbShare))
		raised = true
	}
	return raised
}

// climbWindows raises each cut window's n toward its ceiling, and the
// ceiling toward N, and reports whether any moved.
func (ks *keyState) climbWindows(now time.Time) bool {
	a := &ks.adapt
	raised := false
	for i := range ks.wins {
		w := &ks.wins[i]
		step := func(share float64) int { return max(1, int(float64(w.N)*share)) }
		if w.ceil < w.N && now.Sub(w.cutAt) >= ceilEvery && now.Sub(a.quietAt) >= ceilEvery {
			w.ceil, raised = min(w.N, w.ceil+step(ceilShare)), true
		}
		if w.n < w.ceil {
			w.n, raised = min(w.ceil, w.n+step(climbShare)), true
		}
	}
	return raised
}

// keep reports whether the key's pace was adapted recently enough to be
// worth keeping when the key is otherwise idle.
func (ks *keyState) keep(now time.Time) bool {
	adapted := ks.adapt.learned || ks.lim != nil && ks.lim.Limit() < ks.pol.Rate
	for i := range ks.wins {
		adapted = adapted || ks.wins[i].n < ks.wins[i].N
	}
	return adapted && now.Sub(ks.adapt.adjusted) < forgetAfter
}
