package otelthrottle_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlehttp/throttle"
	"github.com/throttlehttp/throttle/otelthrottle"
)

// What an attempt's attributes say of its request and its answer.
func TestAttemptAttributes(t *testing.T) {
	timeout := &net.OpError{Op: "read", Net: "tcp", Err: &timeoutErr{}}
	reset := &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	tests := []struct {
		name   string
		method string
		url    string
		answer func(*http.Request) (*http.Response, error)
		want   string // the attributes of throttle.attempts' one point
	}{
		{"https, default port", http.MethodGet, "https://API.Example.com/v1?key=s3cr3t", ok,
			"http.request.method=GET,http.response.status_code=200,server.address=api.example.com,server.port=443"},
		{"http, port given", http.MethodPut, "http://api.example.com:8080/v1", ok,
			"http.request.method=PUT,http.response.status_code=200,server.address=api.example.com,server.port=8080"},
		{"IPv6", http.MethodDelete, "http://[::1]:9000/x", ok,
			"http.request.method=DELETE,http.response.status_code=200,server.address=::1,server.port=9000"},
		{"a method of no RFC", "PROPFIND", "https://dav.example.com/x", ok,
			"http.request.method=_OTHER,http.response.status_code=200,server.address=dav.example.com,server.port=443"},
		{"a timeout", http.MethodPost, "https://api.example.com/x", fails(timeout),
			"error.type=timeout,http.request.method=POST,server.address=api.example.com,server.port=443"},
		{"the context canceled", http.MethodPost, "https://api.example.com/x", fails(context.Canceled),
			"error.type=canceled,http.request.method=POST,server.address=api.example.com,server.port=443"},
		{"the context's deadline", http.MethodPost, "https://api.example.com/x", fails(context.DeadlineExceeded),
			"error.type=timeout,http.request.method=POST,server.address=api.example.com,server.port=443"},
		{"a reset connection", http.MethodPost, "https://api.example.com/x", fails(reset),
			"error.type=*net.OpError,http.request.method=POST,server.address=api.example.com,server.port=443"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m, reader := newMetrics(t)
				rt := throttle.New(rtFunc(tc.answer), throttle.WithEvents(m.Events(nil)))
				defer rt.Close()
				_, _ = get(context.Background(), t, rt, tc.method, tc.url) // POST: not retried
				assert.Equal(t, map[string]string{tc.want: "1"}, collect(t, reader)["throttle.attempts"])
			})
		})
	}
}

func ok(req *http.Request) (*http.Response, error) { return reply(req, http.StatusOK), nil }

func fails(err error) func(*http.Request) (*http.Response, error) {
	return func(*http.Request) (*http.Response, error) { return nil, err }
}

type timeoutErr struct{}

func (*timeoutErr) Error() string   { return "i/o timeout" }
func (*timeoutErr) Timeout() bool   { return true }
func (*timeoutErr) Temporary() bool { return true }

var _ net.Error = (*timeoutErr)(nil)

// keyedJob runs requests of two tenants, with a WithKey that keys by
// tenant (a key throttle shows as it is, unlike one that holds a
// credential of its request, which it shows redacted), through every instrument: waits, a 429 and its pause and retry, a
// refusal, and the gauges with one request on the wire.
func keyedJob(t *testing.T, opts ...otelthrottle.Option) map[string]map[string]string {
	t.Helper()
	var got map[string]map[string]string
	synctest.Test(t, func(t *testing.T) {
		m, reader := newMetrics(t, opts...)
		arrived, release := make(chan struct{}), make(chan struct{})
		throttled := false
		base := rtFunc(func(req *http.Request) (*http.Response, error) {
			if req.URL.Path == "/slow" {
				close(arrived)
				<-release
			}
			if !throttled {
				throttled = true
				return reply(req, http.StatusTooManyRequests, "Retry-After", "3"), nil // a pause, not a collision
			}
			return reply(req, http.StatusOK), nil
		})
		rt := throttle.New(base, throttle.WithEvents(m.Events(nil)),
			throttle.WithKey(func(req *http.Request) string { return req.Header.Get("X-Tenant") }),
			throttle.WithPolicy(throttle.Policy{Rate: 1, Burst: 1}))
		defer rt.Close()
		defer m.Observe(rt)()
		for _, key := range []string{"tenant-1", "tenant-2"} {
			for range 2 {
				req, err := http.NewRequest(http.MethodGet, "https://api.test/x", nil)
				require.NoError(t, err)
				req.Header.Set("X-Tenant", key)
				resp, err := rt.RoundTrip(req)
				require.NoError(t, err)
				resp.Body.Close()
			}
			ctx, cancel := context.WithTimeout(context.Background(), 1)
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://api.test/x", nil)
			require.NoError(t, err)
			req.Header.Set("X-Tenant", key)
			_, err = rt.RoundTrip(req)
			cancel()
			require.ErrorIs(t, err, throttle.ErrWouldExceedDeadline)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			req, _ := http.NewRequest(http.MethodGet, "https://api.test/slow", nil)
			req.Header.Set("X-Tenant", "tenant-1")
			resp, err := rt.RoundTrip(req)
			if assert.NoError(t, err) {
				resp.Body.Close()
			}
		}()
		<-arrived
		got = collect(t, reader)
		close(release)
		<-done
	})
	for _, name := range []string{"throttle.wait.duration", "throttle.attempts", "throttle.throttled", "throttle.pauses",
		"throttle.retries", "throttle.refusals", "throttle.requests.waiting", "throttle.requests.in_flight"} {
		require.NotEmpty(t, got[name], "%s: the job reaches every instrument", name)
	}
	return got
}

