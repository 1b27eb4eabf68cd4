package throttle_test

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/iotest"
	"testing/synctest"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlehttp/throttle"
)

// trackedBody is a request body that records being closed.
type trackedBody struct {
	io.Reader
	closed bool
}

func (b *trackedBody) Close() error { b.closed = true; return nil }

func TestRetryReplaysBodyAndLeavesRequestUntouched(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var bodies []string
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			b, _ := io.ReadAll(r.Body)
			r.Body.Close()
			bodies = append(bodies, string(b))
			if len(bodies) < 3 {
				return reply(r, http.StatusTooManyRequests, "Retry-After", "1"), nil
			}
			return reply(r, http.StatusOK), nil
		})
		rt := throttle.New(base)
		defer rt.Close()
		orig := &trackedBody{Reader: strings.NewReader("payload")}
		req := newReq(t, context.Background(), http.MethodPost, "http://b.test/upload?x=1")
		req.Body = orig
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader("payload")), nil }
		req.Header.Set("X-Custom", "v")
		before := req.Clone(context.Background())

		resp, err := rt.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, []string{"payload", "payload", "payload"}, bodies)
		assert.True(t, orig.closed, "the caller's body is closed")
		assert.Same(t, orig, req.Body, "the caller's Body field is untouched")
		assert.Equal(t, before.Header, req.Header)
		assert.Equal(t, before.URL, req.URL)
		assert.Equal(t, before.Method, req.Method)
	})
}

func TestBodyWithoutGetBodyIsNeverRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := 0
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			n++
			r.Body.Close()
			return reply(r, http.StatusTooManyRequests, "Retry-After", "1"), nil
		})
		rt := throttle.New(base)
		defer rt.Close()
		req := newReq(t, context.Background(), http.MethodPut, "http://b.test/")
		req.Body = io.NopCloser(bytes.NewReader([]byte("stream"))) // no GetBody
		resp, err := rt.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "the 429, as a response")
		assert.Equal(t, 1, n)
		assert.EqualValues(t, 1, rt.Stats().Keys["b.test"].Pauses, "the key is paused all the same")
	})
}

func TestNetworkErrors(t *testing.T) {
	reset := &net_OpError{syscall.ECONNRESET}
	tests := []struct {
		name     string
		method   string
		err      error
		attempts int
	}{
		{"reset-get", http.MethodGet, reset, 3},
		{"eof-delete", http.MethodDelete, io.EOF, 3},
		{"refused-put", http.MethodPut, syscall.ECONNREFUSED, 3},
		{"reset-post", http.MethodPost, reset, 1},
		{"unknown-error-get", http.MethodGet, errors.New("unsupported protocol scheme"), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := 0
				base := rtFunc(func(r *http.Request) (*http.Response, error) {
					n++
					if n < 3 {
						return nil, tt.err
					}
					return reply(r, http.StatusOK), nil
				})
				rt := throttle.New(base)
				defer rt.Close()
				_, err := status(t, rt, tt.method, "http://n.test/")
				assert.Equal(t, tt.attempts, n)
				if tt.attempts == 3 {
					require.NoError(t, err)
				} else {
					require.ErrorIs(t, err, tt.err)
				}
			})
		})
	}
}

// net_OpError is a minimal net.Error wrapping a syscall error.
type net_OpError struct{ err error }

func (e *net_OpError) Error() string   { return "read tcp: " + e.err.Error() }
func (e *net_OpError) Unwrap() error   { return e.err }
func (e *net_OpError) Timeout() bool   { return false }
func (e *net_OpError) Temporary() bool { return false }

func TestGiveUpAfterMaxAttemptsWrapsTheError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := 0
		var delays []time.Duration
		last := time.Now()
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			n++
			delays = append(delays, time.Since(last))
			last = time.Now()
			return nil, io.ErrUnexpectedEOF
		})
		var gaveUp []throttle.Event
		rt := throttle.New(base, throttle.WithRetry(throttle.Retry{MaxAttempts: 5, InitialDelay: time.Second, MaxDelay: 4 * time.Second}),
			throttle.WithEvents(func(e throttle.Event) {
				if e.Kind == throttle.EventGaveUp {
					gaveUp = append(gaveUp, e)
				}
			}))
		defer rt.Close()
		_, err := status(t, rt, http.MethodGet, "http://g.test/")
		require.ErrorIs(t, err, io.ErrUnexpectedEOF)
		assert.Contains(t, err.Error(), "gave up after 5 attempts")
		assert.Equal(t, 5, n)
		// Full jitter: each delay is in [0, 1s·2^k], capped at 4s.
		for i, d := range delays[1:] {
			assert.LessOrEqual(t, d, min(time.Second<<i, 4*time.Second), "delay %d", i)
		}
		require.Len(t, gaveUp, 1)
		assert.Equal(t, "5 attempts", gaveUp[0].Reason)
		assert.EqualValues(t, 1, rt.Stats().Keys["g.test"].GaveUp)
	})
}

