package throttletest_test

import (
	"fmt"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/throttlehttp/throttle/throttletest"
)

// Regression (issue 8, point 17): an API created outside the bubble that serves
// it held the real clock's start, decades after the bubble's, so its Outages
// never began, silently.
func TestAPICreatedOutsideTheBubbleStartsItsClockAtTheFirstRequest(t *testing.T) {
	api := throttletest.NewAPI(throttletest.Config{
		Limits:     []throttletest.Limit{{Algorithm: throttletest.TokenBucket, Rate: 5}},
		Outages:    []throttletest.Outage{{Start: 5 * time.Second, Duration: time.Second}},
		XRateLimit: true,
	})
	synctest.Test(t, func(t *testing.T) {
		time.Sleep(time.Second) // the clock starts at the first request, not at the bubble's
		paced := []step{{code: 200}}
		for range 18 {
			paced = append(paced, step{sleep: 200 * time.Millisecond, code: 200}) // at the quota
		}
		runSteps(t, api, append(paced,
			step{code: 429, retryAfter: "1", remaining: "0"},   // t=3.6s: the bucket counts on the bubble's clock
			step{sleep: 1400*time.Millisecond - ns, code: 200}, // just before the outage
			step{sleep: ns, code: 503},                         // t=5s: it begins
			step{sleep: time.Second - ns, code: 503},           // its last instant
			step{sleep: ns, code: 200},                         // t=6s: over
		))
		assert.Equal(t, throttletest.Counts{
			Requests: 24, Accepted: 21, Throttled: 1, Outage: 2, PeakPerSecond: 5, PeakInFlight: 1,
		}, api.Stats().Total)
	})
}

// clockPanic runs f and returns the message of the panic it must raise.
func clockPanic(t *testing.T, f func()) (msg string) {
	t.Helper()
	defer func() {
		p := recover()
		err, ok := p.(error)
		if assert.True(t, ok, "f panics with an error, not %#v", p) {
			msg = err.Error()
		}
	}()
	f()
	return ""
}

const clockMisuse = "throttletest: API used across a synctest bubble boundary: "

// An API that served requests on one clock cannot serve them on another that is
// behind: its state would refuse or admit by the wrong time, so it panics rather
// than answer (issue 8, point 17).
func TestAPIServedOnTwoClocksPanics(t *testing.T) {
	cfg := throttletest.Config{Limits: []throttletest.Limit{{Algorithm: throttletest.TokenBucket, Rate: 5}}}

	t.Run("real clock, then a bubble", func(t *testing.T) {
		api := throttletest.NewAPI(cfg)
		assert.Equal(t, http.StatusOK, get(t, api, "k").code, "on the real clock")
		synctest.Test(t, func(t *testing.T) {
			msg := clockPanic(t, func() { get(t, api, "k") })
			assert.Contains(t, msg, clockMisuse+"it served a request at 20")
			assert.Contains(t, msg, "but is asked to serve one at 2000-01-01T00:00:00Z, on a clock that went back")
		})
	})

	t.Run("one bubble, then another", func(t *testing.T) {
		api := throttletest.NewAPI(cfg)
		synctest.Test(t, func(t *testing.T) {
			time.Sleep(time.Second)
			assert.Equal(t, http.StatusOK, get(t, api, "k").code)
		})
		synctest.Test(t, func(t *testing.T) {
			msg := clockPanic(t, func() { get(t, api, "k") })
			assert.Equal(t, clockMisuse+
				"it served a request at 2000-01-01T00:00:01Z but is asked to serve one at 2000-01-01T00:00:00Z, "+
				"on a clock that went back; create the API inside the bubble that uses it, or Reset it before each bubble", msg)
			assert.Equal(t, throttletest.Counts{Requests: 1, Accepted: 1, PeakPerSecond: 1, PeakInFlight: 1},
				api.Stats().Total, "the refused request is not counted")

			api.Reset()
			assert.Equal(t, http.StatusOK, get(t, api, "k").code, "Reset starts the clock again")
		})
	})

	t.Run("Reset between bubbles", func(t *testing.T) {
		api := throttletest.NewAPI(cfg)
		for i := range 2 {
			synctest.Test(t, func(t *testing.T) {
				time.Sleep(time.Second)
				assert.Equal(t, http.StatusOK, get(t, api, "k").code, fmt.Sprint("bubble ", i))
			})
			api.Reset()
		}
	})
}
