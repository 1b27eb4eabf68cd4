package throttle_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlehttp/throttle"
)

// seen is what a fake server saw of each attempt.
type seen struct {
	at     time.Duration
	token  string
	body   string
	method string
}

// answering returns a base that answers attempt n (from 1) with
// statuses[n-1] (200 past the end), and what it saw.
func answering(statuses ...int) (rtFunc, func() []seen) {
	var mu sync.Mutex
	var log []seen
	start := time.Now()
	return func(req *http.Request) (*http.Response, error) {
			var body []byte
			if req.Body != nil {
				body, _ = io.ReadAll(req.Body)
				req.Body.Close()
			}
			mu.Lock()
			defer mu.Unlock()
			log = append(log, seen{time.Since(start), req.Header.Get("Authorization"), string(body), req.Method})
			if n := len(log); n <= len(statuses) {
				return reply(req, statuses[n-1], "Retry-After", "1"), nil
			}
			return reply(req, http.StatusOK), nil
		}, func() []seen {
			mu.Lock()
			defer mu.Unlock()
			return append([]seen(nil), log...)
		}
}

func post(t *testing.T, ctx context.Context, rt http.RoundTripper, body string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://api.test/items", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer old")
	return rt.RoundTrip(req)
}

// Retry.ShouldRetry has the last word: a 500 to a POST is retried when it
// says so (it is told the default, no), a 503 to a GET is not when it says
// so; the retry budget still caps what it allows.
func TestShouldRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base, log := answering(http.StatusInternalServerError)
		var told []bool
		rt := throttle.New(base, throttle.WithRetry(throttle.Retry{
			ShouldRetry: func(resp *http.Response, err error, retry bool) bool {
				told = append(told, retry)
				return retry || resp != nil && resp.StatusCode == http.StatusInternalServerError
			}}))
		resp, err := post(t, context.Background(), rt, "{}")
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Len(t, log(), 2)
		assert.Equal(t, []bool{false, false}, told, "the default for a 500 to a POST, then for the 200")
	})
	synctest.Test(t, func(t *testing.T) {
		base, log := answering(http.StatusServiceUnavailable)
		rt := throttle.New(base, throttle.WithRetry(throttle.Retry{
			ShouldRetry: func(*http.Response, error, bool) bool { return false }}))
		resp, err := rt.RoundTrip(newReq(t, context.Background(), http.MethodGet, "http://api.test/x"))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		assert.Len(t, log(), 1)
	})
	synctest.Test(t, func(t *testing.T) {
		// Every answer a 500; retried as the hook says, until the budget is
		// spent: a floor of 1 a minute and a sliver of share allow 1 (the
		// budget caps; found in review: the sliver let a second go).
		base, log := answering(500, 500, 500, 500, 500, 500, 500, 500)
		var mu sync.Mutex
		var gaveUp []string
		rt := throttle.New(base, throttle.WithRetry(throttle.Retry{Budget: 1e-9, BudgetFloor: 1,
			ShouldRetry: func(*http.Response, error, bool) bool { return true }}),
			throttle.WithEvents(func(e throttle.Event) {
				if e.Kind == throttle.EventGaveUp {
					mu.Lock()
					gaveUp = append(gaveUp, e.Reason)
					mu.Unlock()
				}
			}))
		resp, err := post(t, context.Background(), rt, "{}")
		require.NoError(t, err)
		resp.Body.Close()
		assert.Len(t, log(), 2, "the first attempt and the budget's one retry")
		assert.Equal(t, []string{"the key's retry budget is spent"}, gaveUp)
	})
}

