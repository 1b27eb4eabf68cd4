package throttle_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"

	"github.com/throttlehttp/throttle"
	"github.com/throttlehttp/throttle/throttletest"
)

// The reaction is in proportion to the evidence: these tests hold the rules
// of pause.go, outage.go, adapt.go and latency.go.

func keyRate(rt *throttle.Transport, key string) rate.Limit { return rt.Stats().Keys[key].Rate }

// An isolated 503, even with Retry-After, delays only its own retry: the
// others go on at the pace, which is not cut.
func TestIsolated503DelaysOnlyItsOwnRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(0, func(r *http.Request, n int) *http.Response {
			if r.URL.Path == "/a" && n == 1 {
				return reply(r, http.StatusServiceUnavailable, "Retry-After", "2")
			}
			return reply(r, http.StatusOK)
		})
		rt := throttle.New(s, throttle.WithPolicy(throttle.Policy{Rate: 10, Burst: 1}))
		defer rt.Close()
		var wg sync.WaitGroup
		wg.Go(func() { assert.NoError(t, do(t, rt, "http://i.test/a")) })
		synctest.Wait()
		for i := range 5 {
			wg.Go(func() { assert.NoError(t, do(t, rt, fmt.Sprint("http://i.test/b", i))) })
			synctest.Wait()
		}
		wg.Wait()
		// /b0../b4 at the pace, 100ms apart, while /a waits its 2s alone.
		var b []time.Duration
		for _, a := range s.attempts() {
			if a.path != "/a" {
				b = append(b, a.at)
			}
		}
		assert.Equal(t, []time.Duration{ms(100), ms(200), ms(300), ms(400), ms(500)}, b)
		assert.Equal(t, []time.Duration{0, 2 * time.Second}, s.times("/a"))
		st := rt.Stats().Keys["i.test"]
		assert.Zero(t, st.Pauses, "no pause")
		assert.EqualValues(t, 10, st.Rate, "no cut")
		assert.EqualValues(t, 1, st.Unavailable)
	})
}

// The outage rule: of the key's last 20 answers, at least 5 failed and
// more than half did. Each case sends POSTs one by one (never retried), the
// server answering as the pattern says: F a 503 without Retry-After, S a 200.
func TestOutageRule(t *testing.T) {
	for _, tt := range []struct {
		answers string
		outage  bool
	}{
		{"FFFF", false},
		{"FFFFF", true},
		{"FSFSFSFSF", true},                  // 5 of 9
		{"FSFSFSFSSF", false},                // 5 of 10: not more than half
		{"SSSSSSSSSSSSSSSSSSSSFFFFF", false}, // 5 of the last 20
		{"SSSSSSSSSSFFFFFFFFFFF", true},      // 11 of the last 20
	} {
		t.Run(tt.answers, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var i atomic.Int64
				base := rtFunc(func(r *http.Request) (*http.Response, error) {
					if tt.answers[i.Add(1)-1] == 'F' {
						return reply(r, http.StatusServiceUnavailable), nil
					}
					return reply(r, http.StatusOK), nil
				})
				rt := throttle.New(base)
				defer rt.Close()
				for range tt.answers {
					_, err := status(t, rt, http.MethodPost, "http://o.test/")
					require.NoError(t, err)
				}
				st := rt.Stats().Keys["o.test"]
				assert.Equal(t, tt.outage, st.Outages == 1, "outage")
				assert.Equal(t, st.Outages, st.Pauses, "no other pause")
			})
		})
	}
}

// When failures dominate the key's recent answers, the key pauses as a
// whole, without cutting its pace: during an outage each worker sends about
// one request, then only probes reach the server, every Retry-After apart,
// and every record is done once the server is back.
func TestOutagePausesTheKeyWithoutStorm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		down := func(at time.Duration) bool { return at >= 2*time.Second && at < 7*time.Second }
		var during atomic.Int64
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			time.Sleep(ms(10))
			if down(time.Since(start)) {
				during.Add(1)
				return reply(r, http.StatusServiceUnavailable, "Retry-After", "1"), nil
			}
			return reply(r, http.StatusOK), nil
		})
		var events sync.Map
		rt := throttle.New(base, throttle.WithPolicy(throttle.Policy{Rate: 200, Burst: 10}),
			throttle.WithEvents(func(e throttle.Event) {
				if e.Kind == throttle.EventPaused {
					events.Store(e.Reason, true)
				}
			}))
		defer rt.Close()
		took := job(t, rt, 2000) // ~10s at 200/s, an outage from 2s to 7s
		n := during.Load()
		assert.LessOrEqual(t, n, int64(3*16), "requests that reached the server during the outage")
		st := rt.Stats().Keys["api.test"]
		assert.EqualValues(t, 1, st.Outages)
		assert.EqualValues(t, 200, st.Rate, "an outage does not cut the pace")
		assert.Zero(t, st.GaveUp)
		_, outage := events.Load("outage")
		assert.True(t, outage, "the pause event says outage")
		assert.Less(t, took, 10*time.Second+5*time.Second+2*time.Second, "ideal + outage + 2s")
		t.Logf("took %v, %d requests during the outage", took, n)
	})
}

// brokenBeside runs k broken items (GETs answered 503 at every attempt,
// the default Retry) at Priority(prio) beside one healthy worker of
// priority 0 sending a GET a second for a minute; it returns the longest
// the worker's answers came apart beyond its second, and the key's
// outages.
func brokenBeside(t *testing.T, prio, k int) (held time.Duration, outages int64) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var last time.Duration
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			time.Sleep(ms(20))
			if r.URL.Path == "/broken" {
				return reply(r, http.StatusServiceUnavailable), nil
			}
			now := time.Since(start) // (one healthy worker: no race)
			if last > 0 {
				held = max(held, now-last-time.Second)
			}
			last = now
			return reply(r, http.StatusOK), nil
		})
		rt := throttle.New(base)
		defer rt.Close()
		ctx := throttle.With(context.Background(), throttle.Priority(prio))
		var wg sync.WaitGroup
		for range k {
			wg.Go(func() { _ = doCtx(t, ctx, rt, "http://b.test/broken") })
		}
		wg.Go(func() {
			for time.Since(start) < time.Minute {
				assert.NoError(t, do(t, rt, "http://b.test/ok"))
				time.Sleep(time.Second)
			}
		})
		wg.Wait()
		outages = rt.Stats().Keys["b.test"].Outages
	})
	return held, outages
}

// meanHeld is brokenBeside's held, on average over runs.
func meanHeld(t *testing.T, runs, prio, k int) time.Duration {
	var total time.Duration
	for range runs {
		held, _ := brokenBeside(t, prio, k)
		total += held
	}
	return total / time.Duration(runs)
}

// One broken item, every attempt of it failed, beside healthy requests is
// one failure in the key's record, not an outage: its retries never hold
// the others (found in review: its 5 retries among the key's last 9
// answers made one, and the healthy worker waited 11-48 s).
func TestOneBrokenItemIsNoOutage(t *testing.T) {
	for range 5 {
		held, outages := brokenBeside(t, 0, 1)
		assert.Zero(t, outages)
		assert.LessOrEqual(t, held, ms(100))
	}
}

// Three broken items beside one healthy worker make an outage (their
// failures dominate the answers), but the healthy request probes in turn:
// a failed probe goes behind the line, and the first served ends the
// outage (found in review: the broken items probed at every pause, and
// held the worker 20 s on average, up to 47 s).
func TestBrokenItemsDoNotHoldTheHealthyOnes(t *testing.T) {
	// 3.3 s on average over 1,000 runs, 11 s at most; 20 s on average
	// before.
	assert.LessOrEqual(t, meanHeld(t, 10, 0, 3), 6*time.Second, "the healthy worker held beyond its second, on average")
}

// A server that serves nothing for a minute, without Retry-After: its
// probes thin out, to one per MaxDelay at most, whichever requests send
// them (found in review: with failed probes behind the line, fresh
// requests probed at their first short backoffs, 47 requests in the
// minute from 8 workers).
func TestOutageProbesThinOut(t *testing.T) {
	const workers = 8
	for range 5 {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			var during, first5 atomic.Int64
			base := rtFunc(func(r *http.Request) (*http.Response, error) {
				time.Sleep(ms(20))
				if at := time.Since(start); at >= 2*time.Second && at < 62*time.Second {
					during.Add(1)
					if at < 7*time.Second {
						first5.Add(1)
					}
					return reply(r, http.StatusServiceUnavailable), nil
				}
				return reply(r, http.StatusOK), nil
			})
			rt := throttle.New(base)
			defer rt.Close()
			var wg sync.WaitGroup
			for w := range workers {
				wg.Go(func() {
					for i := 0; time.Since(start) < 70*time.Second; i++ {
						_ = do(t, rt, fmt.Sprintf("http://d.test/w%d/%d", w, i))
					}
				})
			}
			wg.Wait()
			assert.EqualValues(t, 1, rt.Stats().Keys["d.test"].Outages)
			assert.LessOrEqual(t, during.Load(), int64(38), "requests in the minute")
			assert.LessOrEqual(t, first5.Load(), int64(2*workers+12), "requests in its first 5 s")
		})
	}
}