func TestRetryAfterLongerThanHonouredGivesUpAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := 0
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			n++
			return reply(r, http.StatusTooManyRequests, "Retry-After", "3600"), nil
		})
		rt := throttle.New(base)
		defer rt.Close()
		start := time.Now()
		code, err := status(t, rt, http.MethodGet, "http://l.test/")
		require.NoError(t, err)
		assert.Equal(t, http.StatusTooManyRequests, code)
		assert.Equal(t, 1, n)
		assert.Zero(t, time.Since(start), "no waiting in order to fail")

		// Others would have to wait out the hour: they fail at once, saying until when.
		_, err = status(t, rt, http.MethodGet, "http://l.test/other")
		require.ErrorIs(t, err, throttle.ErrPaused)
		var we *throttle.WaitError
		require.ErrorAs(t, err, &we)
		assert.Equal(t, start.Add(time.Hour), we.Until)
		assert.Contains(t, err.Error(), "pause until "+start.Add(time.Hour).UTC().Format(time.RFC3339))
		assert.Equal(t, 1, n)
		assert.EqualValues(t, 1, rt.Stats().Keys["l.test"].RefusedPaused)
	})
}

func TestRetryAfterPastDeadlineGivesUpAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := 0
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			n++
			return reply(r, http.StatusTooManyRequests, "Retry-After", "30"), nil
		})
		rt := throttle.New(base)
		defer rt.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		start := time.Now()
		resp, err := rt.RoundTrip(newReq(t, ctx, http.MethodGet, "http://dl.test/"))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
		assert.Zero(t, time.Since(start))

		// Another request whose deadline comes before the pause's end.
		err = doCtx(t, ctx, rt, "http://dl.test/b")
		require.ErrorIs(t, err, throttle.ErrWouldExceedDeadline)
		assert.Contains(t, err.Error(), "pause until")
		assert.Equal(t, 1, n)
	})
}

func TestContextEndsWhileRetryWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			return reply(r, http.StatusServiceUnavailable), nil // no Retry-After: backoff
		})
		rt := throttle.New(base, throttle.WithRetry(throttle.Retry{InitialDelay: time.Minute, MaxDelay: time.Minute}))
		defer rt.Close()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- doCtx(t, ctx, rt, "http://c.test/") }()
		synctest.Wait()
		cancel()
		err := <-done
		require.ErrorIs(t, err, context.Canceled)
	})
}

func TestRetryBudgetStopsStorms(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		sent := 0
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			sent++
			mu.Unlock()
			return reply(r, http.StatusBadGateway), nil
		})
		// MaxDelay too: once nothing is served, the key pauses at least
		// the outage's own backoff, doubled at each failed probe up to
		// MaxDelay (outage.go); the count below holds while the 50 first
		// attempts, which probe one by one, fall within the budget's
		// minute.
		rt := throttle.New(base, throttle.WithRetry(throttle.Retry{Budget: 0.2, BudgetFloor: 5, InitialDelay: ms(10), MaxDelay: ms(10)}))
		defer rt.Close()
		var wg sync.WaitGroup
		for i := range 50 {
			wg.Add(1)
			go func() { defer wg.Done(); _, _ = status(t, rt, http.MethodGet, fmt.Sprint("http://down.test/", i)) }()
		}
		wg.Wait()
		st := rt.Stats().Keys["down.test"]
		assert.EqualValues(t, 50+5+10, sent, "50 first attempts, retries: floor 5 + 20%% of 50")
		assert.EqualValues(t, 15, st.Retries)
	})
}

func TestNoBudgetForThrottledRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		seen := map[string]int{}
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			defer mu.Unlock()
			seen[r.URL.Path]++
			if seen[r.URL.Path] == 1 {
				return reply(r, http.StatusTooManyRequests, "Retry-After", "1"), nil
			}
			return reply(r, http.StatusOK), nil
		})
		rt := throttle.New(base, throttle.WithRetry(throttle.Retry{Budget: 0.01, BudgetFloor: 1}))
		defer rt.Close()
		for i := range 20 {
			code, err := status(t, rt, http.MethodGet, fmt.Sprint("http://t.test/", i))
			require.NoError(t, err)
			assert.Equal(t, http.StatusOK, code)
		}
	})
}

func TestRetriesDisabled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := 0
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			n++
			return reply(r, http.StatusTooManyRequests), nil
		})
		rt := throttle.New(base, throttle.WithRetry(throttle.Retry{MaxAttempts: 1}))
		defer rt.Close()
		code, err := status(t, rt, http.MethodGet, "http://r.test/")
		require.NoError(t, err)
		assert.Equal(t, http.StatusTooManyRequests, code)
		assert.Equal(t, 1, n)
	})
}

func TestQuotaHeadersSetThePause(t *testing.T) {
	tests := []struct {
		name   string
		status int
		header []string
		pause  time.Duration // 0: not paused
		source string
	}{
		{"429-x-ratelimit-reset-delta", 429, []string{"X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "7"}, 7 * time.Second, "X-RateLimit-Reset"},
		{"429-ietf-ratelimit", 429, []string{"RateLimit", `"default";r=0;t=4`, "RateLimit-Policy", `"default";q=10;w=60`}, 4 * time.Second, "RateLimit"},
		// The unnamed IETF forms are RateLimit's too (found in review:
		// named X-RateLimit-Reset, a field the server never sent).
		{"429-ietf-draft07", 429, []string{"RateLimit", "limit=5, remaining=0, reset=40", "RateLimit-Policy", "5;w=60"}, 40 * time.Second, "RateLimit"},
		{"429-ietf-draft06", 429, []string{"RateLimit-Limit", "5", "RateLimit-Remaining", "0", "RateLimit-Reset", "6"}, 6 * time.Second, "RateLimit"},
		{"429-retry-after-wins", 429, []string{"Retry-After", "2", "X-RateLimit-Reset", "9"}, 2 * time.Second, "Retry-After"},
		{"403-github-primary-limit", 403, []string{"X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "EPOCH+5"}, 5 * time.Second, "X-RateLimit-Reset"},
		{"403-forbidden", 403, []string{"X-RateLimit-Remaining", "12"}, 0, ""},
		{"200-zero-remaining", 200, []string{"X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "30"}, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var paused []throttle.Event
				rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
					kv := append([]string(nil), tt.header...)
					for i, v := range kv {
						if rest, ok := strings.CutPrefix(v, "EPOCH+"); ok {
							n, _ := time.ParseDuration(rest + "s")
							kv[i] = fmt.Sprint(time.Now().Add(n).Unix())
						}
					}
					return reply(r, tt.status, kv...), nil
				}), throttle.WithRetry(throttle.Retry{MaxAttempts: 1}), throttle.WithEvents(func(e throttle.Event) {
					if e.Kind == throttle.EventPaused {
						paused = append(paused, e)
					}
				}))
				defer rt.Close()
				start := time.Now()
				code, err := status(t, rt, http.MethodGet, "http://q.test/")
				require.NoError(t, err)
				assert.Equal(t, tt.status, code)
				if tt.pause == 0 {
					assert.Empty(t, paused)
					return
				}
				require.Len(t, paused, 1)
				assert.Equal(t, start.Add(tt.pause), paused[0].Until)
				assert.Equal(t, tt.source, paused[0].Source)
			})
		})
	}
}

// MaxElapsed bounds retrying: against a server that refuses every request,
// many callers behind one another each end by MaxElapsed after they arrived
// (or at their first attempt, if that came later: the first attempt's wait
// is the context's to bound), with the last 429 or with ErrMaxElapsed
// (issue 8, point 7). This one guards the rule with many callers; the
// regression test is TestMaxElapsedCountsTheKeysWait.
func TestMaxElapsedBoundsRetrying(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		first := map[string]time.Time{}
		rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			if _, ok := first[r.URL.RawQuery]; !ok {
				first[r.URL.RawQuery] = time.Now()
			}
			mu.Unlock()
			return reply(r, http.StatusTooManyRequests, "Retry-After", "20"), nil
		}), throttle.WithRetry(throttle.Retry{MaxElapsed: 2 * time.Minute, MaxAttempts: 100}))
		defer rt.Close()
		const callers = 50
		var wg sync.WaitGroup
		refused, answered := 0, 0
		for i := range callers {
			wg.Go(func() {
				start := time.Now()
				id := fmt.Sprint(i)
				resp, err := rt.RoundTrip(newReq(t, context.Background(), http.MethodGet, "http://h.test/?"+id))
				end := time.Now()
				mu.Lock()
				defer mu.Unlock()
				bound := start.Add(2 * time.Minute)
				if f := first[id]; f.After(bound) {
					bound = f
				}
				assert.False(t, end.After(bound), "caller %s ended %v after its bound", id, end.Sub(bound))
				if err != nil {
					assert.ErrorIs(t, err, throttle.ErrMaxElapsed)
					refused++
					return
				}
				assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
				resp.Body.Close()
				answered++
			})
		}
		wg.Wait()
		assert.Equal(t, callers, refused+answered, "each ends with the last 429 or ErrMaxElapsed")
	})
}

