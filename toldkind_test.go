package throttle_test

import (
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlehttp/throttle"
	"github.com/throttlehttp/throttle/throttletest"
)

// paceShown is the highest rate the EventPace events in paces gave.
func paceShown(paces []throttle.Event) float64 {
	var top float64
	for _, p := range paces {
		top = max(top, float64(p.Rate))
	}
	return top
}

// A key that sends little to a bucket told by its headers (25 a second to
// one of 200 a second, 20 deep) finds it full at both ends of every span,
// which shows only that it refills at least as fast as the key takes: the
// rate measured stays below the bucket's own, and a job that follows is
// paced at the bucket's refill, with few refusals. Regression, found in
// review 46: the rate was raised by a quarter at every such span, to 1e6 a
// second (EventPace said so 48 times on the way), and a job of 2,000 that
// followed, 16 at a time, was refused 45-47 times and took 13.6 s, 1.37x
// its ideal of 9.9 s (a fresh key: 10.0 s, none refused). Now 49 a second
// at most, and the job takes 9.92 s, none refused.
func TestASlowKeyDoesNotInflateTheBucketItMeasures(t *testing.T) {
	for _, ietf := range []bool{false, true} {
		t.Run(fmt.Sprint("ietf=", ietf), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := throttletest.NewAPI(throttletest.Config{Limits: []throttletest.Limit{quotaBucket},
					XRateLimit: !ietf, IETF: ietf, HeadersOnSuccess: true})
				events, paces := paceLog()
				rt := throttle.New(latent(api, time.Millisecond), events)
				defer rt.Close()
				// 25 a second for 30 s: four workers 40 ms apart, each
				// one request every 160 ms.
				var wg sync.WaitGroup
				for w := range 4 {
					wg.Go(func() {
						time.Sleep(time.Duration(w) * 40 * time.Millisecond)
						for range 188 {
							req := newReq(t, t.Context(), http.MethodGet, "http://api.test/")
							req.Header.Set("X-API-Key", "k")
							if resp, err := rt.RoundTrip(req); assert.NoError(t, err) {
								resp.Body.Close()
							}
							time.Sleep(159 * time.Millisecond)
						}
					})
				}
				wg.Wait()
				shown := paces()
				light := paceShown(shown)
				rate := rt.Stats().Keys["api.test"].Rate
				before := api.Stats().Total.Throttled

				took := job(t, rt, 2000) // ideal (2,000 - 20) / 200 = 9.9 s
				refused := api.Stats().Total.Throttled - before
				t.Logf("light: %d EventPace, the highest %.0f/s; the job took %v, %d refused", len(shown), light, took, refused)
				assert.LessOrEqual(t, light, 200.0, "the key never sent near the bucket's refill")
				assert.LessOrEqual(t, float64(rate), 200.0, "nor does Stats say more")
				assert.LessOrEqual(t, refused, int64(10), "0.5% of the job refused at most")
				assert.LessOrEqual(t, took.Seconds(), 1.1*9.9, "within 1.1x the ideal")
			})
		})
	}
}