// Retry.Prepare changes each retry's own copy: a new token on every retry,
// the body fresh from GetBody; the caller's request is untouched.
func TestPrepare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base, log := answering(http.StatusTooManyRequests, http.StatusTooManyRequests)
		var attempts []int
		rt := throttle.New(base, throttle.WithRetry(throttle.Retry{
			Prepare: func(req *http.Request, attempt int) error {
				attempts = append(attempts, attempt)
				req.Header.Set("Authorization", "Bearer new")
				return nil
			}}))
		req, err := http.NewRequest(http.MethodPost, "http://api.test/items", strings.NewReader(`{"a":1}`))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer old")
		resp, err := rt.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, []int{2, 3}, attempts)
		var tokens, bodies []string
		for _, s := range log() {
			tokens, bodies = append(tokens, s.token), append(bodies, s.body)
		}
		assert.Equal(t, []string{"Bearer old", "Bearer new", "Bearer new"}, tokens)
		assert.Equal(t, []string{`{"a":1}`, `{"a":1}`, `{"a":1}`}, bodies)
		assert.Equal(t, "Bearer old", req.Header.Get("Authorization"), "the caller's request is never modified")
	})
	synctest.Test(t, func(t *testing.T) {
		// An error from Prepare ends retrying with the last answer.
		base, log := answering(http.StatusTooManyRequests)
		var reasons []string
		rt := throttle.New(base, throttle.WithRetry(throttle.Retry{
			Prepare: func(*http.Request, int) error { return errors.New("no token to be had") }}),
			throttle.WithEvents(func(e throttle.Event) {
				if e.Kind == throttle.EventGaveUp {
					reasons = append(reasons, e.Reason)
				}
			}))
		resp, err := post(t, context.Background(), rt, "{}")
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
		assert.Len(t, log(), 1)
		assert.Equal(t, []string{"Retry.Prepare: no token to be had"}, reasons)
	})
}

// Retry.NewBackOff sets the delays, never shorter than Retry-After, and
// backoff.Stop ends retrying.
func TestNewBackOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base, log := answering(http.StatusServiceUnavailable, http.StatusServiceUnavailable, http.StatusServiceUnavailable)
		rt := throttle.New(base, throttle.WithRetry(throttle.Retry{
			NewBackOff: func() backoff.BackOff { return backoff.NewConstantBackOff(3 * time.Second) }}))
		require.NoError(t, do(t, rt, "http://api.test/x"))
		var at []time.Duration
		for _, s := range log() {
			at = append(at, s.at)
		}
		assert.Equal(t, []time.Duration{0, 3 * time.Second, 6 * time.Second, 9 * time.Second}, at)
	})
	synctest.Test(t, func(t *testing.T) {
		// 10 ms asked, 1 s of Retry-After: the server wins.
		base, log := answering(http.StatusServiceUnavailable)
		rt := throttle.New(base, throttle.WithRetry(throttle.Retry{
			NewBackOff: func() backoff.BackOff { return backoff.NewConstantBackOff(10 * time.Millisecond) }}))
		require.NoError(t, do(t, rt, "http://api.test/x"))
		assert.Equal(t, time.Second, log()[1].at)
	})
	synctest.Test(t, func(t *testing.T) {
		base, log := answering(http.StatusServiceUnavailable, http.StatusServiceUnavailable, http.StatusServiceUnavailable)
		rt := throttle.New(base, throttle.WithRetry(throttle.Retry{
			NewBackOff: func() backoff.BackOff {
				return backoff.WithMaxRetries(backoff.NewConstantBackOff(time.Second), 1)
			}}))
		resp, err := rt.RoundTrip(newReq(t, context.Background(), http.MethodGet, "http://api.test/x"))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		assert.Len(t, log(), 2, "one retry, then the backoff said stop")
	})
}

// Retry.NewBackOff's delay is never shorter than what the answer asks,
// and a quota refusal that states no wait asks a second, as Retry's doc
// says: a 429 without Retry-After, and a "Retry-After: 0" to a learned
// pace, which teaches it as none stated, are retried a second later at the
// earliest, as with the default backoff (regression, found in review 46:
// given the stated wait alone, a NewBackOff of 10 ms retried the first
// 10 ms later on a configured pace, the second 125 ms later, the key's
// peek; each took 1 s with the default backoff; an unpaced key's pause
// held the first its second).
func TestNewBackOffWaitsTheSecondARefusalWithoutAWaitAsks(t *testing.T) {
	for _, tt := range []struct {
		name   string
		pol    throttle.Policy
		before int    // requests answered before: the first refused with "Retry-After: 1"
		wait   string // the refusal's Retry-After, if any
	}{
		{"configured, none stated", throttle.Policy{Rate: 100, Burst: 10}, 0, ""},
		{"unpaced, none stated", throttle.Policy{}, 0, ""},
		{"learned, Retry-After: 0", throttle.Policy{}, 20, "0"},
	} {
		for _, own := range []bool{false, true} {
			name := tt.name + "/default"
			if own {
				name = tt.name + "/NewBackOff"
			}
			t.Run(name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					var retry throttle.Retry
					if own {
						retry.NewBackOff = func() backoff.BackOff { return backoff.NewConstantBackOff(10 * time.Millisecond) }
					}
					n := 0
					var at []time.Time // of the attempts of /x
					rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
						n++
						switch {
						case n == 1 && tt.before > 0:
							return reply(r, http.StatusTooManyRequests, "Retry-After", "1"), nil
						case r.URL.Path != "/x":
						case len(at) == 0:
							at = append(at, time.Now())
							if tt.wait == "" {
								return reply(r, http.StatusTooManyRequests), nil
							}
							return reply(r, http.StatusTooManyRequests, "Retry-After", tt.wait), nil
						default:
							at = append(at, time.Now())
						}
						return reply(r, http.StatusOK), nil
					}), throttle.WithPolicy(tt.pol), throttle.WithRetry(retry))
					defer rt.Close()
					for range tt.before {
						require.NoError(t, do(t, rt, "http://nb.test/a"))
					}
					code, err := status(t, rt, http.MethodGet, "http://nb.test/x")
					require.NoError(t, err)
					assert.Equal(t, http.StatusOK, code)
					require.Len(t, at, 2)
					assert.GreaterOrEqual(t, at[1].Sub(at[0]), time.Second, "a refusal that states no wait asks a second")
				})
			})
		}
	}
}