// A server failing half its answers at random is in an outage off and on
// (more than half of 20 fail, often), but serves as often as not: the
// probes are spaced by their requests' backoffs, not by one that doubles
// at each failed probe (found in review: that one grows without bound on
// average where a probe fails as often as not, and 8 workers were served
// 145-1,452 times in a minute, where they are 800-1,100 times).
func TestHalfFailingServerIsNotHeldForLong(t *testing.T) {
	for range 3 {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			var served atomic.Int64
			base := rtFunc(func(r *http.Request) (*http.Response, error) {
				time.Sleep(ms(20))
				if rand.N(2) == 0 {
					return reply(r, http.StatusServiceUnavailable), nil
				}
				served.Add(1)
				return reply(r, http.StatusOK), nil
			})
			rt := throttle.New(base)
			defer rt.Close()
			var wg sync.WaitGroup
			for w := range 8 {
				wg.Go(func() {
					for i := 0; time.Since(start) < time.Minute; i++ {
						_ = do(t, rt, fmt.Sprintf("http://h.test/w%d/%d", w, i))
						time.Sleep(ms(100))
					}
				})
			}
			wg.Wait()
			assert.GreaterOrEqual(t, served.Load(), int64(600), "answers served in the minute")
		})
	}
}

// A server that serves nothing for 20 minutes, without Retry-After, to 8
// workers, with a MaxDelay of 2 minutes: the outage's probes thin out to
// one per MaxDelay at most, as they do with MaxDelay 30 s or 1 min (~100,
// ~65 requests). (Found in review: once the outage's floor passed a
// minute, the gap between two answers forgot the key's record, the floor
// fell to 0 until 20 answers were recorded again, and 20 fresh requests
// probed within some 5 s, every time: ~190 requests.)
func TestOutageProbesThinOutPastAMinute(t *testing.T) {
	for range 5 {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			var mu sync.Mutex
			var during []time.Duration
			base := rtFunc(func(r *http.Request) (*http.Response, error) {
				time.Sleep(ms(20))
				at := time.Since(start)
				if at >= 2*time.Second && at < 2*time.Second+20*time.Minute {
					mu.Lock()
					during = append(during, at)
					mu.Unlock()
					return reply(r, http.StatusServiceUnavailable), nil
				}
				return reply(r, http.StatusOK), nil
			})
			rt := throttle.New(base, throttle.WithRetry(throttle.Retry{MaxDelay: 2 * time.Minute}))
			defer rt.Close()
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(func() {
					for time.Since(start) < 20*time.Minute+10*time.Second {
						_ = do(t, rt, "http://d.test/x")
					}
				})
			}
			wg.Wait()
			// After the outage's first 5 minutes, no burst: at most 5
			// requests reach the dead server in any 10 s.
			burst := 0
			for i, at := range during {
				if at < 5*time.Minute {
					continue
				}
				j := i
				for j < len(during) && during[j]-at < 10*time.Second {
					j++
				}
				burst = max(burst, j-i)
			}
			assert.LessOrEqual(t, burst, 5, "requests within 10 s, past the outage's 5th minute")
			assert.LessOrEqual(t, len(during), 120, "requests in the 20 min outage")
			assert.EqualValues(t, 1, rt.Stats().Keys["d.test"].Outages)
		})
	}
}

// An outage without Retry-After, MaxRetryAfter (3 s) shorter than MaxDelay
// (the default 30 s): no server asked for a pause past MaxRetryAfter, so
// no request fails with ErrPaused. (Found in review: the outage's floor
// was held to MaxRetryAfter, but the pause for the failed request's own
// backoff was not, and requests failed at once, "key paused for longer
// than the longest Retry-After honoured".)
func TestAnOutagesOwnPauseIsNoErrPaused(t *testing.T) {
	for range 5 {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			base := rtFunc(func(r *http.Request) (*http.Response, error) {
				time.Sleep(ms(20))
				if time.Since(start) < time.Minute {
					return reply(r, http.StatusServiceUnavailable), nil
				}
				return reply(r, http.StatusOK), nil
			})
			rt := throttle.New(base, throttle.WithRetry(throttle.Retry{MaxRetryAfter: 3 * time.Second}))
			defer rt.Close()
			var wg sync.WaitGroup
			var mu sync.Mutex
			var paused int
			for range 2 {
				wg.Go(func() {
					for time.Since(start) < 70*time.Second {
						if err := do(t, rt, "http://d.test/x"); err != nil {
							if errors.Is(err, throttle.ErrPaused) {
								mu.Lock()
								paused++
								mu.Unlock()
							}
							time.Sleep(100 * time.Millisecond)
						}
					}
				})
			}
			wg.Wait()
			assert.Zero(t, paused, "requests failed with ErrPaused")
			assert.Zero(t, rt.Stats().Keys["d.test"].RefusedPaused)
		})
	}
}

// Two broken items of a batch (Priority -1, every attempt a 503) beside a
// user's healthy worker (priority 0, a GET a second): a failed probe of
// the outage goes behind the requests waiting, whatever their priorities,
// and the healthy worker is held about as long as with equal priorities
// (1-4 s on average over 20 runs). (Found in review: the broken items,
// waiting since they began, aged past the healthy requests, one priority
// a second, so a failed probe kept its place and probed again at every
// pause: the worker was held 6-14 s on average over 20 runs, up to 27 s.)
func TestAFailedProbeGoesBehindWhateverItsPriority(t *testing.T) {
	assert.LessOrEqual(t, meanHeld(t, 40, -1, 2), 5*time.Second, "the healthy worker held beyond its second, on average")
}

// One worker sending GETs one after another to a server that serves
// nothing for 10 minutes, without a retry budget (Budget: -1, documented):
// no answer is served, so each request's retries are news of the server
// (README: "one request's retries count once while others are served"),
// and the key goes into an outage, as with two workers (~58 requests in
// the 10 min). (Found in review: every retry replaced its own request's
// last failure, no other request having failed since it, the 20 answers
// held at most 3 failures, and the outage never began: ~300 requests,
// more than before the rule, ~165.)
func TestOneWorkerAgainstADeadServerMakesAnOutage(t *testing.T) {
	for range 3 {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			var during atomic.Int64
			base := rtFunc(func(r *http.Request) (*http.Response, error) {
				time.Sleep(ms(20))
				if at := time.Since(start); at >= 2*time.Second && at < 602*time.Second {
					during.Add(1)
					return reply(r, http.StatusServiceUnavailable), nil
				}
				return reply(r, http.StatusOK), nil
			})
			rt := throttle.New(base, throttle.WithRetry(throttle.Retry{Budget: -1, BudgetFloor: -1}))
			defer rt.Close()
			for time.Since(start) < 610*time.Second {
				_ = do(t, rt, "http://d.test/x")
			}
			assert.EqualValues(t, 1, rt.Stats().Keys["d.test"].Outages)
			assert.LessOrEqual(t, during.Load(), int64(120), "requests in the 10 min outage")
		})
	}
}

// A broken item of higher priority than the healthy requests (README's
// interactive calls at Priority(1) beside a batch), up to the highest
// there is, goes behind them too when its probe fails (found in review: it
// kept its place ahead of them, probed again at every pause, and held
// them; two broken items at Priority(5), mean of 60 runs: 7.7-9.1 s; at
// Priority(math.MaxInt), after a first fix that aged it below them, 10 s;
// about 3 s now, as at Priority(0) as the healthy worker).
func TestAFailedProbeOfHigherPriorityGoesBehind(t *testing.T) {
	for _, prio := range []int{5, 1 << 40, math.MaxInt} {
		assert.LessOrEqual(t, meanHeld(t, 40, prio, 2), 6*time.Second, "Priority(%d): the healthy worker held beyond its second, on average", prio)
	}
}

// starvedAfterOutage runs, for a minute, a worker of interactive calls at
// Priority(1) (it sends a GET, then the next), workers of priority 0 and
// one worker of a nightly batch at batchPrio,
// through a Policy of 10 a second, against a server that answers 503
// (Retry-After: 1) to everything for its first 2 s, then 200. It returns
// the longest any interactive call took, and how many were made.
func starvedAfterOutage(t *testing.T, workers, batchPrio int) (longest time.Duration, n int) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			time.Sleep(ms(20))
			if time.Since(start) < 2*time.Second {
				return reply(r, http.StatusServiceUnavailable, "Retry-After", "1"), nil
			}
			return reply(r, http.StatusOK), nil
		})
		rt := throttle.New(base, throttle.WithPolicy(throttle.Policy{Rate: 10, Burst: 1}))
		defer rt.Close()
		var mu sync.Mutex
		var wg sync.WaitGroup
		loop := func(prio int, timed bool) {
			ctx := throttle.With(context.Background(), throttle.Priority(prio))
			for time.Since(start) < time.Minute {
				sent := time.Now()
				_ = doCtx(t, ctx, rt, "http://api.test/x")
				if timed {
					mu.Lock()
					longest, n = max(longest, time.Since(sent)), n+1
					mu.Unlock()
				}
			}
		}
		wg.Go(func() { loop(1, true) })
		synctest.Wait()
		wg.Go(func() { loop(batchPrio, false) })
		for range workers {
			wg.Go(func() { loop(0, false) })
		}
		wg.Wait()
	})
	return longest, n
}

