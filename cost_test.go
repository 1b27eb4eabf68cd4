package throttle_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlehttp/throttle"
)

// costly sends a GET to url through rt, charged cost, and returns when it
// went (from start) and its error.
func costly(t *testing.T, rt http.RoundTripper, start time.Time, url string, cost int) (time.Duration, error) {
	t.Helper()
	return costlyCtx(t, context.Background(), rt, start, url, cost)
}

func costlyCtx(t *testing.T, ctx context.Context, rt http.RoundTripper, start time.Time, url string, cost int) (time.Duration, error) {
	t.Helper()
	err := doCtx(t, throttle.With(ctx, throttle.Cost(cost)), rt, url)
	return time.Since(start), err
}

// figures is a base RoundTripper that answers 200 with the cost the
// request's X-Figure header asks for in X-Cost, the server's figure, and
// logs when each request came.
func figures() (rtFunc, func() []time.Duration) {
	return figuresAfter(answerFigure)
}

// answerFigure answers 200 with the cost the request's X-Figure header
// asks for in X-Cost.
func answerFigure(req *http.Request) (*http.Response, error) {
	if f := req.Header.Get("X-Figure"); f != "" {
		return reply(req, http.StatusOK, "X-Cost", f), nil
	}
	return reply(req, http.StatusOK), nil
}

// A cost-n request takes n tokens of a token bucket: a bucket of depth 5
// (Burst 6, less the token in reserve) at 10/s lets a cost-5 request go at
// once, the next cost-5 one 5/Rate later, and a cost-1 one 1/Rate after.
func TestCostTakesTokens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := throttle.New(newRecorder(), throttle.WithPolicy(throttle.Policy{Rate: 10, Burst: 6}))
		defer rt.Close()
		start := time.Now()
		var got []time.Duration
		for _, cost := range []int{5, 5, 1, 2} {
			at, err := costly(t, rt, start, "http://api.test/q", cost)
			require.NoError(t, err)
			got = append(got, at)
		}
		assert.Equal(t, []time.Duration{0, ms(500), ms(600), ms(800)}, got)
		st := rt.Stats().Total
		assert.EqualValues(t, 4, st.Requests)
		assert.EqualValues(t, 4, st.Attempts)
		assert.EqualValues(t, 13, st.Units)
	})
}

// A leaky bucket releases a cost-n request at its turn, and the one after
// it n/Rate later, in the order they came.
func TestCostInTheQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := newRecorder()
		rt := throttle.New(base, throttle.WithPolicy(throttle.Policy{Rate: 10, Queue: 10}))
		defer rt.Close()
		var wg sync.WaitGroup
		for i, cost := range []int{3, 1, 4, 1} {
			wg.Go(func() {
				ctx := throttle.With(context.Background(), throttle.Cost(cost))
				assert.NoError(t, doCtx(t, ctx, rt, fmt.Sprint("http://api.test/", i)))
			})
			synctest.Wait() // in this order
		}
		wg.Wait()
		assert.Equal(t, []time.Duration{0, ms(300), ms(400), ms(800)}, base.times())
		assert.Equal(t, []string{"http://api.test/0", "http://api.test/1", "http://api.test/2", "http://api.test/3"}, base.urls())
	})
}

// A window counts a cost-n request as n: never more than N units in any
// interval of length Per, exactly.
func TestCostInWindows(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := throttle.New(newRecorder(), throttle.WithPolicy(throttle.Policy{
			Windows: []throttle.Window{{N: 5, Per: time.Second}}}))
		defer rt.Close()
		start := time.Now()
		costs := []int{3, 2, 4, 1, 1, 5, 2}
		var got []time.Duration
		for _, cost := range costs {
			at, err := costly(t, rt, start, "http://api.test/q", cost)
			require.NoError(t, err)
			got = append(got, at)
		}
		// 3+2 at once; the 4 when both have aged out, the 1 beside it;
		// the next 1 when the 4 has; the 5 when all have; the 2 a window
		// after the 5.
		want := []time.Duration{0, 0, time.Second, time.Second, 2 * time.Second, 3 * time.Second, 4 * time.Second}
		assert.Equal(t, want, got)
		for i := range got { // the rule itself, for every interval
			units := 0
			for j := i; j < len(got) && got[j]-got[i] < time.Second; j++ {
				units += costs[j]
			}
			assert.LessOrEqual(t, units, 5, "units within a second from %v", got[i])
		}
	})
}

