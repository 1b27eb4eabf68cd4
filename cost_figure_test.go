package throttle_test

import (
	"context"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlehttp/throttle"
	"github.com/throttlehttp/throttle/throttletest"
)

// Tests of what the server's figure of a request's cost (WithCost) does to
// the key's windows and to its mirror of the quota headers, and of what a
// large cost costs in memory.

// figured sends a GET to url through rt, charged cost, with the server's
// figure asked for in X-Figure (see figures; "" for none), and returns
// when it came back (from start).
func figured(t *testing.T, rt http.RoundTripper, start time.Time, url string, cost int, figure string) time.Duration {
	t.Helper()
	req := newReq(t, throttle.With(context.Background(), throttle.Cost(cost)), http.MethodGet, url)
	if figure != "" {
		req.Header.Set("X-Figure", figure)
	}
	resp, err := rt.RoundTrip(req)
	require.NoError(t, err)
	resp.Body.Close()
	return time.Since(start)
}

// Regression: a window corrected up by the server's figure keeps every
// entry that still counts. A correction once overwrote the oldest entries
// of a full log, and one of N or more rebuilt the log, dropping the
// entries of attempts still on their way.
func TestCostCorrectionKeepsWhatStillCounts(t *testing.T) {
	window := throttle.WithPolicy(throttle.Policy{Windows: []throttle.Window{{N: 2, Per: time.Second}}})
	slowly := func(d time.Duration) rtFunc {
		return func(r *http.Request) (*http.Response, error) {
			if r.URL.Path == "/slow" {
				time.Sleep(d)
			}
			return answerFigure(r)
		}
	}
	// A, charged 1, is answered at 500 ms with a figure of 2; B, sent
	// beside it, at once. A's 2 units count until 1.5 s: the next request
	// goes then, not when B's unit has aged out.
	t.Run("full log", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			base, sent := figuresAfter(slowly(ms(500)))
			rt := throttle.New(base, window, throttle.WithCost(throttle.CostHeader("X-Cost")))
			defer rt.Close()
			start := time.Now()
			var wg sync.WaitGroup
			wg.Go(func() { figured(t, rt, start, "http://api.test/slow", 1, "2") })
			synctest.Wait()
			figured(t, rt, start, "http://api.test/b", 1, "")
			wg.Wait()
			figured(t, rt, start, "http://api.test/d", 1, "")
			assert.Equal(t, []time.Duration{0, 0, ms(1500)}, sent())
		})
	})
	// A slow request (1 unit) is on its way until 800 ms; a big one,
	// charged 1, costs 3 by the server's figure. The next goes at 1 s,
	// when the big one's units have aged out; the one after waits for the
	// slow one's unit, until 1.8 s.
	t.Run("correction beyond N", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			base, sent := figuresAfter(slowly(ms(800)))
			rt := throttle.New(base, window, throttle.WithCost(throttle.CostHeader("X-Cost")))
			defer rt.Close()
			start := time.Now()
			var wg sync.WaitGroup
			wg.Go(func() { figured(t, rt, start, "http://api.test/slow", 1, "") })
			synctest.Wait()
			figured(t, rt, start, "http://api.test/big", 1, "3")
			figured(t, rt, start, "http://api.test/d", 1, "")
			figured(t, rt, start, "http://api.test/e", 1, "")
			wg.Wait()
			assert.Equal(t, []time.Duration{0, 0, time.Second, ms(1800)}, sent())
		})
	})
}

// figuresAfter wraps base, logging when each request came to it.
func figuresAfter(base rtFunc) (rtFunc, func() []time.Duration) {
	var mu sync.Mutex
	var at []time.Duration
	start := time.Now()
	return func(req *http.Request) (*http.Response, error) {
			mu.Lock()
			at = append(at, time.Since(start))
			mu.Unlock()
			return base(req)
		}, func() []time.Duration {
			mu.Lock()
			defer mu.Unlock()
			return append([]time.Duration(nil), at...)
		}
}