// A key that its Policy holds below a bucket's refill (50 a second, then 10,
// against 200 a second, 20 deep, told by X-RateLimit-*) measures the
// bucket no faster than twice what it sent, shows no more, and once the
// Policy goes (SetPolicy(Policy{})) is paced at the bucket's refill: a
// Policy set again is a ceiling at once. Regression, found in review 46:
// the rate measured climbed to 944,000 a second under the Policy, EventPace
// said so, and without it the key trusted that: 10-12 refusals, 3 pauses,
// 72-74 requests in 3 s where 600 were allowed. Now 100 a second at most,
// and 616 in those 3 s, none refused.
func TestAPolicyBelowABucketLeavesNoInflatedRateBehind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := throttletest.NewAPI(throttletest.Config{Limits: []throttletest.Limit{quotaBucket}, XRateLimit: true, HeadersOnSuccess: true})
		var mu sync.Mutex
		var sent []time.Duration
		start := time.Now()
		events, paces := paceLog()
		rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			sent = append(sent, time.Since(start))
			mu.Unlock()
			return latent(api, time.Millisecond)(r)
		}), throttle.WithPolicy(throttle.Policy{Rate: 50, Burst: 1}), events)
		defer rt.Close()
		between := func(from, to time.Duration) int {
			mu.Lock()
			defer mu.Unlock()
			n := 0
			for _, at := range sent {
				if at >= from && at < to {
					n++
				}
			}
			return n
		}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					req := newReq(t, t.Context(), http.MethodGet, "http://api.test/")
					req.Header.Set("X-API-Key", "k")
					if resp, err := rt.RoundTrip(req); assert.NoError(t, err) {
						resp.Body.Close()
					}
				}
			})
		}
		time.Sleep(3 * time.Second)
		require.NoError(t, rt.SetPolicy(throttle.Policy{Rate: 10, Burst: 1}))
		time.Sleep(5 * time.Second) // 3-8 s
		held := paceShown(paces())
		before := api.Stats().Total.Throttled
		require.NoError(t, rt.SetPolicy(throttle.Policy{}))
		time.Sleep(3 * time.Second) // 8-11 s
		refused := api.Stats().Total.Throttled - before
		require.NoError(t, rt.SetPolicy(throttle.Policy{Rate: 20, Burst: 1}))
		time.Sleep(5 * time.Second) // 11-16 s
		st := rt.Stats().Keys["api.test"]
		close(stop)
		wg.Wait()
		unpaced := between(8*time.Second, 11*time.Second)
		t.Logf("shown under the Policy: %.2f/s at most; without it: %d sent in 3 s, %d refused", held, unpaced, refused)
		assert.LessOrEqual(t, between(0, 3*time.Second), 151, "50 a second")
		assert.LessOrEqual(t, between(3*time.Second+100*time.Millisecond, 8*time.Second), 50, "10 a second")
		assert.LessOrEqual(t, held, 110.0, "about twice what the key sent, at most")
		assert.GreaterOrEqual(t, unpaced, 540, "0.9 of the bucket's refill")
		assert.LessOrEqual(t, refused, int64(2))
		assert.LessOrEqual(t, between(11*time.Second+100*time.Millisecond, 16*time.Second), 100, "20 a second")
		assert.Equal(t, throttle.PacePolicy, st.PaceFrom)
		assert.InDelta(t, 20, float64(st.Rate), 0.01)
	})
}

// A bucket told by IETF fields on every answer (2 a second, 10 deep, 5 ms
// away), whose RateLimit t says when its next token comes, a second at
// most, is not given back whole at each such reset: the first reading
// after one finds it not back to whole, so it is no window's. Sent 16
// requests 250 ms apart, then quiet for a second, at 5 s it holds about 4
// (its next answer says 3, having taken one), and the mirror says 3; of 10
// requests sent then, 3 go at once and the rest at its refill, none
// refused. Regression, found in review 46: the key gave the quota back
// whole at every t, about a second apart, and no span of Remaining, each
// across one, showed the refill: at 5 s Stats said 10, and of the 10
// requests 5 went within a third of a second and 2 were refused.
func TestABucketsNextTokenIsNoWindowsEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := throttletest.NewAPI(throttletest.Config{
			Limits: []throttletest.Limit{{Algorithm: throttletest.TokenBucket, Rate: 2, Burst: 10}},
			IETF:   true, HeadersOnSuccess: true, Latency: 5 * time.Millisecond})
		rt := throttle.New(api, throttle.WithRetry(throttle.Retry{MaxAttempts: 1}))
		defer rt.Close()
		start := time.Now()
		for i := range 16 {
			time.Sleep(time.Duration(i)*250*time.Millisecond - time.Since(start))
			_, status := getAt(t, rt, start)
			assert.Equal(t, http.StatusOK, status, "request %d", i)
		}
		time.Sleep(5*time.Second - time.Since(start))
		left := rt.Stats().Keys["api.test"].Remaining
		t.Logf("Stats says %d remain at 5 s", left)
		assert.InDelta(t, 4, left, 1, "what the server holds")

		var mu sync.Mutex
		var answered []time.Duration
		var refused int
		var wg sync.WaitGroup
		for range 10 {
			wg.Go(func() {
				at, status := getAt(t, rt, start)
				mu.Lock()
				defer mu.Unlock()
				if status != http.StatusOK {
					refused++
				}
				answered = append(answered, at)
			})
		}
		wg.Wait()
		slices.Sort(answered)
		t.Logf("answered at %v, %d refused", answered, refused)
		assert.Zero(t, refused)
		assert.Zero(t, api.Stats().Total.Throttled)
		assert.Less(t, answered[9], 9*time.Second, "then at the refill: 6 more take 3 s")
	})
}