// A cost that a limit can never admit fails at once, unsent, with
// ErrCostTooLarge naming the key, the limit and the cost; a cost a limit
// can admit, however large beside the others, waits its turn.
func TestCostTooLarge(t *testing.T) {
	hourly := throttle.Window{N: 5000, Per: time.Hour}
	tests := []struct {
		name   string
		pol    throttle.Policy
		cost   int
		limit  throttle.Limit // LimitNone: admitted
		window throttle.Window
		says   string
	}{
		{"bucket holds Burst less its reserve", throttle.Policy{Rate: 10, Burst: 5}, 5, throttle.LimitRate, throttle.Window{},
			`key "api.test": rate: cost too large: cost 5, and the token bucket holds 4 (Burst 5, less the token kept in reserve)`},
		{"bucket of one", throttle.Policy{Rate: 10, Burst: 1}, 2, throttle.LimitRate, throttle.Window{}, "holds 1"},
		{"bucket, at its depth", throttle.Policy{Rate: 10, Burst: 5}, 4, throttle.LimitNone, throttle.Window{}, ""},
		{"window", throttle.Policy{Rate: 100, Queue: 10, Windows: []throttle.Window{hourly}}, 5001, throttle.LimitWindow, hourly,
			`key "api.test": window 5000/1h0m0s: cost too large: cost 5001, more than the window's N of 5000`},
		{"window, at its N", throttle.Policy{Windows: []throttle.Window{hourly}}, 5000, throttle.LimitNone, throttle.Window{}, ""},
		{"queue admits any cost", throttle.Policy{Rate: 1000, Queue: 1}, 100, throttle.LimitNone, throttle.Window{}, ""},
		{"unpaced", throttle.Policy{}, 1_000_000_000, throttle.LimitNone, throttle.Window{}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := newRecorder()
				rt := throttle.New(base, throttle.WithPolicy(tc.pol))
				defer rt.Close()
				start := time.Now()
				at, err := costly(t, rt, start, "http://api.test/q", tc.cost)
				if tc.limit == throttle.LimitNone {
					require.NoError(t, err)
					assert.Len(t, base.times(), 1)
					return
				}
				require.ErrorIs(t, err, throttle.ErrCostTooLarge)
				var we *throttle.WaitError
				require.ErrorAs(t, err, &we)
				assert.Equal(t, tc.limit, we.Limit)
				assert.Equal(t, tc.window, we.Window)
				assert.Equal(t, "api.test", we.Key)
				assert.Contains(t, err.Error(), tc.says)
				assert.Zero(t, at, "at once")
				assert.Empty(t, base.times(), "nothing sent")
				st := rt.Stats().Total
				assert.EqualValues(t, 1, st.RefusedCost)
				assert.Zero(t, st.Canceled)
				assert.Zero(t, st.Units)
				assert.NoError(t, do(t, rt, "http://api.test/q"), "the key still works")
			})
		})
	}
}

// A cost outside 1 to 1e9 is refused at once as an invalid request
// option; nothing is sent and the body is closed.
func TestCostInvalid(t *testing.T) {
	for _, n := range []int{0, -1, 1_000_000_001} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			base := newRecorder()
			rt := throttle.New(base)
			defer rt.Close()
			bodies := &countingBodies{}
			body, _ := bodies.get()
			req, err := http.NewRequestWithContext(throttle.With(context.Background(), throttle.Cost(n)),
				http.MethodPost, "http://api.test/q", body)
			require.NoError(t, err)
			_, err = rt.RoundTrip(req)
			require.ErrorIs(t, err, throttle.ErrInvalidRequestOption)
			assert.Contains(t, err.Error(), fmt.Sprintf("Cost: %d, want 1 to 1000000000 units", n))
			assert.Empty(t, base.times())
			assert.Equal(t, 1, bodies.closed)
		})
	}
}

// Every retry of a cost-n request is charged n again.
func TestCostChargedForEachRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base, log := answering(http.StatusServiceUnavailable) // then 200; Retry-After 1
		rt := throttle.New(base, throttle.WithPolicy(throttle.Policy{Rate: 1, Burst: 11}))
		defer rt.Close()
		start := time.Now()
		at, err := costly(t, rt, start, "http://api.test/q", 4)
		require.NoError(t, err)
		assert.Equal(t, time.Second, at, "the retry after its Retry-After")
		// 10 tokens, less 4 at 0 and 4 at 1 s, plus 1 refilled: 3 left.
		at, err = costly(t, rt, start, "http://api.test/q", 4)
		require.NoError(t, err)
		assert.Equal(t, 2*time.Second, at, "the next cost-4 request waits for the token it lacks")
		assert.Len(t, log(), 3)
		st := rt.Stats().Total
		assert.EqualValues(t, 3, st.Attempts)
		assert.EqualValues(t, 12, st.Units)
	})
}