// A retry's wait counts against MaxElapsed, not only its backoff (issue 8,
// point 7: a retry that began to wait before MaxElapsed ran on past it).
// A wait known in advance (a window) ends retrying at once with the last
// answer; one that is not (an in-flight slot held by an unclosed body)
// fails when MaxElapsed has passed.
func TestMaxElapsedCountsTheKeysWait(t *testing.T) {
	t.Run("window", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			calls := 0
			rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
				calls++
				return reply(r, http.StatusTooManyRequests, "Retry-After", "1"), nil
			}), throttle.WithPolicy(throttle.Policy{Windows: []throttle.Window{{N: 1, Per: time.Minute}}}),
				throttle.WithRetry(throttle.Retry{MaxElapsed: 30 * time.Second}))
			defer rt.Close()
			start := time.Now()
			resp, err := rt.RoundTrip(newReq(t, context.Background(), http.MethodGet, "http://h.test/"))
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "the last answer")
			assert.Zero(t, time.Since(start), "the window's turn comes after MaxElapsed: no retry")
			assert.Equal(t, 1, calls)
		})
	})
	t.Run("pause", func(t *testing.T) {
		// A pause another request began during the retry's backoff,
		// past MaxElapsed: the retry is not made, and the caller gets
		// the 503 it had (regression, found in review 45: it got
		// ErrMaxElapsed, the response lost).
		synctest.Test(t, func(t *testing.T) {
			calls := 0
			rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
				calls++
				if r.URL.Path == "/a" {
					return reply(r, http.StatusServiceUnavailable), nil
				}
				return reply(r, http.StatusTooManyRequests, "Retry-After", "30"), nil
			}), throttle.WithRetry(throttle.Retry{MaxElapsed: 10 * time.Second,
				NewBackOff: func() backoff.BackOff { return backoff.NewConstantBackOff(time.Second) }}))
			defer rt.Close()
			go func() {
				time.Sleep(500 * time.Millisecond) // during /a's backoff: the key pauses 30 s
				resp, err := rt.RoundTrip(newReq(t, throttle.With(context.Background(), throttle.NoRetry()), http.MethodGet, "http://h.test/b"))
				if assert.NoError(t, err) {
					resp.Body.Close()
				}
			}()
			start := time.Now()
			resp, err := rt.RoundTrip(newReq(t, context.Background(), http.MethodGet, "http://h.test/a"))
			require.NoError(t, err, "the 503 obtained is the caller's")
			resp.Body.Close()
			assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "the last answer")
			assert.Equal(t, time.Second, time.Since(start), "refused at the end of its backoff, when the pause was known")
			assert.Equal(t, 2, calls, "no retry of /a")
		})
	})
	t.Run("in-flight", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
				if r.URL.Path == "/slow" {
					time.Sleep(2 * time.Minute) // holds its slot on the wire
					return reply(r, http.StatusOK), nil
				}
				time.Sleep(100 * time.Millisecond)
				return reply(r, http.StatusServiceUnavailable), nil
			}), throttle.WithPolicy(throttle.Policy{MaxInFlight: 2}),
				throttle.WithRetry(throttle.Retry{MaxElapsed: 30 * time.Second}))
			defer rt.Close()
			var wg sync.WaitGroup
			slow := func() { wg.Go(func() { assert.NoError(t, do(t, rt, "http://h.test/slow")) }) }
			slow()
			start := time.Now()
			done := make(chan error)
			go func() {
				_, err := rt.RoundTrip(newReq(t, context.Background(), http.MethodGet, "http://h.test/"))
				done <- err
			}()
			time.Sleep(110 * time.Millisecond) // its 503 is in; its retry waits out its backoff
			slow()                             // and this one takes the slot it freed
			err := <-done
			require.ErrorIs(t, err, throttle.ErrMaxElapsed)
			assert.Equal(t, 30*time.Second, time.Since(start), "fails when MaxElapsed has passed")
			var we *throttle.WaitError
			require.ErrorAs(t, err, &we)
			assert.Equal(t, throttle.LimitInFlight, we.Limit)
			assert.GreaterOrEqual(t, we.Attempt, 2, "a retry (its backoff is jittered: the first may have gone before the slot was taken)")
			wg.Wait()
		})
	})
}

