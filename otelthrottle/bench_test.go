package otelthrottle_test

import (
	"fmt"
	"net/http"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"golang.org/x/time/rate"

	"github.com/throttlehttp/throttle"
	"github.com/throttlehttp/throttle/otelthrottle"
)

// okBase answers 200 with one shared response: it measures the transport,
// not the fake.
func okBase() http.RoundTripper {
	resp := &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody}
	return rtFunc(func(*http.Request) (*http.Response, error) { return resp, nil })
}

// BenchmarkRoundTrip measures a RoundTrip on a paced key with tokens to
// spare over a no-op base: without events ("off"), with an events function
// that does nothing ("events": the cost of the events themselves), and with
// the metrics recorded on the OTel SDK, read by a ManualReader ("otel"). Each
// sends one request again and again, as a key whose requests go to one URL;
// also each request to a path of its own ("…-paths": the events make each
// one's URL), and from every P at once ("…-parallel", one key).
func BenchmarkRoundTrip(b *testing.B) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	m, err := otelthrottle.New(otelthrottle.WithMeterProvider(mp))
	if err != nil {
		b.Fatal(err)
	}
	cases := []struct {
		name string
		opts []throttle.Option
	}{
		{"off", nil},
		{"events", []throttle.Option{throttle.WithEvents(func(throttle.Event) {})}},
		{"otel", []throttle.Option{throttle.WithEvents(m.Events(nil))}},
	}
	for _, tc := range cases {
		newRT := func() *throttle.Transport {
			return throttle.New(okBase(), append([]throttle.Option{
				throttle.WithPolicy(throttle.Policy{Rate: rate.Limit(1e9), Burst: 1 << 30})}, tc.opts...)...)
		}
		b.Run(tc.name, func(b *testing.B) {
			rt := newRT()
			defer rt.Close()
			req, _ := http.NewRequest(http.MethodGet, "https://api.example.com/v1/items", nil)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := rt.RoundTrip(req); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(tc.name+"-paths", func(b *testing.B) {
			rt := newRT()
			defer rt.Close()
			reqs := make([]*http.Request, 1024)
			for i := range reqs {
				reqs[i], _ = http.NewRequest(http.MethodGet, fmt.Sprintf("https://api.example.com/v1/items/%d", i), nil)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := rt.RoundTrip(reqs[i%len(reqs)]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
		b.Run(tc.name+"-parallel", func(b *testing.B) {
			rt := newRT()
			defer rt.Close()
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				req, _ := http.NewRequest(http.MethodGet, "https://api.example.com/v1/items", nil)
				for pb.Next() {
					if _, err := rt.RoundTrip(req); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkRecord measures the metrics' own part: recording an attempt's
// answer, the one event of every request.
func BenchmarkRecord(b *testing.B) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	m, err := otelthrottle.New(otelthrottle.WithMeterProvider(mp))
	if err != nil {
		b.Fatal(err)
	}
	record := m.Events(nil)
	e := throttle.Event{Kind: throttle.EventAnswered, Key: "api.example.com", Method: http.MethodGet,
		URL: "https://api.example.com/v1/items", Attempt: 1, Status: http.StatusOK}
	b.ReportAllocs()
	for b.Loop() {
		record(e)
	}
}