// An interactive call (Priority(1)) whose probe failed during a 2 s
// outage is not starved, after it, by the requests of priority 0 that keep
// arriving, because a batch request of low priority was waiting when its
// probe failed (found in review: sent behind the batch's level, for good,
// it took 61 s, until the workers stopped, beside a batch at
// Priority(-3600); 3.1 s now).
func TestAFailedProbeIsNotStarvedBehindALowPriorityBatch(t *testing.T) {
	for _, batch := range []int{0, -1, -3600, -1 << 62} {
		longest, n := starvedAfterOutage(t, 6, batch)
		t.Logf("batch at Priority(%d): %d interactive calls, the longest took %v", batch, n, longest)
		assert.Less(t, longest, 15*time.Second, "batch at Priority(%d)", batch)
	}
}

// One episode, one reaction: a throttled answer to an attempt sent before
// the pace was cut does not cut it again, even when it arrives after the
// pause has ended.
func TestLateThrottledAnswerDoesNotCutAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		seen := map[string]int{}
		var mu sync.Mutex
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			seen[r.URL.Path]++
			n := seen[r.URL.Path]
			mu.Unlock()
			if r.URL.Path == "/slow" {
				time.Sleep(3 * time.Second)
			} else {
				time.Sleep(ms(10))
			}
			if n == 1 {
				return reply(r, http.StatusTooManyRequests, "Retry-After", "1"), nil
			}
			return reply(r, http.StatusOK), nil
		})
		rt := throttle.New(base, throttle.WithPolicy(throttle.Policy{Rate: 100, Burst: 5}))
		defer rt.Close()
		var wg sync.WaitGroup
		for _, p := range []string{"/slow", "/fast"} {
			wg.Go(func() { assert.NoError(t, do(t, rt, "http://e.test"+p)) })
		}
		time.Sleep(ms(500))
		assert.EqualValues(t, 80, keyRate(rt, "e.test"), "cut once by /fast's 429")
		time.Sleep(3 * time.Second) // /slow's 429 came at 3s, after the pause
		st := rt.Stats().Keys["e.test"]
		assert.EqualValues(t, 2, st.Throttled)
		assert.Zero(t, st.Pauses, "collisions (a second asked, refusals rare): neither pauses the key")
		assert.GreaterOrEqual(t, float64(st.Rate), 80.0, "the late 429 does not cut it again (it climbed back since)")
		wg.Wait()
	})
}

// A pace cut by one collision is back at the configured rate within
// seconds of quiet: a tenth of Rate per quiet second.
func TestCutPaceClimbsBackWithinSeconds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var first atomic.Bool
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			if first.CompareAndSwap(false, true) {
				return reply(r, http.StatusTooManyRequests, "Retry-After", "1"), nil
			}
			return reply(r, http.StatusOK), nil
		})
		rt := throttle.New(base, throttle.WithPolicy(throttle.Policy{Rate: 100, Burst: 1}))
		defer rt.Close()
		start := time.Now()
		require.NoError(t, do(t, rt, "http://c.test/")) // 429, a collision: the key goes on at 80, the retry after 1s
		want := []struct {
			at   time.Duration
			rate rate.Limit
		}{{ms(1500), 90}, {ms(2500), 100}, {ms(10000), 100}}
		for _, w := range want {
			for time.Since(start) < w.at {
				require.NoError(t, do(t, rt, "http://c.test/"))
			}
			assert.InDelta(t, float64(w.rate), float64(keyRate(rt, "c.test")), 1e-9, "at %v", w.at)
		}
	})
}

// Refusals that come back however slow the pace (every 20th answer here)
// cannot sink a configured pace: two cuts that did not help are not
// repeated, and the pace climbs back.
func TestRefusalsThatSlowingDoesNotStopKeepThePace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := throttle.New(refusingEvery(20, "0"), throttle.WithPolicy(throttle.Policy{Rate: 50, Burst: 5}))
		defer rt.Close()
		lowest := watchRate(t, rt, "api.test")
		job(t, rt, 2000)
		assert.GreaterOrEqual(t, float64(lowest()), 32.0, "at most two cuts of 0.8")
		assert.EqualValues(t, 50, keyRate(rt, "api.test"))
	})
}

// refusingEvery is a base that answers after 10ms, 429 with the given
// Retry-After to every nth request whatever the pace, 200 to the others.
func refusingEvery(nth int64, retryAfter string) http.RoundTripper {
	var n atomic.Int64
	return rtFunc(func(r *http.Request) (*http.Response, error) {
		time.Sleep(ms(10))
		if n.Add(1)%nth == 0 {
			return reply(r, http.StatusTooManyRequests, "Retry-After", retryAfter), nil
		}
		return reply(r, http.StatusOK), nil
	})
}

// refusingWhen is a base that answers after 2ms, 429 with Retry-After: 1
// to the ith request (from 1) when refused(i), 200 to the others.
func refusingWhen(refused func(i int64) bool) http.RoundTripper {
	var n atomic.Int64
	return rtFunc(func(r *http.Request) (*http.Response, error) {
		time.Sleep(ms(2))
		if refused(n.Add(1)) {
			return reply(r, http.StatusTooManyRequests, "Retry-After", "1"), nil
		}
		return reply(r, http.StatusOK), nil
	})
}

// watchRate samples the key's pace every 100ms until the test ends, and
// returns a function that reports the lowest seen.
func watchRate(t *testing.T, rt *throttle.Transport, key string) func() rate.Limit {
	t.Helper()
	var mu sync.Mutex
	low := rate.Inf
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(ms(100)):
			}
			if r := keyRate(rt, key); r > 0 {
				mu.Lock()
				low = min(low, r)
				mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
	return func() rate.Limit {
		mu.Lock()
		defer mu.Unlock()
		return low
	}
}

// Collisions that are not the pace's doing (a refusal every 200 answers,
// every 4s at the pace) cannot sink it: the first, after a long run, barely
// cuts it; the next two, recurring, cut it to 0.8 and 0.64; the fourth, as
// far apart in answers at the slower paces, shows twice that slowing down
// did not help, and the pace is back at the configured rate.
func TestIsolatedCollisionsDoNotSinkThePace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := throttle.New(refusingEvery(200, "1"), throttle.WithPolicy(throttle.Policy{Rate: 50, Burst: 5}))
		defer rt.Close()
		lowest := watchRate(t, rt, "api.test")
		job(t, rt, 3000) // a minute, 15 collisions
		assert.GreaterOrEqual(t, float64(lowest()), 45.0, "no lower than 0.9 of the Rate: the refusals are sparse")
		assert.GreaterOrEqual(t, float64(keyRate(rt, "api.test")), 45.0)
		assert.GreaterOrEqual(t, rt.Stats().Keys["api.test"].Throttled, int64(14))
	})
}

// A Policy ten times the quota, no headers: each pause refills the
// server's bucket, and the pace drains it at once, so the runs between
// refusals stay about its depth however the pace is cut by a fifth. That
// is not a server that refuses whatever the pace: the refusals of each
// episode come together (the count is spent), or after little more than
// what a resume lets go at once (the probe and a Burst: so where the
// answers take 20 ms, before any other request is on its way), and the
// cuts go on. Regression: two cuts that did not help took the episodes
// for noise, the pace went back to the Policy and each episode only paused
// the key, 30 s at a time: 4.5-8.5x the ideal and 87 to 288 429s for the
// bucket of 200 in these seeds, 17x and 333 429s for the bucket of 100
// (6 accepted a second).
func TestPolicyFarAboveTheQuotaIsCutDown(t *testing.T) {
	for _, c := range []struct {
		name    string
		cfg     throttletest.Config
		pol     throttle.Policy
		records int
		ideal   time.Duration
		refused int64
	}{
		{"200/s seed0", nearby(throttletest.Config{Limits: []throttletest.Limit{quotaBucket}}, 0),
			throttle.Policy{Rate: 2000, Burst: 20}, 4000, 3980 * time.Second / 200, 40},
		{"200/s seed2", nearby(throttletest.Config{Limits: []throttletest.Limit{quotaBucket}}, 2),
			throttle.Policy{Rate: 2000, Burst: 20}, 4000, 3980 * time.Second / 200, 40},
		{"200/s seed3", nearby(throttletest.Config{Limits: []throttletest.Limit{quotaBucket}}, 3),
			throttle.Policy{Rate: 2000, Burst: 20}, 4000, 3980 * time.Second / 200, 40},
		{"100/s 20ms", throttletest.Config{Latency: 20 * time.Millisecond,
			Limits: []throttletest.Limit{{Algorithm: throttletest.TokenBucket, Rate: 100, Burst: 5}}},
			throttle.Policy{Rate: 1000, Burst: 5}, 2000, 1995 * time.Second / 100, 30},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := throttletest.NewAPI(c.cfg)
				rt := throttle.New(api, throttle.WithPolicy(c.pol))
				defer rt.Close()
				took := job(t, rt, c.records)
				x := took.Seconds() / c.ideal.Seconds()
				refused := api.Stats().Total.Throttled
				t.Logf("took %v (%.3fx the ideal), %d refused", took, x, refused)
				assert.LessOrEqual(t, x, 2.0)
				assert.LessOrEqual(t, refused, c.refused)
			})
		})
	}
}

