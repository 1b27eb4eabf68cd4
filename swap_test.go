package throttle_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlehttp/throttle"
	"github.com/throttlehttp/throttle/throttletest"
)

// gaps returns the time between each send and the one before.
func gaps(times []time.Duration) []time.Duration {
	var out []time.Duration
	for i := 1; i < len(times); i++ {
		out = append(out, times[i]-times[i-1])
	}
	return out
}

// A host's Policy replaced under load: the requests already waiting are
// neither dropped nor refused, and go at the new pace from the change on,
// faster or slower.
func TestSetHostPolicyUnderLoad(t *testing.T) {
	for _, tc := range []struct {
		name     string
		from, to throttle.Policy
		change   time.Duration // when: three have gone
		gapAfter time.Duration
	}{
		{"faster", throttle.Policy{Rate: 10, Burst: 1}, throttle.Policy{Rate: 100, Burst: 1}, 205 * time.Millisecond, 10 * time.Millisecond},
		{"slower", throttle.Policy{Rate: 100, Burst: 1}, throttle.Policy{Rate: 10, Burst: 1}, 25 * time.Millisecond, 100 * time.Millisecond},
		{"a queue, smaller", throttle.Policy{Rate: 10, Queue: 20}, throttle.Policy{Rate: 20, Queue: 2}, 205 * time.Millisecond, 50 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := newRecorder()
				rt := throttle.New(base, throttle.WithHostPolicy("api.test", tc.from))
				defer rt.Close()
				var wg sync.WaitGroup
				for i := range 12 {
					wg.Go(func() { assert.NoError(t, do(t, rt, fmt.Sprint("http://api.test/", i))) })
					synctest.Wait()
				}
				time.Sleep(tc.change)
				before := len(base.times())
				require.Equal(t, 3, before)
				require.NoError(t, rt.SetHostPolicy("API.test", tc.to))
				wg.Wait()
				times := base.times()
				require.Len(t, times, 12, "nothing dropped")
				for _, g := range gaps(times)[before:] {
					assert.Equal(t, tc.gapAfter, g, "after the change")
				}
			})
		})
	}
}

// A window the key keeps counts what it logged before the change: a
// smaller window holds the key at once.
func TestSetHostPolicyKeepsTheWindowsCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := newRecorder()
		rt := throttle.New(base, throttle.WithHostPolicy("api.test", throttle.Policy{Windows: []throttle.Window{{N: 5, Per: time.Second}}}))
		defer rt.Close()
		for range 3 {
			require.NoError(t, do(t, rt, "http://api.test/x"))
		}
		require.NoError(t, rt.SetHostPolicy("api.test", throttle.Policy{Windows: []throttle.Window{{N: 3, Per: time.Second}}}))
		require.NoError(t, do(t, rt, "http://api.test/x"))
		assert.Equal(t, []time.Duration{0, 0, 0, time.Second}, base.times(), "3 of 3 were already used")
	})
}

// SetPolicy replaces WithPolicy's, for the hosts without their own.
func TestSetPolicy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := newRecorder()
		rt := throttle.New(base)
		defer rt.Close()
		require.NoError(t, do(t, rt, "http://any.test/x"))
		require.NoError(t, rt.SetPolicy(throttle.Policy{Rate: 2, Burst: 1}))
		for range 3 {
			require.NoError(t, do(t, rt, "http://any.test/x"))
		}
		assert.Equal(t, []time.Duration{0, 0, 500 * time.Millisecond, time.Second}, base.times(),
			"an unpaced key starts its bucket full, then one every 500 ms")
		assert.EqualValues(t, 2, rt.Stats().Keys["any.test"].Rate)
	})
}

