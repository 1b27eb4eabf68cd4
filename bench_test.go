package throttle_test

import (
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"

	"golang.org/x/time/rate"

	"github.com/throttlehttp/throttle"
)

// okBase answers 200 with one shared response: it measures the transport,
// not the fake.
func okBase() http.RoundTripper {
	resp := &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody}
	return rtFunc(func(*http.Request) (*http.Response, error) { return resp, nil })
}

func benchRoundTrip(b *testing.B, rt http.RoundTripper) {
	req, _ := http.NewRequest(http.MethodGet, "http://api.example.com/v1/items", nil)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := rt.RoundTrip(req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRoundTrip compares the base RoundTripper called directly with the
// Transport on an unpaced key and on a paced key with tokens to spare.
func BenchmarkRoundTrip(b *testing.B) {
	b.Run("base", func(b *testing.B) { benchRoundTrip(b, okBase()) })
	b.Run("unpaced", func(b *testing.B) {
		rt := throttle.New(okBase())
		defer rt.Close()
		benchRoundTrip(b, rt)
	})
	b.Run("paced", func(b *testing.B) {
		rt := throttle.New(okBase(), throttle.WithPolicy(throttle.Policy{Rate: rate.Limit(1e9), Burst: 1 << 30}))
		defer rt.Close()
		benchRoundTrip(b, rt)
	})
	b.Run("paced-window-inflight", func(b *testing.B) {
		rt := throttle.New(okBase(), throttle.WithPolicy(throttle.Policy{Rate: rate.Limit(1e9), Burst: 1 << 30,
			Windows: []throttle.Window{{N: 1 << 30, Per: 1}}, MaxInFlight: 1 << 20}))
		defer rt.Close()
		benchRoundTrip(b, rt)
	})
}

// BenchmarkRoundTripParallel sends from every P over 1 and 10,000 keys.
func BenchmarkRoundTripParallel(b *testing.B) {
	for _, keys := range []int{1, 10_000} {
		b.Run("keys="+strconv.Itoa(keys), func(b *testing.B) {
			rt := throttle.New(okBase(), throttle.WithPolicy(throttle.Policy{Rate: rate.Limit(1e9), Burst: 1 << 30}))
			defer rt.Close()
			reqs := make([]*http.Request, keys)
			for i := range reqs {
				reqs[i], _ = http.NewRequest(http.MethodGet, "http://h"+strconv.Itoa(i)+".test/", nil)
			}
			var next atomic.Int64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := int(next.Add(7919))
				for pb.Next() {
					i++
					if _, err := rt.RoundTrip(reqs[i%keys]); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