// getAt sends one GET to api.test as key k through rt and returns when its
// answer came, from start, and its status (0 on an error).
func getAt(t *testing.T, rt http.RoundTripper, start time.Time) (time.Duration, int) {
	t.Helper()
	req := newReq(t, t.Context(), http.MethodGet, "http://api.test/")
	req.Header.Set("X-API-Key", "k")
	resp, err := rt.RoundTrip(req)
	if !assert.NoError(t, err) {
		return time.Since(start), 0
	}
	resp.Body.Close()
	return time.Since(start), resp.StatusCode
}

// A fixed window told by IETF fields (100 a second, w=1) that another
// client, not throttled, spends 80 of at the start of each window, before
// this key's first answer after the reset, stays a window: its count is not
// back to whole after a reset, as a bucket's is not (see
// TestABucketsNextTokenIsNoWindowsEnd), but others are seen spending it,
// and a reset that gives back what they left is a window's. Regression,
// found in review 48: taken for no window's end, each reset gave back one
// request; a job of 400 into the 20 a second left took 1.105x the 20 s on
// average over these seeds, 19 of its requests refused, where the code
// before that rule took 0.981x and 9; now 1.000x and 10.6.
func TestAWindowOthersSpendMostOfIsStillAWindow(t *testing.T) {
	limit := throttletest.Limit{Algorithm: throttletest.FixedWindow, N: 100, Per: time.Second}
	var sx, sr float64
	const seeds = 8
	for seed := range int64(seeds) {
		synctest.Test(t, func(t *testing.T) {
			api := throttletest.NewAPI(nearby(throttletest.Config{Limits: []throttletest.Limit{limit},
				IETF: true, HeadersOnSuccess: true}, seed))
			done := make(chan struct{})
			var other sync.WaitGroup
			other.Go(func() { // 80 at the start of each window
				tick := time.NewTicker(limit.Per)
				defer tick.Stop()
				for {
					var wg sync.WaitGroup
					for i := range 80 {
						wg.Go(func() {
							req, _ := http.NewRequest(http.MethodGet, fmt.Sprint("http://api.test/other/", i), nil)
							req.Header.Set("X-API-Key", "k")
							if resp, err := api.RoundTrip(req); err == nil {
								resp.Body.Close()
							}
						})
					}
					wg.Wait()
					select {
					case <-done:
						return
					case <-tick.C:
					}
				}
			})
			time.Sleep(time.Millisecond)
			rt := throttle.New(api)
			defer rt.Close()
			took := jobOf(t, rt, 400, 8, "ours")
			close(done)
			other.Wait()
			refused := rt.Stats().Total.Throttled
			t.Logf("seed %d: %.3fx of 20 s, %d of ours refused", seed, took.Seconds()/20, refused)
			sx, sr = sx+took.Seconds()/20, sr+float64(refused)
		})
	}
	t.Logf("%.3fx on average, %.1f refused", sx/seeds, sr/seeds)
	assert.LessOrEqual(t, sx/seeds, 1.04, "on average")
	assert.LessOrEqual(t, sr/seeds, 14.0, "refused, on average")
}

// slowBucketJob runs n requests, workers at a time, against limit told by
// X-RateLimit-* or IETF fields on every answer, and reports the time over
// ideal and the requests refused.
func slowBucketJob(t *testing.T, limit throttletest.Limit, ietf bool, n, workers int, ideal time.Duration) (float64, int64) {
	t.Helper()
	api := throttletest.NewAPI(nearby(throttletest.Config{Limits: []throttletest.Limit{limit},
		XRateLimit: !ietf, IETF: ietf, HeadersOnSuccess: true}, 1))
	rt := throttle.New(api)
	defer rt.Close()
	took := jobOf(t, rt, n, workers, "")
	refused := api.Stats().Total.Throttled
	x := took.Seconds() / ideal.Seconds()
	t.Logf("took %v (%.3fx the ideal %v), %d refused", took, x, ideal, refused)
	return x, refused
}

