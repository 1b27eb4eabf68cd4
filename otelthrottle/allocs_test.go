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
// the events, for a key whose requests go to one URL (see
// throttle.TestRoundTripWithEventsAllocatesOnlyANewURL).
func TestMetricsAllocateNothingMore(t *testing.T) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	m, err := otelthrottle.New(otelthrottle.WithMeterProvider(mp))
	if err != nil {
		t.Fatal(err)
	}
	allocs := func(events func(throttle.Event)) float64 {
		rt := throttle.New(okBase(), throttle.WithEvents(events),
			throttle.WithPolicy(throttle.Policy{Rate: rate.Limit(1e9), Burst: 1 << 30}))
		defer rt.Close()
		req, _ := http.NewRequest(http.MethodGet, "https://api.example.com/v1/items", nil)
		return testing.AllocsPerRun(1000, func() {
			if _, err := rt.RoundTrip(req); err != nil {
				t.Fatal(err)
			}
		})
	}
	if n := allocs(m.Events(nil)); n != 0 {
		t.Errorf("%v allocations per RoundTrip with the metrics, want 0", n)
	}
}
