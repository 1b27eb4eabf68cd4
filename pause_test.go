package throttle_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlehttp/throttle"
)

// script is a base RoundTripper whose answers are chosen per request by a
// function, after a fixed latency, and which logs every attempt.
type script struct {
	mu      sync.Mutex
	start   time.Time
	latency time.Duration
	answer  func(req *http.Request, n int) *http.Response // n: attempts of this URL so far, from 1
	seen    map[string]int
	log     []attempt
}

type attempt struct {
	at   time.Duration
	path string
}

func newScript(latency time.Duration, answer func(*http.Request, int) *http.Response) *script {
	return &script{start: time.Now(), latency: latency, answer: answer, seen: map[string]int{}}
}

func (s *script) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		req.Body.Close()
	}
	s.mu.Lock()
	s.seen[req.URL.String()]++
	n := s.seen[req.URL.String()]
	s.log = append(s.log, attempt{time.Since(s.start), req.URL.Path})
	s.mu.Unlock()
	time.Sleep(s.latency)
	return s.answer(req, n), nil
}

func (s *script) attempts() []attempt {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]attempt(nil), s.log...)
}

func (s *script) times(path string) []time.Duration {
	var ts []time.Duration
	for _, a := range s.attempts() {
		if path == "" || a.path == path {
			ts = append(ts, a.at)
		}
	}
	return ts
}

// status sends a request and returns its status code, closing the body.
func status(t *testing.T, rt http.RoundTripper, method, url string) (int, error) {
	t.Helper()
	resp, err := rt.RoundTrip(newReq(t, context.Background(), method, url))
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

func TestPauseHoldsWholeKeyThenProbeThenRamp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(ms(100), func(r *http.Request, n int) *http.Response {
			if r.URL.Path == "/a" && n == 1 {
				return reply(r, http.StatusTooManyRequests, "Retry-After", "2")
			}
			return reply(r, http.StatusOK)
		})
		var events, waits []throttle.Event
		var mu sync.Mutex
		rt := throttle.New(s, throttle.WithEvents(func(e throttle.Event) {
			mu.Lock()
			switch e.Kind {
			case throttle.EventWaited:
				waits = append(waits, e)
			case throttle.EventAnswered: // one per attempt: counted by Stats
			default:
				events = append(events, e)
			}
			mu.Unlock()
		}))
		defer rt.Close()

		var wg sync.WaitGroup
		codes := make(chan int, 10)
		send := func(url string) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				code, err := status(t, rt, http.MethodGet, url)
				assert.NoError(t, err)
				codes <- code
			}()
		}
		send("http://api.test/a")
		time.Sleep(ms(500)) // the 429 came back at 100ms: paused until 2.1s
		for i := range 5 {
			send(fmt.Sprint("http://api.test/b", i))
			synctest.Wait()
		}
		// Another key is untouched.
		code, err := status(t, rt, http.MethodGet, "http://other.test/")
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, code)
		assert.Equal(t, ms(500), s.times("/")[0])

		wg.Wait()
		close(codes)
		for c := range codes {
			assert.Equal(t, http.StatusOK, c)
		}
		// The throttled request's retry probes alone at 2.1s; once its answer
		// is in (2.2s), the backlog ramps up: 1, then 2, then the rest.
		assert.Equal(t, []time.Duration{0, ms(2100)}, s.times("/a"))
		var b []time.Duration
		for _, a := range s.attempts() {
			if a.path != "/a" && a.path != "/" {
				b = append(b, a.at)
			}
		}
		sort.Slice(b, func(i, j int) bool { return b[i] < b[j] })
		assert.Equal(t, []time.Duration{ms(2200), ms(2300), ms(2300), ms(2400), ms(2400)}, b)

		st := rt.Stats().Keys["api.test"]
		assert.EqualValues(t, 1, st.Throttled)
		assert.EqualValues(t, 1, st.Pauses)
		assert.EqualValues(t, 1, st.Retries)
		assert.EqualValues(t, 7, st.Attempts)

		mu.Lock()
		defer mu.Unlock()
		require.Len(t, events, 3)
		assert.Equal(t, throttle.EventThrottled, events[0].Kind)
		assert.Equal(t, throttle.EventPaused, events[1].Kind)
		assert.Equal(t, "Retry-After", events[1].Source)
		assert.Equal(t, s.start.Add(ms(2100)), events[1].Until)
		assert.Equal(t, throttle.EventRetry, events[2].Kind)
		assert.Equal(t, 2*time.Second, events[2].Delay)
		// Every request but the other key's waited; the retry, for the pause.
		require.Len(t, waits, 6)
		assert.Equal(t, "http://api.test/a", waits[0].URL)
		assert.Equal(t, 2, waits[0].Attempt)
		assert.Equal(t, throttle.LimitPause, waits[0].Limit)
		assert.Equal(t, 2*time.Second, waits[0].Wait)
		assert.Equal(t, "api.test", events[2].Key)
	})
}