// Regression: a window's memory is bounded by the attempts it counts, not
// by their units. A window took 16 bytes per unit it counted, up to N: in
// a window of ten million, one attempt of a million units took 16 MB, and
// one answer with a figure of ten million 160 MB (of a billion, 16 GB).
func TestCostWindowMemoryIsPerAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base, _ := figures()
		rt := throttle.New(base, throttle.WithPolicy(throttle.Policy{Windows: []throttle.Window{{N: 10_000_000, Per: time.Hour}}}),
			throttle.WithCost(throttle.CostHeader("X-Cost")))
		defer rt.Close()
		start := time.Now()
		before := allocated()
		figured(t, rt, start, "http://api.test/q", 1_000_000, "")
		figured(t, rt, start, "http://api.test/q", 1, "9000000")
		figured(t, rt, start, "http://api.test/q", 1, "")
		assert.Less(t, allocated()-before, uint64(1<<20), "bytes allocated for 3 requests")
		// The window still counts every unit: the next unit waits an hour.
		assert.Equal(t, time.Hour, figured(t, rt, start, "http://api.test/q", 1, ""))
	})
}

// allocated is the bytes allocated on the heap so far, by the whole
// program.
func allocated() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc
}

// Regression: the mirror of the quota headers counts what the server says
// a request cost, not what it was charged. Charged 5 and found to cost 1,
// the requests of a window of 100 per minute once showed as a climb of
// Remaining (4 units back per answer): the key took the window for a bucket
// of 500/s and sent 93 before the reset. Counted by their figures, they
// are 96: the last 4 units of the window cannot hold a request charged 5.
func TestQuotaHeadersCountTheServersFigure(t *testing.T) {
	for _, cost := range []int{1, 5} {
		t.Run(strings.Repeat("I", cost), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := throttletest.NewAPI(throttletest.Config{
					Limits:     []throttletest.Limit{{Algorithm: throttletest.FixedWindow, N: 100, Per: time.Minute}},
					XRateLimit: true, HeadersOnSuccess: true, Latency: ms(10)})
				base := rtFunc(func(r *http.Request) (*http.Response, error) {
					resp, err := api.RoundTrip(r)
					if resp != nil {
						resp.Header.Set("X-Cost", "1")
					}
					return resp, err
				})
				paces, shown := paceLog()
				rt := throttle.New(base, throttle.WithCost(throttle.CostHeader("X-Cost")), paces)
				defer rt.Close()
				ctx, cancel := context.WithTimeout(context.Background(), 59*time.Second)
				defer cancel()
				for {
					req := newReq(t, throttle.With(ctx, throttle.Cost(cost)), http.MethodGet, "http://api.test/q")
					req.Header.Set("X-API-Key", "k")
					resp, err := rt.RoundTrip(req)
					if err != nil {
						break
					}
					resp.Body.Close()
				}
				assert.EqualValues(t, 100-(cost-1), api.Stats().Total.Accepted, "sent before the reset")
				var why []string
				for _, e := range shown() {
					why = append(why, e.Reason)
				}
				assert.NotContains(t, strings.Join(why, "; "), "bucket", "what the headers taught")
			})
		})
	}
}

// Regression: the units of attempts on their way are counted in 64 bits
// everywhere: three attempts of a billion units once wrapped to a negative
// count on 32-bit platforms (GOARCH=386), and the mirror of the quota
// headers let the next request go at once, on a quota it saw spent.
// KeyStats.Remaining counts them in units, not attempts.
func TestCostUnitsOnTheirWayDoNotWrap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			if r.URL.Path == "/held" {
				<-release
				return reply(r, http.StatusOK), nil
			}
			return reply(r, http.StatusOK, "X-RateLimit-Limit", "10", "X-RateLimit-Remaining", "9", "X-RateLimit-Reset", "60"), nil
		})
		rt := throttle.New(base)
		defer rt.Close()
		start := time.Now()
		var wg sync.WaitGroup
		for range 3 { // no quota known yet: they go at once
			wg.Go(func() {
				_, err := costly(t, rt, start, "http://api.test/held", 1_000_000_000)
				assert.NoError(t, err)
			})
			synctest.Wait()
		}
		require.NoError(t, do(t, rt, "http://api.test/first")) // 9 remain, and 3e9 units on their way
		assert.Zero(t, rt.Stats().Keys["api.test"].Remaining)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := doCtx(t, ctx, rt, "http://api.test/q")
		assert.ErrorIs(t, err, throttle.ErrWouldExceedDeadline, "held until the reset")
		close(release)
		wg.Wait()
		assert.Equal(t, 9, rt.Stats().Keys["api.test"].Remaining)
	})
}