// A wait that cannot end before the deadline fails at once, counting the
// cost, and takes nothing.
func TestCostWouldExceedDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := throttle.New(newRecorder(), throttle.WithPolicy(throttle.Policy{Rate: 10, Burst: 6}))
		defer rt.Close()
		start := time.Now()
		_, err := costly(t, rt, start, "http://api.test/q", 5) // the bucket is empty
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), ms(250)) // 2 tokens by then; the cost is 3
		defer cancel()
		at, err := costlyCtx(t, ctx, rt, start, "http://api.test/q", 3)
		require.ErrorIs(t, err, throttle.ErrWouldExceedDeadline)
		assert.Zero(t, at, "at once")
		var we *throttle.WaitError
		require.ErrorAs(t, err, &we)
		assert.Equal(t, throttle.LimitRate, we.Limit)
		assert.Equal(t, start.Add(ms(300)), we.Until)
		// The same request without a deadline goes when 3 tokens are in:
		// the refused one took none.
		at, err = costly(t, rt, start, "http://api.test/q", 3)
		require.NoError(t, err)
		assert.Equal(t, ms(300), at)
	})
}

// The server's figure corrects the charge: more than charged takes the
// difference from the bucket (into debt) and the windows, from the
// answer; less gives it back. The next request shows it.
func TestCostCorrectedByTheServer(t *testing.T) {
	bucket := throttle.Policy{Rate: 10, Burst: 11} // depth 10
	window := throttle.Policy{Windows: []throttle.Window{{N: 10, Per: time.Second}}}
	tests := []struct {
		name         string
		pol          throttle.Policy
		cost, figure int
		next         int           // the next request's cost
		wait         time.Duration // and its wait
		units        int64
	}{
		{"bucket, up", bucket, 2, 8, 4, ms(200), 12},
		{"bucket, up into debt", bucket, 2, 15, 1, ms(600), 16},
		{"bucket, down", bucket, 8, 2, 8, 0, 10},
		{"bucket, no figure", bucket, 8, -1, 8, ms(600), 16},
		{"bucket, figure ignored", bucket, 8, 1_000_000_001, 8, ms(600), 16},
		{"bucket, zero", bucket, 8, 0, 10, 0, 10},
		{"window, up", window, 2, 8, 4, time.Second, 12},
		{"window, down", window, 8, 2, 8, 0, 10},
		{"window, no figure", window, 8, -1, 8, time.Second, 16},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base, _ := figures()
				var mu sync.Mutex
				var answered []int
				rt := throttle.New(base, throttle.WithPolicy(tc.pol), throttle.WithCost(throttle.CostHeader("x-cost")),
					throttle.WithEvents(func(e throttle.Event) {
						if e.Kind == throttle.EventAnswered {
							mu.Lock()
							answered = append(answered, e.Cost)
							mu.Unlock()
						}
					}))
				defer rt.Close()
				start := time.Now()
				req := newReq(t, throttle.With(context.Background(), throttle.Cost(tc.cost)), http.MethodGet, "http://api.test/q")
				if tc.figure >= 0 {
					req.Header.Set("X-Figure", strconv.Itoa(tc.figure))
				}
				resp, err := rt.RoundTrip(req)
				require.NoError(t, err)
				resp.Body.Close()
				at, err := costly(t, rt, start, "http://api.test/q", tc.next)
				require.NoError(t, err)
				assert.Equal(t, tc.wait, at)
				assert.EqualValues(t, tc.units, rt.Stats().Total.Units)
				first := tc.cost
				if tc.figure >= 0 && tc.figure <= 1_000_000_000 {
					first = tc.figure
				}
				assert.Equal(t, []int{first, tc.next}, answered, "EventAnswered's Cost: what was charged")
			})
		})
	}
}

// A wait known to end after the deadline fails at once behind costly
// waiters too: each of those ahead counts its cost, not 1 (regression,
// found in review: on a bucket of 1 a second, behind one of cost 10, one
// with a deadline 5 s away, its turn 11 s away, waited 5 s and failed with
// the context's error; in a leaky bucket it held a place of the queue a
// second, then failed).
func TestADeadlineBehindCostlyWaitersFailsAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name        string
		pol         throttle.Policy
		first, next int // the costs of the request that empties the bucket and of the one waiting ahead
	}{
		{"token bucket", throttle.Policy{Rate: 1, Burst: 11}, 10, 10},
		{"leaky bucket", throttle.Policy{Rate: 1, Queue: 10}, 1, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rt := throttle.New(newRecorder(), throttle.WithPolicy(tc.pol))
				defer rt.Close()
				start := time.Now()
				_, err := costly(t, rt, start, "http://api.test/0", tc.first)
				require.NoError(t, err)
				done := make(chan error)
				go func() {
					_, err := costly(t, rt, start, "http://api.test/1", tc.next) // waits its turn
					done <- err
				}()
				synctest.Wait()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				at, err := costlyCtx(t, ctx, rt, start, "http://api.test/2", 1)
				assert.ErrorIs(t, err, throttle.ErrWouldExceedDeadline)
				assert.Zero(t, at, "at once")
				require.NoError(t, <-done)
			})
		})
	}
}

