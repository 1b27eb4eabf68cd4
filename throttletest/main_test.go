package throttletest_test

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"

	"github.com/throttlehttp/throttle/throttletest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const (
	target = "http://api.test/v1/items"
	ns     = time.Nanosecond
)

// result is a response read to its end.
type result struct {
	code   int
	header http.Header
	body   string
}

// get sends GET target with the API key key ("" for none).
func get(t *testing.T, rt http.RoundTripper, key string) result {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, target, nil)
	if !assert.NoError(t, err) {
		return result{}
	}
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	return roundTrip(t, rt, req)
}

// roundTrip sends req and reads the response; it may run outside the test's
// goroutine, so it only asserts.
func roundTrip(t *testing.T, rt http.RoundTripper, req *http.Request) result {
	t.Helper()
	resp, err := rt.RoundTrip(req)
	if !assert.NoError(t, err) {
		return result{}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	assert.NoError(t, err)
	return result{code: resp.StatusCode, header: resp.Header, body: string(b)}
}

// A step sleeps, then sends n requests (default 1) that must all get code, with
// the given Retry-After and X-RateLimit-Remaining when those are not "".
type step struct {
	sleep      time.Duration
	n          int
	code       int
	retryAfter string
	remaining  string
}

// runSteps plays steps against api, with key "k", inside the caller's bubble.
func runSteps(t *testing.T, api *throttletest.API, steps []step) {
	t.Helper()
	start := time.Now()
	for i, s := range steps {
		time.Sleep(s.sleep)
		for j := range max(s.n, 1) {
			r := get(t, api, "k")
			at := time.Since(start)
			assert.Equal(t, s.code, r.code, "step %d request %d at %v", i, j, at)
			if s.retryAfter != "" {
				assert.Equal(t, s.retryAfter, r.header.Get("Retry-After"), "step %d at %v", i, at)
			}
			if s.remaining != "" {
				assert.Equal(t, s.remaining, r.header.Get("X-RateLimit-Remaining"), "step %d at %v", i, at)
			}
		}
	}
}