// A 429 that states no wait (no Retry-After, no quota headers) is taken to
// ask for a second: its retry waits that long, not a backoff of a fraction
// of one that a window still spent would refuse again (one such refusal is
// a collision, to a window as to a pace: the rest of the key goes on). A
// 503 without Retry-After keeps its backoff.
func TestQuotaRefusalWithoutAWaitAsksASecond(t *testing.T) {
	for _, tt := range []struct {
		status int
		least  time.Duration
		most   time.Duration
	}{
		{http.StatusTooManyRequests, time.Second, time.Second},
		{http.StatusServiceUnavailable, 0, 250 * time.Millisecond},
	} {
		t.Run(fmt.Sprint(tt.status), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var mu sync.Mutex
				var sent []time.Time
				base := rtFunc(func(r *http.Request) (*http.Response, error) {
					mu.Lock()
					defer mu.Unlock()
					sent = append(sent, time.Now())
					if len(sent) == 1 {
						return reply(r, tt.status), nil
					}
					return reply(r, http.StatusOK), nil
				})
				var paused []time.Duration
				start := time.Now()
				rt := throttle.New(base, throttle.WithPolicy(throttle.Policy{Rate: 100, Burst: 10,
					Windows: []throttle.Window{{N: 1000, Per: time.Minute}}}),
					throttle.WithEvents(func(e throttle.Event) {
						if e.Kind == throttle.EventPaused {
							paused = append(paused, e.Until.Sub(start))
						}
					}))
				defer rt.Close()
				code, err := status(t, rt, http.MethodGet, "http://api.test/a")
				require.NoError(t, err)
				assert.Equal(t, http.StatusOK, code)
				require.Len(t, sent, 2)
				retry := sent[1].Sub(sent[0])
				assert.GreaterOrEqual(t, retry, tt.least, "the retry waited")
				assert.LessOrEqual(t, retry, tt.most)
				assert.Empty(t, paused, "a lone refusal, a random 503, pauses nothing")
			})
		})
	}
}

// A 429 pauses the key for the wait the server asked, not for the refused
// request's own backoff, which may be far longer: one unlucky request
// does not hold back the whole key.
func TestKeyPausesForTheServersWaitNotARequestsBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		n := 0
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			defer mu.Unlock()
			n++
			if r.URL.Path == "/a" && n == 1 {
				return reply(r, http.StatusTooManyRequests, "Retry-After", "3"), nil
			}
			return reply(r, http.StatusOK), nil
		})
		var paused []time.Duration
		start := time.Now()
		rt := throttle.New(base, throttle.WithPolicy(throttle.Policy{Rate: 100, Burst: 10}),
			throttle.WithRetry(throttle.Retry{InitialDelay: 10 * time.Minute, MaxDelay: 10 * time.Minute, MaxElapsed: time.Hour}),
			throttle.WithEvents(func(e throttle.Event) {
				if e.Kind == throttle.EventPaused {
					paused = append(paused, e.Until.Sub(start))
				}
			}))
		defer rt.Close()
		done := make(chan time.Duration)
		go func() {
			_, err := status(t, rt, http.MethodGet, "http://api.test/a")
			assert.NoError(t, err)
			done <- time.Since(start)
		}()
		synctest.Wait()
		assert.Equal(t, []time.Duration{3 * time.Second}, paused, "the key paused for the 3 s asked")
		time.Sleep(3 * time.Second)
		code, err := status(t, rt, http.MethodGet, "http://api.test/b")
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, code)
		assert.Equal(t, 3*time.Second, time.Since(start), "another request goes once the 3 s have passed")
		assert.GreaterOrEqual(t, <-done, 3*time.Second, "the refused request waits its own backoff, at least the 3 s")
	})
}