func TestPauseHoldsPacedWaitersAndResumesThroughPacer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(ms(10), func(r *http.Request, n int) *http.Response {
			if r.URL.Path == "/x2" && n == 1 {
				return reply(r, http.StatusTooManyRequests, "Retry-After", "3")
			}
			return reply(r, http.StatusOK)
		})
		rt := throttle.New(s, throttle.WithPolicy(throttle.Policy{Rate: 10, Burst: 5}))
		defer rt.Close()
		var wg sync.WaitGroup
		for i := range 10 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := status(t, rt, http.MethodGet, fmt.Sprint("http://p.test/x", i))
				assert.NoError(t, err)
			}()
			synctest.Wait()
		}
		wg.Wait()
		// x0..x3 go at 0 (the burst, one token in reserve); x2's 429 arrives
		// at 10ms: paused until 3.01s, and the rate cut to 8/s. x4..x9,
		// waiting for tokens, wait for the pause too. At 3.01s the retry of
		// x2 probes alone; its answer (3.02s) takes the whole tokens left, so
		// the six waiting follow at 8/s, not as a burst.
		sec := time.Second
		assert.Equal(t, []time.Duration{0, 0, 0, 0, 3*sec + ms(10),
			3*sec + ms(135), 3*sec + ms(260), 3*sec + ms(385), 3*sec + ms(510), 3*sec + ms(635), 3*sec + ms(760)}, s.times(""))
		assert.Equal(t, "/x2", s.attempts()[4].path, "the throttled request probes first")
		for i, a := range s.attempts()[5:] {
			assert.Equal(t, fmt.Sprint("/x", i+4), a.path, "the backlog follows in arrival order")
		}
		assert.EqualValues(t, 8, rt.Stats().Keys["p.test"].Rate)
	})
}

func TestPauseIsExtendedNeverShortened(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(ms(10), func(r *http.Request, n int) *http.Response {
			switch {
			case r.URL.Path == "/long" && n == 1:
				return reply(r, http.StatusTooManyRequests, "Retry-After", "10")
			case r.URL.Path == "/short" && n == 1:
				return reply(r, http.StatusTooManyRequests, "Retry-After", "1")
			}
			return reply(r, http.StatusOK)
		})
		rt := throttle.New(s)
		defer rt.Close()
		var wg sync.WaitGroup
		for _, p := range []string{"/long", "/short"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := status(t, rt, http.MethodGet, "http://e.test"+p)
				assert.NoError(t, err)
			}()
		}
		wg.Wait()
		// Both were on the wire together; the 1s pause does not cut the 10s one.
		for _, a := range s.attempts()[2:] {
			assert.GreaterOrEqual(t, a.at, 10*time.Second+ms(10), a.path)
		}
	})
}