// A Policy at the quota, without quota headers, behind a gateway that
// refuses every request for 100 ms every 4 s (eight or more refused in a
// row: they dominate the key's recent answers and pause it) pauses 1/8 s
// and the peek's round trip at each, not the whole second of their
// Retry-After (see quietPeek): within 5% of go-retryablehttp + x/time/rate
// told the quota, in the same bubble. Regression, found in session 45:
// 38.9 s for 3,000 requests on the window and the bucket, the peer
// 31.1 s; now 31.9-32.0 s. The log of 200 a second, which the peer (one
// token deep) meets with a burst of retries at each blip's end: 20.6 s,
// the peer 20.0-21.0 s; now 16.1 s. The window on seed 2, whose second
// blip came 80 ms after a lone refusal of the window's, took the two for
// dense refusals (adapt.go, rule 3), cut the pace to 0.7 and held it there
// under the blips that followed: 43.8 s, where pausing a whole second at
// each took 38.9 s; a blip now counts as one refusal (see dense): 31.9 s.
func TestAGatewaysBlipsPauseAConfiguredKeyBriefly(t *testing.T) {
	for _, limit := range gatewayQuotas {
		for seed := range int64(3) {
			t.Run(fmt.Sprint(limit.Algorithm, "/seed", seed), func(t *testing.T) {
				r, burst := peerRate(limit)
				blipsBesideThePeer(t, limit, 100*time.Millisecond, seed, 1.05, false,
					throttle.WithPolicy(throttle.Policy{Rate: rate.Limit(r), Burst: burst}))
			})
		}
	}
}

// A quota proven lower than the configured pace becomes its ceiling: 25%
// too fast, the key settles at the quota after a few collisions and stays.
func TestQuotaProvenLowerBecomesTheCeiling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api, base := quotaAPI() // 100/s, burst 10
		rt := throttle.New(base, throttle.WithPolicy(throttle.Policy{Rate: 125, Burst: 10}))
		defer rt.Close()
		job(t, rt, 3000)
		assert.LessOrEqual(t, api.Stats().Total.Throttled, int64(6), "0.2%: sparse refusals cut to 0.9 of Rate (112.5) at most until they are dense")
		assert.InDelta(t, 100, float64(keyRate(rt, "api.test")), 5)
	})
}

// A window far from its limit when the server objected is not cut: here
// the server's 429 came with 3 of 10 used, and the 7 left still go at once
// after the pause.
func TestWindowFarFromItsLimitIsNotCut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(0, func(r *http.Request, n int) *http.Response {
			if r.URL.Path == "/x" && n == 1 {
				return reply(r, http.StatusTooManyRequests, "Retry-After", "1")
			}
			return reply(r, http.StatusOK)
		})
		rt := throttle.New(s, throttle.WithPolicy(throttle.Policy{Windows: []throttle.Window{{N: 10, Per: 10 * time.Second}}}))
		defer rt.Close()
		require.NoError(t, do(t, rt, "http://w.test/a"))
		require.NoError(t, do(t, rt, "http://w.test/b"))
		require.NoError(t, do(t, rt, "http://w.test/x")) // 429 with 2 used, its retry at 1s
		launch(t, rt, 7, "http://w.test/more")
		times := s.times("")
		require.Len(t, times, 11)
		assert.Equal(t, time.Second, times[9], "the 10th at 1s")
		assert.Equal(t, 10*time.Second, times[10], "the 11th when the first leaves the window")
	})
}

// A window entry counts from when its answer came back, never earlier: an
// entry still on the wire holds the window until its answer.
func TestWindowEntryCountsFromItsAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder() // logs each request when it is sent
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			resp, err := rec.RoundTrip(r)
			if r.URL.Path == "/slow" {
				time.Sleep(5 * time.Second)
			} else {
				time.Sleep(ms(10))
			}
			return resp, err
		})
		rt := throttle.New(base, throttle.WithPolicy(throttle.Policy{Windows: []throttle.Window{{N: 2, Per: time.Second}}}))
		defer rt.Close()
		var wg sync.WaitGroup
		for _, p := range []string{"/fast", "/slow", "/c", "/d"} {
			wg.Go(func() { assert.NoError(t, do(t, rt, "http://a.test"+p)) })
			synctest.Wait()
		}
		wg.Wait()
		// /fast answered at 10ms: /c goes 1s later. /slow, still on the
		// wire, holds the other place: /d waits until /c, answered at
		// 1020ms, has aged out (were /slow counted from its sending, /d
		// would go beside /c). Nothing is counted twice: /slow and /c
		// count within the same second, /c and /d never.
		assert.Equal(t, []time.Duration{0, 0, ms(1010), ms(2020)}, rec.times())
	})
}

// A probe that gets no answer holds the key only for a bounded time (1s
// here: the round trips seen were instant), then the next attempt goes.
func TestProbeWithoutAnswerDoesNotHoldTheKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The probe (/a's retry, answered 200) never gets its answer.
		s, base := throttledOnceThenHanging(t, func(r *http.Request, resp *http.Response) bool {
			return r.URL.Path == "/a" && resp.StatusCode == http.StatusOK
		})
		rt := throttle.New(base)
		defer rt.Close()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() { _ = doCtx(t, ctx, rt, "http://p.test/a") }()
		time.Sleep(ms(500))
		require.NoError(t, do(t, rt, "http://p.test/b"))
		assert.Equal(t, []time.Duration{0, time.Second}, s.times("/a"))
		assert.Equal(t, []time.Duration{2 * time.Second}, s.times("/b"), "the probe held the key for 1s")
		cancel()
	})
}

// After a successful probe an unpaced key ramps up from one request in
// flight; a ramp's head that gets no answer holds the rest for a bounded
// time too.
func TestRampHeadWithoutAnswerDoesNotHoldTheKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, base := throttledOnceThenHanging(t, func(r *http.Request, _ *http.Response) bool {
			return r.URL.Path == "/stuck"
		})
		rt := throttle.New(base)
		defer rt.Close()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var wg sync.WaitGroup
		wg.Go(func() { assert.NoError(t, do(t, rt, "http://r.test/a")) })
		time.Sleep(ms(500))
		go func() { _ = doCtx(t, ctx, rt, "http://r.test/stuck") }() // the ramp's head
		synctest.Wait()
		wg.Go(func() { assert.NoError(t, do(t, rt, "http://r.test/next")) })
		wg.Wait()
		assert.Equal(t, []time.Duration{time.Second}, s.times("/stuck"), "after the probe, the ramp's first")
		assert.Equal(t, []time.Duration{2 * time.Second}, s.times("/next"), "held 1s by the stuck head, not forever")
		cancel()
	})
}

// With requests reaching the server 0–20ms late at random, a pace set
// exactly at the quota draws no 429 and keeps the ideal time: the token
// reserve it grows from the jitter it observes costs one request's time per
// token, once. (A reserve of one token is already enough here: late arrivals
// only leave the server's bucket fuller. Growing it must not cost more.)
func TestPaceAtQuotaUnderJitterNeverCollides(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api, base := jitteredAPI(seed, ms(20))
				rt := throttle.New(base, throttle.WithPolicy(throttle.Policy{Rate: 100, Burst: 5}))
				defer rt.Close()
				took := job(t, rt, 2000)
				assert.Zero(t, api.Stats().Total.Throttled)
				assert.LessOrEqual(t, took, time.Duration(1.01*float64(19950*time.Millisecond)), "within 1% of the ideal")
			})
		})
	}
}

// When the network's jitter exceeds what the server's bucket absorbs (0–60ms
// late at 100/s against a bucket of 5), a pace at the quota collides again
// and again: the collisions recur, and the pace settles a little below the
// quota, where the server's bucket has room again.
func TestRecurringCollisionsSettleBelowTheQuota(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api, base := jitteredAPI(seed, ms(60))
				rt := throttle.New(base, throttle.WithPolicy(throttle.Policy{Rate: 100, Burst: 5}))
				defer rt.Close()
				took := job(t, rt, 2000)
				assert.LessOrEqual(t, api.Stats().Total.Throttled, int64(6))
				assert.Less(t, took, 30*time.Second, "within 1.5x the ideal")
				assert.Less(t, float64(keyRate(rt, "api.test")), 100.0, "below the quota")
			})
		})
	}
}

