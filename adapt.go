package throttle

import (
	"time"

	"golang.org/x/time/rate"
)

// The pace adapts to what the server says. A throttled answer that begins a
// pause means the pace was too fast: a paced key's rate, and the number its
// windows admit, drop at once and come back slowly. A key with no pace at
// all that is throttled twice learns one:
// between two throttled answers the server's bucket went from empty to
// empty, so the requests it accepted in between, over that time, are a rate
// it can bear (a lower bound: its bucket overflowed during the pause). From
// there the learned pace doubles each quiet second until the server objects
// again, then behaves as a configured one.
const (
	slowFactor   = 0.8              // a throttled answer cuts the rate to this share
	slowestShare = 0.1              // a configured rate never drops below this share
	recoverEvery = 30 * time.Second // a quiet spell this long raises the rate
	recoverShare = 0.05             // by this share of Policy.Rate (of itself, if learned)
	growEvery    = time.Second      // a learned pace doubles after this long quiet
	slowestRate  = rate.Limit(0.1)  // a learned pace never drops below this
	fastestRate  = rate.Limit(1e6)  // nor grows above this
	forgetAfter  = time.Minute      // an adapted pace is kept this long after its last change
)

// adaptation is a key's record of the server's objections.
type adaptation struct {
	adjusted time.Time // when the rate was last lowered or raised
	since    time.Time // when the last pause began; zero before the first
	accepted int       // answers that were not throttled since then
	learned  bool      // lim was learned, not configured
	growing  bool      // a learned pace still doubling
}

// slow lowers the key's pace after a throttled answer began a pause at now,
// or learns one for an unpaced key throttled for the second time.
func (ks *keyState) slow(now time.Time) {
	a := &ks.adapt
	defer func() { a.since, a.accepted = now, 0 }()
	for i := range ks.wins {
		w := &ks.wins[i]
		w.n = max(int(float64(w.n)*slowFactor), int(float64(w.N)*slowestShare), 1)
		a.adjusted = now
	}
	switch {
	case ks.lim == nil && len(ks.wins) > 0:
	case ks.lim == nil && (a.since.IsZero() || a.accepted == 0):
		// The first pause (the server's bucket was full when we began), or
		// nothing accepted since the last: no rate to learn.
	case ks.lim == nil:
		r := rate.Limit(float64(a.accepted) / now.Sub(a.since).Seconds())
		ks.lim = rate.NewLimiter(min(max(r, slowestRate), fastestRate), 1)
		a.learned, a.growing, a.adjusted = true, true, now
	case a.learned:
		a.growing = false
		ks.lim.SetLimitAt(now, max(ks.lim.Limit()*slowFactor, slowestRate))
		a.adjusted = now
	default:
		ks.lim.SetLimitAt(now, max(ks.lim.Limit()*slowFactor, ks.pol.Rate*slowestShare))
		a.adjusted = now
	}
}

// recover raises a slowed or learned pace after a quiet spell; a configured
// one goes no higher than configured.
func (ks *keyState) recover(now time.Time) {
	a := &ks.adapt
	quiet := now.Sub(a.adjusted) >= recoverEvery
	if quiet && len(ks.wins) > 0 {
		for i := range ks.wins {
			w := &ks.wins[i]
			if w.n < w.N {
				w.n = min(w.N, w.n+max(1, int(float64(w.N)*recoverShare)))
				a.adjusted = now
			}
		}
	}
	switch {
	case ks.lim == nil:
	case a.learned && ks.waiting == 0:
		// The pace holds nobody back: raising it would prove nothing.
	case a.growing:
		if now.Sub(a.adjusted) >= growEvery {
			ks.lim.SetLimitAt(now, min(2*ks.lim.Limit(), fastestRate))
			a.adjusted = now
		}
	case a.learned:
		if quiet {
			ks.lim.SetLimitAt(now, min(ks.lim.Limit()*(1+recoverShare), fastestRate))
			a.adjusted = now
		}
	case quiet && ks.lim.Limit() < ks.pol.Rate:
		ks.lim.SetLimitAt(now, min(ks.pol.Rate, ks.lim.Limit()+ks.pol.Rate*recoverShare))
		a.adjusted = now
	}
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
