package otelthrottle_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/goleak"

	"github.com/throttlehttp/throttle"
	"github.com/throttlehttp/throttle/otelthrottle"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// rtFunc is a fake base RoundTripper.
type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// reply returns a response with the status and header pairs given.
func reply(req *http.Request, status int, kv ...string) *http.Response {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader("body")), Request: req}
}

// newMetrics returns Metrics on an SDK MeterProvider, and its reader.
func newMetrics(t *testing.T, opts ...otelthrottle.Option) (*otelthrottle.Metrics, *sdkmetric.ManualReader) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	m, err := otelthrottle.New(append([]otelthrottle.Option{otelthrottle.WithMeterProvider(mp)}, opts...)...)
	require.NoError(t, err)
	return m, reader
}

// collect reads every instrument: by name, its points by their attributes
// ("k=v,k=v", sorted), the value of a sum or the count and sum of a
// histogram ("n=2 sum=1.5").
func collect(t *testing.T, r *sdkmetric.ManualReader) map[string]map[string]string {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.Collect(context.Background(), &rm))
	out := map[string]map[string]string{}
	for _, sm := range rm.ScopeMetrics {
		assert.Equal(t, otelthrottle.ScopeName, sm.Scope.Name)
		for _, m := range sm.Metrics {
			points := map[string]string{}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					points[p.Attributes.Encoded(attribute.DefaultEncoder())] = fmt.Sprint(p.Value)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					points[p.Attributes.Encoded(attribute.DefaultEncoder())] = fmt.Sprintf("n=%d sum=%g", p.Count, p.Sum)
				}
			default:
				t.Fatalf("%s: unexpected data %T", m.Name, m.Data)
			}
			out[m.Name] = points
		}
	}
	return out
}

// units reads the unit of every instrument, by name.
func units(t *testing.T, r *sdkmetric.ManualReader) map[string]string {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.Collect(context.Background(), &rm))
	out := map[string]string{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m.Unit
		}
	}
	return out
}

// eventLog records the events that reach the user's own function.
type eventLog struct {
	mu    sync.Mutex
	kinds []string
}

func (l *eventLog) fn(e throttle.Event) {
	l.mu.Lock()
	l.kinds = append(l.kinds, fmt.Sprintf("%d:%s", e.Attempt, e.Kind))
	l.mu.Unlock()
}

func get(ctx context.Context, t *testing.T, rt http.RoundTripper, method, url string) (int, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	require.NoError(t, err)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// srv is the attributes of the host, as collect shows them.
const srv = "server.address=api.test,server.port=443"

// A throttled job, read back from every instrument: a request waits in the
// queue behind one on the wire (the gauges see both), a 429 with
// Retry-After pauses the key and is retried once the pause ends, and a
// request that cannot end before its deadline is refused at once.
func TestMetricsOfAThrottledJob(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, reader := newMetrics(t)
		release := make(chan struct{})
		throttled := false
		base := rtFunc(func(req *http.Request) (*http.Response, error) {
			switch req.URL.Path {
			case "/slow":
				<-release
			case "/limited":
				if !throttled {
					throttled = true
					return reply(req, http.StatusTooManyRequests, "Retry-After", "3"), nil
				}
			}
			return reply(req, http.StatusOK), nil
		})
		var mine eventLog
		rt := throttle.New(base, throttle.WithEvents(m.Events(mine.fn)),
			throttle.WithHostPolicy("api.test", throttle.Policy{Rate: 1, Queue: 5}))
		defer rt.Close()
		stop := m.Observe(rt)
		defer stop()

		// One on the wire, one waiting behind it.
		var wg sync.WaitGroup
		for _, path := range []string{"/slow", "/queued"} {
			wg.Go(func() {
				code, err := get(context.Background(), t, rt, http.MethodGet, "https://api.test"+path)
				assert.NoError(t, err)
				assert.Equal(t, http.StatusOK, code)
			})
			synctest.Wait()
		}
		now := collect(t, reader)
		assert.Equal(t, map[string]string{"": "1"}, now["throttle.requests.waiting"])
		assert.Equal(t, map[string]string{"": "1"}, now["throttle.requests.in_flight"])
		close(release)
		wg.Wait() // the queued one goes at 1s

		// At 2s (the queue's next turn: a wait of 1s), a 429 with
		// Retry-After: 3 pauses the key (a wait of 2 s or less would be a
		// collision, which pauses nothing); a request with 100ms left is
		// refused at once meanwhile; the retry goes at 5s.
		wg.Go(func() {
			code, err := get(context.Background(), t, rt, http.MethodGet, "https://api.test/limited")
			assert.NoError(t, err)
			assert.Equal(t, http.StatusOK, code)
		})
		synctest.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		_, err := get(ctx, t, rt, http.MethodPost, "https://api.test/refused")
		cancel()
		assert.ErrorIs(t, err, throttle.ErrWouldExceedDeadline)
		wg.Wait()

		got := collect(t, reader)
		want := map[string]map[string]string{
			"throttle.attempts": {
				"http.request.method=GET,http.response.status_code=200," + srv: "3",
				"http.request.method=GET,http.response.status_code=429," + srv: "1",
			},
			"throttle.throttled": {"http.request.method=GET,http.response.status_code=429," + srv: "1"},
			"throttle.pauses":    {srv + ",throttle.pause.reason=quota,throttle.pause.source=Retry-After": "1"},
			"throttle.retries":   {"http.request.method=GET,http.response.status_code=429," + srv: "1"},
			"throttle.refusals": { // in line behind the retry, which waits out the pause
				"http.request.method=POST," + srv + ",throttle.limit=queue,throttle.refusal.reason=would_exceed_deadline": "1",
			},
			"throttle.wait.duration": {
				"http.request.method=GET," + srv + ",throttle.limit=queue": "n=2 sum=2", // /queued and /limited, 1s each
				"http.request.method=GET," + srv + ",throttle.limit=pause": "n=1 sum=3", // the retry
			},
			"throttle.requests.waiting":   {"": "0"},
			"throttle.requests.in_flight": {"": "0"},
		}
		assert.Equal(t, want, got)
		assert.Equal(t, map[string]string{
			"throttle.wait.duration": "s", "throttle.attempts": "{attempt}", "throttle.throttled": "{response}",
			"throttle.pauses": "{pause}", "throttle.retries": "{retry}", "throttle.refusals": "{request}",
			"throttle.requests.waiting": "{request}", "throttle.requests.in_flight": "{request}",
		}, units(t, reader))

		// The user's own function got every event, the metrics' or not.
		mine.mu.Lock()
		defer mine.mu.Unlock()
		sort.Strings(mine.kinds)
		assert.Equal(t, []string{"1:answered", "1:answered", "1:answered", "1:paused", "1:refused", "1:retry",
			"1:throttled", "1:waited", "1:waited", "2:answered", "2:waited"}, mine.kinds)
	})
}

