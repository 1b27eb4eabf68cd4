package throttle_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"

	"github.com/throttlehttp/throttle"
	"github.com/throttlehttp/throttle/throttletest"
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

// recorder is a base RoundTripper that answers 200 and logs when each
// request was sent, by URL.
type recorder struct {
	mu    sync.Mutex
	start time.Time
	sent  []sent
}

type sent struct {
	at  time.Duration
	url string
}

func newRecorder() *recorder { return &recorder{start: time.Now()} }

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	r.mu.Lock()
	r.sent = append(r.sent, sent{time.Since(r.start), req.URL.String()})
	r.mu.Unlock()
	return reply(req, http.StatusOK), nil
}

func (r *recorder) times() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ts []time.Duration
	for _, s := range r.sent {
		ts = append(ts, s.at)
	}
	return ts
}

func (r *recorder) urls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var us []string
	for _, s := range r.sent {
		us = append(us, s.url)
	}
	return us
}

func newReq(t *testing.T, ctx context.Context, method, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// do sends a GET through rt and closes the response.
func do(t *testing.T, rt http.RoundTripper, url string) error {
	t.Helper()
	return doCtx(t, context.Background(), rt, url)
}

func doCtx(t *testing.T, ctx context.Context, rt http.RoundTripper, url string) error {
	t.Helper()
	resp, err := rt.RoundTrip(newReq(t, ctx, http.MethodGet, url))
	if err == nil {
		resp.Body.Close()
	}
	return err
}

// ms is a shorthand for durations in test tables.
func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// paceLog returns an option that records the transport's EventPace events,
// and a function that returns those recorded so far.
func paceLog() (throttle.Option, func() []throttle.Event) {
	var mu sync.Mutex
	var paces []throttle.Event
	opt := throttle.WithEvents(func(e throttle.Event) {
		if e.Kind == throttle.EventPace {
			mu.Lock()
			paces = append(paces, e)
			mu.Unlock()
		}
	})
	return opt, func() []throttle.Event {
		mu.Lock()
		defer mu.Unlock()
		return append([]throttle.Event(nil), paces...)
	}
}

// nearby sets on cfg the noise of a server nearby, seeded: requests reach
// its quotas 0-2 ms late, answers come 1-3 ms after.
func nearby(cfg throttletest.Config, seed int64) throttletest.Config {
	cfg.ArrivalJitter, cfg.Latency, cfg.LatencyJitter, cfg.Seed = 2*time.Millisecond, time.Millisecond, 2*time.Millisecond, seed
	return cfg
}

// The quotas of issue 9's rows (bench/cmd/e2e): a token bucket of 200/s,
// burst 20; a fixed window of 100 a second; a sliding log of 200 a second.
var (
	quotaBucket = throttletest.Limit{Algorithm: throttletest.TokenBucket, Rate: 200, Burst: 20}
	quotaWindow = throttletest.Limit{Algorithm: throttletest.FixedWindow, N: 100, Per: time.Second}
	quotaLog    = throttletest.Limit{Algorithm: throttletest.SlidingLog, N: 200, Per: time.Second}
)

// peerRate is the pace the model of go-retryablehttp + x/time/rate is told
// for the quota l: a bucket's rate and depth, or a window's or a log's N a
// Per, one at a time.
func peerRate(l throttletest.Limit) (float64, int) {
	if l.Rate == 0 {
		return float64(l.N) / l.Per.Seconds(), 1
	}
	return l.Rate, l.Burst
}

// windowJobHolds runs 4,000 records through rt against api, a window of
// 100 a second (quotaWindow), and checks that the job took 1.1x its ideal
// at most, with 30 requests refused at most.
func windowJobHolds(t *testing.T, rt http.RoundTripper, api *throttletest.API) {
	t.Helper()
	windowJobWithin(t, rt, api, 1.1, 30)
}

// windowJobWithin is windowJobHolds with the bounds given: the job's time
// over its ideal, and the requests refused.
func windowJobWithin(t *testing.T, rt http.RoundTripper, api *throttletest.API, x float64, most int64) {
	t.Helper()
	took := job(t, rt, 4000)
	ideal := 39 * time.Second // (4,000 - 100) / 100
	refused := api.Stats().Total.Throttled
	t.Logf("took %v (%.3fx the ideal), %d refused", took, took.Seconds()/ideal.Seconds(), refused)
	assert.LessOrEqual(t, took.Seconds(), x*ideal.Seconds(), "within %vx the ideal", x)
	assert.LessOrEqual(t, refused, most)
}