// A slow bucket told by IETF fields (2 a second, 500 deep:
// RateLimit-Policy q=500;w=250, RateLimit t=1, its next token; 100 deep:
// q=100;w=50) is spent by the first of a job, 4 or 16 at a time. Its t=1
// resets are no window's end (wholeAgain), so each gives back one; but
// rollover still placed the next reset a whole policy period on, and the
// spread of a kind not yet known sent that one token over the first half
// of it: 125 s (25 s) for one request (regression, found in review: 6.3x
// the ideal, 1.3x at 100 deep).
func TestASlowBucketToldByIETFIsNotHeldHalfItsPolicyPeriod(t *testing.T) {
	for _, c := range []struct {
		depth, n, workers int
	}{{500, 540, 16}, {100, 140, 4}, {100, 140, 16}} {
		t.Run(fmt.Sprintf("depth=%d/workers=%d", c.depth, c.workers), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				limit := throttletest.Limit{Algorithm: throttletest.TokenBucket, Rate: 2, Burst: c.depth}
				x, refused := slowBucketJob(t, limit, true, c.n, c.workers, 20*time.Second) // (n - depth) / 2
				assert.LessOrEqual(t, x, 1.10)
				assert.LessOrEqual(t, refused, int64(3))
			})
		})
	}
}

// A slow deep bucket told by X-RateLimit-* on every answer, its Reset the
// time until it is full (throttletest's, and Twitch's Ratelimit-Reset), is
// spent by the first of a job, within a few round trips: no span of
// Remaining shows its refill, but its Reset does, growing by 1/rate with
// each request it takes where a window's end stays put (see endMoved).
// Regression, found in review: taken for a window, 2 a second 500 deep was
// held until its last reset, 250 s: 12.6x the ideal; 100 deep, 2.6x; 10 a
// second 500 deep, 2.6x. And met by 64 requests at once, a bucket of 20
// told so within the burst took the 40 refused for spent and held the key
// 17 s (1.42x; see told.refused).
func TestASlowBucketsResetUntilFullShowsABucket(t *testing.T) {
	for _, c := range []struct {
		rate              float64
		depth, n, workers int
		refusedAtMost     int64
	}{{2, 500, 540, 16, 3}, {2, 100, 140, 4, 3}, {2, 100, 140, 1, 3}, {10, 500, 700, 16, 3}, {2, 20, 60, 64, 40}} {
		t.Run(fmt.Sprintf("rate=%v/depth=%d/workers=%d", c.rate, c.depth, c.workers), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				limit := throttletest.Limit{Algorithm: throttletest.TokenBucket, Rate: c.rate, Burst: c.depth}
				x, refused := slowBucketJob(t, limit, false, c.n, c.workers, 20*time.Second) // (n - depth) / rate
				assert.LessOrEqual(t, x, 1.10)
				assert.LessOrEqual(t, refused, c.refusedAtMost)
			})
		})
	}
}

// A fixed window (10 a minute) told by either form of headers keeps its
// reset as its end: four requests at once leave 6, which Stats still says
// at 30 s, with the reset a minute after the start, and the window is back
// to 10 once that reset passed. (Its resets shrink as time passes: the end
// they state stays put, and it is not taken for a bucket's.)
func TestAWindowsResetStaysItsEnd(t *testing.T) {
	for _, ietf := range []bool{false, true} {
		t.Run(fmt.Sprint("ietf=", ietf), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := throttletest.NewAPI(throttletest.Config{
					Limits:     []throttletest.Limit{{Algorithm: throttletest.FixedWindow, N: 10, Per: time.Minute}},
					XRateLimit: !ietf, IETF: ietf, HeadersOnSuccess: true, Latency: 5 * time.Millisecond})
				rt := throttle.New(api)
				defer rt.Close()
				start := time.Now()
				var wg sync.WaitGroup
				for range 4 {
					wg.Go(func() { getAt(t, rt, start) })
				}
				wg.Wait()
				for _, at := range []time.Duration{0, 30 * time.Second} {
					time.Sleep(at - time.Since(start))
					st := rt.Stats().Keys["api.test"]
					assert.Equal(t, 6, st.Remaining, "at %v", at)
					assert.WithinDuration(t, start.Add(time.Minute), st.Reset, time.Second, "at %v", at)
				}
				time.Sleep(61*time.Second - time.Since(start))
				assert.Equal(t, 10, rt.Stats().Keys["api.test"].Remaining, "whole after the reset")
			})
		})
	}
}