// A retry refused at once, its turn known to come too late because another
// request's answer paused the key (past the deadline, or past
// MaxRetryAfter), ends retrying as the server's own answer would: the
// caller gets the last response, its body whole, not an error (regression,
// found in review: the 503 obtained was drained and lost, and the caller
// got ErrWouldExceedDeadline or ErrPaused).
func TestRetryRefusedAtOnceGivesTheLastResponse(t *testing.T) {
	for _, wait := range []string{"10", "600"} { // past the deadline, past MaxRetryAfter
		t.Run("Retry-After "+wait, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				resp, err := retryRefusedAtOnce(t, wait, func() io.ReadCloser { return io.NopCloser(strings.NewReader("down for a second")) })
				require.NoError(t, err, "a response was obtained")
				defer resp.Body.Close()
				assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
				body, err := io.ReadAll(resp.Body)
				require.NoError(t, err)
				assert.Equal(t, "down for a second", string(body))
			})
		})
	}
}

// retryRefusedAtOnce sends request A, whose first answer is a 503 with
// Retry-After: 1 and the body body makes, with a deadline 5 s away; while
// A's retry waits out its second, request B is answered 429 with
// Retry-After wait (10: past A's deadline; 600: past MaxRetryAfter), which
// pauses the key: A's retry is refused at once. It returns what A's
// RoundTrip returned. Run it in a synctest bubble.
func retryRefusedAtOnce(t *testing.T, wait string, body func() io.ReadCloser) (*http.Response, error) {
	t.Helper()
	var first atomic.Bool
	first.Store(true)
	rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
		switch {
		case r.URL.Path == "/b":
			return reply(r, http.StatusTooManyRequests, "Retry-After", wait), nil
		case first.CompareAndSwap(true, false):
			resp := reply(r, http.StatusServiceUnavailable, "Retry-After", "1")
			resp.Body = body()
			return resp, nil
		}
		return reply(r, http.StatusOK), nil
	}))
	t.Cleanup(func() { rt.Close() })
	type result struct {
		resp *http.Response
		err  error
	}
	done := make(chan result)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := rt.RoundTrip(newReq(t, ctx, http.MethodGet, "http://h.test/a"))
		done <- result{resp, err}
	}()
	time.Sleep(500 * time.Millisecond) // A's 503 is in (its body drained, or cut at 100 ms); its retry waits out a second
	resp, err := rt.RoundTrip(newReq(t, throttle.With(context.Background(), throttle.NoRetry()), http.MethodGet, "http://h.test/b"))
	require.NoError(t, err)
	resp.Body.Close()
	a := <-done
	return a.resp, a.err
}

// A request whose retry is refused at once, the caller getting its last
// answer, a 429, counts as one whose retries ended with a throttled answer:
// in GaveUp, told by EventGaveUp (of the attempt whose answer the caller
// gets, Reason the refusal), and not as a refusal, which is a request that
// failed without being sent (regression, found in review 46: a got 429
// Retry-After 1, b at 1.5 s 429 Retry-After 30, and a's retry at 3 s,
// refused as past its 5 s deadline, counted as RefusedDeadline 1 with an
// EventRefused; GaveUp said 1, with one EventGaveUp, for two requests that
// both ended with a 429).
func TestARetryRefusedAtOnceCountsAsGivenUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var log eventLog
		var mu sync.Mutex
		seen := map[string]int{}
		rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			seen[r.URL.Path]++
			n := seen[r.URL.Path]
			mu.Unlock()
			switch {
			case r.URL.Path == "/a" && n == 1:
				return reply(r, http.StatusTooManyRequests, "Retry-After", "1"), nil
			case r.URL.Path == "/b":
				return reply(r, http.StatusTooManyRequests, "Retry-After", "30"), nil
			}
			return reply(r, http.StatusOK), nil
		}), log.option(), throttle.WithRetry(throttle.Retry{
			NewBackOff: func() backoff.BackOff { return backoff.NewConstantBackOff(3 * time.Second) }}))
		defer rt.Close()
		get := func(url string) int { // with a deadline 5 s from the start
			ctx, cancel := context.WithDeadline(context.Background(), start.Add(5*time.Second))
			defer cancel()
			resp, err := rt.RoundTrip(newReq(t, ctx, http.MethodGet, url))
			if !assert.NoError(t, err, "%s: a response was obtained", url) {
				return 0
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		done := make(chan int)
		go func() { done <- get("http://api.test/a") }()
		time.Sleep(1500 * time.Millisecond) // a's retry waits its backoff, to 3 s
		assert.Equal(t, http.StatusTooManyRequests, get("http://api.test/b"))
		assert.Equal(t, http.StatusTooManyRequests, <-done, "a gets its 429")

		st := rt.Stats().Keys["api.test"]
		assert.EqualValues(t, 2, st.GaveUp, "both ended with a throttled answer")
		assert.Zero(t, st.RefusedDeadline, "neither failed without being sent")
		assert.Empty(t, log.of(throttle.EventRefused))
		gaveUp := log.of(throttle.EventGaveUp)
		require.Len(t, gaveUp, 2)
		var a throttle.Event
		for _, e := range gaveUp {
			if strings.HasSuffix(e.URL, "/a") {
				a = e
			}
		}
		assert.Equal(t, 1, a.Attempt, "the attempt whose answer the caller gets")
		assert.Equal(t, http.StatusTooManyRequests, a.Status)
		assert.NoError(t, a.Err)
		assert.Contains(t, a.Reason, "the retry was refused: attempt 2: ")
		assert.Contains(t, a.Reason, "wait would exceed the context deadline")
	})
}