// The gauges count the Transports observed, each once however often it is
// observed, until its last stop.
func TestObserveUntilStopped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, reader := newMetrics(t)
		arrived, release := make(chan struct{}), make(chan struct{})
		base := rtFunc(func(req *http.Request) (*http.Response, error) {
			arrived <- struct{}{}
			<-release
			return reply(req, http.StatusOK), nil
		})
		rt := throttle.New(base, throttle.WithEvents(m.Events(nil)))
		defer rt.Close()
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, err := get(context.Background(), t, rt, http.MethodGet, "https://api.test/x")
			assert.NoError(t, err)
		}()
		<-arrived
		inFlight := func() string { return collect(t, reader)["throttle.requests.in_flight"][""] }
		assert.Equal(t, "0", inFlight(), "not observed")
		stop1, stop2 := m.Observe(rt), m.Observe(rt)
		assert.Equal(t, "1", inFlight(), "observed twice, counted once")
		stop1()
		stop1()
		assert.Equal(t, "1", inFlight(), "a stop called twice stops once")
		stop2()
		assert.Equal(t, "0", inFlight())
		close(release)
		<-done
	})
}

// downStore is a Store out of reach: its own call's timeout passed, and it
// says so with the context's error of that call, wrapped in
// ErrStoreUnavailable as Store's contract asks ("store unavailable:
// context deadline exceeded"), while the request's context is live.
type downStore struct{}

func (downStore) Reserve(context.Context, string, throttle.Policy, int, time.Duration) (throttle.Reservation, error) {
	return throttle.Reservation{}, fmt.Errorf("%w: no answer within 200ms: %w", throttle.ErrStoreUnavailable, context.DeadlineExceeded)
}

func (downStore) Slow(context.Context, string, throttle.Policy, throttle.Slowdown) error { return nil }

// A request refused because the Store is out of reach is a refusal for the
// Store, throttle.refusal.reason "store_unavailable", as Stats counts it
// (RefusedStore), not "deadline_exceeded", which the documentation keeps
// for a request whose context ended while it waited: its context is live.
func TestAStoreOutOfReachIsNoDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, reader := newMetrics(t)
		rt := throttle.New(rtFunc(ok), throttle.WithEvents(m.Events(nil)), throttle.WithStore(downStore{}),
			throttle.WithPolicy(throttle.Policy{Rate: 10, Burst: 5}))
		defer rt.Close()
		_, err := get(context.Background(), t, rt, http.MethodGet, "https://api.test/x")
		require.ErrorIs(t, err, throttle.ErrStoreUnavailable)
		require.Equal(t, int64(1), rt.Stats().Total.RefusedStore, "Stats: a refusal for the Store")
		got := collect(t, reader)["throttle.refusals"]
		require.Len(t, got, 1)
		for attrs := range got {
			assert.Contains(t, attrs, "throttle.refusal.reason=store_unavailable")
		}
	})
}
