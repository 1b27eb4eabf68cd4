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

// Each trace starts at the bubble's epoch, midnight, so windows start at t=0.
const (
	ok   = http.StatusOK
	full = http.StatusTooManyRequests
)

func oneLimit(l throttletest.Limit) throttletest.Config {
	return throttletest.Config{Limits: []throttletest.Limit{l}, XRateLimit: true, HeadersOnSuccess: true}
}

func TestTokenBucketRefillsAtRateUpToBurst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := throttletest.NewAPI(oneLimit(throttletest.Limit{Algorithm: throttletest.TokenBucket, Rate: 2, Burst: 3}))
		runSteps(t, api, []step{
			{code: ok, remaining: "2"}, // t=0: the bucket starts full
			{code: ok, remaining: "1"},
			{code: ok, remaining: "0"},
			{code: full, retryAfter: "1", remaining: "0"}, // next token in 500ms
			{sleep: 500*time.Millisecond - ns, code: full},
			{sleep: ns, code: ok, remaining: "0"}, // t=0.5s: exactly one token
			{code: full, retryAfter: "1"},
			{sleep: 10 * time.Second, n: 3, code: ok}, // t=10.5s: refilled, but only up to Burst
			{code: full},
			{sleep: time.Second, n: 2, code: ok}, // t=11.5s: Rate 2 gives 2 tokens a second
			{code: full},
		})
	})
}

func TestLeakyBucketServesOnePerIntervalAndRefusesWhenFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := throttletest.NewAPI(throttletest.Config{Limits: []throttletest.Limit{
			{Algorithm: throttletest.LeakyBucket, Rate: 2, Queue: 2},
		}})
		type answer struct {
			code       int
			at         time.Duration
			retryAfter string
		}
		start := time.Now()
		got := make([]answer, 5)
		var wg sync.WaitGroup
		for i := range got {
			wg.Go(func() {
				r := get(t, api, "k")
				got[i] = answer{r.code, time.Since(start), r.header.Get("Retry-After")}
			})
			synctest.Wait() // request i is served, queued or refused before i+1 arrives
		}
		wg.Wait()
		assert.Equal(t, []answer{
			{ok, 0, ""},                      // served at once
			{ok, 500 * time.Millisecond, ""}, // queued: one every 1/Rate
			{ok, time.Second, ""},            // queued
			{full, 0, "1"},                   // queue full: Queue 2 wait; next slot in 500ms
			{full, 0, "1"},
		}, got)

		// t=1s: the last one has just been served; a new one waits its interval.
		before := time.Now()
		assert.Equal(t, ok, get(t, api, "k").code)
		assert.Equal(t, 500*time.Millisecond, time.Since(before))
		assert.Equal(t, int64(2), api.Stats().Total.PeakPerSecond) // served every 500ms
	})
}

func TestLeakyBucketWithoutQueueRefusesUntilIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := throttletest.NewAPI(oneLimit(throttletest.Limit{Algorithm: throttletest.LeakyBucket, Rate: 0.1}))
		runSteps(t, api, []step{
			{code: ok, remaining: "0"},
			{code: full, retryAfter: "10"},
			{sleep: 10*time.Second - ns, code: full},
			{sleep: ns, code: ok},
		})
	})
}

func TestFixedWindowAdmitsTwiceItsLimitAcrossABoundary(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := throttletest.NewAPI(oneLimit(throttletest.Limit{Algorithm: throttletest.FixedWindow, N: 5, Per: time.Minute}))
		runSteps(t, api, []step{
			{sleep: 59500 * time.Millisecond, n: 5, code: ok}, // end of window 1
			{code: full, retryAfter: "1", remaining: "0"},     // true wait 500ms
			{sleep: 500*time.Millisecond - ns, code: full},
			{sleep: ns, n: 5, code: ok}, // t=60s: window 2 starts
			{code: full, retryAfter: "60"},
		})
		assert.Equal(t, int64(10), api.Stats().Total.PeakPerSecond)
	})
}

func TestSlidingLogDoesNotAdmitTwiceItsLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := throttletest.NewAPI(oneLimit(throttletest.Limit{Algorithm: throttletest.SlidingLog, N: 5, Per: time.Minute}))
		runSteps(t, api, []step{
			{sleep: 59500 * time.Millisecond, n: 5, code: ok},
			{sleep: 500 * time.Millisecond, code: full, retryAfter: "60"}, // t=60s: oldest expires at 119.5s
			{sleep: 59500*time.Millisecond - ns, code: full},
			{sleep: ns, n: 5, code: ok},
			{code: full, retryAfter: "60"},
		})
		assert.Equal(t, int64(5), api.Stats().Total.PeakPerSecond)
	})
}