func TestRetryAfterForms(t *testing.T) {
	for _, tt := range []struct {
		name  string
		value func(now time.Time) string
		want  time.Duration
	}{
		{"seconds", func(time.Time) string { return "3" }, 3 * time.Second},
		{"decimal", func(time.Time) string { return " 1.5 " }, ms(1500)},
		{"imf-fixdate", func(now time.Time) string { return now.Add(4 * time.Second).UTC().Format(http.TimeFormat) }, 4 * time.Second},
		{"rfc850", func(now time.Time) string { return now.Add(5 * time.Second).UTC().Format(time.RFC850) }, 5 * time.Second},
		{"asctime", func(now time.Time) string { return now.Add(6 * time.Second).UTC().Format(time.ANSIC) }, 6 * time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// The bubble's clock starts at a whole second, so dates are exact.
				s := newScript(0, func(r *http.Request, n int) *http.Response {
					if n == 1 {
						return reply(r, http.StatusTooManyRequests, "Retry-After", tt.value(time.Now()))
					}
					return reply(r, http.StatusOK)
				})
				rt := throttle.New(s)
				defer rt.Close()
				code, err := status(t, rt, http.MethodGet, "http://f.test/")
				require.NoError(t, err)
				assert.Equal(t, http.StatusOK, code)
				assert.Equal(t, []time.Duration{0, tt.want}, s.times(""))
			})
		})
	}
}

// TestMergedRetryAfterPausesForTheLongestWait guards that a Retry-After an
// intermediary merged from two field lines ("120, 120", two HTTP-dates
// joined with ", ", each with its own comma), or one sent as two lines, is
// read: the key pauses for the longest wait stated, and the refused
// request's retry waits it; one malformed element makes the whole value
// malformed, a refusal that states no wait (a second), but a malformed
// line is left out of several (so "120" and "soon" gave 120 s before any
// line but the first was read, and give it still). Regression, found in
// review 46: "120, 120" and the merged dates were malformed, the key paused
// a second (120 s and 90 s asked), and of the lines "60" and "120" only the
// first was read, 60 s.
func TestMergedRetryAfterPausesForTheLongestWait(t *testing.T) {
	date := func(now time.Time, d time.Duration) string { return now.Add(d).UTC().Format(http.TimeFormat) }
	for _, tt := range []struct {
		name  string
		lines func(now time.Time) []string
		want  time.Duration
	}{
		{"seconds merged", func(time.Time) []string { return []string{"120, 120"} }, 120 * time.Second},
		{"seconds merged, longest first", func(time.Time) []string { return []string{"120, 60"} }, 120 * time.Second},
		{"seconds merged without a space", func(time.Time) []string { return []string{"60,120"} }, 120 * time.Second},
		{"two lines, longest last", func(time.Time) []string { return []string{"60", "120"} }, 120 * time.Second},
		{"dates merged", func(now time.Time) []string {
			return []string{date(now, 90*time.Second) + ", " + date(now, 30*time.Second)}
		}, 90 * time.Second},
		{"rfc850 and asctime merged", func(now time.Time) []string {
			return []string{now.Add(20*time.Second).UTC().Format(time.RFC850) + ", " + now.Add(40*time.Second).UTC().Format(time.ANSIC)}
		}, 40 * time.Second},
		{"a date line and a seconds line", func(now time.Time) []string { return []string{date(now, 30*time.Second), "45"} }, 45 * time.Second},
		{"an empty line", func(time.Time) []string { return []string{"", "75"} }, 75 * time.Second},
		{"one element malformed", func(time.Time) []string { return []string{"120, soon"} }, time.Second},
		{"one line malformed", func(time.Time) []string { return []string{"120", "soon"} }, 120 * time.Second},
		{"one line malformed, first", func(time.Time) []string { return []string{"soon", "60"} }, 60 * time.Second},
		{"every line malformed", func(time.Time) []string { return []string{"soon", "later"} }, time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// The bubble's clock starts at a whole second, so dates are exact.
				s := newScript(0, func(r *http.Request, n int) *http.Response {
					if r.URL.Path == "/a" && n == 1 {
						resp := reply(r, http.StatusTooManyRequests)
						resp.Header["Retry-After"] = tt.lines(time.Now())
						return resp
					}
					return reply(r, http.StatusOK)
				})
				var mu sync.Mutex
				var paused []throttle.Event
				rt := throttle.New(s, throttle.WithEvents(func(e throttle.Event) {
					if e.Kind == throttle.EventPaused {
						mu.Lock()
						paused = append(paused, e)
						mu.Unlock()
					}
				}))
				defer rt.Close()
				code, err := status(t, rt, http.MethodGet, "http://m.test/a")
				require.NoError(t, err)
				assert.Equal(t, http.StatusOK, code)
				assert.Equal(t, []time.Duration{0, tt.want}, s.times("/a"), "the retry waits the longest")
				mu.Lock()
				defer mu.Unlock()
				require.Len(t, paused, 1)
				assert.Equal(t, s.start.Add(tt.want), paused[0].Until, "the key pauses for the longest")
				if tt.want > time.Second {
					assert.Equal(t, "Retry-After", paused[0].Source)
				} else {
					assert.Equal(t, "backoff", paused[0].Source, "no wait stated")
				}
			})
		})
	}
}

