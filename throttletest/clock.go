package throttletest

import (
	"fmt"
	"time"
)

// clock is the API's view of time, which keeps one clock from NewAPI or Reset on.
//
// An API reads time.Now, and inside a testing/synctest bubble that is the
// bubble's fake clock, which starts at midnight UTC 2000-01-01 whatever the real
// date, and each bubble has its own. State computed on one clock means nothing on
// another, and only a clock that goes back shows the change: the real clock is
// read with its monotonic reading, which never goes back, a bubble's never goes
// back either, and a reading from one compared with a reading from another falls
// back to the wall clock, years apart. So a reading earlier than the last one
// (both taken under the API's mutex, hence in order) is a change of clock. Before
// any request has read the clock, the API holds no state but the start of its
// Outages, which then moves to the request: an API created outside the bubble
// that serves it works. After, the API's state is from another clock, and arrive
// fails. A clock that jumps ahead (a bubble's, then the real one) cannot be told
// from time passing, and the state reads as old, which it is on either clock.
type clock struct {
	start time.Time // of the Outages: NewAPI, Reset, or the first request on another clock
	last  time.Time // the latest reading
	read  bool      // whether a request has read the clock since start
}

// restart starts the clock again at now, as NewAPI and Reset do.
func (c *clock) restart(now time.Time) { *c = clock{start: now, last: now} }

// arrive records the arrival of a request at now and returns how long after
// start it is, or a *clockError when the API served requests on another clock.
func (c *clock) arrive(now time.Time) (since time.Duration, err error) {
	if now.Before(c.last) {
		if c.read {
			return 0, &clockError{last: c.last, now: now}
		}
		c.start = now
	}
	c.last, c.read = now, true
	return now.Sub(c.start), nil
}

// clockError is an API served on two clocks.
type clockError struct {
	last, now time.Time
}

func (e *clockError) Error() string {
	return fmt.Sprintf("throttletest: API used across a synctest bubble boundary: "+
		"it served a request at %s but is asked to serve one at %s, on a clock that went back; "+
		"create the API inside the bubble that uses it, or Reset it before each bubble",
		e.last.Format(time.RFC3339Nano), e.now.Format(time.RFC3339Nano))
}

// arrive reads the clock for a request that arrives now, after any
// ArrivalJitter, and returns the reading and how long after the start of the
// Outages it is. It panics, as synctest does with a channel used outside its
// bubble, when the API served requests on another clock: no answer could be
// right, and a wrong one lets a test pass.
func (a *API) arrive() (now time.Time, since time.Duration) {
	a.mu.Lock()
	now = time.Now()
	since, err := a.clock.arrive(now)
	a.mu.Unlock()
	if err != nil {
		panic(err)
	}
	return now, since
}
