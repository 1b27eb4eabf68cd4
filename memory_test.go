package throttle_test

import (
	"context"
	"net/http"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/throttlehttp/throttle"
)

// BenchmarkKeyMemory measures what a live key costs: the heap held by the
// Transport after each of many keys sent one request, over the keys still
// live (a key that went idle may have been dropped). Run it with
//
//	go test -run '^$' -bench KeyMemory -benchtime 1x -count 5 .
//
// and read B/key.
func BenchmarkKeyMemory(b *testing.B) {
	ok := &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody}
	okBase := rtFunc(func(*http.Request) (*http.Response, error) { return ok, nil })
	refused := &http.Response{StatusCode: http.StatusTooManyRequests,
		Header: http.Header{"Retry-After": {"3600"}}, Body: http.NoBody}
	refuseBase := rtFunc(func(*http.Request) (*http.Response, error) { return refused, nil })
	window := []throttle.Window{{N: 5000, Per: time.Hour}}

	for _, c := range []struct {
		name string
		base http.RoundTripper
		pol  throttle.Policy
		cost int
	}{
		{"unpaced", okBase, throttle.Policy{}, 1},
		{"bucket", okBase, throttle.Policy{Rate: 10, Burst: 10}, 1},
		{"window", okBase, throttle.Policy{Rate: 10, Burst: 10, Windows: window}, 1},
		{"window-cost100", okBase, throttle.Policy{Windows: window}, 100}, // a request of 100 units
		{"paused", refuseBase, throttle.Policy{}, 1},                      // held by a pause of an hour
	} {
		b.Run(c.name, func(b *testing.B) {
			var bytes, live float64
			for b.Loop() {
				by, n := keyMemory(b, c.base, c.pol, c.cost, 100_000)
				bytes += by
				live += n
			}
			b.ReportMetric(bytes/live, "B/key")
			b.ReportMetric(live/float64(b.N), "keys")
		})
	}
}

// keyMemory sends one request of the cost given for each of n keys, and
// returns the heap the Transport holds after, and how many keys it holds.
func keyMemory(b *testing.B, base http.RoundTripper, pol throttle.Policy, cost, n int) (bytes, live float64) {
	b.Helper()
	rt := throttle.New(base, throttle.WithPolicy(pol),
		throttle.WithKey(func(r *http.Request) string { return r.Header.Get("X-Tenant") }),
		throttle.WithRetry(throttle.Retry{MaxAttempts: 1}))
	defer rt.Close()
	ctx := context.Background()
	if cost > 1 {
		ctx = throttle.With(ctx, throttle.Cost(cost))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.example.com/v1/items", nil)
	if err != nil {
		b.Fatal(err)
	}
	before := heapAlloc()
	for i := range n {
		req.Header = http.Header{"X-Tenant": {"key-" + strconv.Itoa(i)}}
		resp, err := rt.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
	}
	req.Header = nil
	after := heapAlloc()
	runtime.KeepAlive(rt)
	return float64(after) - float64(before), float64(len(rt.Stats().Keys))
}

func heapAlloc() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