// A refund gives back no more than the bucket lost: an attempt charged 2
// and answered "cost 0" 250 ms later left the bucket 2 lower only until it
// would have been full, and meanwhile another request took what refilled
// (regression, found in review: the refund was given back whole, and the
// requests after it went past the bucket's rate). A token bucket of 10 a
// second, 2 deep (Burst 3, less the reserve): A (cost 2) at 0, answered at
// 250 ms; B (cost 2) at 200 ms, once 2 refilled; C (cost 2) after A's
// answer waits for the tokens B took, until 400 ms (it went at 250 ms, B
// and C 4 units within 50 ms). A leaky bucket of 10 a second: A at 0,
// answered "cost 0" at 150 ms; B at 100 ms; C no sooner than 200 ms (it
// went at 150 ms, 50 ms after B).
func TestCostRefundGivesBackNoMoreThanTheBucketLost(t *testing.T) {
	for _, tc := range []struct {
		name  string
		pol   throttle.Policy
		cost  int
		delay time.Duration // A's answer comes this long after it went
		want  []time.Duration
	}{
		{"token bucket", throttle.Policy{Rate: 10, Burst: 3}, 2, ms(250), []time.Duration{0, ms(200), ms(400)}},
		{"leaky bucket", throttle.Policy{Rate: 10, Queue: 10}, 1, ms(150), []time.Duration{0, ms(100), ms(200)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec := newRecorder()
				base := rtFunc(func(req *http.Request) (*http.Response, error) {
					_, _ = rec.RoundTrip(req)
					if req.URL.Path == "/A" {
						time.Sleep(tc.delay)
					}
					return answerFigure(req)
				})
				rt := throttle.New(base, throttle.WithPolicy(tc.pol), throttle.WithCost(throttle.CostHeader("X-Cost")))
				defer rt.Close()
				send := func(path string) {
					req := newReq(t, throttle.With(context.Background(), throttle.Cost(tc.cost)), http.MethodGet, "http://api.test"+path)
					if path == "/A" {
						req.Header.Set("X-Figure", "0")
					}
					resp, err := rt.RoundTrip(req)
					require.NoError(t, err)
					resp.Body.Close()
				}
				var wg sync.WaitGroup
				wg.Go(func() { send("/A") })
				synctest.Wait()
				wg.Go(func() { send("/B") })
				time.Sleep(tc.delay)
				synctest.Wait() // A answered
				send("/C")
				wg.Wait()
				assert.Equal(t, []string{"http://api.test/A", "http://api.test/B", "http://api.test/C"}, rec.urls())
				assert.Equal(t, tc.want, rec.times())
			})
		})
	}
}

// A window corrected up counts the difference from the answer, not from
// the sending: a request 300 ms on the wire, charged 2 and found to cost
// 8, holds the window until a second after its answer.
func TestCostCorrectionCountsFromTheAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fast, _ := figures()
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			if r.Header.Get("X-Figure") != "" {
				time.Sleep(ms(300))
			}
			return fast(r)
		})
		rt := throttle.New(base, throttle.WithPolicy(throttle.Policy{Windows: []throttle.Window{{N: 10, Per: time.Second}}}),
			throttle.WithCost(throttle.CostHeader("X-Cost")))
		defer rt.Close()
		start := time.Now()
		req := newReq(t, throttle.With(context.Background(), throttle.Cost(2)), http.MethodGet, "http://api.test/q")
		req.Header.Set("X-Figure", "8")
		resp, err := rt.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
		at, err := costly(t, rt, start, "http://api.test/q", 3)
		require.NoError(t, err)
		assert.Equal(t, ms(1300), at)
	})
}

