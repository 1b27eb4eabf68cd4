package throttle_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlehttp/throttle"
)

// Regressions found in review. Each names what it guards.

// The in-flight slot is the last thing an attempt takes: a key whose slots
// are all held must still refuse at once what the pause, the queue or the
// deadline would refuse.
func TestFullSlotsDoNotHideAPauseQueueOrDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		paused := false
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			if paused {
				return reply(r, http.StatusTooManyRequests, "Retry-After", "600"), nil
			}
			return reply(r, http.StatusOK), nil
		})
		rt := throttle.New(base, throttle.WithPolicy(throttle.Policy{Rate: 1, Queue: 1, MaxInFlight: 1}))
		defer rt.Close()
		resp, err := rt.RoundTrip(newReq(t, context.Background(), http.MethodGet, "http://h.test/0"))
		require.NoError(t, err) // its open body holds the only slot

		// Queue: one waits for the slot, the next four are refused at once.
		errs := make(chan error, 5)
		for range 5 {
			go func() { errs <- do(t, rt, "http://h.test/q") }()
		}
		synctest.Wait()
		for range 4 {
			require.ErrorIs(t, <-errs, throttle.ErrQueueFull)
		}
		// Deadline: the slot's wait is unknown, the pacer's is not (1s).
		ctx, cancel := context.WithTimeout(context.Background(), ms(500))
		defer cancel()
		start := time.Now()
		require.ErrorIs(t, doCtx(t, ctx, rt, "http://h.test/d"), throttle.ErrQueueFull) // the queue is still full
		assert.Zero(t, time.Since(start))
		resp.Body.Close()
		require.NoError(t, <-errs, "the waiter got the slot once the body was closed")

		// Pause: longer than MaxRetryAfter, refused at once with a slot held.
		paused = true
		resp, err = rt.RoundTrip(newReq(t, context.Background(), http.MethodGet, "http://h.test/p"))
		require.NoError(t, err)
		defer resp.Body.Close()
		assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
		start = time.Now()
		require.ErrorIs(t, do(t, rt, "http://h.test/after"), throttle.ErrPaused)
		assert.Zero(t, time.Since(start))
	})
}

func TestThrottledRetryProbesFirstWithMaxInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(ms(500), func(r *http.Request, n int) *http.Response {
			if r.URL.Path == "/a" && n == 1 {
				return reply(r, http.StatusTooManyRequests, "Retry-After", "1")
			}
			return reply(r, http.StatusOK)
		})
		rt := throttle.New(s, throttle.WithPolicy(throttle.Policy{MaxInFlight: 1}))
		defer rt.Close()
		var wg sync.WaitGroup
		wg.Go(func() { assert.NoError(t, do(t, rt, "http://h.test/a")) })
		time.Sleep(ms(200))
		wg.Go(func() { assert.NoError(t, do(t, rt, "http://h.test/b")) })
		wg.Wait()
		// /a's 429 arrives at 0.5s: paused until 1.5s. Its retry came first.
		assert.Equal(t, []attempt{{0, "/a"}, {ms(1500), "/a"}, {ms(2000), "/b"}}, s.attempts())
	})
}

func TestProbeAgainAfterPauseGrewWhileProbeWasOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(0, nil)
		s.answer = func(r *http.Request, n int) *http.Response {
			switch {
			case r.URL.Path == "/c" && n == 1:
				time.Sleep(ms(1500)) // on the wire when the pause began
				return reply(r, http.StatusTooManyRequests, "Retry-After", "10")
			case r.URL.Path == "/a" && n <= 2: // its retry is the probe at 1s
				if n == 2 {
					time.Sleep(time.Second)
				}
				return reply(r, http.StatusTooManyRequests, "Retry-After", "1")
			}
			time.Sleep(ms(100))
			return reply(r, http.StatusOK)
		}
		rt := throttle.New(s)
		defer rt.Close()
		var wg sync.WaitGroup
		wg.Go(func() { _ = do(t, rt, "http://h.test/c") })
		synctest.Wait()
		wg.Go(func() { _ = do(t, rt, "http://h.test/a") })
		time.Sleep(ms(500))
		for range 5 {
			wg.Go(func() { _ = do(t, rt, "http://h.test/w") })
		}
		wg.Wait()
		// The pause grew to 11.5s while the probe was out; after it, one
		// request probes alone, and the rest follow its answer.
		together := 0
		for _, a := range s.attempts() {
			if a.at == ms(11500) {
				together++
			}
		}
		assert.Equal(t, 1, together, "%v", s.attempts())
	})
}

func TestCancelledContextTakesNoTokenOrWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			if err := r.Context().Err(); err != nil {
				return nil, err // as http.Transport does
			}
			return reply(r, http.StatusOK), nil
		})
		rt := throttle.New(base, throttle.WithPolicy(throttle.Policy{Windows: []throttle.Window{{N: 1, Per: time.Hour}}}))
		defer rt.Close()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		require.ErrorIs(t, doCtx(t, ctx, rt, "http://h.test/1"), context.Canceled)
		ctx2, cancel2 := context.WithTimeout(context.Background(), time.Minute)
		defer cancel2()
		require.NoError(t, doCtx(t, ctx2, rt, "http://h.test/2"), "the window's one entry is still free")
		assert.EqualValues(t, 1, rt.Stats().Total.Attempts)
	})
}

func TestBasePanicLeavesTheKeyUsable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		first := true
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			if first {
				first = false
				panic("base broke")
			}
			return reply(r, http.StatusOK), nil
		})
		rt := throttle.New(base, throttle.WithPolicy(throttle.Policy{MaxInFlight: 1}))
		defer rt.Close()
		assert.PanicsWithValue(t, "base broke", func() { _ = do(t, rt, "http://h.test/") })
		require.NoError(t, do(t, rt, "http://h.test/"), "the slot came back")
		assert.Zero(t, rt.Stats().Keys["h.test"].InFlight)
	})
}

func TestRetryAfterZeroStillBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(0, func(r *http.Request, n int) *http.Response {
			return reply(r, http.StatusTooManyRequests, "Retry-After", "0")
		})
		rt := throttle.New(s, throttle.WithRetry(throttle.Retry{MaxAttempts: 4, InitialDelay: time.Second}))
		defer rt.Close()
		code, err := status(t, rt, http.MethodGet, "http://h.test/")
		require.NoError(t, err)
		assert.Equal(t, http.StatusTooManyRequests, code)
		ts := s.times("")
		require.Len(t, ts, 4)
		// Full jitter: each wait in [0, 1s·2^k]; not all of them zero.
		assert.Positive(t, ts[3], "Retry-After 0 does not make retries immediate")
		for i := 1; i < 4; i++ {
			assert.LessOrEqual(t, ts[i]-ts[i-1], time.Second<<(i-1))
		}
	})
}

func TestKeyWhoseBasePanickedIsStillSwept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			if r.URL.Host == "panic.test" {
				panic("boom")
			}
			return reply(r, http.StatusOK), nil
		})
		rt := throttle.New(base)
		defer rt.Close()
		assert.Panics(t, func() { _ = do(t, rt, "http://panic.test/") })
		for i := range 5000 { // enough new keys for sweeps
			require.NoError(t, do(t, rt, fmt.Sprintf("http://k%d.test/", i)))
		}
		keys := rt.Stats().Keys
		assert.NotContains(t, keys, "panic.test", "its reference was given back")
		assert.EqualValues(t, 5001, rt.Stats().Total.Requests)
	})
}

func TestFailingServerDoesNotRaiseThePace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		throttled := true
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			if throttled {
				throttled = false
				return reply(r, http.StatusTooManyRequests, "Retry-After", "1"), nil
			}
			return reply(r, http.StatusInternalServerError), nil
		})
		rt := throttle.New(base, throttle.WithPolicy(throttle.Policy{Rate: 10, Burst: 1}),
			throttle.WithRetry(throttle.Retry{MaxAttempts: 2}))
		defer rt.Close()
		_, _ = status(t, rt, http.MethodGet, "http://f.test/") // 429, then a 500: slowed to 8/s
		for range 5 {
			time.Sleep(time.Minute)
			_, _ = status(t, rt, http.MethodGet, "http://f.test/")
		}
		assert.EqualValues(t, 8, rt.Stats().Keys["f.test"].Rate, "500s are no sign that the pace may rise")
	})
}