// jitteredAPI is a token bucket of 100/s, burst 5, that each request reaches
// a random 0 to jitter late (seeded), answered 1ms later.
func jitteredAPI(seed uint64, jitter time.Duration) (*throttletest.API, http.RoundTripper) {
	api := throttletest.NewAPI(throttletest.Config{
		Limits: []throttletest.Limit{{Algorithm: throttletest.TokenBucket, Rate: 100, Burst: 5}},
	})
	rng := rand.New(rand.NewPCG(seed, 7))
	var mu sync.Mutex
	return api, rtFunc(func(r *http.Request) (*http.Response, error) {
		mu.Lock()
		d := time.Duration(rng.Int64N(int64(jitter)))
		mu.Unlock()
		time.Sleep(d)
		resp, err := api.RoundTrip(r)
		time.Sleep(time.Millisecond)
		return resp, err
	})
}

// throttledOnceThenHanging is a base whose first /a gets a 429 with
// Retry-After: 1, and whose answers for which hang reports true never come
// back (until the request's context ends or the test does).
func throttledOnceThenHanging(t *testing.T, hang func(*http.Request, *http.Response) bool) (*script, http.RoundTripper) {
	t.Helper()
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	s := newScript(0, func(r *http.Request, n int) *http.Response {
		if r.URL.Path == "/a" && n == 1 {
			return reply(r, http.StatusTooManyRequests, "Retry-After", "1")
		}
		return reply(r, http.StatusOK)
	})
	return s, rtFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := s.RoundTrip(r)
		if hang(r, resp) {
			select {
			case <-done:
			case <-r.Context().Done():
			}
		}
		return resp, err
	})
}

// A lone 429 that asks for a second, to a configured pace, is a
// collision: the refused request waits its Retry-After, the pace is cut
// once and climbs back, and the rest of the key goes on; it does not pause
// the whole key (found in review: each one paused it a second, and with
// the probe and the ramp after, cost about 1.5 s of the key's time).
func TestCollisionDoesNotPauseAConfiguredPace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var first atomic.Bool
		var sent atomic.Int64
		rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
			sent.Add(1)
			time.Sleep(ms(10))
			if r.URL.Path == "/a" && first.CompareAndSwap(false, true) {
				return reply(r, http.StatusTooManyRequests, "Retry-After", "1"), nil
			}
			return reply(r, http.StatusOK), nil
		}), throttle.WithPolicy(throttle.Policy{Rate: 100, Burst: 5}))
		defer rt.Close()
		done := make(chan struct{})
		go func() {
			defer close(done)
			assert.NoError(t, do(t, rt, "http://c.test/a")) // refused, retried after its second
		}()
		time.Sleep(ms(20)) // the 429 is in
		start := time.Now()
		for range 50 {
			require.NoError(t, do(t, rt, "http://c.test/b"))
		}
		took := time.Since(start)
		<-done
		st := rt.Stats().Keys["c.test"]
		assert.EqualValues(t, 1, st.Throttled)
		assert.Zero(t, st.Pauses, "the key did not pause")
		assert.Less(t, took, 900*time.Millisecond, "50 requests went on at the cut pace, before the refused one's second was over")
	})
}

// A configured pace a third over the quota finds it without pausing for
// each collision nor taking a pace climbing back after a cut for proof of
// a lower quota: the server refusing a tenth of what the key sent proves
// it; fewer refusals are collisions (found in review: the key sent at
// 0.87 of the ideal, 1.15x).
func TestPaceAboveQuotaFindsItQuickly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := throttletest.NewAPI(nearby(throttletest.Config{Limits: []throttletest.Limit{
			{Algorithm: throttletest.TokenBucket, Rate: 70, Burst: 5}}}, 0))
		rt := throttle.New(api, throttle.WithPolicy(throttle.Policy{Rate: 100, Burst: 5}))
		defer rt.Close()
		took := job(t, rt, 2000)
		ideal := 1995 * time.Second / 70
		refused := api.Stats().Total.Throttled
		t.Logf("took %v (%.3fx the ideal), %d refused", took, took.Seconds()/ideal.Seconds(), refused)
		assert.LessOrEqual(t, took.Seconds(), 1.08*ideal.Seconds())
		assert.LessOrEqual(t, refused, int64(10))
	})
}

// Refusals that no pace causes, one request in a hundred at random (a
// gateway's), are sparse: each is tried, the ceiling a twentieth lower
// until the answers tell whether refusals fell; they come as often, and
// the ceiling goes back toward the Rate (found in review: each within 10 s
// of the one before took the ceiling to 0.95 of a pace already cut,
// 1.4-2.8x the ideal here, 2.7x on loopback where go-retryablehttp +
// x/time/rate took 1.03x; then, cut no lower than 0.9 of the Rate, each
// set the ceiling there for 30 s: 1.12-1.50x, 1.25x on average over these
// seeds, the pace at the end 53-90).
func TestRandomRefusalsDoNotSinkAConfiguredPace(t *testing.T) {
	bucket := throttletest.Limit{Algorithm: throttletest.TokenBucket, Rate: 100, Burst: 5}
	mean := randomlyRefused(t, 0.01, bucket, 2000, func(t *testing.T, seed int64, x, pace float64) {
		assert.LessOrEqual(t, x, 1.25, "seed %d", seed)
		assert.GreaterOrEqual(t, pace, 80.0, "seed %d: the pace near the Rate", seed)
	}, throttle.WithPolicy(throttle.Policy{Rate: 100, Burst: 5}))
	assert.LessOrEqual(t, mean, 1.15, "on average")
}

// One request in 33 refused at random: three refusals in twenty answers
// come by chance at one refusal in nine, three in a trial's first 60
// answers one trial in three, and four in twenty about once a job. Taken
// for the pace's doing, each cut the pace by a fifth and proved its
// ceiling lower, and the four paused the key (found in review: 2.3x the
// ideal on average here, 3.9x at worst, and 8.7x or more at one in 20; on
// loopback 2.2-4.0x, where go-retryablehttp + x/time/rate took
// 1.03-1.07x). Refusals are dense now when they come twice as often as
// the key's share of them lately, at odds of e^6 to 1. Until trials show
// that share, it is taken as one in 50 (found in review: the first 256
// answers, judged by the counts alone, took chance clusters for the
// pace's and proved its ceiling lower: 1.42x on average here, 1.96x at
// worst, and 2.13x at one in 20). At one in 20 a chance cluster still
// proved it lower, against the prior, and no quiet 30 s came to raise it:
// 1.57x on average, 2.50x at worst (found in session 56). A cut of dense
// refusals that did not make them rarer gives the ceiling back (rule 3's
// check): 1.23x on average, 1.36x at worst.
func TestHeavyRandomRefusalsDoNotSinkAConfiguredPace(t *testing.T) {
	bucket := throttletest.Limit{Algorithm: throttletest.TokenBucket, Rate: 100, Burst: 5}
	for _, c := range []struct {
		share      float64
		mean, most float64
	}{{0.03, 1.35, 1.65}, {0.05, 1.35, 1.7}} {
		t.Run(fmt.Sprint(c.share), func(t *testing.T) {
			mean := randomlyRefused(t, c.share, bucket, 2000, func(t *testing.T, seed int64, x, pace float64) {
				assert.LessOrEqual(t, x, c.most, "seed %d", seed)
			}, throttle.WithPolicy(throttle.Policy{Rate: 100, Burst: 5}))
			assert.LessOrEqual(t, mean, c.mean, "on average")
		})
	}
}

// A chance cluster among a configured key's first answers does not prove
// its ceiling lower: a trial's refusals are dense only against a share
// before them counted over enough answers, or the prior one in 50 where
// few tell it. Here a gateway refuses the 20th and 40th requests (the
// second begins a trial), then four among the next 80, then one in 33:
// 6 refusals among the first 120 answers, as 3% random 429s send now and
// then. Judged against one refusal in a hundred (the first, over the 20
// answers since it, counted as 100), the four were "twice as often" at
// e^3: the pace went to 0.8 of itself and its ceiling, proven, to 85.5
// of 100 for the rest of the job, 1.29x the ideal (regression: 1.27x on
// average in TestConfiguredModel behind 3% random 429s, six seeds of 16
// at 1.34-1.70x, where go-retryablehttp + x/time/rate took 1.07x). Now
// the trial chains a ceiling 5% lower, and the one in 33 after it, as
// often, gives the Rate back.
func TestAChanceClusterDoesNotProveTheCeilingLower(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := modelBucket(100, 5, 0)
		refuse := map[int]bool{20: true, 40: true, 60: true, 80: true, 100: true, 115: true}
		var mu sync.Mutex
		n := 0
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			n++
			refused := refuse[n] || n >= 150 && n%33 == 0
			mu.Unlock()
			if refused {
				time.Sleep(ms(2))
				return reply(r, http.StatusTooManyRequests, "Retry-After", "1"), nil
			}
			return api.RoundTrip(r)
		})
		rt := throttle.New(base, throttle.WithPolicy(throttle.Policy{Rate: 100, Burst: 5}))
		defer rt.Close()
		took := jobOf(t, rt, 2000, 4, "")
		pace := float64(keyRate(rt, "api.test"))
		t.Logf("took %v, pace at the end %.1f", took, pace)
		assert.GreaterOrEqual(t, pace, 95.0, "the ceiling given back")
		assert.LessOrEqual(t, took.Seconds(), 1.2*19.95, "within 1.2x the ideal")
	})
}