// A WithCost function that panics leaves the key in order — the slot
// given back, the probe's answer taken, the tokens as charged — and the
// response closed; the panic goes on to the caller, as Retry's hooks'.
func TestCostHookPanics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var sent []time.Duration
		body := &closeCounter{Reader: strings.NewReader("x")}
		start := time.Now()
		calls := 0
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			defer mu.Unlock()
			sent = append(sent, time.Since(start))
			calls++
			if calls == 1 {
				return reply(r, http.StatusTooManyRequests, "Retry-After", "3"), nil
			}
			resp := reply(r, http.StatusOK)
			resp.Body = body
			return resp, nil
		})
		rt := throttle.New(base, throttle.WithPolicy(throttle.Policy{Rate: 10, Burst: 11, MaxInFlight: 1}),
			throttle.WithCost(func(resp *http.Response) (int, bool) {
				if resp.StatusCode == http.StatusOK && resp.Request.URL.Path == "/boom" {
					panic("cost")
				}
				return 0, false
			}))
		defer rt.Close()
		// A 429 that asks for 3 s pauses the key (a shorter one would be
		// a collision); the first request after it is the probe, whose
		// hook panics.
		require.NoError(t, doCtx(t, throttle.With(context.Background(), throttle.NoRetry()), rt, "http://api.test/x"))
		time.Sleep(3 * time.Second)
		req := newReq(t, throttle.With(context.Background(), throttle.Cost(4)), http.MethodGet, "http://api.test/boom")
		assert.PanicsWithValue(t, "cost", func() { _, _ = rt.RoundTrip(req) })
		assert.Equal(t, 1, body.closed, "the response is closed")
		st := rt.Stats().Total
		assert.Zero(t, st.Slots, "the slot is given back")
		assert.Zero(t, st.InFlight)
		assert.EqualValues(t, 5, st.Units, "charged as given")
		// The probe's answer was taken: the next request does not wait a
		// second for it, and finds the slot free. (The resume after a
		// probe empties the bucket: it waits one token, at the pace the
		// 429 cut to 8/s.)
		at, err := costly(t, rt, start, "http://api.test/y", 1)
		require.NoError(t, err)
		assert.Equal(t, 3*time.Second+ms(125), at)
	})
}

// A window given back units by the server's figures has their room at
// once (GitHub's GraphQL: a query estimated at 5 points that cost 1): in a
// window of 10, six such queries go at once — each charged 5 on the wire,
// 1 once answered — and the seventh when the first units age out.
func TestCostWindowGivesBackAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base, _ := figures()
		rt := throttle.New(base, throttle.WithPolicy(throttle.Policy{Windows: []throttle.Window{{N: 10, Per: time.Second}}}),
			throttle.WithCost(throttle.CostHeader("X-Cost")))
		defer rt.Close()
		start := time.Now()
		var got []time.Duration
		for range 8 {
			req := newReq(t, throttle.With(context.Background(), throttle.Cost(5)), http.MethodPost, "http://api.test/graphql")
			req.Header.Set("X-Figure", "1")
			resp, err := rt.RoundTrip(req)
			require.NoError(t, err)
			resp.Body.Close()
			got = append(got, time.Since(start))
		}
		assert.Equal(t, []time.Duration{0, 0, 0, 0, 0, 0, time.Second, time.Second}, got)
		assert.EqualValues(t, 8, rt.Stats().Total.Units)
	})
}

// Each unit of a costly attempt outlives the one N before it, not only its
// last: answers that overtake one another leave an earlier admission
// counting longer than a later one. In a window of 2, a slow request (its
// answer at 800 ms) and a fast one (at once) hold a cost-2 request until the
// slow one's unit has aged out.
func TestCostWindowOutlivesEveryUnit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fast := newRecorder()
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			if r.URL.Path == "/slow" {
				time.Sleep(ms(800))
			}
			return fast.RoundTrip(r)
		})
		rt := throttle.New(base, throttle.WithPolicy(throttle.Policy{Windows: []throttle.Window{{N: 2, Per: time.Second}}}))
		defer rt.Close()
		start := time.Now()
		var wg sync.WaitGroup
		wg.Go(func() { assert.NoError(t, do(t, rt, "http://api.test/slow")) })
		synctest.Wait()
		require.NoError(t, do(t, rt, "http://api.test/fast"))
		at, err := costly(t, rt, start, "http://api.test/costly", 2)
		require.NoError(t, err)
		assert.Equal(t, ms(1800), at)
		wg.Wait()
	})
}

// What the server's quota headers say remains is spent by each request's
// cost while it is on its way: told 9 remain, two cost-4 requests go, and
// a third must wait for the reset (here past its deadline: it fails at
// once).
func TestCostSpendsWhatTheServerSaysRemains(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			if r.URL.Path == "/held" {
				<-release
			}
			return reply(r, http.StatusOK, "X-RateLimit-Limit", "10", "X-RateLimit-Remaining", "9", "X-RateLimit-Reset", "60"), nil
		})
		rt := throttle.New(base)
		defer rt.Close()
		require.NoError(t, do(t, rt, "http://api.test/first")) // 9 remain
		start := time.Now()
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				_, err := costly(t, rt, start, "http://api.test/held", 4)
				assert.NoError(t, err)
			})
			synctest.Wait()
		}
		assert.Equal(t, 2, rt.Stats().Total.InFlight, "two cost-4 requests on their way: 1 of 9 left")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		at, err := costlyCtx(t, ctx, rt, start, "http://api.test/q", 4)
		require.ErrorIs(t, err, throttle.ErrWouldExceedDeadline)
		assert.Zero(t, at)
		var we *throttle.WaitError
		require.ErrorAs(t, err, &we)
		assert.Equal(t, throttle.LimitQuota, we.Limit)
		_, err = costlyCtx(t, ctx, rt, start, "http://api.test/q", 1)
		assert.NoError(t, err, "a request of cost 1 still fits")
		close(release)
		wg.Wait()
	})
}