// A panic in user code (an events callback, GetBody) must not lose the
// in-flight slot of the response in hand: the key goes on.
func TestPanickingUserCodeKeepsTheSlot(t *testing.T) {
	for _, tt := range []struct {
		name   string
		kind   throttle.EventKind
		status int
	}{
		{"throttled event", throttle.EventThrottled, http.StatusTooManyRequests},
		{"paused event", throttle.EventPaused, http.StatusTooManyRequests},
		{"gave-up event", throttle.EventGaveUp, http.StatusTooManyRequests},
		{"GetBody", 0, http.StatusServiceUnavailable},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				first := true
				base := rtFunc(func(r *http.Request) (*http.Response, error) {
					if r.Body != nil {
						r.Body.Close()
					}
					if first {
						first = false
						return reply(r, tt.status, "Retry-After", "1"), nil
					}
					return reply(r, http.StatusOK), nil
				})
				rt := throttle.New(base,
					throttle.WithPolicy(throttle.Policy{MaxInFlight: 1}),
					throttle.WithRetry(throttle.Retry{MaxAttempts: 1 + btoi(tt.kind != throttle.EventGaveUp)}),
					throttle.WithEvents(func(e throttle.Event) {
						if tt.kind != 0 && e.Kind == tt.kind {
							panic("user code")
						}
					}))
				defer rt.Close()
				req := newReq(t, context.Background(), http.MethodPut, "http://u.test/")
				req.Body = io.NopCloser(strings.NewReader("x"))
				req.GetBody = func() (io.ReadCloser, error) {
					if tt.kind == 0 {
						panic("user code")
					}
					return io.NopCloser(strings.NewReader("x")), nil
				}
				assert.PanicsWithValue(t, "user code", func() { _, _ = rt.RoundTrip(req) })
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				require.NoError(t, doCtx(t, ctx, rt, "http://u.test/after"), "the slot was given back")
			})
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// A Retry-After too large for a time.Duration (seconds or a year-9999 date)
// saturates the pause; on a key whose window is full, the window's time
// arithmetic overflowed and let a request through during the pause
// (issue 8, point 1; found again in review).
func TestSaturatedPauseHoldsKeysWithWindows(t *testing.T) {
	for _, ra := range []string{"9300000000", "Fri, 31 Dec 9999 23:59:59 GMT"} {
		t.Run(ra, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var sent atomic.Int64
				base := rtFunc(func(r *http.Request) (*http.Response, error) {
					if sent.Add(1) == 1 {
						return reply(r, http.StatusTooManyRequests, "Retry-After", ra), nil
					}
					return reply(r, http.StatusOK), nil
				})
				rt := throttle.New(base, throttle.WithPolicy(throttle.Policy{Windows: []throttle.Window{{N: 1, Per: time.Second}}}))
				defer rt.Close()
				time.Sleep(time.Second) // the pause begins after the transport's epoch
				code, err := status(t, rt, http.MethodGet, "http://s.test/")
				require.NoError(t, err)
				require.Equal(t, http.StatusTooManyRequests, code, "longer than MaxRetryAfter: given up")
				time.Sleep(2 * time.Second) // the window's entry has expired
				require.ErrorIs(t, do(t, rt, "http://s.test/"), throttle.ErrPaused)
				assert.EqualValues(t, 1, sent.Load(), "nothing sent during the pause")
			})
		})
	}
}

// A 2xx saying nothing remains until a reset too far for a time.Duration
// (seconds, milliseconds or a date centuries off: ParseQuota saturates it)
// holds the key as one just short of that does: the next request fails at
// once with ErrPaused, whether the answer came at the transport's first
// instant or later (regression, found in review: the reset's sum wrapped
// around, and the next request was sent; at the first instant it waited
// for an answer that never came, for ever without a deadline).
func TestSaturatedResetOnASuccessHoldsTheKey(t *testing.T) {
	for _, reset := range []string{"2562047h", "99999999999999999999", "9999999999999ms"} {
		for _, after := range []time.Duration{0, time.Second} {
			t.Run(fmt.Sprint(reset, "/after=", after), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					var sent atomic.Int64
					rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
						sent.Add(1)
						return reply(r, http.StatusOK, "X-RateLimit-Limit", "10", "X-RateLimit-Remaining", "0",
							"X-RateLimit-Reset", reset), nil
					}))
					defer rt.Close()
					time.Sleep(after)
					require.NoError(t, do(t, rt, "http://s.test/"))
					ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
					defer cancel()
					start := time.Now()
					require.ErrorIs(t, doCtx(t, ctx, rt, "http://s.test/"), throttle.ErrPaused)
					assert.Zero(t, time.Since(start), "at once")
					assert.EqualValues(t, 1, sent.Load(), "nothing sent until the reset")
				})
			})
		}
	}
}