// A Policy twice the quota, no refusals at random: the pace's own
// refusals must not make the share it is judged against (found in review:
// counted in the key's share of refusals lately, its refusals were never
// more often than that share, the pace was never cut for them, and the
// key held a pace over the quota: a Policy of 500 on a bucket of 240, 2,066
// of the quota's 429s and 1.54x the ideal where 30 and 1.04x were). The
// counts alone decide until 256 answers tell the share lately, and a share
// over 5% counts as 5%.
func TestPolicyOverTheQuotaIsNotItsOwnNoise(t *testing.T) {
	for _, q := range []float64{150, 240, 300} {
		t.Run(fmt.Sprint(q), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := throttletest.NewAPI(nearby(throttletest.Config{Limits: []throttletest.Limit{
					{Algorithm: throttletest.TokenBucket, Rate: q, Burst: 10}}}, 0))
				rt := throttle.New(api, throttle.WithPolicy(throttle.Policy{Rate: 500, Burst: 10}))
				defer rt.Close()
				n := int(q) * 60
				took := job(t, rt, n)
				x := took.Seconds() / (float64(n-10) / q)
				refused := api.Stats().Total.Throttled
				t.Logf("took %v (%.3fx the ideal), %d refused, pace at the end %.1f", took, x, refused, float64(keyRate(rt, "api.test")))
				assert.LessOrEqual(t, x, 1.08)
				assert.LessOrEqual(t, refused, int64(60))
			})
		})
	}
}

// Collisions from the network's jitter, more than the server's bucket
// absorbs (25 ms of arrival jitter, a Burst of 2), are the pace's doing:
// they must not count as the server's share lately beyond a twentieth
// (found in review: at a tenth, the key held its pace through them, 393
// of the quota's 429s on average, 682 at worst; counted in the share
// lately below a twentieth, 124, where 76.5 were before it was kept, at
// commit 90479c0). The share lately counts only answers shown to be
// noise now: 107 here.
func TestJitterBeyondTheBurstIsNotNoise(t *testing.T) {
	refused := meanOverSeeds(t, 2, func(t *testing.T, seed int64) int64 {
		cfg := nearby(throttletest.Config{Limits: []throttletest.Limit{
			{Algorithm: throttletest.TokenBucket, Rate: 100, Burst: 2}}}, seed)
		cfg.ArrivalJitter = 25 * time.Millisecond
		api := throttletest.NewAPI(cfg)
		rt := throttle.New(api, throttle.WithPolicy(throttle.Policy{Rate: 100, Burst: 2}))
		defer rt.Close()
		took := job(t, rt, 100*120)
		n := api.Stats().Total.Throttled
		t.Logf("took %v, %d refused", took, n)
		return n
	})
	assert.LessOrEqual(t, refused, 150.0, "refused on average")
}

// meanOverSeeds runs run for seeds 0 to n-1, each in a subtest of its own
// and a synctest bubble, and returns the mean of what they return.
func meanOverSeeds(t *testing.T, n int64, run func(t *testing.T, seed int64) int64) float64 {
	var sum int64
	for seed := range n {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { sum += run(t, seed) })
		})
	}
	return float64(sum) / float64(n)
}

// A quota stepping down under a configured pace, no refusals at random
// (100 a second, then 90, 70 and 50, a minute each): the pace's own
// refusals, steady at a few percent while it is over the quota, are not
// noise, and must not count in the share they are judged against (found
// in review: counted in the key's share lately, they were, and the key
// drew 68-80 of the quota's 429s on average where 50 were before that
// share was kept; 102 in this test at commit 42e2f8c, 38 now).
func TestQuotaSteppingDownIsFollowed(t *testing.T) {
	refused := meanOverSeeds(t, 4, func(t *testing.T, seed int64) int64 {
		var apis []*throttletest.API
		for i, q := range []float64{100, 90, 70, 50} {
			apis = append(apis, modelBucket(q, 5, 10*seed+int64(i)))
		}
		rt := throttle.New(modelSteps(apis), throttle.WithPolicy(throttle.Policy{Rate: 100, Burst: 5}))
		defer rt.Close()
		took := job(t, rt, 6000+5400+4200+3000)
		n := int64(throttled(apis...))
		t.Logf("took %v, %d refused, pace at the end %.1f", took, n, float64(keyRate(rt, "api.test")))
		assert.LessOrEqual(t, took, 252*time.Second, "within 1.05x the ideal, 240 s")
		assert.LessOrEqual(t, float64(keyRate(rt, "api.test")), 51.0, "at the last quota or under")
		return n
	})
	assert.LessOrEqual(t, refused, 50.0, "refused on average")
}

// Random refusals that come together, none accepted among them (a
// gateway refusing everything for a moment), tell nothing of the pace: a
// run of them is neither dense nor a trial's sign that refusals came more
// often (found in review: five in a row every 10 s, each run cut the pace
// by a fifth and proved its ceiling lower, faster than it climbs back,
// 9.3x the ideal where go-retryablehttp + x/time/rate took 1.006x; every
// request for 100 ms every 20 s, 2.7x), and the run's refusals after the
// one that ended a trial begin none (regression: the run's last refusal
// began a trial of a ceiling 5% lower, which the quiet after the run told
// "helped": the ceiling sank 5% a run, 1.41x and 1.33x the ideal). A pace
// learned from 429s (no Policy) pauses at each run; such a pause, long after
// the last and of a pace that had not risen, ended no probe, and does not
// double the probes' hold (regression: it did, the hold grew to a minute,
// no probe came, and the pace sank 5% a run: 1.94x and 1.19x).
func TestRunsOfRandomRefusalsDoNotSinkThePace(t *testing.T) {
	for _, c := range []struct {
		name    string
		refused func(since time.Duration, nth int) bool // the nth request since the last whole period
		every   time.Duration
		most    float64 // with a Policy at the quota
		learned float64 // with none
	}{
		{"five in a row every 10 s", func(_ time.Duration, nth int) bool { return nth <= 5 }, 10 * time.Second, 1.1, 1.25},
		{"everything for 100 ms every 20 s", func(since time.Duration, _ int) bool { return since < 100*time.Millisecond }, 20 * time.Second, 1.15, 1.1},
	} {
		for _, told := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/policy=%v", c.name, told), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					api := modelBucket(100, 5, 0)
					start := time.Now()
					var mu sync.Mutex
					period, nth := 0, 0
					base := rtFunc(func(r *http.Request) (*http.Response, error) {
						mu.Lock()
						since := time.Since(start)
						if p := int(since / c.every); p != period {
							period, nth = p, 0
						}
						nth++
						refused := period > 0 && c.refused(since%c.every, nth)
						mu.Unlock()
						if refused {
							time.Sleep(ms(2))
							return reply(r, http.StatusTooManyRequests, "Retry-After", "1"), nil
						}
						return api.RoundTrip(r)
					})
					rt, most := throttle.New(base), c.learned
					if told {
						rt, most = throttle.New(base, throttle.WithPolicy(throttle.Policy{Rate: 100, Burst: 5})), c.most
					}
					defer rt.Close()
					took := job(t, rt, 18000)
					x := took.Seconds() / (17995.0 / 100)
					t.Logf("took %v (%.3fx the ideal), pace at the end %.1f, %d refused by the quota", took, x, float64(keyRate(rt, "api.test")), api.Stats().Total.Throttled)
					assert.LessOrEqual(t, x, most)
				})
			})
		}
	}
}

// A quota that drops under a configured pace amid random refusals (one
// request in a hundred, before and after) is still found: refusals twice
// as often as lately are dense, and a trial's dense refusals cut, though
// sparse refusals are chance (a review's bound: a pace a few percent over
// the quota is hard to tell from noise, but it must not be kept there).
func TestQuotaDropAmidRandomRefusalsIsFound(t *testing.T) {
	after := meanOverSeeds(t, 4, func(t *testing.T, seed int64) int64 {
		full, low := modelBucket(100, 5, seed), modelBucket(90, 5, 100+seed)
		start := time.Now()
		var mu sync.Mutex
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			refused := rng.Float64() < 0.01
			mu.Unlock()
			switch {
			case refused:
				time.Sleep(ms(2))
				return reply(r, http.StatusTooManyRequests, "Retry-After", "1"), nil
			case time.Since(start) >= time.Minute:
				return low.RoundTrip(r)
			}
			return full.RoundTrip(r)
		})
		rt := throttle.New(base, throttle.WithPolicy(throttle.Policy{Rate: 100, Burst: 5}))
		defer rt.Close()
		took := job(t, rt, 6000+90*120)
		n := low.Stats().Total.Throttled
		t.Logf("seed %d: took %v, %d refused by the quota after the drop, pace at the end %.1f", seed, took, n, float64(keyRate(rt, "api.test")))
		assert.LessOrEqual(t, took, 216*time.Second, "within 1.2x the ideal, 180 s")
		assert.LessOrEqual(t, float64(keyRate(rt, "api.test")), 91.0, "at the quota or under")
		return n
	})
	assert.LessOrEqual(t, after, 45.0, "refused by the quota after the drop, on average")
}

