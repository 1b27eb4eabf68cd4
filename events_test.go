package throttle_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlehttp/throttle"
)

// eventLog records a transport's events.
type eventLog struct {
	mu     sync.Mutex
	events []throttle.Event
}

func (l *eventLog) option() throttle.Option {
	return throttle.WithEvents(func(e throttle.Event) {
		l.mu.Lock()
		l.events = append(l.events, e)
		l.mu.Unlock()
	})
}

func (l *eventLog) of(kind throttle.EventKind) []throttle.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []throttle.Event
	for _, e := range l.events {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

type traceKey struct{}

// Every event says which request it is about: its method, its URL without
// the parts that may hold credentials, the attempt, and its context, which
// carries what the caller put there (a trace span, say).
func TestEventsSayWhichRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := 0
		base := rtFunc(func(req *http.Request) (*http.Response, error) {
			n++
			if n == 1 { // a wait over 2 s: the quota spent, not a collision; the key pauses
				return reply(req, http.StatusTooManyRequests, "Retry-After", "3"), nil
			}
			return reply(req, http.StatusOK), nil
		})
		var log eventLog
		rt := throttle.New(base, log.option(), throttle.WithPolicy(throttle.Policy{Rate: 10, Burst: 1}))
		defer rt.Close()
		ctx := context.WithValue(context.Background(), traceKey{}, "span-42")
		req, err := http.NewRequestWithContext(ctx, http.MethodPost,
			"https://user:hunter2@API.example.com/v1/items?api_key=s3cr3t#frag", strings.NewReader("{}"))
		require.NoError(t, err)
		resp, err := rt.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()

		log.mu.Lock()
		events := append([]throttle.Event(nil), log.events...)
		log.mu.Unlock()
		var kinds []throttle.EventKind
		for _, e := range events {
			kinds = append(kinds, e.Kind)
			assert.Equal(t, http.MethodPost, e.Method, "%v", e.Kind)
			assert.Equal(t, "https://API.example.com/v1/items", e.URL, "%v", e.Kind)
			require.NotNil(t, e.Context, "%v", e.Kind)
			assert.Equal(t, "span-42", e.Context.Value(traceKey{}), "%v", e.Kind)
			logged := fmt.Sprint(e.LogValue())
			for _, secret := range []string{"hunter2", "s3cr3t", "frag"} {
				assert.NotContains(t, e.URL+logged, secret)
			}
		}
		assert.Equal(t, []throttle.EventKind{throttle.EventAnswered, throttle.EventThrottled, throttle.EventPace, throttle.EventPaused,
			throttle.EventRetry, throttle.EventWaited, throttle.EventAnswered}, kinds)
		assert.Equal(t, "policy, adapted to 429s", events[2].Reason)
		assert.EqualValues(t, 8, events[2].Rate, "the pace cut to 0.8 of 10")
		assert.Equal(t, 2, events[5].Attempt, "the retry waited")
	})
}

// Each request's events show its own URL, whatever the requests before it
// showed: the URL the events last showed is kept, for a request to the same
// URL to take rather than make again (see request.url), and never given to
// another.
func TestEventsShowEachRequestsOwnURL(t *testing.T) {
	var log eventLog
	rt := throttle.New(rtFunc(func(req *http.Request) (*http.Response, error) { return reply(req, http.StatusOK), nil }),
		log.option())
	defer rt.Close()
	urls := []struct{ raw, shown string }{
		{"https://api.example.com/v1/items", "https://api.example.com/v1/items"},
		{"https://api.example.com/v1/items?page=2", "https://api.example.com/v1/items"},
		{"https://api.example.com/v1/items/2", "https://api.example.com/v1/items/2"},
		{"https://api.example.com/v1/items", "https://api.example.com/v1/items"},
		{"https://api.example.com:8443/v1/items", "https://api.example.com:8443/v1/items"},
		{"http://api.example.com/v1/items", "http://api.example.com/v1/items"},
		{"https://API.example.com/v1/items", "https://API.example.com/v1/items"},
		{"https://api.example.com/v1/a%2Fb", "https://api.example.com/v1/a%2Fb"},
		{"https://api.example.com/v1/a/b", "https://api.example.com/v1/a/b"},
		{"https://api.example.com/v1/a%2Fb", "https://api.example.com/v1/a%2Fb"},
	}
	for _, u := range urls {
		req, err := http.NewRequest(http.MethodGet, u.raw, nil)
		require.NoError(t, err)
		resp, err := rt.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
	}
	answered := log.of(throttle.EventAnswered)
	require.Len(t, answered, len(urls))
	for i, u := range urls {
		assert.Equal(t, u.shown, answered[i].URL, "request %d: %s", i+1, u.raw)
	}
}