// A bucket of 2 a second, 1 deep, told by X-RateLimit-* (Limit 1,
// Remaining 0 and Reset 1 at every answer), met one request at a time: a
// kind not yet known, spent, lets one request try an eighth of the way to
// the reset; refused, the next tries twice as far, and the third, half
// way, finds the bucket's token and tells the bucket and its rate.
// Regression, found in review: every try went an eighth of the way,
// was refused and paused the key a second: one 429 a request, 2.26x the
// ideal. (What is refused after that is the bucket's probing: full at
// both ends, a bucket 1 deep shows only that it refills as fast as the
// key took.)
func TestARefusedTryGoesFurtherNextTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		limit := throttletest.Limit{Algorithm: throttletest.TokenBucket, Rate: 2, Burst: 1}
		x, refused := slowBucketJob(t, limit, false, 20, 1, 9500*time.Millisecond) // (n - depth) / rate
		assert.LessOrEqual(t, x, 1.6)
		assert.LessOrEqual(t, refused, int64(6))
	})
}

// A bucket of 1 a second, 3 deep, told by IETF fields, met by one worker
// in four jobs of 60 records, 45 s apart: each job's ideal is (60-3)/1 s.
// Regression, found in review: a span of Remaining across the pause between
// jobs, full part of the time, was taken for the bucket's rate (3/46 s), and
// jobs 1-3 took 2.2x their ideal.
func TestASlowShallowBucketsJobsStayNearTheirIdeal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := throttletest.NewAPI(nearby(throttletest.Config{
			Limits: []throttletest.Limit{{Algorithm: throttletest.TokenBucket, Rate: 1, Burst: 3}},
			IETF:   true, HeadersOnSuccess: true}, 1))
		rt := throttle.New(api)
		defer rt.Close()
		for j := range 4 {
			took := jobOf(t, rt, 60, 1, fmt.Sprint(j))
			st := rt.Stats().Keys["api.test"]
			t.Logf("job %d took %v, %d refused so far, rate %.3f (%s)", j, took, api.Stats().Total.Throttled, st.Rate, st.PaceFrom)
			assert.LessOrEqual(t, took, 70*time.Second, "job %d: ideal 57 s", j)
			time.Sleep(45 * time.Second)
		}
	})
}

// A bucket of 5 a second, 5 deep, told by X-RateLimit-*, met by 4 workers
// in four jobs of 60 records, 45 s apart: each job's ideal is 11 s.
// Regression, found in review: the same misread span, 60-99 s a job.
func TestABucketsSpanAcrossAPauseIsNotItsRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := throttletest.NewAPI(nearby(throttletest.Config{
			Limits:     []throttletest.Limit{{Algorithm: throttletest.TokenBucket, Rate: 5, Burst: 5}},
			XRateLimit: true, HeadersOnSuccess: true}, 1))
		rt := throttle.New(api)
		defer rt.Close()
		for j := range 4 {
			took := jobOf(t, rt, 60, 4, fmt.Sprint(j))
			st := rt.Stats().Keys["api.test"]
			t.Logf("job %d took %v, %d refused so far, rate %.3f (%s)", j, took, api.Stats().Total.Throttled, st.Rate, st.PaceFrom)
			assert.LessOrEqual(t, took, 14*time.Second, "job %d: ideal 11 s", j)
			time.Sleep(45 * time.Second)
		}
	})
}

// A leaky bucket (2 a second, a queue of 3) told by X-RateLimit-*, met by
// 16 workers in four jobs of 60 records, 45 s apart: the first job draws
// the 429s that tell its count, the others draw none. Regression, found in
// review: a refused try's doubling (see TestARefusedTryGoesFurtherNextTime)
// outlived the tries that went through, and every job drew 26-36 429s,
// 121 in all where 31 were.
func TestALeakyBucketsJobsAfterAPauseAreNotRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := throttletest.NewAPI(nearby(throttletest.Config{
			Limits:     []throttletest.Limit{{Algorithm: throttletest.LeakyBucket, Rate: 2, Queue: 3}},
			XRateLimit: true, HeadersOnSuccess: true}, 1))
		rt := throttle.New(api)
		defer rt.Close()
		for j := range 4 {
			took := jobOf(t, rt, 60, 16, fmt.Sprint(j))
			st := rt.Stats().Keys["api.test"]
			t.Logf("job %d took %v, %d refused so far, rate %.3f (%s)", j, took, api.Stats().Total.Throttled, st.Rate, st.PaceFrom)
			time.Sleep(45 * time.Second)
		}
		assert.LessOrEqual(t, api.Stats().Total.Throttled, int64(40))
	})
}