// Hooks that panic leave the key in order: its in-flight slot is given
// back, and a body GetBody made for the retry is closed.
func TestPanickingRetryHooks(t *testing.T) {
	tests := []struct {
		name  string
		retry throttle.Retry
	}{
		{"ShouldRetry", throttle.Retry{ShouldRetry: func(resp *http.Response, _ error, retry bool) bool {
			if resp.StatusCode == http.StatusTooManyRequests {
				panic("hook")
			}
			return retry
		}}},
		{"Prepare", throttle.Retry{Prepare: func(*http.Request, int) error { panic("hook") }}},
		{"NewBackOff", throttle.Retry{NewBackOff: func() backoff.BackOff { panic("hook") }}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base, _ := answering(http.StatusTooManyRequests)
				rt := throttle.New(base, throttle.WithRetry(tc.retry), throttle.WithPolicy(throttle.Policy{MaxInFlight: 1}))
				bodies := &countingBodies{}
				req, err := http.NewRequest(http.MethodPost, "http://api.test/items", strings.NewReader("{}"))
				require.NoError(t, err)
				req.GetBody = bodies.get
				assert.PanicsWithValue(t, "hook", func() { _, _ = rt.RoundTrip(req) })
				assert.Equal(t, bodies.made, bodies.closed, "every body GetBody made is closed")
				st := rt.Stats().Total
				assert.Zero(t, st.Slots, "the slot is given back")
				assert.Zero(t, st.InFlight)
				time.Sleep(2 * time.Second) // past the 429's pause
				assert.NoError(t, do(t, rt, "http://api.test/x"), "the key still works")
			})
		})
	}
}

// countingBodies is a GetBody that counts the bodies it makes and closes.
type countingBodies struct{ made, closed int }

func (c *countingBodies) get() (io.ReadCloser, error) {
	c.made++
	return &countedBody{Reader: strings.NewReader("{}"), c: c}, nil
}

type countedBody struct {
	io.Reader
	c *countingBodies
}

func (b *countedBody) Close() error { b.c.closed++; return nil }

// Per-request options through the context: NoRetry sends once (a 429
// still pauses the key); PartitionKey puts the request in another key's
// line; an option no Transport can honour fails the request at once.
func TestRequestOptions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base, log := answering(http.StatusTooManyRequests)
		rt := throttle.New(base)
		ctx := throttle.With(context.Background(), throttle.NoRetry())
		resp, err := rt.RoundTrip(newReq(t, ctx, http.MethodGet, "http://api.test/x"))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
		assert.Len(t, log(), 1, "not retried")
		require.NoError(t, do(t, rt, "http://api.test/x"))
		assert.Equal(t, time.Second, log()[1].at, "the key paused for the Retry-After all the same")
	})
	synctest.Test(t, func(t *testing.T) {
		base := newRecorder()
		rt := throttle.New(base, throttle.WithPolicy(throttle.Policy{Rate: 1, Burst: 1}))
		for _, key := range []string{"tenant-a", "tenant-b", "tenant-a"} {
			ctx := throttle.With(context.Background(), throttle.PartitionKey(key))
			require.NoError(t, doCtx(t, ctx, rt, "http://api.test/x"))
		}
		assert.Equal(t, []time.Duration{0, 0, time.Second}, base.times(), "two keys, one bucket each")
		_, ok := rt.Stats().Keys["tenant-b"]
		assert.True(t, ok)
	})
	synctest.Test(t, func(t *testing.T) {
		base := newRecorder()
		rt := throttle.New(base)
		for _, opt := range []throttle.RequestOption{throttle.PartitionKey(""), {}} {
			ctx := throttle.With(throttle.With(context.Background(), throttle.NoRetry()), opt)
			bodies := &countingBodies{}
			body, _ := bodies.get()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://api.test/x", body)
			require.NoError(t, err)
			_, err = rt.RoundTrip(req)
			assert.ErrorIs(t, err, throttle.ErrInvalidRequestOption)
			assert.Equal(t, 1, bodies.closed, "the body is closed")
		}
		assert.Empty(t, base.times(), "nothing sent")
	})
}