// So do requests to URLs of their own at once: the URL kept is taken only
// by a request to it.
func TestEventsShowEachRequestsOwnURLAtOnce(t *testing.T) {
	type wantKey struct{}
	events := throttle.WithEvents(func(e throttle.Event) {
		if want := e.Context.Value(wantKey{}).(string); e.URL != want {
			t.Errorf("%v: %s, want %s", e.Kind, e.URL, want)
		}
	})
	rt := throttle.New(rtFunc(func(req *http.Request) (*http.Response, error) { return reply(req, http.StatusOK), nil }),
		events)
	defer rt.Close()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				u := fmt.Sprintf("https://api.example.com/v1/items/%d", g%4) // two goroutines a URL
				if i%3 == 0 {
					u = "https://api.example.com/v1/items"
				}
				ctx := context.WithValue(context.Background(), wantKey{}, u)
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u+"?page=1", nil)
				resp, err := rt.RoundTrip(req)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
}

// An attempt that waited for its turn says how long, and which limit let it
// go; one that went at once says nothing.
func TestEventWaited(t *testing.T) {
	tests := []struct {
		name string
		p    throttle.Policy
		wait time.Duration // of the third request
		held throttle.Limit
	}{
		{"token bucket", throttle.Policy{Rate: 10, Burst: 3}, 100 * time.Millisecond, throttle.LimitRate},
		{"queue", throttle.Policy{Rate: 10, Queue: 5}, 100 * time.Millisecond, throttle.LimitQueue},
		{"window", throttle.Policy{Windows: []throttle.Window{{N: 2, Per: time.Second}}}, time.Second, throttle.LimitWindow},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var log eventLog
				rt := throttle.New(newRecorder(), log.option(), throttle.WithPolicy(tc.p))
				defer rt.Close()
				for range 3 {
					require.NoError(t, do(t, rt, "http://api.test/x"))
				}
				waited := log.of(throttle.EventWaited)
				require.NotEmpty(t, waited)
				last := waited[len(waited)-1]
				assert.Equal(t, tc.wait, last.Wait)
				assert.Equal(t, tc.held, last.Limit)
				assert.Equal(t, 1, last.Attempt)
				assert.Contains(t, fmt.Sprint(last.LogValue()), "limit="+tc.held.String())
			})
		})
	}
}

// A request that ends without being sent says why, and which limit held it.
func TestEventRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log eventLog
		rt := throttle.New(newRecorder(), log.option(), throttle.WithPolicy(throttle.Policy{Rate: 1, Queue: 1}))
		require.NoError(t, do(t, rt, "http://api.test/x")) // the next goes in a second

		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		assert.ErrorIs(t, doCtx(t, ctx, rt, "http://api.test/x"), throttle.ErrWouldExceedDeadline)

		started := make(chan struct{})
		go func() {
			close(started)
			assert.ErrorIs(t, do(t, rt, "http://api.test/x"), throttle.ErrClosed) // waits in the queue
		}()
		<-started
		synctest.Wait()
		assert.ErrorIs(t, do(t, rt, "http://api.test/x"), throttle.ErrQueueFull)
		rt.Close()
		synctest.Wait()

		refused := log.of(throttle.EventRefused)
		require.Len(t, refused, 3)
		for i, want := range []struct {
			err   error
			limit throttle.Limit
		}{
			{throttle.ErrWouldExceedDeadline, throttle.LimitQueue},
			{throttle.ErrQueueFull, throttle.LimitQueue},
			{throttle.ErrClosed, throttle.LimitQueue},
		} {
			assert.ErrorIs(t, refused[i].Err, want.err, "refusal %d", i)
			assert.Equal(t, want.limit, refused[i].Limit, "refusal %d", i)
			var we *throttle.WaitError
			assert.True(t, errors.As(refused[i].Err, &we))
		}
	})
}