// randomlyRefused runs a job of n records, 16 workers, for each of 8
// seeds against the quota l behind a server that refuses the share of
// requests at random, through a Transport made with opts; each calls
// check, if not nil, with its own t, its time over the ideal and the
// key's pace at the end. It returns the mean time over the ideal.
func randomlyRefused(t *testing.T, share float64, l throttletest.Limit, n int, check func(t *testing.T, seed int64, x, pace float64), opts ...throttle.Option) float64 {
	const seeds = 8
	ideal := float64(n-l.Burst) / l.Rate
	if l.Rate == 0 { // a window or a log: N a Per
		ideal = float64(n) / float64(l.N) * l.Per.Seconds()
	}
	var sum float64
	for seed := range int64(seeds) {
		synctest.Test(t, func(t *testing.T) {
			api := throttletest.NewAPI(nearby(throttletest.Config{Refused: share, Limits: []throttletest.Limit{l}}, seed))
			rt := throttle.New(api, opts...)
			defer rt.Close()
			took := job(t, rt, n)
			x, pace := took.Seconds()/ideal, float64(keyRate(rt, "api.test"))
			sum += x
			t.Logf("seed %d: took %v (%.3fx the ideal), %d refused, pace %.1f", seed, took, x, api.Stats().Total.Throttled, pace)
			if check != nil {
				check(t, seed, x, pace)
			}
		})
	}
	t.Logf("%.3fx the ideal on average", sum/seeds)
	return sum / seeds
}

// A Policy 7% over the quota: a trial's ceiling, 0.95 of the Rate, is
// still over it, and refusals come there more often than the share the key
// knew before (counted while it climbed back, its bucket fuller): the pace
// is the cause still, not noise, and the next trial goes lower (found in
// review: taken for noise, the ceiling went back to the Rate and sparse
// refusals changed nothing for 30 s: 62 refusals where 5 were before;
// after a quota dropped to 92 mid-run, 464 where 41 were).
func TestPolicyAFewPercentOverTheQuotaFindsIt(t *testing.T) {
	t.Run("from the start", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			api := throttletest.NewAPI(nearby(throttletest.Config{Limits: []throttletest.Limit{
				{Algorithm: throttletest.TokenBucket, Rate: 93, Burst: 5}}}, 0))
			rt := throttle.New(api, throttle.WithPolicy(throttle.Policy{Rate: 100, Burst: 5}))
			defer rt.Close()
			took := job(t, rt, 93*60)
			refused := api.Stats().Total.Throttled
			t.Logf("took %v, %d refused, pace at the end %.1f", took, refused, float64(keyRate(rt, "api.test")))
			assert.LessOrEqual(t, refused, int64(15))
		})
	})
	t.Run("after a drop", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			full := throttletest.NewAPI(nearby(throttletest.Config{Limits: []throttletest.Limit{
				{Algorithm: throttletest.TokenBucket, Rate: 100, Burst: 5}}}, 1))
			low := throttletest.NewAPI(nearby(throttletest.Config{Limits: []throttletest.Limit{
				{Algorithm: throttletest.TokenBucket, Rate: 92, Burst: 5}}}, 101))
			start := time.Now()
			base := rtFunc(func(r *http.Request) (*http.Response, error) {
				if time.Since(start) >= time.Minute {
					return low.RoundTrip(r)
				}
				return full.RoundTrip(r)
			})
			rt := throttle.New(base, throttle.WithPolicy(throttle.Policy{Rate: 100, Burst: 5}))
			defer rt.Close()
			took := job(t, rt, 6000+92*600)
			t.Logf("took %v, %d refused after the drop", took, low.Stats().Total.Throttled)
			assert.LessOrEqual(t, low.Stats().Total.Throttled, int64(60))
		})
	})
}

// Each answer is evidence for one cut: three refusals in a row are dense,
// and cut the pace once; the sparse ones after them (one in 40) are not
// dense with them again (found in review: the three stayed among the last
// 100 answers, and each sparse refusal after them cut the pace again, to
// 37 of 100, and paused the key: 1.8x the ideal).
func TestRefusalsAreCountedForOneCut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int64
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			time.Sleep(ms(2))
			if i := n.Add(1); i >= 300 && i <= 302 || i > 302 && i%40 == 0 {
				return reply(r, http.StatusTooManyRequests, "Retry-After", "1"), nil
			}
			return reply(r, http.StatusOK), nil
		})
		rt := throttle.New(base, throttle.WithPolicy(throttle.Policy{Rate: 100, Burst: 5}))
		defer rt.Close()
		lowest := watchRate(t, rt, "api.test")
		took := job(t, rt, 2000)
		t.Logf("took %v, lowest pace %.1f", took, float64(lowest()))
		assert.GreaterOrEqual(t, float64(lowest()), 64.0, "at most two cuts of 0.8")
		assert.Zero(t, rt.Stats().Total.Pauses)
		assert.Less(t, took, 26*time.Second, "within 1.3x the ideal")
	})
}

// Three refusals in twenty answers come by chance, in a third of jobs of
// 2,000 where one request in a hundred is refused at random: to a
// configured pace they are dense, and cut it, but do not pause the key
// (found in review: each such cluster paused it a second, 1.26x the ideal
// on loopback where go-retryablehttp + x/time/rate took 1.03x). A fourth
// pauses it: see TestSpentWindowRefusingOneAtATimePausesTheKey.
func TestThreeRefusalsInTwentyDoNotPauseAConfiguredPace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := refusingWhen(func(i int64) bool { return i == 500 || i == 505 || i == 512 })
		rt := throttle.New(base, throttle.WithPolicy(throttle.Policy{Rate: 100, Burst: 5}))
		defer rt.Close()
		job(t, rt, 1000)
		st := rt.Stats().Total
		assert.EqualValues(t, 3, st.Throttled)
		assert.Zero(t, st.Pauses)
	})
}

// Four refusals in twenty answers pause a configured pace that was never
// refused so often (see TestSpentWindowRefusingOneAtATimePausesTheKey),
// but not one whose server refused one request in 33 all along: there they
// come by chance about once a job, and each paused the key a second.
func TestFourRefusalsInTwentyAmidNoiseDoNotPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := refusingWhen(func(i int64) bool {
			return i%33 == 0 && i < 1500 || i >= 1600 && i <= 1615 && i%5 == 0
		})
		rt := throttle.New(base, throttle.WithPolicy(throttle.Policy{Rate: 100, Burst: 5}))
		defer rt.Close()
		job(t, rt, 2000)
		st := rt.Stats().Total
		assert.EqualValues(t, 45+4, st.Throttled)
		assert.Zero(t, st.Pauses)
	})
}

// Found in review: each random 429 to a window configured at the quota
// paused the whole key for its Retry-After and cut the window to 0.8 of
// itself for minutes: one refusal in a hundred took a window of 100 a
// second to 6x the ideal, one in 300 to 1.9-3.4x. A lone refusal that asks
// for a second or two is a collision to a window as to a pace: only the
// refused request waits, and the window is cut when refusals dominate.
func TestRandomRefusalsDoNotSinkAWindow(t *testing.T) {
	for seed := range int64(6) {
		n := 100 + 100*int(seed%2) // a window sends its N at once: the refusals among 200 come closer together
		t.Run(fmt.Sprint("N", n, "seed", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := throttletest.NewAPI(nearby(throttletest.Config{Refused: 0.01,
					Limits: []throttletest.Limit{{Algorithm: throttletest.FixedWindow, N: n, Per: time.Second}}}, seed))
				rt := throttle.New(api, throttle.WithPolicy(throttle.Policy{
					Windows: []throttle.Window{{N: n, Per: time.Second}}}))
				defer rt.Close()
				took := job(t, rt, 20*n)
				ideal := 19 * time.Second // 20 windows, the first at once
				st := api.Stats().Total
				t.Logf("took %v (%.3fx the ideal), %d refused", took, took.Seconds()/ideal.Seconds(), st.Throttled)
				assert.LessOrEqual(t, took.Seconds(), 1.15*ideal.Seconds())
				assert.Positive(t, st.Throttled, "the server refused some at random")
			})
		})
	}
}

// A window configured above a fixed window's quota still settles at the
// quota when the refusals come with random ones: the refusals of a spent
// window are many at once, and cut it.
func TestWindowAboveQuotaSettlesAmidRandomRefusals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := throttletest.NewAPI(nearby(throttletest.Config{Refused: 0.01,
			Limits: []throttletest.Limit{{Algorithm: throttletest.FixedWindow, N: 80, Per: time.Second}}}, 1))
		rt := throttle.New(api, throttle.WithPolicy(throttle.Policy{
			Windows: []throttle.Window{{N: 100, Per: time.Second}}}))
		defer rt.Close()
		took := job(t, rt, 2000)
		ideal := 24 * time.Second // 25 windows of 80, the first at once
		st := api.Stats().Total
		t.Logf("took %v (%.3fx the ideal), %d refused", took, took.Seconds()/ideal.Seconds(), st.Throttled)
		assert.LessOrEqual(t, took.Seconds(), 1.1*ideal.Seconds())
		assert.LessOrEqual(t, st.Throttled, int64(60), "a spent window is found, not hit each second")
	})
}