// A POST is retried after a 503 or a network error when it carries either
// header net/http takes to make it safe to resend (Request.isReplayable):
// Idempotency-Key or X-Idempotency-Key; without one it is sent once
// (regression, found in review 46: with X-Idempotency-Key it was sent
// once, 1 attempt where net/http would have made 2).
func TestAPostIsRetriedWithEitherIdempotencyKeyNetHTTPTakes(t *testing.T) {
	for _, tt := range []struct {
		header   string // "" for none
		attempts int
	}{
		{"Idempotency-Key", 2},
		{"X-Idempotency-Key", 2},
		{"", 1},
	} {
		for _, fail := range []string{"503", "EOF"} {
			t.Run(fmt.Sprintf("%s/%s", cmp.Or(tt.header, "none"), fail), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					n := 0
					rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
						if n++; n > 1 {
							return reply(r, http.StatusOK), nil
						}
						if fail == "EOF" {
							return nil, io.ErrUnexpectedEOF
						}
						return reply(r, http.StatusServiceUnavailable), nil
					}))
					defer rt.Close()
					req := newReq(t, context.Background(), http.MethodPost, "http://x.test/")
					if tt.header != "" {
						req.Header.Set(tt.header, "k1")
					}
					resp, err := rt.RoundTrip(req)
					if err == nil {
						resp.Body.Close()
					}
					assert.Equal(t, tt.attempts, n)
				})
			})
		}
	}
}

// A retry refused at once gives the caller the last response whatever its
// body: one longer than 4 KiB (a CDN's error page of 8 KiB), or that does
// not end within 100 ms, was cut while the retry waited, and reads its
// first bytes, then ErrBodyDiscarded; one that failed on its own reads its
// bytes, then its error (regression, found in review 46: as
// TestRetryRefusedAtOnceGivesTheLastResponse with such a body, the caller
// got nil and `attempt 2: pause until …: wait would exceed the context
// deadline`, or ErrPaused past MaxRetryAfter, the 503 obtained lost).
func TestRetryRefusedAtOnceGivesTheLastResponseWhateverItsBody(t *testing.T) {
	page := strings.Repeat("<p>Service unavailable</p>\n", 300) // 8,100 bytes
	for _, body := range []struct {
		name string
		make func() io.ReadCloser
		want string // what the caller reads (a prefix of it, for "long")
		err  error  // and the error after it
	}{
		{"long", func() io.ReadCloser { return io.NopCloser(strings.NewReader(page)) }, page, throttle.ErrBodyDiscarded},
		{"slow", func() io.ReadCloser {
			return &stalledBody{head: []byte("<p>Service"), closed: make(chan struct{})}
		}, "<p>Service", throttle.ErrBodyDiscarded},
		{"failing", func() io.ReadCloser {
			return io.NopCloser(io.MultiReader(strings.NewReader("<p>Service"), iotest.ErrReader(io.ErrUnexpectedEOF)))
		}, "<p>Service", io.ErrUnexpectedEOF},
	} {
		for _, wait := range []string{"10", "600"} { // past the deadline, past MaxRetryAfter
			t.Run(body.name+"/Retry-After "+wait, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					resp, err := retryRefusedAtOnce(t, wait, body.make)
					require.NoError(t, err, "a response was obtained")
					defer resp.Body.Close()
					assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
					assert.Equal(t, "1", resp.Header.Get("Retry-After"), "its header whole")
					got, err := io.ReadAll(resp.Body)
					require.ErrorIs(t, err, body.err, "the body says why it ends")
					assert.NotEmpty(t, got)
					assert.LessOrEqual(t, len(got), 4<<10, "no more kept than drained")
					assert.True(t, strings.HasPrefix(body.want, string(got)), "what was read: %q", got)
					if body.name != "long" {
						assert.Equal(t, body.want, string(got), "all that came")
					}
					_, err = resp.Body.Read(make([]byte, 1))
					assert.ErrorIs(t, err, body.err, "and says it again")
				})
			})
		}
	}
}

