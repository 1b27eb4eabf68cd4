package otelthrottle_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/throttlehttp/throttle"
	"github.com/throttlehttp/throttle/otelthrottle"
)

// The metrics of a Transport whose server throttles its first request,
// with a logger of its own that gets the events too.
func Example() {
	// Your MeterProvider; here the SDK's, read by hand.
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())

	m, err := otelthrottle.New(otelthrottle.WithMeterProvider(mp))
	if err != nil {
		panic(err)
	}
	first := true
	base := rtFunc(func(req *http.Request) (*http.Response, error) {
		if first {
			first = false
			return reply(req, http.StatusTooManyRequests, "Retry-After", "0"), nil
		}
		return reply(req, http.StatusOK), nil
	})
	logEvent := func(e throttle.Event) {
		if e.Kind == throttle.EventRetry {
			slog.Debug("throttle", "event", e) // your own events function, chained
		}
	}
	rt := throttle.New(base, throttle.WithRetry(throttle.Retry{InitialDelay: time.Microsecond}),
		throttle.WithEvents(m.Events(logEvent)))
	defer rt.Close()
	defer m.Observe(rt)() // the gauges of waiting and in flight

	req, _ := http.NewRequest(http.MethodGet, "https://api.example.com/items", nil)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()

	var rm metricdata.ResourceMetrics
	_ = reader.Collect(context.Background(), &rm)
	for _, sm := range rm.ScopeMetrics {
		for _, name := range []string{"throttle.attempts", "throttle.throttled", "throttle.retries"} {
			for _, mt := range sm.Metrics {
				if mt.Name != name {
					continue
				}
				for _, p := range mt.Data.(metricdata.Sum[int64]).DataPoints {
					status, _ := p.Attributes.Value("http.response.status_code")
					host, _ := p.Attributes.Value("server.address")
					fmt.Printf("%s %s %d: %d\n", name, host.AsString(), status.AsInt64(), p.Value)
				}
			}
		}
	}
	// Unordered output:
	// throttle.attempts api.example.com 429: 1
	// throttle.attempts api.example.com 200: 1
	// throttle.throttled api.example.com 429: 1
	// throttle.retries api.example.com 429: 1
}