func TestStatusHandling(t *testing.T) {
	tests := []struct {
		name     string
		method   string
		idemKey  bool
		status   int
		header   []string
		attempts int // sent before the caller got an answer
		paused   bool
	}{
		{"429-any-method", http.MethodPost, false, 429, []string{"Retry-After", "1"}, 2, true},
		{"429-no-retry-after-pauses-for-backoff", http.MethodGet, false, 429, nil, 2, true},
		{"503-retry-after-get-isolated", http.MethodGet, false, 503, []string{"Retry-After", "1"}, 2, false},
		{"503-retry-after-post", http.MethodPost, false, 503, []string{"Retry-After", "1"}, 1, false},
		{"403-retry-after-post", http.MethodPost, false, 403, []string{"Retry-After", "1"}, 2, true},
		{"403-quota-spent-get", http.MethodGet, false, 403, []string{"X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "2"}, 2, true},
		{"403-plain-get", http.MethodGet, false, 403, nil, 1, false},
		{"503-plain-get", http.MethodGet, false, 503, nil, 2, false},
		{"502-post", http.MethodPost, false, 502, nil, 1, false},
		{"502-post-idempotency-key", http.MethodPost, true, 502, nil, 2, false},
		{"504-put", http.MethodPut, false, 504, nil, 2, false},
		{"500-get", http.MethodGet, false, 500, nil, 1, false},
		{"404-get", http.MethodGet, false, 404, nil, 1, false},
		{"200-get", http.MethodGet, false, 200, nil, 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newScript(0, func(r *http.Request, n int) *http.Response {
					if n == 1 {
						return reply(r, tt.status, tt.header...)
					}
					return reply(r, http.StatusOK)
				})
				rt := throttle.New(s)
				defer rt.Close()
				req := newReq(t, context.Background(), tt.method, "http://s.test/")
				if tt.idemKey {
					req.Header.Set("Idempotency-Key", "k1")
				}
				resp, err := rt.RoundTrip(req)
				require.NoError(t, err)
				resp.Body.Close()
				assert.Len(t, s.attempts(), tt.attempts)
				want := tt.status
				if tt.attempts > 1 {
					want = http.StatusOK
				}
				assert.Equal(t, want, resp.StatusCode, "the last answer, unchanged")
				assert.Equal(t, tt.paused, rt.Stats().Keys["s.test"].Pauses == 1, "paused")
			})
		})
	}
}

