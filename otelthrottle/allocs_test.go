//go:build !race

package otelthrottle_test

import (
	"net/http"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"golang.org/x/time/rate"

	"github.com/throttlehttp/throttle"
	"github.com/throttlehttp/throttle/otelthrottle"
)

// Regression: the metrics add no allocation to a request that waited
// nothing: recording its answer finds the attributes made before. Nor do
// the events, for requests that go to one URL; to a URL other than the
// last, they make the one they show (see
// throttle.TestRoundTripWithEventsAllocatesOnlyANewURL).
func TestMetricsAllocateNothing(t *testing.T) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	m, err := otelthrottle.New(otelthrottle.WithMeterProvider(mp))
	if err != nil {
		t.Fatal(err)
	}
	allocs := func(events func(throttle.Event), urls ...string) float64 {
		rt := throttle.New(okBase(), throttle.WithEvents(events),
			throttle.WithPolicy(throttle.Policy{Rate: rate.Limit(1e9), Burst: 1 << 30}))
		defer rt.Close()
		var reqs []*http.Request
		for _, u := range urls {
			req, _ := http.NewRequest(http.MethodGet, u, nil)
			reqs = append(reqs, req)
		}
		i := 0
		return testing.AllocsPerRun(1000, func() {
			if _, err := rt.RoundTrip(reqs[i%len(reqs)]); err != nil {
				t.Fatal(err)
			}
			i++
		})
	}
	for _, tc := range []struct {
		name string
		urls []string
		want float64
	}{
		{"one URL", []string{"https://api.example.com/v1/items"}, 0},
		{"a URL other than the last", []string{"https://api.example.com/v1/items/1", "https://api.example.com/v1/items/2"}, 1},
	} {
		if n := allocs(m.Events(nil), tc.urls...); n != tc.want {
			t.Errorf("%s: %v allocations per RoundTrip with the metrics, want %v", tc.name, n, tc.want)
		}
		if n := allocs(func(throttle.Event) {}, tc.urls...); n != tc.want {
			t.Errorf("%s: %v allocations per RoundTrip with an events function that does nothing, want %v", tc.name, n, tc.want)
		}
	}
}
