//go:build !race

package throttle_test

import (
	"net/http"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/throttlehttp/throttle"
)

// Regression: a RoundTrip whose answer has no body allocates nothing, with
// events off and no request options (issue 11; requestOptions once moved
// its config to the heap on every request). Under MaxInFlight an answer
// with a body gets one wrapper, which the caller owns (see body.go).
func TestRoundTripAllocatesNothing(t *testing.T) {
	for name, opts := range map[string][]throttle.Option{
		"unpaced": nil,
		"paced":   {throttle.WithPolicy(throttle.Policy{Rate: rate.Limit(1e9), Burst: 1 << 30})},
		"window-inflight": {throttle.WithPolicy(throttle.Policy{Rate: rate.Limit(1e9), Burst: 1 << 30,
			Windows: []throttle.Window{{N: 100, Per: time.Microsecond}}, MaxInFlight: 64})},
	} {
		t.Run(name, func(t *testing.T) {
			rt := throttle.New(okBase(), opts...)
			defer rt.Close()
			req, _ := http.NewRequest(http.MethodGet, "http://api.example.com/v1/items", nil)
			if n := testing.AllocsPerRun(1000, func() {
				if _, err := rt.RoundTrip(req); err != nil {
					t.Fatal(err)
				}
			}); n != 0 {
				t.Errorf("%v allocations per RoundTrip, want 0", n)
			}
		})
	}
}

// With events on, a request makes the URL they show (its one allocation)
// unless they last showed the same URL: requests that go to one URL
// allocate nothing.
func TestRoundTripWithEventsAllocatesOnlyANewURL(t *testing.T) {
	rt := throttle.New(okBase(), throttle.WithEvents(func(throttle.Event) {}),
		throttle.WithPolicy(throttle.Policy{Rate: rate.Limit(1e9), Burst: 1 << 30}))
	defer rt.Close()
	items, _ := http.NewRequest(http.MethodGet, "http://api.example.com/v1/items?page=2", nil)
	item, _ := http.NewRequest(http.MethodGet, "http://api.example.com/v1/items/2", nil)
	for _, tc := range []struct {
		name string
		reqs []*http.Request
		want float64
	}{
		{"one URL", []*http.Request{items}, 0},
		{"a URL other than the last", []*http.Request{items, item}, 1},
	} {
		i := 0
		if n := testing.AllocsPerRun(1000, func() {
			if _, err := rt.RoundTrip(tc.reqs[i%len(tc.reqs)]); err != nil {
				t.Fatal(err)
			}
			i++
		}); n != tc.want {
			t.Errorf("%s: %v allocations per RoundTrip, want %v", tc.name, n, tc.want)
		}
	}
}