// stalledBody is a response body whose head comes at once and whose rest
// never comes: a read after the head waits until the body is closed.
type stalledBody struct {
	head   []byte
	closed chan struct{}
	once   sync.Once
}

func (b *stalledBody) Read(p []byte) (int, error) {
	if len(b.head) > 0 {
		n := copy(p, b.head)
		b.head = b.head[n:]
		return n, nil
	}
	<-b.closed
	return 0, errors.New("read on closed body")
}

func (b *stalledBody) Close() error {
	b.once.Do(func() { close(b.closed) })
	return nil
}

// A retry that is never sent (refused at the key: its pause past
// MaxRetryAfter, its turn past the deadline, its queue full; or its wait
// ended) spends no retry budget. Regression, found in review: the budget,
// spent when the retry was planned, was given back only when GetBody or
// Prepare refused it: with one 5xx retry a minute, a retry refused because
// another request's 429 paused the key 20 s used it up, and a 503 21 s
// later, in the same minute, was not retried.
func TestARetryRefusedAtTheKeySpendsNoBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		sent := map[string]int{}
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			sent[r.URL.Path]++
			n := sent[r.URL.Path]
			mu.Unlock()
			switch {
			case r.URL.Path == "/b":
				return reply(r, http.StatusTooManyRequests, "Retry-After", "20"), nil
			case n == 1:
				return reply(r, http.StatusServiceUnavailable), nil
			}
			return reply(r, http.StatusOK), nil
		})
		rt := throttle.New(base, throttle.WithRetry(throttle.Retry{
			Budget: 0.0001, BudgetFloor: 1, // one 5xx retry a minute
			MaxRetryAfter: 10 * time.Second, InitialDelay: time.Second,
		}))
		defer rt.Close()
		var wg sync.WaitGroup
		wg.Go(func() { // 503 at 0s; its retry backs off up to 1s
			code, err := status(t, rt, http.MethodGet, "http://k.test/a")
			require.NoError(t, err)
			assert.Equal(t, http.StatusServiceUnavailable, code, "its retry refused at once: the 503 is the answer")
		})
		synctest.Wait() // /a backs off
		code, err := status(t, rt, http.MethodGet, "http://k.test/b")
		require.NoError(t, err)
		assert.Equal(t, http.StatusTooManyRequests, code) // the key paused 20s, past MaxRetryAfter
		wg.Wait()
		require.Equal(t, 1, sent["/a"], "/a's retry was never sent")

		time.Sleep(21 * time.Second) // the pause is over, well within the budget's minute
		code, err = status(t, rt, http.MethodGet, "http://k.test/c")
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, code, "no retry was sent this minute: the budget's one is left for /c")
		assert.Equal(t, 2, sent["/c"])
	})
}

// A Retry with the longest delays, which validates, does not panic at the
// first 503. Regression, found in review: the full jitter drew from
// Int64N(d+1), which wrapped negative for the longest Duration: "invalid
// argument to Int64N".
func TestTheLongestBackoffDoesNotPanic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := throttle.Retry{InitialDelay: math.MaxInt64, MaxDelay: math.MaxInt64}
		require.NoError(t, r.Validate())
		base := rtFunc(func(req *http.Request) (*http.Response, error) {
			return reply(req, http.StatusServiceUnavailable), nil
		})
		rt := throttle.New(base, throttle.WithRetry(r))
		defer rt.Close()
		var code int
		var err error
		require.NotPanics(t, func() { code, err = status(t, rt, http.MethodGet, "http://p.test/") })
		require.NoError(t, err)
		assert.Equal(t, http.StatusServiceUnavailable, code, "a retry past MaxElapsed is not made: the 503 is the answer")
	})
}