// A retry that Retry.ShouldRetry makes of an answer with no signal of its
// own (a 500, a 408, a 425) waits its Retry-After, and is not made when
// that is longer than MaxRetryAfter: the 500 is returned at once
// (regression, found in review: the Retry-After of such answers was not
// read, and they were retried after a backoff of 100-200 ms).
func TestShouldRetryHonoursRetryAfter(t *testing.T) {
	for _, code := range []int{http.StatusInternalServerError, http.StatusRequestTimeout, http.StatusTooEarly} {
		for _, ra := range []string{"10", "3600"} {
			t.Run(fmt.Sprint(code, "/Retry-After=", ra), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					var times []time.Duration
					start := time.Now()
					rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
						times = append(times, time.Since(start))
						if len(times) == 1 {
							return reply(r, code, "Retry-After", ra), nil
						}
						return reply(r, http.StatusOK), nil
					}), throttle.WithRetry(throttle.Retry{MaxRetryAfter: time.Minute,
						ShouldRetry: func(resp *http.Response, _ error, retry bool) bool {
							return retry || resp != nil && resp.StatusCode == code
						}}))
					defer rt.Close()
					resp, err := rt.RoundTrip(newReq(t, context.Background(), http.MethodGet, "http://s.test/"))
					require.NoError(t, err)
					resp.Body.Close()
					if ra == "3600" {
						assert.Equal(t, code, resp.StatusCode, "longer than MaxRetryAfter: not retried")
						assert.Len(t, times, 1)
						return
					}
					assert.Equal(t, http.StatusOK, resp.StatusCode)
					require.Len(t, times, 2)
					assert.GreaterOrEqual(t, times[1]-times[0], 10*time.Second, "the retry waits its Retry-After")
				})
			})
		}
	}
}

// closeCount is a request body that counts its closes.
type closeCount struct {
	io.Reader
	closed *atomic.Int32
}

func (b closeCount) Close() error { b.closed.Add(1); return nil }

// A Prepare that replaces the body (to sign it anew) may read from the one
// GetBody made, while the base sends: that one is closed with the new one,
// by the base; one Prepare drops is closed at once (found in review: it
// was never closed, a file's descriptor per retry); so is the body of a
// retry Prepare fails (it was not either).
func TestPrepareThatReplacesTheBodyClosesGetBodys(t *testing.T) {
	for _, tt := range []struct {
		name    string
		replace func(old io.Reader) io.ReadCloser
		sent    string // the retry's body; "": Prepare fails, no retry
	}{
		{"wrapped", func(old io.Reader) io.ReadCloser {
			return io.NopCloser(io.MultiReader(old, strings.NewReader("&sig=2")))
		}, `{"a":1}&sig=2`},
		{"dropped", func(io.Reader) io.ReadCloser { return http.NoBody }, "-"},
		{"failed", nil, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base, log := answering(http.StatusServiceUnavailable)
				var made []*atomic.Int32
				rt := throttle.New(base, throttle.WithRetry(throttle.Retry{
					Prepare: func(req *http.Request, attempt int) error {
						if tt.replace == nil {
							return errors.New("no signature to be had")
						}
						req.Body = tt.replace(req.Body)
						return nil
					}}))
				req, err := http.NewRequest(http.MethodPut, "http://api.test/items", strings.NewReader(`{"a":1}`))
				require.NoError(t, err)
				req.GetBody = func() (io.ReadCloser, error) {
					n := new(atomic.Int32)
					made = append(made, n)
					return closeCount{strings.NewReader(`{"a":1}`), n}, nil
				}
				resp, err := rt.RoundTrip(req)
				require.NoError(t, err)
				resp.Body.Close()
				if tt.sent == "" {
					assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "the last answer")
					assert.Len(t, log(), 1)
				} else {
					assert.Equal(t, http.StatusOK, resp.StatusCode)
					require.Len(t, log(), 2)
					assert.Equal(t, strings.TrimPrefix(tt.sent, "-"), log()[1].body, "the base sent Prepare's body")
				}
				require.Len(t, made, 1)
				assert.EqualValues(t, 1, made[0].Load(), "GetBody's body closed")
			})
		})
	}
}