// A key that learns its pace from 429s is paused, and peeking, by one
// refusal; an attempt sent before that pause comes back refused with a
// Retry-After far in the future (a date in year 9999, or more seconds than
// a Duration holds: both saturate). That asks for a later end than the
// pause's: the key pauses until then, as it does for Retry-After: 1000,
// and the next request fails at once (regression, found in review: the
// end overflowed, the refusal was taken for the pause's own news, and the
// key sent again after 3 s).
func TestAFarRetryAfterDuringALearnedPausePausesTheKey(t *testing.T) {
	for _, ra := range []string{"1000", "Fri, 31 Dec 9999 23:59:59 GMT", "100000000000"} {
		t.Run(ra, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var afterSent atomic.Bool
				rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
					switch r.URL.Path {
					case "/slow": // sent before the pause, answered during it
						time.Sleep(ms(500))
						return reply(r, http.StatusTooManyRequests, "Retry-After", ra), nil
					case "/refused": // begins the pause (the learner's first)
						time.Sleep(ms(5))
						return reply(r, http.StatusTooManyRequests, "Retry-After", "3"), nil
					case "/after":
						afterSent.Store(true)
					}
					time.Sleep(ms(5))
					return reply(r, http.StatusOK), nil
				}), throttle.WithRetry(throttle.Retry{MaxAttempts: 1}))
				defer rt.Close()
				for i := range 5 {
					require.NoError(t, do(t, rt, fmt.Sprint("http://api.test/ok", i)))
				}
				slow := make(chan error)
				go func() { slow <- do(t, rt, "http://api.test/slow") }()
				time.Sleep(ms(10))
				require.NoError(t, do(t, rt, "http://api.test/refused")) // the key pauses (its peek at about 2.1 s)
				require.NoError(t, <-slow)                               // its 429 came at 0.5 s
				assert.ErrorIs(t, do(t, rt, "http://api.test/after"), throttle.ErrPaused)
				assert.False(t, afterSent.Load(), "nothing is sent during the wait the server asked for")
			})
		})
	}
}

// An outage the key never saw end (its job stopped during it) is forgotten
// with its record of answers: an isolated 503 an hour later delays only its
// own retry. Regression, found in review: the outage was still on, and
// that 503, the first answer since, paused the whole key for its
// Retry-After; a request beside it took 9.97 s, not 10 ms.
func TestAnOutageLongOverIsForgotten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var down atomic.Bool
		down.Store(true)
		var n atomic.Int64
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			time.Sleep(ms(10))
			if down.Load() || r.URL.Path == "/unlucky" {
				ra := "1"
				if r.URL.Path == "/unlucky" {
					ra = "10"
				}
				return reply(r, http.StatusServiceUnavailable, "Retry-After", ra), nil
			}
			n.Add(1)
			return reply(r, http.StatusOK), nil
		})
		rt := throttle.New(base)
		defer rt.Close()
		for range 5 { // POSTs: never retried; the fifth begins an outage
			_, err := status(t, rt, http.MethodPost, "http://o.test/")
			require.NoError(t, err)
		}
		require.EqualValues(t, 1, rt.Stats().Keys["o.test"].Outages)
		down.Store(false)
		time.Sleep(time.Hour) // the job stopped; the server is back; nothing is sent

		// One unlucky 503 (Retry-After: 10 s this time) among requests to a healthy server.
		start := time.Now()
		var wg sync.WaitGroup
		wg.Go(func() {
			req := newReq(t, t.Context(), http.MethodPost, "http://o.test/unlucky")
			resp, err := rt.RoundTrip(req)
			if assert.NoError(t, err) {
				resp.Body.Close()
			}
		})
		synctest.Wait()
		var took []time.Duration
		for range 3 {
			time.Sleep(ms(50))
			s := time.Now()
			require.NoError(t, do(t, rt, "http://o.test/ok"))
			took = append(took, time.Since(s))
		}
		wg.Wait()
		st := rt.Stats().Keys["o.test"]
		t.Logf("after the idle hour: requests beside the 503 took %v; pauses %d (began %v ago)", took, st.Pauses, time.Since(start))
		for _, d := range took {
			assert.Less(t, d, 100*time.Millisecond, "an isolated 503 delays only its own retry")
		}
		assert.EqualValues(t, 1, st.Pauses, "no pause but the outage's")
	})
}