// A Policy that does not validate, or a pattern New was not given, is an
// error, and changes nothing.
func TestSetHostPolicyErrors(t *testing.T) {
	rt := throttle.New(newRecorder(), throttle.WithHostPolicy("api.test", throttle.Policy{Rate: 1, Burst: 1}))
	defer rt.Close()
	err := rt.SetHostPolicy("other.test", throttle.Policy{Rate: 1, Burst: 1})
	assert.ErrorIs(t, err, throttle.ErrInvalidConfig)
	assert.ErrorContains(t, err, `SetHostPolicy("other.test"): no such pattern was given to New`)
	err = rt.SetHostPolicy("api.test", throttle.Policy{Rate: 5}) // no Burst
	assert.ErrorIs(t, err, throttle.ErrInvalidConfig)
	assert.ErrorIs(t, rt.SetPolicy(throttle.Policy{Rate: -1}), throttle.ErrInvalidConfig)
	require.NoError(t, do(t, rt, "http://api.test/x"))
	assert.EqualValues(t, 1, rt.Stats().Keys["api.test"].Rate, "unchanged")
}

// Policies replaced while requests come and go, from many goroutines: no
// request is lost, and the race detector finds nothing, with a Store too
// (an answer read the key's policy, to tell the Store, without the key's
// lock: found in review).
func TestSetPolicyWhileRequestsRun(t *testing.T) {
	for _, store := range []bool{false, true} {
		t.Run(fmt.Sprint("store=", store), func(t *testing.T) { setPolicyWhileRequestsRun(t, store) })
	}
}

func setPolicyWhileRequestsRun(t *testing.T, store bool) {
	opts := []throttle.Option{throttle.WithHostPolicy("*.test",
		throttle.Policy{Rate: 1e6, Burst: 100, Windows: []throttle.Window{{N: 1000, Per: time.Millisecond}}})}
	if store {
		opts = append(opts, throttle.WithStore(throttle.NewMemoryStore()))
	}
	rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) { return reply(r, http.StatusOK), nil }), opts...)
	defer rt.Close()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			p := throttle.Policy{Rate: 1e6, Burst: 50 + i%100, MaxInFlight: 4 + i%4}
			if i%3 == 0 {
				p.Windows = []throttle.Window{{N: 500 + i%500, Per: time.Millisecond}}
			}
			assert.NoError(t, rt.SetHostPolicy("*.test", p))
		}
	})
	var reqs sync.WaitGroup
	for w := range 8 {
		reqs.Go(func() {
			for i := range 300 {
				assert.NoError(t, do(t, rt, fmt.Sprintf("http://k%d.test/%d", (w+i)%5, i)))
			}
		})
	}
	reqs.Wait()
	close(stop)
	wg.Wait()
	assert.EqualValues(t, 8*300, rt.Stats().Total.Requests)
}

// A key that learned its pace from 429s (no Rate), moved to a Policy of
// windows alone, is paced by its windows: the learned pace goes with what
// learned it (regression, found in review 45: its limiter stayed, which
// nothing moved again, and the key sent at the 10 a second it had learned,
// against a window of 1,000 a second, for good).
func TestAPaceLearnedGoesWhenWindowsReplaceIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := throttletest.NewAPI(throttletest.Config{
			Limits: []throttletest.Limit{{Algorithm: throttletest.TokenBucket, Rate: 10, Burst: 2}},
		})
		var after atomic.Bool
		rec := newRecorder()
		rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
			if after.Load() {
				return rec.RoundTrip(r)
			}
			time.Sleep(time.Millisecond)
			return api.RoundTrip(r)
		}), throttle.WithHostPolicy("api.test", throttle.Policy{}))
		defer rt.Close()
		job(t, rt, 200)
		require.Equal(t, throttle.PaceLearned, rt.Stats().Keys["api.test"].PaceFrom, "a pace was learned")

		require.NoError(t, rt.SetHostPolicy("api.test", throttle.Policy{Windows: []throttle.Window{{N: 1000, Per: time.Second}}}))
		after.Store(true)
		st := rt.Stats().Keys["api.test"]
		assert.Zero(t, st.Rate, "windows alone: no pace")
		assert.Equal(t, throttle.PaceNone, st.PaceFrom)
		start := time.Now()
		var wg sync.WaitGroup
		for i := range 50 {
			wg.Go(func() { assert.NoError(t, do(t, rt, fmt.Sprint("http://api.test/", i))) })
		}
		wg.Wait()
		assert.Zero(t, time.Since(start), "50 requests within a window of 1,000 a second go at once")
	})
}

