package throttletest_test

import (
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlehttp/throttle/throttletest"
)

func TestRetryAfterSecondsNeverZero(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := throttletest.NewAPI(throttletest.Config{Limits: []throttletest.Limit{
			{Algorithm: throttletest.TokenBucket, Rate: 200}, // a token every 5ms
		}})
		assert.Equal(t, http.StatusOK, get(t, api, "k").code)
		r := get(t, api, "k")
		assert.Equal(t, http.StatusTooManyRequests, r.code)
		assert.Equal(t, "1", r.header.Get("Retry-After"))
	})
}

func TestRetryAfterDateIsNeverEarly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := throttletest.NewAPI(throttletest.Config{
			Limits:     []throttletest.Limit{{Algorithm: throttletest.TokenBucket, Rate: 0.1}},
			RetryAfter: throttletest.RetryAfterDate,
		})
		time.Sleep(300 * time.Millisecond) // off the whole second
		assert.Equal(t, http.StatusOK, get(t, api, "k").code)
		r := get(t, api, "k")
		require.Equal(t, http.StatusTooManyRequests, r.code)
		date, err := http.ParseTime(r.header.Get("Retry-After"))
		require.NoError(t, err)
		wait := time.Until(date)
		assert.GreaterOrEqual(t, wait, 10*time.Second) // the true wait
		assert.Less(t, wait, 11*time.Second)
		assert.Equal(t, 10700*time.Millisecond, wait)
	})
}

func TestRetryAfterNone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := throttletest.NewAPI(throttletest.Config{
			Limits:     []throttletest.Limit{{Algorithm: throttletest.FixedWindow, N: 1, Per: time.Second}},
			RetryAfter: throttletest.RetryAfterNone,
		})
		get(t, api, "k")
		r := get(t, api, "k")
		assert.Equal(t, http.StatusTooManyRequests, r.code)
		assert.NotContains(t, r.header, "Retry-After")
	})
}

func TestHeaderFamiliesSwitch(t *testing.T) {
	xrl := []string{"X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset"}
	ietf := []string{"Ratelimit", "Ratelimit-Policy"}
	tests := []struct {
		name             string
		xrl, ietf, on200 bool
	}{
		{"none", false, false, false},
		{"x-ratelimit", true, false, false},
		{"ietf", false, true, false},
		{"both", true, true, false},
		{"both-on-success", true, true, true},
		{"on-success-alone-sends-nothing", false, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := throttletest.NewAPI(throttletest.Config{
					Limits:     []throttletest.Limit{{Algorithm: throttletest.FixedWindow, N: 1, Per: time.Minute}},
					XRateLimit: tt.xrl, IETF: tt.ietf, HeadersOnSuccess: tt.on200,
				})
				accepted, refused := get(t, api, "k"), get(t, api, "k")
				require.Equal(t, http.StatusOK, accepted.code)
				require.Equal(t, http.StatusTooManyRequests, refused.code)
				for _, h := range xrl {
					assert.Equal(t, tt.xrl, has(refused.header, h), "429 %s", h)
					assert.Equal(t, tt.xrl && tt.on200, has(accepted.header, h), "200 %s", h)
				}
				for _, h := range ietf {
					assert.Equal(t, tt.ietf, has(refused.header, h), "429 %s", h)
					assert.Equal(t, tt.ietf && tt.on200, has(accepted.header, h), "200 %s", h)
				}
				assert.True(t, has(refused.header, "Retry-After"))
				assert.False(t, has(accepted.header, "Retry-After"))
			})
		})
	}
}

func has(h http.Header, name string) bool {
	_, ok := h[name]
	return ok
}

func TestQuotaHeaderValues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := throttletest.NewAPI(throttletest.Config{
			Limits: []throttletest.Limit{
				{Algorithm: throttletest.FixedWindow, N: 2, Per: time.Minute, Name: "minute"},
				{Algorithm: throttletest.TokenBucket, Rate: 1, Burst: 5}, // default name
				{Algorithm: throttletest.Concurrency, N: 10},             // in no header
			},
			XRateLimit: true, IETF: true, HeadersOnSuccess: true,
		})
		time.Sleep(10 * time.Second)
		r := get(t, api, "k")
		policy := `"minute";q=2;w=60, "token-bucket";q=5;w=5`
		assert.Equal(t, policy, r.header.Get("RateLimit-Policy"))
		assert.Equal(t, `"minute";r=1;t=50, "token-bucket";r=4;t=1`, r.header.Get("RateLimit"))
		// X-RateLimit-* follow the limit with the fewest remaining: "minute".
		assert.Equal(t, "2", r.header.Get("X-RateLimit-Limit"))
		assert.Equal(t, "1", r.header.Get("X-RateLimit-Remaining"))
		assert.Equal(t, "50", r.header.Get("X-RateLimit-Reset"))

		time.Sleep(1500 * time.Millisecond)
		get(t, api, "k")
		r = get(t, api, "k") // t=11.5s: "minute" refuses until t=60s
		assert.Equal(t, http.StatusTooManyRequests, r.code)
		assert.Equal(t, "49", r.header.Get("Retry-After"))
		assert.Equal(t, policy, r.header.Get("RateLimit-Policy"))
		// The refused request took no token: the bucket lacks only the one taken at 11.5s.
		assert.Equal(t, `"minute";r=0;t=49, "token-bucket";r=4;t=1`, r.header.Get("RateLimit"))
		assert.Equal(t, "2", r.header.Get("X-RateLimit-Limit"))
		assert.Equal(t, "0", r.header.Get("X-RateLimit-Remaining"))
		assert.Equal(t, "49", r.header.Get("X-RateLimit-Reset"))
	})
}

func TestXRateLimitDescribesTheRefusingLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := throttletest.NewAPI(throttletest.Config{
			Limits: []throttletest.Limit{
				{Algorithm: throttletest.FixedWindow, N: 100, Per: time.Hour},
				{Algorithm: throttletest.SlidingLog, N: 1, Per: 10 * time.Second},
			},
			XRateLimit: true,
		})
		get(t, api, "k")
		r := get(t, api, "k")
		assert.Equal(t, http.StatusTooManyRequests, r.code)
		assert.Equal(t, "1", r.header.Get("X-RateLimit-Limit"))
		assert.Equal(t, "0", r.header.Get("X-RateLimit-Remaining"))
		assert.Equal(t, "10", r.header.Get("X-RateLimit-Reset"))
		assert.Equal(t, "10", r.header.Get("Retry-After"))
	})
}