// A window cut below N must not overwrite an entry that still counts (an
// answer that came late): once N climbs back, that request would be
// forgotten and the server would see more than N in one Per.
func TestCutWindowNeverForgetsAnEntryThatCounts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var mu sync.Mutex
		var arrivals []time.Duration // when the server counted each request
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			if r.URL.Path == "/hang" {
				time.Sleep(35 * time.Second) // reaches the server at 35s
			}
			mu.Lock()
			arrivals = append(arrivals, time.Since(start))
			n := len(arrivals)
			mu.Unlock()
			if r.URL.Path == "/x" && n == 1 {
				return reply(r, http.StatusTooManyRequests, "Retry-After", "1"), nil
			}
			return reply(r, http.StatusOK), nil
		})
		rt := throttle.New(base, throttle.WithPolicy(throttle.Policy{Windows: []throttle.Window{{N: 2, Per: time.Second}}}))
		defer rt.Close()
		var wg sync.WaitGroup
		wg.Go(func() { assert.NoError(t, do(t, rt, "http://w.test/hang")) })
		synctest.Wait()
		require.NoError(t, do(t, rt, "http://w.test/x")) // 429: the window is cut to 1
		for time.Since(start) < 34*time.Second {
			require.NoError(t, do(t, rt, "http://w.test/seq")) // quiet: N climbs back to 2
		}
		time.Sleep(time.Second)
		for range 2 {
			wg.Go(func() { assert.NoError(t, do(t, rt, "http://w.test/late")) })
		}
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		assertWindow(t, arrivals, 2, time.Second)
	})
}

// In an outage whose Retry-After is longer than the minute after which the
// record of answers is forgotten, each failed probe still extends the
// pause: one request per Retry-After reaches the server.
func TestLongOutageStillProbesOnePerRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var mu sync.Mutex
		var at []time.Duration
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			at = append(at, time.Since(start))
			mu.Unlock()
			return reply(r, http.StatusServiceUnavailable, "Retry-After", "120"), nil
		})
		rt := throttle.New(base)
		defer rt.Close()
		for range 5 {
			_, err := status(t, rt, http.MethodPost, "http://o.test/") // POSTs: never retried
			require.NoError(t, err)
		}
		require.EqualValues(t, 1, rt.Stats().Keys["o.test"].Outages)
		time.Sleep(121 * time.Second)
		for range 4 {
			_, err := status(t, rt, http.MethodPost, "http://o.test/")
			require.NoError(t, err)
		}
		mu.Lock()
		defer mu.Unlock()
		require.Len(t, at, 9)
		for i := 6; i < len(at); i++ {
			assert.GreaterOrEqual(t, at[i]-at[i-1], 120*time.Second, "probe %d: one per Retry-After", i)
		}
	})
}

// 503s among the answers (no outage) are not evidence that the quota is
// lower: a single 429 must not cut the pace's ceiling because of them.
func TestUnavailableAnswersDoNotProveTheQuotaLower(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var n atomic.Int64
		var refused atomic.Bool
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			if time.Since(start) >= 5*time.Second && refused.CompareAndSwap(false, true) {
				return reply(r, http.StatusTooManyRequests, "Retry-After", "1"), nil
			}
			if n.Add(1)%3 == 0 {
				return reply(r, http.StatusServiceUnavailable), nil
			}
			return reply(r, http.StatusOK), nil
		})
		rt := throttle.New(base, throttle.WithPolicy(throttle.Policy{Rate: 10, Burst: 1}))
		defer rt.Close()
		for time.Since(start) < 25*time.Second {
			_, err := status(t, rt, http.MethodPost, "http://u.test/")
			require.NoError(t, err)
		}
		assert.EqualValues(t, 10, rt.Stats().Keys["u.test"].Rate, "back at the configured rate")
	})
}