// Found in review: the refusals of a window spent often come back one at a
// time (a 429 answered at once, before the server's latency; a key paced
// with few requests on their way), each an episode of its own: counted by
// episode, they never looked like a window spent, so the key never paused,
// and each cut the pace of a window with a Rate (100 on a fixed window of
// 80: 3.35x the ideal, the pace at 30). Counted from the first refusal on,
// they are most of the answers: the key pauses and the window is cut.
func TestSpentWindowRefusingOneAtATimePausesTheKey(t *testing.T) {
	for _, tt := range []struct {
		name    string
		pol     throttle.Policy
		workers int
		latency time.Duration
		most    int64 // refused: a first refusal, and those of what was on its way then
	}{
		{"window and Rate", throttle.Policy{Rate: 100, Burst: 5, Windows: []throttle.Window{{N: 100, Per: time.Second}}}, 16, 2 * time.Millisecond, 6},
		{"window alone", throttle.Policy{Windows: []throttle.Window{{N: 100, Per: time.Second}}}, 4, 20 * time.Millisecond, 10},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := throttletest.NewAPI(throttletest.Config{Latency: tt.latency, Limits: []throttletest.Limit{
					{Algorithm: throttletest.FixedWindow, N: 80, Per: time.Second}}})
				base := rtFunc(func(r *http.Request) (*http.Response, error) {
					time.Sleep(time.Millisecond) // the network, each way
					resp, err := api.RoundTrip(r)
					time.Sleep(time.Millisecond)
					return resp, err
				})
				rt := throttle.New(base, throttle.WithPolicy(tt.pol))
				defer rt.Close()
				took := jobOf(t, rt, 2000, tt.workers, "")
				ideal := 24 * time.Second // 25 windows of 80, the first at once
				st := rt.Stats()
				t.Logf("took %v (%.3fx the ideal), %d refused, %d pauses", took, took.Seconds()/ideal.Seconds(), st.Total.Throttled, st.Total.Pauses)
				assert.LessOrEqual(t, took.Seconds(), 1.2*ideal.Seconds())
				assert.LessOrEqual(t, st.Total.Throttled, tt.most)
				assert.Positive(t, st.Total.Pauses, "the window spent paused the key")
			})
		})
	}
}

// A window spent refuses one request at a time when the key has a worker
// or two: each refused request waits its Retry-After, and the next ones,
// sent after the server's window gave back, are accepted. Window after
// window the refusal comes after as many admissions: the third so is a
// window spent (found in review: one 429 a window, 23 of 2,000, 1.19x
// the ideal; a sliding log with HTTP-date Retry-After, 45 and 1.87x).
func TestSpentWindowOfASerialClientIsCut(t *testing.T) {
	for _, tt := range []struct {
		name  string
		algo  throttletest.Algorithm
		ra    throttletest.RetryAfterFormat
		ideal time.Duration
	}{
		{"fixed window, seconds", throttletest.FixedWindow, throttletest.RetryAfterSeconds, 24 * time.Second},
		{"sliding log, seconds", throttletest.SlidingLog, throttletest.RetryAfterSeconds, 24 * time.Second},
		{"fixed window, date", throttletest.FixedWindow, throttletest.RetryAfterDate, 24 * time.Second},
		{"sliding log, date", throttletest.SlidingLog, throttletest.RetryAfterDate, 24 * time.Second},
		{"fixed window, seconds, 5 ms", throttletest.FixedWindow, throttletest.RetryAfterSeconds, 24 * time.Second}, // refused after 81, 121, 100, 81... admissions
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				latency := time.Millisecond
				if strings.HasSuffix(tt.name, "5 ms") {
					latency = 5 * time.Millisecond
				}
				api := throttletest.NewAPI(throttletest.Config{RetryAfter: tt.ra, Latency: latency,
					Limits: []throttletest.Limit{{Algorithm: tt.algo, N: 80, Per: time.Second}}})
				rt := throttle.New(api, throttle.WithPolicy(throttle.Policy{Windows: []throttle.Window{{N: 100, Per: time.Second}}}))
				defer rt.Close()
				took := jobOf(t, rt, 2000, 1, "")
				refused := api.Stats().Total.Throttled
				t.Logf("took %v (%.3fx the ideal), %d refused", took, took.Seconds()/tt.ideal.Seconds(), refused)
				assert.LessOrEqual(t, took.Seconds(), 1.15*tt.ideal.Seconds())
				assert.LessOrEqual(t, refused, int64(8))
			})
		})
	}
}

// Found in review: a 429 comes back at once, before the accepted answers
// of the requests sent around it (20 ms of service time here): three
// random refusals of a burst of 500 came back together and were taken for
// a window spent, 1.8-2.8x the ideal. A window spent refuses most of what
// was admitted from its first refusal to its last; refusals at random are
// a few among many.
func TestRandomRefusalsOfABigBurstDoNotSinkAWindow(t *testing.T) {
	for seed := range int64(3) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				x, st := windowAtItsQuota(t, throttletest.Config{Refused: 0.01, Seed: seed + 1,
					Latency: 20 * time.Millisecond, LatencyJitter: 5 * time.Millisecond}, 500, 20, 64)
				assert.LessOrEqual(t, x, 1.2)
				assert.Zero(t, st.Pauses, "no window spent")
			})
		})
	}
}

// A window that holds few requests of their cost is refused one or two a
// window when set above the server's, never three (found in review: cost
// 30 on a window of 100 units, the server's 60, half the requests refused
// and the window never cut): a tenth of what it holds, at least one,
// tells it spent.
func TestSpentWindowOfFewCostlyRequestsIsCut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A fixed window of 60 units a second, counting each request's
		// X-Cost; a refusal is answered at once.
		start := time.Now()
		var mu sync.Mutex
		var window time.Duration
		var used, accepted, refused int
		api := rtFunc(func(r *http.Request) (*http.Response, error) {
			cost, _ := strconv.Atoi(r.Header.Get("X-Cost"))
			mu.Lock()
			now := time.Since(start)
			if w := now.Truncate(time.Second); w != window {
				window, used = w, 0
			}
			if used+cost > 60 {
				refused++
				mu.Unlock()
				return reply(r, http.StatusTooManyRequests, "Retry-After", "1"), nil
			}
			used += cost
			accepted++
			mu.Unlock()
			time.Sleep(time.Millisecond)
			return reply(r, http.StatusOK), nil
		})
		rt := throttle.New(api, throttle.WithPolicy(throttle.Policy{Windows: []throttle.Window{{N: 100, Per: time.Second}}}))
		defer rt.Close()
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				for i := range 25 {
					ctx := throttle.With(context.Background(), throttle.Cost(30))
					req, _ := http.NewRequestWithContext(ctx, http.MethodPut, fmt.Sprint("http://api.test/records/", w, "-", i), nil)
					req.Header.Set("X-Cost", "30")
					resp, err := rt.RoundTrip(req)
					if assert.NoError(t, err) {
						resp.Body.Close()
					}
				}
			})
		}
		wg.Wait()
		t.Logf("%d accepted, %d refused", accepted, refused)
		assert.Equal(t, 100, accepted)
		assert.LessOrEqual(t, refused, 6, "a window spent is cut, not hit each second")
	})
}

// A window that holds few requests needs fewer refusals to be told spent
// only while refusals are a fifth of the key's recent answers: found in
// review, every random 429 to a window of 10 a second at its quota paused
// the key and cut the window, 6-10x the ideal at one in 33.
func TestRandomRefusalsDoNotSinkASmallWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		x, st := windowAtItsQuota(t, throttletest.Config{Refused: 0.03, Seed: 1, Latency: time.Millisecond}, 10, 60, 8)
		assert.LessOrEqual(t, x, 1.3)
		assert.LessOrEqual(t, st.Pauses, int64(2), "a chance cluster now and then, not every refusal")
	})
}

// windowAtItsQuota runs windows' worth of records, with workers, through a
// key configured with a window of n a second against cfg's API counting a
// fixed window of n a second, and returns the time taken over the ideal
// (all but the first window's at n a second) and the key's counters.
func windowAtItsQuota(t *testing.T, cfg throttletest.Config, n, windows, workers int) (float64, throttle.KeyStats) {
	t.Helper()
	cfg.Limits = []throttletest.Limit{{Algorithm: throttletest.FixedWindow, N: n, Per: time.Second}}
	api := throttletest.NewAPI(cfg)
	rt := throttle.New(api, throttle.WithPolicy(throttle.Policy{Windows: []throttle.Window{{N: n, Per: time.Second}}}))
	defer rt.Close()
	took := jobOf(t, rt, windows*n, workers, "")
	ideal := time.Duration(windows-1) * time.Second // the first window at once
	st := rt.Stats().Total
	t.Logf("took %v (%.3fx the ideal), %d refused, %d pauses", took, took.Seconds()/ideal.Seconds(), st.Throttled, st.Pauses)
	return took.Seconds() / ideal.Seconds(), st
}