// Transports sharing a Store book each attempt's cost there: a cost-5
// request through one Transport empties the shared bucket of 5, and the
// other Transport's cost-5 request goes 5/Rate later, though its own
// bucket is full.
func TestCostSharedThroughTheStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := throttle.NewMemoryStore()
		pol := throttle.WithPolicy(throttle.Policy{Rate: 10, Burst: 6})
		a := throttle.New(newRecorder(), pol, throttle.WithStore(store))
		defer a.Close()
		b := throttle.New(newRecorder(), pol, throttle.WithStore(store))
		defer b.Close()
		start := time.Now()
		at, err := costly(t, a, start, "http://api.test/q", 5)
		require.NoError(t, err)
		assert.Zero(t, at)
		at, err = costly(t, b, start, "http://api.test/q", 5)
		require.NoError(t, err)
		assert.Equal(t, ms(500), at)
		at, err = costly(t, a, start, "http://api.test/q", 1)
		require.NoError(t, err)
		assert.Equal(t, ms(600), at)
	})
}

// A cost the bucket admits (up to Burst-1) still goes once the reserve the
// key holds back against jitter has grown past it: when the bucket is
// full, leaving it owing the rest. Round trips of 0 and 500 ms in turn,
// after two of 500 ms in a row (a lasting change, not one slow answer: see
// latency.observe), grow the reserve of a bucket of Burst 10 to 8 tokens:
// it holds 2, and a cost-9 request takes 9 of them.
func TestCostBeyondWhatTheReserveLeaves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := 0
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			if r.URL.Path != "/jitter" {
				return reply(r, http.StatusOK), nil
			}
			if n++; n == 2 || n >= 3 && n%2 == 1 { // 0, 500, 500, 0, 500, 0, 500, 0 ms
				time.Sleep(ms(500))
			}
			return reply(r, http.StatusOK), nil
		})
		rt := throttle.New(base, throttle.WithPolicy(throttle.Policy{Rate: 10, Burst: 10}))
		defer rt.Close()
		for range 8 {
			require.NoError(t, do(t, rt, "http://api.test/jitter"))
		}
		time.Sleep(10 * time.Second) // the bucket full again
		start := time.Now()
		at, err := costly(t, rt, start, "http://api.test/q", 9)
		require.NoError(t, err)
		assert.Zero(t, at, "at once: the bucket is full")
		// Owing 7 (it held 2): the next waits for 8 tokens.
		at, err = costly(t, rt, start, "http://api.test/q", 1)
		require.NoError(t, err)
		assert.Equal(t, ms(800), at)
	})
}

// A retry that Retry.Prepare refuses gives back its tokens, but no more
// than the bucket lost: refill the bucket could not hold while the retry's
// tokens were out was not lost by it. Policy{Rate: 1, Burst: 5}, every
// request of Cost(4). A's retry is admitted at P (the bucket 4 -> 0), its
// Prepare fails at P+4.5 s; B goes at P+4 s (the bucket refilled to 4 ->
// 0), C, sent at P+4.6 s, must wait for 4 tokens: P+8 s. Given back whole,
// the retry's 4 tokens let C go at P+4.6 s: 8 units within 0.6 s, where
// the bucket (Burst 5, and 1 a second) allows 5.6 (regression, found in
// review).
func TestAPrepareRefusalGivesBackNoMoreThanTheBucketLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		sentAt := map[string][]time.Duration{}
		start := time.Now()
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			defer mu.Unlock()
			sentAt[r.URL.Path] = append(sentAt[r.URL.Path], time.Since(start))
			if r.URL.Path == "/a" {
				return reply(r, http.StatusServiceUnavailable), nil
			}
			return reply(r, http.StatusOK), nil
		})
		prepared := make(chan time.Duration, 1)
		rt := throttle.New(base,
			throttle.WithPolicy(throttle.Policy{Rate: 1, Burst: 5}),
			throttle.WithRetry(throttle.Retry{
				NewBackOff: func() backoff.BackOff { return backoff.NewConstantBackOff(time.Second) },
				Prepare: func(*http.Request, int) error {
					prepared <- time.Since(start)
					time.Sleep(4500 * time.Millisecond) // fetching a fresh token, which fails
					return errors.New("no fresh token")
				}}))
		defer rt.Close()
		ctx := throttle.With(context.Background(), throttle.Cost(4))
		send := func(path string) {
			resp, err := rt.RoundTrip(newReq(t, ctx, http.MethodGet, "http://h.test"+path))
			if assert.NoError(t, err) {
				resp.Body.Close()
			}
		}
		var wg sync.WaitGroup
		wg.Go(func() { send("/a") })
		p := <-prepared // A's retry admitted: its 4 tokens taken
		time.Sleep(p + 4*time.Second - time.Since(start))
		wg.Go(func() { send("/b") }) // the bucket is whole again: B goes now
		time.Sleep(600 * time.Millisecond)
		wg.Go(func() { send("/c") }) // Prepare failed 100 ms ago
		wg.Wait()

		mu.Lock()
		defer mu.Unlock()
		require.Len(t, sentAt["/a"], 1, "A's retry never went")
		require.Len(t, sentAt["/b"], 1)
		require.Len(t, sentAt["/c"], 1)
		b, c := sentAt["/b"][0], sentAt["/c"][0]
		t.Logf("retry admitted at %v; B sent at %v, C at %v", p, b, c)
		span := c - b
		assert.LessOrEqual(t, 8.0, 5+span.Seconds(), "8 units within %v: more than Burst 5 and 1 a second allow", span)
		assert.GreaterOrEqual(t, c, p+8*time.Second, "C waits for the 4 tokens B took")
	})
}