// A base RoundTripper that returns neither a response nor an error breaks
// its contract; the transport turns it into an error instead of panicking
// with the key's state half updated.
func TestNilResponseNilErrorFromBase(t *testing.T) {
	rt := throttle.New(rtFunc(func(*http.Request) (*http.Response, error) { return nil, nil }))
	defer rt.Close()
	require.Error(t, do(t, rt, "http://n.test/"))
	require.Error(t, do(t, rt, "http://n.test/"), "the key still works")
	assert.Zero(t, rt.Stats().Keys["n.test"].InFlight)
}

// A base RoundTripper that returns both a response and an error breaks its
// contract too: the error stands, as net/http's Client has it, and the
// response's body is closed, which gives back its in-flight slot
// (regression, found in review 45: both went to the caller, and under
// MaxInFlight the body the Client drops unclosed held the slot for ever).
func TestResponseAndErrorFromBase(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var bodies []*closeCounter
		rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
			resp := reply(r, http.StatusOK)
			b := &closeCounter{Reader: strings.NewReader("x")}
			bodies = append(bodies, b)
			resp.Body = b
			return resp, errors.New("both")
		}), throttle.WithPolicy(throttle.Policy{MaxInFlight: 1}))
		defer rt.Close()
		for range 2 {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			resp, err := rt.RoundTrip(newReq(t, ctx, http.MethodGet, "http://b.test/"))
			cancel()
			assert.Nil(t, resp)
			require.ErrorContains(t, err, "both", "the base's error, not a wait for the slot")
		}
		require.Len(t, bodies, 2)
		for _, b := range bodies {
			assert.Equal(t, 1, b.closed)
		}
		assert.Zero(t, rt.Stats().Keys["b.test"].Slots)
	})
}

// A WithKey function that panics still has the request's body closed, as
// RoundTrip always does, and takes nothing of any key.
func TestPanickingKeyFunctionClosesTheBody(t *testing.T) {
	rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) { return reply(r, http.StatusOK), nil }),
		throttle.WithKey(func(r *http.Request) string {
			if r.URL.Path == "/panic" {
				panic("user code")
			}
			return "k"
		}))
	defer rt.Close()
	body := &closeCounter{Reader: strings.NewReader("x")}
	req := newReq(t, context.Background(), http.MethodPut, "http://k.test/panic")
	req.Body = body
	assert.PanicsWithValue(t, "user code", func() { _, _ = rt.RoundTrip(req) })
	assert.Equal(t, 1, body.closed)
	assert.Empty(t, rt.Stats().Keys)
}

// A request refused at once (its context already ended) has its body
// closed once, though the events function panics on its EventRefused
// (regression, found in review: RoundTrip's clean-up after the panic closed
// it a second time).
func TestPanickingRefusedEventClosesTheBodyOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) { return reply(r, http.StatusOK), nil }),
			throttle.WithEvents(func(e throttle.Event) {
				if e.Kind == throttle.EventRefused {
					panic("user code")
				}
			}))
		defer rt.Close()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		body := &closeCounter{Reader: strings.NewReader("x")}
		req := newReq(t, ctx, http.MethodPut, "http://r.test/")
		req.Body = body
		assert.PanicsWithValue(t, "user code", func() { _, _ = rt.RoundTrip(req) })
		assert.Equal(t, 1, body.closed, "closed once")
	})
}

type closeCounter struct {
	io.Reader
	closed int
}

func (c *closeCounter) Close() error { c.closed++; return nil }

// A retry whose delay ran out before its wait began (here: an event
// callback slower than the backoff) goes at once. It used to wait forever: a
// negative wait meant "until woken", and nothing woke it.
func TestRetryWhoseDelayAlreadyPassedGoesAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int64
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			if n.Add(1) == 1 {
				return reply(r, http.StatusServiceUnavailable, "Retry-After", "0"), nil
			}
			return reply(r, http.StatusOK), nil
		})
		rt := throttle.New(base,
			throttle.WithRetry(throttle.Retry{InitialDelay: time.Millisecond, MaxDelay: time.Millisecond}),
			throttle.WithEvents(func(e throttle.Event) {
				if e.Kind == throttle.EventRetry {
					time.Sleep(10 * time.Millisecond) // longer than the backoff
				}
			}))
		defer rt.Close()
		start := time.Now()
		require.NoError(t, do(t, rt, "http://s.test/"))
		assert.EqualValues(t, 2, n.Load())
		assert.Equal(t, 10*time.Millisecond, time.Since(start))
	})
}

