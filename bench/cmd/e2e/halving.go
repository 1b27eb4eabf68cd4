package main

import (
	"net/http"
	"sync"
	"time"

	"github.com/throttlehttp/throttle/throttletest"
)

// A quota whose rate halves mid-run (quota.halveAfter > 0) is played by two
// throttletest APIs behind one address: the first has the token bucket as
// told, the second the same bucket at half the rate; the address answers
// from the first until halveAfter has passed since its first request, then
// from the second. throttletest has no way to change a Limit while it
// serves, and needs none for this. The second bucket starts full, where a
// bucket whose rate an operator changed would keep its level: its burst is
// a gift the ideal time does not count (halvingIdeal), so a client may
// finish up to burst / (rate/2) sooner (0.2 s for 200/s burst 20). From
// its first answer on, RateLimit-Policy's q halves; X-RateLimit-* and
// RateLimit read as before (the depth, a reset rounded up to whole seconds),
// and only how fast Remaining refills tells the change.

// halved is the quota after its change: the same bucket at half the rate,
// never changing again.
func (q quota) halved() quota {
	q.rate /= 2
	q.halveAfter = 0
	return q
}

// halvingIdeal is the shortest time in which a bucket whose rate halves at
// halveAfter admits records requests, from the first request to the last: by
// halveAfter it admits its burst and rate·halveAfter more, the rest at half
// the rate. When it admits them all before the change, its ideal is the
// unchanged one.
func (q quota) halvingIdeal(records int) time.Duration {
	first := q
	first.halveAfter = 0
	before := float64(q.burst) + q.rate*q.halveAfter.Seconds()
	if float64(records) <= before {
		return first.ideal(records)
	}
	d := q.halveAfter.Seconds() + (float64(records)-before)/q.halved().rate
	return time.Duration(d * float64(time.Second)).Round(time.Microsecond)
}

// halvingAPIs are the two APIs of a quota whose rate halves, cfg's before
// the change and cfg's with the halved limit after it; the second draws its
// noise from another seed.
func halvingAPIs(cfg throttletest.Config, q quota) (before, after *throttletest.API) {
	cfgAfter := cfg
	cfgAfter.Limits = []throttletest.Limit{q.halved().limit()}
	cfgAfter.Seed = cfg.Seed + 1<<40
	return throttletest.NewAPI(cfg), throttletest.NewAPI(cfgAfter)
}

// A switched handler serves from before until after has passed since its
// first request, then from after.
type switched struct {
	before, after *throttletest.API
	halveAfter    time.Duration

	once sync.Once
	at   time.Time // when it switches; set at the first request
}

func (s *switched) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	s.once.Do(func() { s.at = now.Add(s.halveAfter) })
	if now.Before(s.at) {
		s.before.ServeHTTP(w, r)
		return
	}
	s.after.ServeHTTP(w, r)
}

// halveIfDue halves the rate of every limiter of l, told the quota as it
// changes, once halveAfter has passed at now since l's first request: the
// best a client told the new quota could do is to change its pace at the
// moment the server does. Limiters made later are made at the halved rate.
// l.mu is held.
func (l *limited) halveIfDue(now time.Time) {
	if l.quota.halveAfter <= 0 {
		return
	}
	if l.start.IsZero() {
		l.start = now
	}
	if now.Sub(l.start) < l.quota.halveAfter {
		return
	}
	l.quota = l.quota.halved()
	for _, lim := range l.lims {
		lim.SetLimitAt(now, lim.Limit()/2)
	}
}