// The partition key, whose number has no bound, is in no attribute unless
// WithKeyAttribute asks for it; then it is in every one.
func TestKeyOnlyWhenAskedFor(t *testing.T) {
	t.Run("by default", func(t *testing.T) {
		for name, points := range keyedJob(t) {
			for attrs := range points {
				assert.NotContains(t, attrs, "tenant-", name)
				assert.NotContains(t, attrs, "throttle.key", name)
			}
		}
	})
	t.Run("WithKeyAttribute", func(t *testing.T) {
		got := keyedJob(t, otelthrottle.WithKeyAttribute())
		for name, points := range got {
			for attrs := range points {
				assert.Regexp(t, `throttle\.key=tenant-[12]`, attrs, name)
			}
		}
		assert.Equal(t, map[string]string{"throttle.key=tenant-1": "1", "throttle.key=tenant-2": "0"},
			got["throttle.requests.in_flight"], "one series per key")
	})
}

// Events(nil) records the metrics alone; Events(fn) passes every event on,
// whatever its kind, unchanged.
func TestEventsPassesEveryEventOn(t *testing.T) {
	m, reader := newMetrics(t)
	var got []throttle.Event
	fn := m.Events(func(e throttle.Event) { got = append(got, e) })
	var sent []throttle.Event
	for k := throttle.EventKind(0); k <= throttle.EventAnswered+1; k++ {
		e := throttle.Event{Kind: k, Key: "k", Method: "GET", URL: "https://api.test/x", Attempt: 1, Status: 429,
			Err: errors.New("x"), Reason: "quota", Source: "Retry-After", Limit: throttle.LimitRate}
		sent = append(sent, e)
		fn(e)
		m.Events(nil)(e)
	}
	assert.Equal(t, sent, got)
	assert.Equal(t, map[string]string{
		"http.request.method=GET,http.response.status_code=429,server.address=api.test,server.port=443": "2",
	}, collect(t, reader)["throttle.attempts"], "each function recorded each event once")
}

// New without a MeterProvider uses the global one: no-op until one is set.
func TestNewWithTheGlobalProvider(t *testing.T) {
	m, err := otelthrottle.New()
	require.NoError(t, err)
	m.Events(nil)(throttle.Event{Kind: throttle.EventAnswered, URL: "https://api.test/", Method: "GET", Status: 200})
	assert.True(t, strings.HasPrefix(otelthrottle.ScopeName, "github.com/throttlehttp/throttle"))
}

// Past 1024 combinations of attributes, a new one is recorded in the
// overflow series, as the OTel SDK does past its own limit: the count is
// kept, the number of series bounded.
func TestOverflow(t *testing.T) {
	m, reader := newMetrics(t)
	record := m.Events(nil)
	for i := range 1029 {
		record(throttle.Event{Kind: throttle.EventAnswered, Method: "GET", URL: fmt.Sprintf("https://h%d.test/x", i), Status: 200})
	}
	record(throttle.Event{Kind: throttle.EventAnswered, Method: "GET", URL: "https://h0.test/y", Status: 200})
	record(throttle.Event{Kind: throttle.EventThrottled, Method: "GET", URL: "https://h1028.test/x", Status: 429})
	got := collect(t, reader)
	attempts := got["throttle.attempts"]
	assert.Equal(t, 1025, len(attempts))
	assert.Equal(t, "5", attempts["otel.metric.overflow=true"])
	assert.Equal(t, "2", attempts["http.request.method=GET,http.response.status_code=200,server.address=h0.test,server.port=443"])
	assert.Equal(t, map[string]string{"otel.metric.overflow=true": "1"}, got["throttle.throttled"])
}