// An events function that panics on an attempt's EventWaited, sent after
// the attempt was admitted and before it went, leaves the key as it was:
// the attempt gives back its in-flight slot and its window entry, and the
// request's body is closed (regression, found in review: the slot and the
// entry were held for ever, so that the key sent nothing again, and the
// body was left open).
func TestPanickingWaitedEventLeavesTheKeyInOrder(t *testing.T) {
	for _, tt := range []struct {
		name string
		pol  throttle.Policy
	}{
		{"in-flight cap", throttle.Policy{MaxInFlight: 1}},
		{"window", throttle.Policy{Windows: []throttle.Window{{N: 1, Per: time.Second}}}},
		{"bucket", throttle.Policy{Rate: 1, Burst: 1}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var sent atomic.Int64
				var panicky atomic.Bool
				rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
					sent.Add(1)
					return reply(r, http.StatusOK), nil
				}), throttle.WithPolicy(tt.pol), throttle.WithEvents(func(e throttle.Event) {
					if e.Kind == throttle.EventWaited && panicky.Load() {
						panic("user code")
					}
				}))
				defer rt.Close()
				// The first holds the slot (its body open), or spends the
				// window or the bucket: the second waits, then its
				// EventWaited panics.
				first, err := rt.RoundTrip(newReq(t, context.Background(), http.MethodGet, "http://w.test/"))
				require.NoError(t, err)
				panicky.Store(true)
				body := &closeCounter{Reader: strings.NewReader("x")}
				req := newReq(t, context.Background(), http.MethodPut, "http://w.test/")
				req.Body = body
				done := make(chan any)
				go func() {
					defer func() { done <- recover() }()
					_, _ = rt.RoundTrip(req)
				}()
				synctest.Wait()
				time.Sleep(2 * time.Second) // the window and the bucket give back
				first.Body.Close()          // the slot goes back
				assert.Equal(t, "user code", <-done)
				panicky.Store(false)
				assert.Equal(t, 1, body.closed, "the body of the request that never went")
				assert.EqualValues(t, 1, sent.Load(), "the attempt whose event panicked never went")
				assert.EqualValues(t, 1, rt.Stats().Total.Attempts, "nor is it counted as sent")
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				require.NoError(t, doCtx(t, ctx, rt, "http://w.test/after"), "the key still sends")
				assert.Zero(t, rt.Stats().Keys["w.test"].InFlight)
			})
		})
	}
}

// The same attempt gives back its pacer's token, and its units: the next
// request goes at the turn the panicking one had (regression, found in
// review 45: it waited a whole turn more, and Stats.Units counted the
// attempt that never went).
func TestPanickingWaitedEventGivesBackItsToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		var panicky atomic.Bool
		rt := throttle.New(rec, throttle.WithPolicy(throttle.Policy{Rate: 1, Burst: 2}), // a bucket of 1
			throttle.WithEvents(func(e throttle.Event) {
				if e.Kind == throttle.EventWaited && panicky.Load() {
					panic("user code")
				}
			}))
		defer rt.Close()
		require.NoError(t, do(t, rt, "http://k.test/")) // at 0: the bucket is spent
		panicky.Store(true)
		assert.Panics(t, func() { _ = do(t, rt, "http://k.test/") }) // admitted at 1 s, never sent
		panicky.Store(false)
		require.NoError(t, do(t, rt, "http://k.test/"))
		assert.Equal(t, []time.Duration{0, time.Second}, rec.times(), "the token of the attempt never sent is the next one's")
		st := rt.Stats().Keys["k.test"]
		assert.EqualValues(t, 2, st.Attempts)
		assert.EqualValues(t, 2, st.Units, "units charged: only the attempts sent")
	})
}

// And its window entry: the next request goes at the turn the panicking one
// had, 1 s, under a window of 1 a second (regression, found in review: the
// entry counted in the window from the panic, as one sent, and the next
// request went at 2 s).
func TestPanickingWaitedEventGivesBackItsWindowEntry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		var panicky atomic.Bool
		rt := throttle.New(rec, throttle.WithPolicy(throttle.Policy{Windows: []throttle.Window{{N: 1, Per: time.Second}}}),
			throttle.WithEvents(func(e throttle.Event) {
				if e.Kind == throttle.EventWaited && panicky.Load() {
					panic("user code")
				}
			}))
		defer rt.Close()
		require.NoError(t, do(t, rt, "http://w.test/")) // at 0: the window is spent until 1 s
		panicky.Store(true)
		assert.Panics(t, func() { _ = do(t, rt, "http://w.test/") }) // admitted at 1 s, never sent
		panicky.Store(false)
		require.NoError(t, do(t, rt, "http://w.test/"))
		assert.Equal(t, []time.Duration{0, time.Second}, rec.times(), "the window entry of the attempt never sent is the next one's")
	})
}