// A request waiting in line whose cost the new Policy's bucket cannot hold
// is not refused for the change: it goes when the bucket is full, leaving
// it owing (regression, found in review 45: it failed with
// ErrCostTooLarge, which SetHostPolicy's doc says a change never does).
func TestAChangeRefusesNoCostlyRequestWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := throttle.New(newRecorder(), throttle.WithHostPolicy("api.test", throttle.Policy{Rate: 1, Burst: 10}))
		defer rt.Close()
		start := time.Now()
		_, err := costly(t, rt, start, "http://api.test/q", 9) // the bucket is empty
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() {
			_, err := costly(t, rt, start, "http://api.test/q", 5)
			done <- err
		}()
		synctest.Wait()
		require.NoError(t, rt.SetHostPolicy("api.test", throttle.Policy{Rate: 1, Burst: 3}))
		require.NoError(t, <-done, "a waiting request is not refused for the change")
		assert.Equal(t, 2*time.Second, time.Since(start), "it went when the new bucket (2 tokens held) was full")
	})
}

// Nor is a retry of a costly request, which waited out a pause across the
// change: its request was admitted under the Policy before, and the caller
// gets its answer (regression, found in review 45: ErrCostTooLarge, the
// last answer lost).
func TestAChangeRefusesNoCostlyRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
			calls++
			if calls == 1 {
				return reply(r, http.StatusTooManyRequests, "Retry-After", "5"), nil
			}
			return reply(r, http.StatusOK), nil
		}), throttle.WithHostPolicy("api.test", throttle.Policy{Rate: 10, Burst: 10}))
		defer rt.Close()
		done := make(chan error, 1)
		go func() {
			_, err := costly(t, rt, time.Now(), "http://api.test/q", 5)
			done <- err
		}()
		time.Sleep(time.Second) // the retry waits out the pause
		require.NoError(t, rt.SetHostPolicy("api.test", throttle.Policy{Rate: 10, Burst: 3}))
		require.NoError(t, <-done)
		assert.Equal(t, 2, calls, "the retry went")
	})
}

// A change of Policy that puts a waiting request's turn past its deadline
// fails it then, with ErrWouldExceedDeadline, as at its arrival, wherever
// it waits in the line; a request whose deadline its new turn still meets,
// and one without a deadline, wait and go (regression, found in review 46:
// behind four others in a queue slowed from 10 to 0.1 a second, its turn
// now at 50 s, a request with a deadline of 2 s failed at 2 s with "line:
// context deadline exceeded"; the head already failed at the change).
func TestAChangeFailsAWaitItPutsPastTheDeadline(t *testing.T) {
	for _, before := range []int{0, 4} {
		t.Run(fmt.Sprint(before, " before it"), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := newRecorder()
				rt := throttle.New(base, throttle.WithPolicy(throttle.Policy{Rate: 10, Queue: 10}))
				defer rt.Close()
				start := time.Now()
				require.NoError(t, do(t, rt, "http://api.test/first")) // at 0: the next at 100 ms
				var wg sync.WaitGroup
				for range before {
					wg.Go(func() { assert.NoError(t, do(t, rt, "http://api.test/before")) })
					synctest.Wait()
				}
				late := make(chan error, 1)
				go func() {
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
					defer cancel()
					late <- doCtx(t, ctx, rt, "http://api.test/late")
				}()
				synctest.Wait()
				wg.Go(func() {
					ctx, cancel := context.WithTimeout(context.Background(), 100*time.Second)
					defer cancel()
					assert.NoError(t, doCtx(t, ctx, rt, "http://api.test/patient"))
				})
				wg.Go(func() { assert.NoError(t, do(t, rt, "http://api.test/no-deadline")) })
				synctest.Wait()

				require.NoError(t, rt.SetPolicy(throttle.Policy{Rate: 0.1, Queue: 10}))
				synctest.Wait()
				select {
				case err := <-late:
					assert.ErrorIs(t, err, throttle.ErrWouldExceedDeadline)
					if we := (*throttle.WaitError)(nil); assert.ErrorAs(t, err, &we) {
						assert.Equal(t, throttle.LimitQueue, we.Limit)
						assert.Equal(t, start.Add(time.Duration(before+1)*10*time.Second), we.Until, "its turn under the new Policy")
					}
				default:
					t.Error("still waiting after the change")
				}
				wg.Wait()
				assert.NotContains(t, base.urls(), "http://api.test/late")
				assert.Len(t, base.urls(), before+3)
				assert.EqualValues(t, 1, rt.Stats().Keys["api.test"].RefusedDeadline)
			})
		})
	}
}