// URLs that name one server one way or another count in one series; so do
// methods of no RFC.
func TestOneServerOneSeries(t *testing.T) {
	m, reader := newMetrics(t)
	record := m.Events(nil)
	for _, e := range []struct{ method, url string }{
		{"GET", "https://api.example.com/x"},
		{"GET", "https://API.Example.com/y"},
		{"GET", "https://api.example.com:443/z"},
		{"PROPFIND", "https://api.example.com/x"},
		{"MKCOL", "https://api.example.com/x"},
	} {
		record(throttle.Event{Kind: throttle.EventAnswered, Method: e.method, URL: e.url, Status: 200})
	}
	assert.Equal(t, map[string]string{
		"http.request.method=GET,http.response.status_code=200,server.address=api.example.com,server.port=443":    "3",
		"http.request.method=_OTHER,http.response.status_code=200,server.address=api.example.com,server.port=443": "2",
	}, collect(t, reader)["throttle.attempts"])
}

// The base's error that names the request's URL, query and all, keeps its
// own type in error.type, however throttle's events show its message
// (without the query: a *url.Error as a copy, another error wrapped).
func TestErrorTypeOfAnErrorNamingTheURL(t *testing.T) {
	for _, tt := range []struct {
		err  func(u *url.URL) error
		want string
	}{
		{func(u *url.URL) error {
			return &url.Error{Op: "Post", URL: u.String(), Err: errors.New("connection reset by peer")}
		}, "*url.Error"},
		{func(u *url.URL) error { return fmt.Errorf("dialing %s: %w", u, errors.ErrUnsupported) }, "*fmt.wrapError"},
	} {
		t.Run(tt.want, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m, reader := newMetrics(t)
				rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
					return nil, tt.err(r.URL)
				}), throttle.WithEvents(m.Events(nil)))
				defer rt.Close()
				_, _ = get(context.Background(), t, rt, http.MethodPost, "https://api.example.com/x?api_key=s3cr3t-0123456789")
				assert.Equal(t, map[string]string{
					"error.type=" + tt.want + ",http.request.method=POST,server.address=api.example.com,server.port=443": "1",
				}, collect(t, reader)["throttle.attempts"])
			})
		})
	}
}

// A request sent verbatim in the form net/url documents for URL.Opaque,
// "//host/path", whose authority carries the API's token as user info
// ("https://sk_live_…@api.test/…", as Stripe-style APIs take it): no
// attribute of any instrument holds the token, and server.address is the
// host the request goes to (URL.Host), not "token@host". Nor does the URL
// the events show, which the user's own events function (a logger) gets.
func TestOpaqueUserInfoIsInNoAttribute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const token = "sk_live_51Hsecret"
		m, reader := newMetrics(t)
		var shown []string
		rt := throttle.New(rtFunc(func(req *http.Request) (*http.Response, error) {
			return reply(req, http.StatusTooManyRequests, "Retry-After", "3"), nil
		}), throttle.WithEvents(m.Events(func(e throttle.Event) { shown = append(shown, e.URL) })),
			throttle.WithRetry(throttle.Retry{MaxAttempts: 2}))
		defer rt.Close()
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "https://api.test/", nil)
		require.NoError(t, err)
		req.URL.Opaque = "//" + token + "@api.test/v1/items%2F7"
		resp, err := rt.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()

		got := collect(t, reader)
		require.NotEmpty(t, got["throttle.attempts"])
		for name, points := range got {
			for attrs := range points {
				assert.NotContains(t, strings.ToLower(attrs), strings.ToLower(token), name) // server.address is lower-cased
				if strings.Contains(attrs, "server.address=") {
					assert.Contains(t, attrs, "server.address=api.test,", name)
				}
			}
		}
		require.NotEmpty(t, shown)
		for _, u := range shown {
			assert.NotContains(t, u, token, "Event.URL")
		}
	})
}
