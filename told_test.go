package throttle_test

import (
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/throttlehttp/throttle"
	"github.com/throttlehttp/throttle/throttletest"
)

// latent passes requests to api, each answer delayed by latency.
func latent(api *throttletest.API, latency time.Duration) rtFunc {
	return func(r *http.Request) (*http.Response, error) {
		resp, err := api.RoundTrip(r)
		time.Sleep(latency)
		return resp, err
	}
}

// Not told the quota, the transport paces from the quota headers the
// server sends on every answer, at the quota's full speed and without
// refusals, for every kind of quota (issue 9, points 1 and 2).
func TestPacesFromQuotaHeaders(t *testing.T) {
	window := throttletest.Limit{Algorithm: throttletest.FixedWindow, N: 100, Per: time.Second}
	bucket := throttletest.Limit{Algorithm: throttletest.TokenBucket, Rate: 200, Burst: 20}
	tests := []struct {
		name  string
		limit throttletest.Limit
		ietf  bool
		ideal time.Duration // for 2,000 requests
		slack float64       // the most over the ideal
	}{
		{"fixed-window/x-ratelimit", window, false, 19 * time.Second, 1.05},
		{"fixed-window/ietf", window, true, 19 * time.Second, 1.05},
		// A bucket's headers cannot tell it from a one-second window at
		// first; the key finds out within its first second. An unlucky
		// start draws one refusal, whose Retry-After of a second costs a
		// tenth of the job.
		{"token-bucket/x-ratelimit", bucket, false, 9900 * time.Millisecond, 1.12},
		{"token-bucket/ietf", bucket, true, 9900 * time.Millisecond, 1.12},
		// A log of requests gives back what was sent a second before: the
		// first second's spread and probe echo once.
		{"sliding-log/x-ratelimit", throttletest.Limit{Algorithm: throttletest.SlidingLog, N: 200, Per: time.Second}, false, 9 * time.Second, 1.15},
		{"hourly-window", throttletest.Limit{Algorithm: throttletest.FixedWindow, N: 5000, Per: time.Hour}, false, 125 * time.Millisecond, 1.05},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := throttletest.NewAPI(throttletest.Config{Limits: []throttletest.Limit{tt.limit},
					XRateLimit: !tt.ietf, IETF: tt.ietf, HeadersOnSuccess: true})
				rt := throttle.New(latent(api, time.Millisecond))
				defer rt.Close()
				took := job(t, rt, 2000)
				seen := api.Stats().Total
				t.Logf("took %v (ideal %v), %d refused", took, tt.ideal, seen.Throttled)
				assert.LessOrEqual(t, seen.Throttled, int64(6), "at most 0.3%% refused")
				assert.LessOrEqual(t, took.Seconds(), tt.ideal.Seconds()*tt.slack+0.01, "within %v× the ideal", tt.slack)
			})
		})
	}
}