// After a pause, the probe's good answer lets the backlog follow through
// the pacer, its bucket emptied (see resume), never the whole backlog at
// once; a refund on that answer must not fill the bucket again.
// Policy{Rate: 10, Burst: 6} (depth 5), WithCost. /p, of cost 5, is
// refused at 0 s for 3 s; five requests of cost 1 wait behind the pause.
// (Regression, found in review.) At 3 s /p's retry, the probe, takes the bucket's 5 tokens; its answer,
// at 3.2 s, says it cost 0. Charged 5 (no figure, or "5"), the backlog
// goes a turn apart from 3.25 s, at the pace the 429 cut to 8 a second;
// had the probe cost nothing at all, the resume would have emptied the
// bucket all the same. With the refund given after the resume, the first
// two went at once at 3.2 s, the third 50 ms later.
func TestARefundToTheProbeDoesNotUndoTheResume(t *testing.T) {
	for _, fig := range []string{"", "5", "0"} {
		t.Run("figure "+fig, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var mu sync.Mutex
				var sentAt []time.Duration // the backlog's sendings
				calls := 0
				start := time.Now()
				base := rtFunc(func(r *http.Request) (*http.Response, error) {
					mu.Lock()
					if r.URL.Path != "/p" {
						sentAt = append(sentAt, time.Since(start))
						mu.Unlock()
						return reply(r, http.StatusOK), nil
					}
					calls++
					first := calls == 1
					mu.Unlock()
					if first {
						return reply(r, http.StatusTooManyRequests, "Retry-After", "3"), nil
					}
					time.Sleep(200 * time.Millisecond)
					if fig == "" {
						return reply(r, http.StatusOK), nil
					}
					return reply(r, http.StatusOK, "X-Cost", fig), nil
				})
				rt := throttle.New(base, throttle.WithPolicy(throttle.Policy{Rate: 10, Burst: 6}),
					throttle.WithCost(throttle.CostHeader("X-Cost")))
				defer rt.Close()
				var wg sync.WaitGroup
				wg.Go(func() {
					assert.NoError(t, doCtx(t, throttle.With(context.Background(), throttle.Cost(5)), rt, "http://api.test/p"))
				})
				time.Sleep(100 * time.Millisecond) // the key is paused until 3 s
				for range 5 {
					wg.Go(func() { assert.NoError(t, do(t, rt, "http://api.test/next")) })
				}
				wg.Wait()
				mu.Lock()
				defer mu.Unlock()
				t.Logf("the backlog went at %v", sentAt)
				require.Len(t, sentAt, 5)
				prev := 3000 * time.Millisecond // the probe's sending (as TestPauseHoldsPacedWaitersAndResumesThroughPacer counts the turn; its answer at 3.2 s)
				for i, at := range sentAt {
					assert.GreaterOrEqual(t, at-prev, 100*time.Millisecond, "backlog request %d: a turn at 10 a second at least after the one before", i)
					prev = at
				}
			})
		})
	}
}

// costArrival is one request as the fake server counted it: when it came,
// and how many units it counted it as.
type costArrival struct {
	at    time.Duration
	units int
}

// costServer is a fake API behind a func-typed RoundTripper: each request
// reaches it after the latency its X-Go header asks for (ms), is counted
// there at the units its X-Figure header asks for (its Cost without one),
// and is answered after the latency its X-Back header asks for, with the
// figure in X-Cost and the status in X-Status (200 without one).
type costServer struct {
	mu    sync.Mutex
	start time.Time
	got   []costArrival
}