// Every attempt sent says what came back: its status code, or the base's
// error; a request refused before it was sent says nothing of an answer.
func TestEventAnswered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		errNet := syscall.ECONNRESET
		answers := []func(*http.Request) (*http.Response, error){
			func(req *http.Request) (*http.Response, error) { return nil, errNet },
			func(req *http.Request) (*http.Response, error) { return reply(req, http.StatusServiceUnavailable), nil },
			func(req *http.Request) (*http.Response, error) { return reply(req, http.StatusOK), nil },
		}
		n := 0
		base := rtFunc(func(req *http.Request) (*http.Response, error) {
			n++
			return answers[n-1](req)
		})
		var log eventLog
		rt := throttle.New(base, log.option(), throttle.WithPolicy(throttle.Policy{Rate: 1, Queue: 1}))
		defer rt.Close()
		require.NoError(t, do(t, rt, "http://api.test/x"))
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		require.ErrorIs(t, doCtx(t, ctx, rt, "http://api.test/x"), throttle.ErrWouldExceedDeadline)

		answered := log.of(throttle.EventAnswered)
		require.Len(t, answered, 3, "one per attempt sent, none for the refusal")
		for i, want := range []struct {
			status int
			err    error
		}{{0, errNet}, {http.StatusServiceUnavailable, nil}, {http.StatusOK, nil}} {
			assert.Equal(t, i+1, answered[i].Attempt)
			assert.Equal(t, want.status, answered[i].Status, "attempt %d", i+1)
			if want.err == nil {
				assert.NoError(t, answered[i].Err, "attempt %d", i+1)
			} else {
				assert.ErrorIs(t, answered[i].Err, want.err, "attempt %d", i+1)
			}
		}
		assert.Equal(t, "answered", throttle.EventAnswered.String())
	})
}

// The events' log line names the request, never its context.
func TestEventLogValue(t *testing.T) {
	e := throttle.Event{Kind: throttle.EventWaited, Key: "api.test", Method: "GET", URL: "https://api.test/x",
		Context: context.WithValue(context.Background(), traceKey{}, "span"), Attempt: 1,
		Wait: 250 * time.Millisecond, Limit: throttle.LimitRate}
	var b strings.Builder
	slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == "time" {
			return slog.Attr{}
		}
		return a
	}})).Info("throttle", "event", e)
	assert.Equal(t, "level=INFO msg=throttle event.kind=waited event.key=api.test event.method=GET event.url=https://api.test/x event.attempt=1 event.wait=250ms event.limit=rate\n", b.String())
}

