package throttletest

import (
	"fmt"
	"math"
	"net/http"
	"time"
)

// An Outage is a span of time in which the fake API's backend is down (see
// Config.Outages): it begins Start after NewAPI or Reset and lasts Duration, and
// every request that arrives within [Start, Start+Duration) gets 503 (or
// Status) with a Retry-After of RetryAfter, in the Config's RetryAfter format.
type Outage struct {
	// Start is when the outage begins, counted from NewAPI or Reset (or from the
	// first request, for an API created outside its synctest bubble; see NewAPI);
	// it must be >= 0.
	Start time.Duration
	// Duration is how long the outage lasts; it must be > 0.
	Duration time.Duration
	// RetryAfter is the wait the 503s announce; zero means 1 second, as for
	// Config.UnavailableRetryAfter. It need not match the time left in the outage:
	// a backend that is down seldom knows when it will be back.
	RetryAfter time.Duration
	// Status is what the outage answers: zero means 503 Service Unavailable;
	// 429 Too Many Requests plays a gateway that refuses everything for a
	// moment (a rate limiter's hiccup), with no quota headers, counted in
	// Stats as Throttled, as Config.Refused's are, and against no quota. No other status is allowed.
	Status int
}

// validate panics, as Config.validate does, when the i-th outage cannot work.
func (o Outage) validate(i int) {
	bad := func(what string) {
		panic(fmt.Sprintf("throttletest: Outages[%d]: %s", i, what))
	}
	switch {
	case o.Start < 0 || o.RetryAfter < 0:
		bad("Start and RetryAfter must be >= 0")
	case o.Duration <= 0:
		bad("Duration must be > 0")
	case o.Duration > math.MaxInt64-o.Start:
		bad("Start+Duration overflows a time.Duration")
	}
	switch o.Status {
	case 0, http.StatusServiceUnavailable, http.StatusTooManyRequests:
	default:
		bad(fmt.Sprintf("Status %d: want 0, 503 or 429", o.Status))
	}
}

// covers reports whether the outage covers the instant that is since after
// NewAPI or Reset.
func (o Outage) covers(since time.Duration) bool {
	return since >= o.Start && since-o.Start < o.Duration
}

// outageAt returns the first outage that covers the instant that is since after
// the start of the API's clock, if any.
func (a *API) outageAt(since time.Duration) (Outage, bool) {
	for _, o := range a.cfg.Outages {
		if o.covers(since) {
			return o, true
		}
	}
	return Outage{}, false
}