// timeoutErr is a network timeout, as net.Error gives one.
type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

// A request that an http.Client's Timeout ends in a throttle wait, and one
// whose every attempt timed out on the network, are timeouts for
// os.IsTimeout and url.Error, as net/http's own are (regression, found in
// review: WaitError said nothing of it, and the base's timeout was wrapped
// by fmt.Errorf once retried or given up on).
func TestTimeoutsStayTimeouts(t *testing.T) {
	t.Run("client-timeout", func(t *testing.T) { synctest.Test(t, clientTimeoutInAWait) })
	for _, attempts := range []int{1, 3} {
		t.Run(fmt.Sprint("attempts=", attempts), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rt := throttle.New(rtFunc(func(*http.Request) (*http.Response, error) { return nil, timeoutErr{} }),
					throttle.WithRetry(throttle.Retry{MaxAttempts: attempts}))
				defer rt.Close()
				_, err := (&http.Client{Transport: rt}).Get("http://t.test/")
				require.Error(t, err)
				assert.True(t, os.IsTimeout(err), "the base's timeout, after %d attempts: %v", attempts, err)
				assert.ErrorIs(t, err, timeoutErr{})
			})
		})
	}
}

// clientTimeoutInAWait: an http.Client's Timeout ends a request in a
// throttle wait: a timeout.
func clientTimeoutInAWait(t *testing.T) {
	{
		rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) { return reply(r, http.StatusOK), nil }),
			throttle.WithPolicy(throttle.Policy{Rate: 1, Burst: 1}))
		defer rt.Close()
		client := &http.Client{Transport: rt, Timeout: 100 * time.Millisecond}
		resp, err := client.Get("http://t.test/first")
		require.NoError(t, err)
		resp.Body.Close()
		_, err = client.Get("http://t.test/second") // its turn is a second away
		require.ErrorIs(t, err, throttle.ErrWouldExceedDeadline)
		assert.True(t, os.IsTimeout(err), "a wait past the client's timeout: %v", err)
		var ue *url.Error
		require.ErrorAs(t, err, &ue)
		assert.True(t, ue.Timeout())
	}
}

// conn is the body of a 101 Switching Protocols answer: the connection,
// which writes too, and closes its write side alone.
type conn struct {
	io.Reader
	wrote      strings.Builder
	halfClosed bool
}

func (c *conn) Write(p []byte) (int, error) { return c.wrote.Write(p) }
func (c *conn) Close() error                { return nil }
func (c *conn) CloseWrite() error           { c.halfClosed = true; return nil }

// Under MaxInFlight, the body of a 101 Switching Protocols answer still
// writes and closes its write side alone (httputil.ReverseProxy tunnels
// with them), and holds its slot until it is closed (regression, found in
// review: CloseWrite was lost, and ReverseProxy closed the whole tunnel
// when the client half-closed, losing the backend's answer).
func TestSwitchingProtocolsBodyKeepsItsConnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &conn{Reader: strings.NewReader("")}
		rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
			resp := reply(r, http.StatusSwitchingProtocols)
			resp.Body = c
			return resp, nil
		}), throttle.WithPolicy(throttle.Policy{MaxInFlight: 1}))
		defer rt.Close()
		resp, err := rt.RoundTrip(newReq(t, context.Background(), http.MethodGet, "http://ws.test/"))
		require.NoError(t, err)
		rwc, ok := resp.Body.(io.ReadWriteCloser)
		require.True(t, ok, "the body writes")
		_, err = rwc.Write([]byte("hello"))
		require.NoError(t, err)
		assert.Equal(t, "hello", c.wrote.String())
		cw, ok := resp.Body.(interface{ CloseWrite() error })
		require.True(t, ok, "the body closes its write side alone")
		require.NoError(t, cw.CloseWrite())
		assert.True(t, c.halfClosed)
		assert.Equal(t, 1, rt.Stats().Keys["ws.test"].Slots, "the tunnel holds its slot")
		require.NoError(t, resp.Body.Close())
		assert.Zero(t, rt.Stats().Keys["ws.test"].Slots)
	})
}

