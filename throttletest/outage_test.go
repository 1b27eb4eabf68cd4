package throttletest_test

import (
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/throttlehttp/throttle/throttletest"
)

func TestOutageAnswers503WithoutSpendingTheQuota(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := throttletest.NewAPI(throttletest.Config{
			Limits:  []throttletest.Limit{{Algorithm: throttletest.SlidingLog, N: 3, Per: time.Hour}},
			Outages: []throttletest.Outage{{Start: 10 * time.Second, Duration: 5 * time.Second, RetryAfter: 2 * time.Second}},
		})
		runSteps(t, api, []step{
			{code: 200},                                             // t=0
			{sleep: 10*time.Second - ns, code: 200},                 // just before the outage
			{sleep: ns, n: 3, code: 503, retryAfter: "2"},           // t=10s: it begins
			{sleep: 5*time.Second - ns, code: 503, retryAfter: "2"}, // its last instant
			{sleep: ns, code: 200},                                  // t=15s: over; the 503s spent nothing
			{code: 429},                                             // the quota's third was the last
		})
		assert.Equal(t, throttletest.Counts{
			Requests: 8, Accepted: 3, Outage: 4, Throttled: 1, PeakPerSecond: 1, PeakInFlight: 1,
		}, api.Stats().Keys["k"])
	})
}

// An outage of 429s plays a gateway that refuses everything for a moment:
// its refusals are Throttled, with the outage's Retry-After, and spend no
// quota.
func TestOutageOf429sRefusesWithoutSpendingTheQuota(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := throttletest.NewAPI(throttletest.Config{
			Limits: []throttletest.Limit{{Algorithm: throttletest.SlidingLog, N: 3, Per: time.Hour}},
			Outages: []throttletest.Outage{
				{Start: 10 * time.Second, Duration: 100 * time.Millisecond, RetryAfter: 2 * time.Second, Status: http.StatusTooManyRequests},
				{Start: 20 * time.Second, Duration: time.Second}, // a 503 one after it
			},
		})
		runSteps(t, api, []step{
			{code: 200}, // t=0
			{sleep: 10 * time.Second, n: 3, code: 429, retryAfter: "2"}, // t=10s: it begins
			{sleep: 100 * time.Millisecond, code: 200},                  // over; the 429s spent nothing
			{sleep: 10 * time.Second, code: 503, retryAfter: "1"},       // the other outage
			{sleep: time.Second, code: 200},                             // the quota's third
		})
		assert.Equal(t, throttletest.Counts{
			Requests: 7, Accepted: 3, Outage: 1, Throttled: 3, PeakPerSecond: 1, PeakInFlight: 1,
		}, api.Stats().Keys["k"])
	})
}

func TestOutageAnswersAtOnceAndSparesRequestsAlreadyIn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := throttletest.NewAPI(throttletest.Config{
			Latency: 2 * time.Second,
			Outages: []throttletest.Outage{{Start: time.Second, Duration: time.Minute}},
		})
		var wg sync.WaitGroup
		wg.Go(func() {
			assert.Equal(t, http.StatusOK, get(t, api, "k").code, "arrived before the outage")
		})
		time.Sleep(time.Second)
		start := time.Now()
		r := get(t, api, "k")
		assert.Equal(t, http.StatusServiceUnavailable, r.code)
		assert.Equal(t, "1", r.header.Get("Retry-After"), "zero RetryAfter means 1 second")
		assert.JSONEq(t, `{"ok":false,"error":"service unavailable"}`, r.body)
		assert.Zero(t, time.Since(start), "no Latency: the backend is not reached")
		assert.Equal(t, http.StatusServiceUnavailable, get(t, api, "").code, "no key: still down, not 401")
		wg.Wait()

		s := api.Stats().Total
		assert.Equal(t, int64(2), s.Outage)
		assert.Zero(t, s.Unavailable, "apart from the random 503s")
		assert.Zero(t, s.Unauthorized)
	})
}

func TestOutageClockStartsAtNewAPIAndReset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := throttletest.NewAPI(throttletest.Config{
			RetryAfter: throttletest.RetryAfterDate,
			Outages:    []throttletest.Outage{{Start: time.Minute, Duration: time.Minute, RetryAfter: 90 * time.Second}},
		})
		time.Sleep(90 * time.Second)
		r := get(t, api, "k")
		assert.Equal(t, http.StatusServiceUnavailable, r.code)
		assert.Equal(t, time.Now().Add(90*time.Second).UTC().Format(http.TimeFormat), r.header.Get("Retry-After"),
			"in the Config's format")

		api.Reset()
		assert.Equal(t, http.StatusOK, get(t, api, "k").code, "the outage is a minute away again")
		time.Sleep(time.Minute)
		assert.Equal(t, http.StatusServiceUnavailable, get(t, api, "k").code)
	})
}