// A base RoundTripper's error that names the request's URL (a *url.Error,
// as a base built on an http.Client returns) carries its query and user
// info: events and their log lines show it as it is, where Event.URL
// drops them for holding credentials. So too the URL of a retry that
// Retry.Prepare signed. Regression, found in review: Event.Err and its
// log line showed the user info, the API key and the fragment.
func TestEventsShowNoCredentialOfTheBasesError(t *testing.T) {
	const token = "sk_live_9f8e7d6c5b4a3210"
	const sig = "c2lnbmF0dXJlLW9mLXRoZS1yZXRyeQ"
	for _, tt := range []struct {
		prepare, urlError bool
	}{{false, true}, {true, true}, {false, false}, {true, false}} {
		prepare := tt.prepare
		t.Run(fmt.Sprint("prepare=", prepare, "/url.Error=", tt.urlError), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var logs bytes.Buffer
				var mu sync.Mutex
				log := slog.New(slog.NewTextHandler(&logs, nil))
				var errs []string
				var found []string // the URL of the *url.Error errors.As finds in each Event.Err
				retry := throttle.Retry{MaxAttempts: 2}
				if prepare {
					retry.Prepare = func(r *http.Request, attempt int) error {
						q := r.URL.Query()
						q.Set("X-Amz-Signature", sig)
						r.URL.RawQuery = q.Encode()
						return nil
					}
				}
				rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
					if !tt.urlError {
						return nil, fmt.Errorf("fetching %s: %w", r.URL, syscall.ECONNRESET)
					}
					return nil, &url.Error{Op: "Get", URL: r.URL.String(), Err: errors.New("connection reset by peer")}
				}), throttle.WithRetry(retry), throttle.WithEvents(func(e throttle.Event) {
					mu.Lock()
					defer mu.Unlock()
					log.Info("throttle", "event", e)
					if e.Err != nil {
						errs = append(errs, e.Err.Error())
						if ue := (*url.Error)(nil); errors.As(e.Err, &ue) {
							found = append(found, ue.URL)
						}
					}
				}))
				defer rt.Close()
				err := do(t, rt, "https://bob:"+token+"@api.test/v1/items?api_key="+token+"#"+token)
				require.Error(t, err)
				require.NotEmpty(t, errs)
				for _, secret := range []string{token, sig} {
					assert.NotContains(t, logs.String(), secret, "the events' log lines")
					for _, e := range errs {
						assert.NotContains(t, e, secret, "an Event's Err")
					}
					for _, u := range found {
						assert.NotContains(t, u, secret, "the *url.Error in an Event's Err")
					}
				}
				assert.Contains(t, errs[0], "https://api.test/v1/items", "the URL as events show it")
				assert.Equal(t, tt.urlError, len(found) == len(errs), "a *url.Error is shown as one")
			})
		})
	}
}

// A key paced by Windows alone whose window a 429 cut says so: Stats
// shows the cut window's N per Per as its Rate, from its Policy, and
// EventPace fires with it; once the window is whole again, Rate is 0.
// Regression, found in review: the cut paced the key at 8 a second where
// 10 were configured, and neither Stats nor any event said so.
func TestACutWindowIsShownAsThePace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := 0
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			n++
			if n == 10 {
				return reply(r, http.StatusTooManyRequests, "Retry-After", "3"), nil
			}
			return reply(r, http.StatusOK), nil
		})
		var mu sync.Mutex
		var paces []throttle.Event
		rt := throttle.New(base, throttle.WithPolicy(throttle.Policy{Windows: []throttle.Window{{N: 10, Per: time.Second}}}),
			throttle.WithRetry(throttle.Retry{MaxAttempts: 1}),
			throttle.WithEvents(func(e throttle.Event) {
				if e.Kind == throttle.EventPace {
					mu.Lock()
					paces = append(paces, e)
					mu.Unlock()
				}
			}))
		defer rt.Close()
		for range 10 {
			_, err := status(t, rt, http.MethodGet, "http://w.test/")
			require.NoError(t, err)
		}
		st := rt.Stats().Keys["w.test"]
		assert.InDelta(t, 8, float64(st.Rate), 0.01, "the window cut to 8 of 10 a second")
		assert.Equal(t, throttle.PacePolicy, st.PaceFrom)
		mu.Lock()
		require.NotEmpty(t, paces, "an EventPace for the cut")
		assert.InDelta(t, 8, float64(paces[0].Rate), 0.01)
		assert.Equal(t, "policy, adapted to 429s", paces[0].Reason)
		mu.Unlock()

		// Quiet answers for two minutes: the window climbs back whole.
		for range 120 {
			time.Sleep(time.Second)
			_, err := status(t, rt, http.MethodGet, "http://w.test/")
			require.NoError(t, err)
		}
		st = rt.Stats().Keys["w.test"]
		assert.Zero(t, st.Rate, "whole again")
		mu.Lock()
		defer mu.Unlock()
		assert.Zero(t, paces[len(paces)-1].Rate, "the last EventPace says so: %v", paces)
	})
}