// The reason a request gave up reads as English for one attempt too.
func TestGaveUpAfterOneAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base, _ := answering(http.StatusServiceUnavailable)
		var reasons []string
		rt := throttle.New(base, throttle.WithRetry(throttle.Retry{MaxAttempts: 1}),
			throttle.WithEvents(func(e throttle.Event) {
				if e.Kind == throttle.EventGaveUp {
					reasons = append(reasons, e.Reason)
				}
			}))
		resp, err := rt.RoundTrip(newReq(t, context.Background(), http.MethodGet, "http://api.test/x"))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, []string{"1 attempt"}, reasons)
	})
}

// A leaky bucket of Queue 1 holds at most one waiting request, and a retry
// that finds it full is refused at once, the caller getting its last
// response (Policy.Queue, Retry, Transport: "a retry refused at once (its
// turn known to come too late, its queue full)"). A gets a 503 at 0 s and
// its retry comes back at 1 s, while B waits for its turn at 2 s (C, at
// 0.2 s, found the queue full). Regression, found in review: retries were
// never refused for a full queue; A's retry was sent, B pushed to 4 s.
func TestRetryFindingTheQueueFullIsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var mu sync.Mutex
		sentAt := map[string][]time.Duration{}
		rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			defer mu.Unlock()
			sentAt[r.URL.Path] = append(sentAt[r.URL.Path], time.Since(start))
			if r.URL.Path == "/a" && len(sentAt["/a"]) == 1 {
				return reply(r, http.StatusServiceUnavailable, "Retry-After", "1"), nil
			}
			return reply(r, http.StatusOK), nil
		}), throttle.WithPolicy(throttle.Policy{Rate: 0.5, Queue: 1}))
		defer rt.Close()

		codes := make(chan int, 2)
		get := func(path string) {
			resp, err := rt.RoundTrip(newReq(t, context.Background(), http.MethodGet, "http://q.test"+path))
			if !assert.NoError(t, err, path) {
				codes <- 0
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			codes <- resp.StatusCode
		}
		aDone := make(chan int, 1)
		go func() {
			resp, err := rt.RoundTrip(newReq(t, context.Background(), http.MethodGet, "http://q.test/a"))
			if !assert.NoError(t, err) {
				aDone <- 0
				return
			}
			resp.Body.Close()
			aDone <- resp.StatusCode
		}()
		time.Sleep(100 * time.Millisecond)
		go get("/b") // waits for its turn at 2 s: the queue is full
		time.Sleep(100 * time.Millisecond)
		require.ErrorIs(t, do(t, rt, "http://q.test/c"), throttle.ErrQueueFull, "the queue of 1 is full")

		time.Sleep(1300 * time.Millisecond) // 1.5 s: A's retry came back at 1 s
		assert.LessOrEqual(t, rt.Stats().Keys["q.test"].Queued, 1, "a leaky bucket of Queue 1 holds one waiting request at most")

		assert.Equal(t, http.StatusServiceUnavailable, <-aDone, "A's retry found the queue full: A gets its 503")
		assert.Equal(t, http.StatusOK, <-codes)
		mu.Lock()
		defer mu.Unlock()
		assert.Equal(t, []time.Duration{2 * time.Second}, sentAt["/b"], "B goes at its turn, 1/Rate after A")
		assert.Len(t, sentAt["/a"], 1, "A was sent once")
	})
}

