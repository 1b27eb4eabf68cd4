package throttletest_test

import (
	"math"
	"net/http"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlehttp/throttle/throttletest"
)

// A quota that never comes back, written as the longest Duration (a
// lifetime quota of 1): the second request is refused, and every header
// must say so truthfully, a wait of about 292 years, never 1 s and never a
// negative reset.
func TestAQuotaThatNeverComesBackSaysSo(t *testing.T) {
	const forever = time.Duration(math.MaxInt64)
	wantSeconds := int64(forever / time.Second) // 9223372036, rounded down; up is 9223372037
	for _, alg := range []throttletest.Algorithm{throttletest.SlidingLog, throttletest.FixedWindow} {
		t.Run(alg.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := throttletest.NewAPI(throttletest.Config{
					Limits:     []throttletest.Limit{{Algorithm: alg, N: 1, Per: forever}},
					XRateLimit: true, IETF: true,
				})
				require.Equal(t, http.StatusOK, get(t, api, "k").code)
				r := get(t, api, "k")
				require.Equal(t, http.StatusTooManyRequests, r.code)
				ra, err := strconv.ParseInt(r.header.Get("Retry-After"), 10, 64)
				require.NoError(t, err)
				reset, err := strconv.ParseInt(r.header.Get("X-RateLimit-Reset"), 10, 64)
				require.NoError(t, err)
				t.Logf("Retry-After: %s; X-RateLimit-Reset: %s; RateLimit: %s; RateLimit-Policy: %s",
					r.header.Get("Retry-After"), r.header.Get("X-RateLimit-Reset"),
					r.header.Get("RateLimit"), r.header.Get("RateLimit-Policy"))
				if alg == throttletest.SlidingLog { // the first entry leaves after forever
					assert.GreaterOrEqual(t, ra, wantSeconds, "Retry-After")
					assert.GreaterOrEqual(t, reset, wantSeconds, "X-RateLimit-Reset")
				} else { // the window ends decades away
					assert.Greater(t, ra, int64(365*24*3600), "Retry-After")
					assert.Greater(t, reset, int64(365*24*3600), "X-RateLimit-Reset")
				}
				assert.Contains(t, r.header.Get("RateLimit-Policy"), ";w="+strconv.FormatInt(wantSeconds+1, 10))
			})
		})
	}
}

// A sliding counter of 1 admits one request per two windows, and says so
// (RateLimit-Policy q=1 per 2·Per); for a window over 146 years 2·Per
// overflowed, and it said 1 per second.
func TestASlidingCounterOfOneOverCenturiesSaysItsWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		per := 200 * 365 * 24 * time.Hour
		api := throttletest.NewAPI(throttletest.Config{
			Limits: []throttletest.Limit{{Algorithm: throttletest.SlidingCounter, N: 1, Per: per}},
			IETF:   true, HeadersOnSuccess: true,
		})
		r := get(t, api, "k")
		require.Equal(t, http.StatusOK, r.code)
		assert.Equal(t, `"sliding-counter";q=1;w=`+strconv.FormatInt(2*int64(per/time.Second), 10),
			r.header.Get("RateLimit-Policy"))
	})
}