// A cap on requests in flight that SetPolicy sets while requests are on
// the wire counts them: with 3 on the wire and a new MaxInFlight of 2, no
// other goes until fewer than 2 are out (regression, found in review: the
// 3 held no slot, and 2 more went at once, 5 in flight under a cap of 2).
func TestACapSetWhileRequestsAreOnTheWireCountsThem(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out, most atomic.Int32
		release := make(chan struct{})
		rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
			n := out.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			<-release
			out.Add(-1)
			return reply(r, http.StatusOK), nil
		})) // unpaced, no cap
		defer rt.Close()
		var wg sync.WaitGroup
		for i := range 3 {
			wg.Go(func() { assert.NoError(t, do(t, rt, fmt.Sprint("http://api.test/", i))) })
		}
		synctest.Wait()
		require.EqualValues(t, 3, out.Load(), "3 on the wire")
		require.NoError(t, rt.SetPolicy(throttle.Policy{MaxInFlight: 2}))
		for i := range 3 {
			wg.Go(func() { assert.NoError(t, do(t, rt, fmt.Sprint("http://api.test/new", i))) })
		}
		synctest.Wait()
		assert.EqualValues(t, 3, out.Load(), "none more while 3 are out, the cap 2")
		close(release)
		wg.Wait()
		assert.EqualValues(t, 3, most.Load(), "never more than the 3 already out")
		st := rt.Stats().Keys["api.test"]
		assert.Zero(t, st.InFlight)
		assert.Zero(t, st.Slots)
	})
}

// SetHostPolicy's doc: "what 429s had cut or taught of its pace starts
// again under the new Policy". A key that learned 10 a second from a
// bucket of 10 a second, whose plan was upgraded to 1,000 a second, is
// moved to a new unpaced Policy (MaxInFlight raised): what the 429s
// taught must start again, not hold the key at 10 a second. Regression,
// found in review: it did, and 200 requests took 19.9 s.
func TestSetHostPolicyForgetsALearnedPace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := func(r float64) throttletest.Config {
			return nearby(throttletest.Config{Limits: []throttletest.Limit{{Algorithm: throttletest.TokenBucket, Rate: r, Burst: 5}}}, 1)
		}
		before, after := throttletest.NewAPI(cfg(10)), throttletest.NewAPI(cfg(1000))
		var upgraded atomic.Bool
		rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
			if upgraded.Load() {
				return after.RoundTrip(r)
			}
			return before.RoundTrip(r)
		}), throttle.WithHostPolicy("api.test", throttle.Policy{MaxInFlight: 8}))
		defer rt.Close()
		jobOf(t, rt, 300, 8, "")
		learned := rt.Stats().Keys["api.test"]
		require.Equal(t, throttle.PaceLearned, learned.PaceFrom)
		require.Less(t, float64(learned.Rate), 20.0)

		upgraded.Store(true)
		require.NoError(t, rt.SetHostPolicy("api.test", throttle.Policy{MaxInFlight: 16}))
		st := rt.Stats().Keys["api.test"]
		assert.Equal(t, throttle.PaceNone, st.PaceFrom, "what the 429s taught starts again")
		assert.Zero(t, st.Rate)
		took := jobOf(t, rt, 200, 16, "")
		t.Logf("learned %.1f/s; after the upgrade, 200 took %v", float64(learned.Rate), took)
		assert.Less(t, took, 5*time.Second, "200 requests against 1,000 a second: not at the 10 a second learned before")
	})
}