// A 429 that states no wait is taken to ask for a second, "as is the pause
// of its key" (Retry), and ErrPaused is for a key "held by the server for
// longer than the longest Retry-After honoured". A long retry backoff is
// the refused request's own: it must not hold the whole key, nor make the
// others fail with ErrPaused for a wait no server asked for.
func TestARefusalThatStatesNoWaitPausesTheKeyASecond(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		n := 0
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			defer mu.Unlock()
			if n++; n == 1 {
				return reply(r, http.StatusTooManyRequests), nil // no Retry-After, no quota headers
			}
			return reply(r, http.StatusOK), nil
		})
		var paused []time.Duration
		start := time.Now()
		rt := throttle.New(base,
			throttle.WithRetry(throttle.Retry{InitialDelay: time.Hour, MaxDelay: time.Hour, MaxElapsed: 2 * time.Hour}),
			throttle.WithEvents(func(e throttle.Event) {
				if e.Kind == throttle.EventPaused {
					mu.Lock()
					paused = append(paused, e.Until.Sub(start))
					mu.Unlock()
				}
			}))
		defer rt.Close()
		go func() {
			resp, err := rt.RoundTrip(newReq(t, context.Background(), http.MethodGet, "http://api.test/a"))
			if assert.NoError(t, err) {
				resp.Body.Close()
			}
		}()
		time.Sleep(2 * time.Second)
		resp, err := rt.RoundTrip(newReq(t, context.Background(), http.MethodGet, "http://api.test/b"))
		require.NoError(t, err, "another request, 2 s after a 429 that asked for no wait")
		resp.Body.Close()
		assert.Equal(t, 2*time.Second, time.Since(start), "it goes at once: the key's pause of a second is over")
		mu.Lock()
		for _, p := range paused {
			assert.LessOrEqual(t, p, time.Second, "the key paused until %v for a 429 that asked for no wait", p)
		}
		mu.Unlock()
		time.Sleep(3 * time.Hour) // the refused request's own retry
	})
}

// A pause that begins while requests wait puts their turns after its end.
// A waiter behind the head of the line whose deadline falls within the
// pause must fail at once, with an error that says until when the key is
// paused (README, Pause: "A request that would have to wait out a pause
// ... past its deadline, fails at once"), as the head does and as it would
// have at its arrival; not wait out its deadline and fail with the bare
// context error. One whose deadline the pause leaves room for still goes.
func TestAPauseFailsAtOnceTheWaitersBehindTheHeadItPutsPastTheirDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			if r.URL.Path == "/refused" {
				time.Sleep(500 * time.Millisecond) // answered at 0.5 s: the key pauses until 30.5 s
				return reply(r, http.StatusTooManyRequests, "Retry-After", "30"), nil
			}
			return reply(r, http.StatusOK), nil
		})
		rt := throttle.New(base, throttle.WithPolicy(throttle.Policy{Rate: 1, Queue: 10}))
		defer rt.Close()

		var wg sync.WaitGroup
		wg.Go(func() { // goes at once
			_ = doCtx(t, throttle.With(context.Background(), throttle.NoRetry()), rt, "http://api.example.com/refused")
		})
		time.Sleep(100 * time.Millisecond)
		wg.Go(func() { // the head of the line: no deadline, its turn at 1 s, then after the pause
			assert.NoError(t, do(t, rt, "http://api.example.com/head"))
		})
		time.Sleep(100 * time.Millisecond)
		var shortErr error
		var shortEnd time.Duration
		wg.Go(func() { // behind it, deadline at 5.2 s: its turn was 2 s, now after 30.5 s
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			shortErr = doCtx(t, ctx, rt, "http://api.example.com/short")
			shortEnd = time.Since(start)
		})
		time.Sleep(100 * time.Millisecond)
		wg.Go(func() { // behind both, deadline at 40.3 s: the pause leaves it room
			ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
			defer cancel()
			assert.NoError(t, doCtx(t, ctx, rt, "http://api.example.com/long"))
		})
		wg.Wait()

		require.ErrorIs(t, shortErr, throttle.ErrWouldExceedDeadline,
			"failed at %v: %v", shortEnd, shortErr)
		var we *throttle.WaitError
		require.True(t, errors.As(shortErr, &we))
		assert.Equal(t, throttle.LimitPause, we.Limit)
		assert.Equal(t, start.Add(30500*time.Millisecond), we.Until)
		assert.Equal(t, 500*time.Millisecond, shortEnd, "it fails when the pause begins")
	})
}