// The retry budget counts retries made: a retry that Retry.Prepare (or
// GetBody) refused was never sent, and spends nothing. With Budget 0.5 and
// no floor, three first attempts allow one retry a minute; /1's retry is
// refused by Prepare, so /2's 503 may still be retried. Regression, found
// in review: the refused retry spent the budget, and /2 got its 503.
func TestARetryNeverMadeSpendsNoBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		seen := map[string]int{}
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			defer mu.Unlock()
			seen[r.URL.Path]++
			if r.URL.Path != "/0" && seen[r.URL.Path] == 1 {
				return reply(r, http.StatusServiceUnavailable), nil
			}
			return reply(r, http.StatusOK), nil
		})
		rt := throttle.New(base, throttle.WithRetry(throttle.Retry{Budget: 0.5, BudgetFloor: -1,
			Prepare: func(req *http.Request, _ int) error {
				if req.URL.Path == "/1" {
					return errors.New("no fresh token")
				}
				return nil
			}}))
		defer rt.Close()
		for _, p := range []string{"/0", "/1", "/2"} {
			resp, err := rt.RoundTrip(newReq(t, context.Background(), http.MethodGet, "http://b.test"+p))
			require.NoError(t, err)
			resp.Body.Close()
			if p == "/2" {
				assert.Equal(t, http.StatusOK, resp.StatusCode, "/2's 503 is retried: no retry was made this minute")
			}
		}
		st := rt.Stats().Keys["b.test"]
		t.Logf("Retries %d, GaveUp %d", st.Retries, st.GaveUp)
		mu.Lock()
		defer mu.Unlock()
		assert.Equal(t, 2, seen["/2"])
	})
}

// A retry refused at once ends retrying "with the last response", and for
// a network error, with the last error, wrapped, as every other end of
// retrying gives it (Retry). A's GET meets a connection reset at 0 s, its
// retry waits a second; at 0.5 s B's 429 pauses the key for 600 s, past
// MaxRetryAfter, and A's retry is refused at once: A's caller must still
// see the reset it met (the refusal may say why retrying ended).
// Regression, found in review: it got the refusal alone.
func TestARetryRefusedAtOnceKeepsTheLastError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var first atomic.Bool
		first.Store(true)
		reset := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
		rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
			switch {
			case r.URL.Path == "/b":
				return reply(r, http.StatusTooManyRequests, "Retry-After", "600"), nil
			case first.CompareAndSwap(true, false):
				return nil, reset
			}
			return reply(r, http.StatusOK), nil
		}), throttle.WithRetry(throttle.Retry{NewBackOff: func() backoff.BackOff { return backoff.NewConstantBackOff(time.Second) }}))
		defer rt.Close()
		errs := make(chan error, 1)
		go func() {
			resp, err := rt.RoundTrip(newReq(t, context.Background(), http.MethodGet, "http://h.test/a"))
			if err == nil {
				resp.Body.Close()
			}
			errs <- err
		}()
		time.Sleep(500 * time.Millisecond)
		resp, err := rt.RoundTrip(newReq(t, throttle.With(context.Background(), throttle.NoRetry()), http.MethodGet, "http://h.test/b"))
		require.NoError(t, err)
		resp.Body.Close()
		err = <-errs
		require.Error(t, err)
		t.Logf("A's error: %v", err)
		assert.ErrorIs(t, err, syscall.ECONNRESET, "the last error, wrapped")
	})
}

// Retry.Prepare gives a retry "a new token, a new signature": one made
// when the retry goes, not when it was planned. A 429 asks for 10 s; a
// Prepare that stamps the retry (as APIs that refuse a signature older
// than a few seconds ask: a timestamp inside a receive window) must find
// its stamp fresh at the base, not 10 s old. Regression, found in review:
// Prepare ran when the retry was planned, and the stamp was 10 s old.
func TestPrepareSignsTheRetryWhenItGoes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var ages []time.Duration // how old each retry's stamp was when the base got it
		n := 0
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			defer mu.Unlock()
			n++
			if n == 1 {
				return reply(r, http.StatusTooManyRequests, "Retry-After", "10"), nil
			}
			stamp, err := time.Parse(time.RFC3339Nano, r.Header.Get("X-Signed-At"))
			require.NoError(t, err)
			ages = append(ages, time.Since(stamp))
			return reply(r, http.StatusOK), nil
		})
		rt := throttle.New(base, throttle.WithRetry(throttle.Retry{
			Prepare: func(req *http.Request, _ int) error {
				req.Header.Set("X-Signed-At", time.Now().Format(time.RFC3339Nano))
				return nil
			}}))
		defer rt.Close()
		resp, err := rt.RoundTrip(newReq(t, context.Background(), http.MethodGet, "http://sig.test/"))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		mu.Lock()
		defer mu.Unlock()
		require.Len(t, ages, 1)
		assert.Less(t, ages[0], time.Second, "the retry's signature was made %v before it was sent", ages[0])
	})
}