// panicBody is a response body whose Close panics.
type panicBody struct{ io.Reader }

func (panicBody) Close() error { panic("body close") }

// A response body whose Close panics, the caller recovering, gives its
// MaxInFlight slot back. Regression, found in review: the slot was given
// back after the base's Close returned, and the key stayed at its cap for
// good: every later request waited out its deadline ("in-flight: context
// deadline exceeded", Slots 1).
func TestABodyWhoseClosePanicsGivesItsSlotBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := 0
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			n++
			resp := reply(r, http.StatusOK)
			if n == 1 {
				resp.Body = panicBody{strings.NewReader("x")}
			}
			return resp, nil
		})
		rt := throttle.New(base, throttle.WithPolicy(throttle.Policy{MaxInFlight: 1}))
		defer rt.Close()
		resp, err := rt.RoundTrip(newReq(t, context.Background(), http.MethodGet, "http://api.example.com/"))
		require.NoError(t, err)
		assert.Panics(t, func() { resp.Body.Close() })

		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		assert.NoError(t, doCtx(t, ctx, rt, "http://api.example.com/"), "the slot is still held: Slots %d",
			rt.Stats().Keys["api.example.com"].Slots)
	})
}

// A 503 whose body panics when the transport closes it to retry: the
// panic reaches the caller, and RoundTrip's tidy closes that body again,
// which panics inside the deferred recovery: the request is never let go
// of (Stats.Requests misses it, its key is held for ever and never swept)
// and the retry budget it spent is not given back.
func TestABodyWhoseClosePanicsOnARetryIsCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := 0
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			n++
			resp := reply(r, http.StatusServiceUnavailable)
			if n == 1 {
				resp.Body = panicBody{strings.NewReader("x")}
			}
			return resp, nil
		})
		rt := throttle.New(base)
		defer rt.Close()
		assert.Panics(t, func() { _ = do(t, rt, "http://b.test/") })
		assert.EqualValues(t, 1, rt.Stats().Total.Requests, "the request is counted")
	})
}

// A hook that panics while an answer is in hand, whose body's Close
// panics too: RoundTrip's recovery closes that body, and its second panic
// must not keep the request uncounted, its key held (found in review).
func TestAHookAndABodyThatBothPanicLeaveTheRequestCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			resp := reply(r, http.StatusOK)
			resp.Body = panicBody{strings.NewReader("x")}
			return resp, nil
		})
		rt := throttle.New(base, throttle.WithEvents(func(e throttle.Event) {
			if e.Kind == throttle.EventAnswered {
				panic("hook")
			}
		}))
		defer rt.Close()
		assert.PanicsWithValue(t, "hook", func() { _ = do(t, rt, "http://b.test/") }, "the first panic goes on")
		st := rt.Stats()
		assert.EqualValues(t, 1, st.Total.Requests, "the request is counted")
		assert.EqualValues(t, 0, st.Total.InFlight)
	})
}

// slowPanicBody is a response body that takes 200 ms to read and whose
// Close panics.
type slowPanicBody struct{}

func (slowPanicBody) Read([]byte) (int, error) {
	time.Sleep(200 * time.Millisecond)
	return 0, io.EOF
}

func (slowPanicBody) Close() error { panic("body close") }

// A retried 503 whose body is still being read when the drain's time is up
// is closed by a timer, on its own goroutine: a Close that panics there
// must not end the process; the request goes on to its retry (regression,
// found in review: the panic had no caller to reach, and crashed it).
func TestABodyWhoseClosePanicsAfterTheDrainsTimeDoesNotCrash(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := 0
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			n++
			if n == 1 {
				resp := reply(r, http.StatusServiceUnavailable)
				resp.Body = slowPanicBody{}
				return resp, nil
			}
			return reply(r, http.StatusOK), nil
		})
		rt := throttle.New(base)
		defer rt.Close()
		require.NoError(t, do(t, rt, "http://b.test/"))
		assert.Equal(t, 2, n, "retried")
	})
}