func (s *costServer) RoundTrip(r *http.Request) (*http.Response, error) {
	if d, _ := strconv.Atoi(r.Header.Get("X-Go")); d > 0 {
		time.Sleep(ms(d))
	}
	units, _ := strconv.Atoi(r.Header.Get("X-Units"))
	if f := r.Header.Get("X-Figure"); f != "" {
		units, _ = strconv.Atoi(f)
	}
	s.mu.Lock()
	s.got = append(s.got, costArrival{time.Since(s.start), units})
	s.mu.Unlock()
	if d, _ := strconv.Atoi(r.Header.Get("X-Back")); d > 0 {
		time.Sleep(ms(d))
	}
	status := http.StatusOK
	if st := r.Header.Get("X-Status"); st != "" {
		status, _ = strconv.Atoi(st)
	}
	kv := []string{}
	if f := r.Header.Get("X-Figure"); f != "" {
		kv = append(kv, "X-Cost", f)
	}
	if status == http.StatusTooManyRequests {
		kv = append(kv, "Retry-After", "1")
	}
	return reply(r, status, kv...), nil
}

// costReq sends one request charged cost, with the server's latencies and
// figure given (figure < 0: none).
func costReq(ctx context.Context, rt http.RoundTripper, cost, goMs, backMs, figure int) error {
	req, err := http.NewRequestWithContext(throttle.With(ctx, throttle.Cost(cost)), http.MethodGet, "http://api.test/q", nil)
	if err != nil {
		return err
	}
	req.Header.Set("X-Units", strconv.Itoa(cost))
	req.Header.Set("X-Go", strconv.Itoa(goMs))
	req.Header.Set("X-Back", strconv.Itoa(backMs))
	if figure >= 0 {
		req.Header.Set("X-Figure", strconv.Itoa(figure))
	}
	resp, err := rt.RoundTrip(req)
	if err == nil {
		resp.Body.Close()
	}
	return err
}

// overdrawn replays what the server counted through its own token
// bucket (as deep as depth, refilled at r, full at start) and returns how
// many units it was short at worst, and when.
func (s *costServer) overdrawn(r float64, depth int) (float64, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tokens, last, worst, when := float64(depth), time.Duration(0), 0.0, time.Duration(0)
	for _, a := range s.got {
		tokens = min(float64(depth), tokens+(a.at-last).Seconds()*r)
		last = a.at
		tokens -= float64(a.units)
		if -tokens > worst+1e-9 {
			worst, when = -tokens, a.at
		}
	}
	return worst, when
}

// A refund (WithCost's figure below the charge) gives back no more than the
// bucket lost: here nothing, for the bucket refilled whole after the
// charge, before another answer's correction up emptied it. A bucket of 10
// a second, Burst 20 (19 usable, one token in reserve); at 3.1 s, C
// (charged 1) and A (charged 18) empty it; it is whole again at 5.0 s,
// when C reaches the server, which counts it as 19 (2 left there at 5.1
// s); C's answer says so at 5.05 s and the client takes the 18 more; A's
// answer at 5.1 s says it cost 0. The bucket would be where it is had A
// never been charged: nothing is owed back. (The first 20 requests: a
// key's first 16 answers are read for quota headers, which times them;
// after them A, admitted in C's instant, is not timed, and its 2 s round
// trip does not grow the reserve kept against jitter.)
func TestARefundAfterTheBucketRefilledGivesNothingBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const r, burst = 10.0, 20
		srv := &costServer{start: time.Now()}
		rt := throttle.New(srv, throttle.WithPolicy(throttle.Policy{Rate: r, Burst: burst}),
			throttle.WithCost(throttle.CostHeader("X-Cost")))
		defer rt.Close()
		for range 20 { // round trips of 0: the key keeps one token in reserve
			require.NoError(t, costReq(context.Background(), rt, 1, 0, 0, -1))
		}
		time.Sleep(3 * time.Second) // the bucket is whole again
		var wg sync.WaitGroup
		// C, charged 1, reaches the server at 5.0 s, which counts it as
		// 19; its answer says so at 5.05 s.
		wg.Go(func() { assert.NoError(t, costReq(context.Background(), rt, 1, 1900, 50, 19)) })
		synctest.Wait()
		// A, charged 18, costs nothing at the server; its answer comes at 5.1 s.
		wg.Go(func() { assert.NoError(t, costReq(context.Background(), rt, 18, 0, 2000, 0)) })
		synctest.Wait()
		wg.Wait()
		start := time.Since(srv.start)
		for range 18 {
			require.NoError(t, costReq(context.Background(), rt, 1, 0, 0, -1))
		}
		t.Logf("18 requests of 1 unit from %v to %v", start, time.Since(srv.start))
		short, at := srv.overdrawn(r, burst)
		assert.Zero(t, short, "units sent beyond the server's bucket (at %v)", at)
	})
}