// (A guard for the fix of TestPrepareSignsTheRetryWhenItGoes, not
// a failure of its own.) A Prepare that fails once its retry has its turn
// gives that turn back: A's retry, admitted at 1 s into a window of 2 per
// 10 s and a MaxInFlight of 1, is never sent, and B goes at once, not 10 s
// later; the caller of A gets its 429, and Attempts counts what was sent.
func TestPrepareThatFailsGivesItsTurnBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var sent []time.Duration
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			sent = append(sent, time.Since(start))
			if len(sent) == 1 {
				return reply(r, http.StatusTooManyRequests, "Retry-After", "1"), nil
			}
			return reply(r, http.StatusOK), nil
		})
		rt := throttle.New(base,
			throttle.WithPolicy(throttle.Policy{MaxInFlight: 1, Windows: []throttle.Window{{N: 2, Per: 10 * time.Second}}}),
			throttle.WithRetry(throttle.Retry{Prepare: func(*http.Request, int) error { return errors.New("no token to be had") }}))
		defer rt.Close()
		resp, err := rt.RoundTrip(newReq(t, context.Background(), http.MethodGet, "http://w.test/a"))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
		require.NoError(t, do(t, rt, "http://w.test/b"))
		require.Len(t, sent, 2, "A's retry was never sent")
		assert.LessOrEqual(t, sent[1], time.Second, "B goes at once after A gave up, not when the window frees")
		st := rt.Stats().Total
		assert.EqualValues(t, 2, st.Attempts)
		assert.Zero(t, st.Slots)
	})
}

// A retry that a panicking hook kept from being sent spends no retry
// budget: "A retry that GetBody or Prepare refuses (or panics in) is never
// sent: it spends nothing" (transport.go, next). Budget 1 retry a minute.
// Regression, found in review: a panic after next (in Prepare, EventRetry
// or the retry's EventWaited) left the budget spent, and the next 503 got
// no retry.
func TestAPanickingHookSpendsNoRetryBudget(t *testing.T) {
	for _, where := range []string{"Prepare", "EventRetry", "EventWaited"} {
		t.Run(where, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var mu sync.Mutex
				calls := 0
				seen := map[string]bool{}
				base := rtFunc(func(req *http.Request) (*http.Response, error) {
					mu.Lock()
					defer mu.Unlock()
					calls++
					if !seen[req.URL.Path] { // each request's first attempt
						seen[req.URL.Path] = true
						return reply(req, http.StatusServiceUnavailable), nil
					}
					return reply(req, http.StatusOK), nil
				})
				armed := true
				boom := func(here string) {
					if armed && here == where {
						armed = false
						panic("hook: " + here)
					}
				}
				tr := throttle.New(base,
					throttle.WithPolicy(throttle.Policy{Rate: 1, Burst: 2}), // the retry waits for its token
					throttle.WithRetry(throttle.Retry{Budget: 0.0001, BudgetFloor: 1,
						Prepare: func(*http.Request, int) error { boom("Prepare"); return nil }}),
					throttle.WithEvents(func(e throttle.Event) {
						switch e.Kind {
						case throttle.EventRetry:
							boom("EventRetry")
						case throttle.EventWaited:
							if e.Attempt == 2 {
								boom("EventWaited")
							}
						}
					}))
				defer tr.Close()
				func() {
					defer func() {
						if p := recover(); p == nil {
							t.Fatal("no panic reached the caller")
						}
					}()
					do(t, tr, "https://api.test/a")
				}()
				mu.Lock()
				if calls != 1 {
					t.Fatalf("the panicking hook's retry was sent: %d calls", calls)
				}
				mu.Unlock()
				time.Sleep(2 * time.Second)
				resp, err := tr.RoundTrip(newReq(t, context.Background(), http.MethodGet, "https://api.test/b"))
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("the next 503 got no retry (%d, retries %d, gave up %d): the retry the panic kept from being sent spent the budget",
						resp.StatusCode, tr.Stats().Total.Retries, tr.Stats().Total.GaveUp)
				}
			})
		})
	}
}