func TestSlidingLogWaitsForTheOldestEntry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := throttletest.NewAPI(oneLimit(throttletest.Limit{Algorithm: throttletest.SlidingLog, N: 3, Per: time.Minute}))
		runSteps(t, api, []step{
			{code: ok, remaining: "2"}, // t=0
			{sleep: 10 * time.Second, code: ok, remaining: "1"},
			{sleep: 10 * time.Second, code: ok, remaining: "0"},
			{sleep: 10 * time.Second, code: full, retryAfter: "30"}, // t=30s: t=0 expires at 60s
			{sleep: 30*time.Second - ns, code: full},
			{sleep: ns, code: ok},
			{code: full, retryAfter: "10"}, // t=60s: t=10s expires at 70s
		})
	})
}

func TestSlidingCounterFollowsTheWeightedEstimate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := throttletest.NewAPI(oneLimit(throttletest.Limit{Algorithm: throttletest.SlidingCounter, N: 10, Per: time.Minute}))
		runSteps(t, api, []step{
			{sleep: 10 * time.Second, n: 8, code: ok}, // window [0,60s): curr 8
			// t=75s: prev 8, 15s into the window: estimate 8*(1-15/60) + 0 = 6,
			// so 4 more fit (an estimate of 10 with the request included).
			{sleep: 65 * time.Second, code: ok, remaining: "3"},
			{code: ok, remaining: "2"},
			{code: ok, remaining: "1"},
			{code: ok, remaining: "0"},
			// 8*(1-e/60) + 4 <= 9 from e = 22.5s, 7.5s from now.
			{code: full, retryAfter: "8", remaining: "0"},
			{sleep: 7500*time.Millisecond - ns, code: full},
			{sleep: ns, code: ok, remaining: "0"},
			{code: full},
		})
	})
}

func TestSlidingCounterWaitsIntoTheNextWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := throttletest.NewAPI(oneLimit(throttletest.Limit{Algorithm: throttletest.SlidingCounter, N: 2, Per: time.Minute}))
		runSteps(t, api, []step{
			{n: 2, code: ok},
			// Window 2 starts with prev 2: 2*(1-e/60) <= 1 from e = 30s, at t=90s.
			{code: full, retryAfter: "90"},
			{sleep: 90*time.Second - ns, code: full},
			{sleep: ns, code: ok},
		})
	})
}

func TestConcurrencyRefusesTheRequestOverN(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := oneLimit(throttletest.Limit{Algorithm: throttletest.Concurrency, N: 2})
		cfg.Latency = time.Second
		api := throttletest.NewAPI(cfg)
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() { assert.Equal(t, ok, get(t, api, "k").code) })
		}
		synctest.Wait() // both are in their latency
		r := get(t, api, "k")
		assert.Equal(t, full, r.code)
		assert.Equal(t, "1", r.header.Get("Retry-After"))
		assert.Empty(t, r.header.Get("X-RateLimit-Limit"), "a concurrency limit is not a quota over time")
		assert.Equal(t, ok, get(t, api, "other").code, "limits are per key")
		wg.Wait()
		assert.Equal(t, ok, get(t, api, "k").code)
		assert.Equal(t, int64(2), api.Stats().Keys["k"].PeakInFlight)
	})
}

func TestRefusedRequestConsumesFromNoLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := throttletest.NewAPI(throttletest.Config{
			Limits: []throttletest.Limit{
				{Algorithm: throttletest.FixedWindow, N: 3, Per: time.Hour, Name: "hour"},
				{Algorithm: throttletest.TokenBucket, Rate: 1, Name: "second"},
			},
			IETF: true, HeadersOnSuccess: true,
		})
		r := get(t, api, "k")
		assert.Equal(t, `"hour";r=2;t=3600, "second";r=0;t=1`, r.header.Get("RateLimit"))
		for range 5 {
			assert.Equal(t, full, get(t, api, "k").code) // refused by "second" only
		}
		time.Sleep(time.Second)
		r = get(t, api, "k")
		assert.Equal(t, ok, r.code)
		assert.Equal(t, `"hour";r=1;t=3599, "second";r=0;t=1`, r.header.Get("RateLimit"))
	})
}
