package throttle_test

import (
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlehttp/throttle"
)

// hostileRateLimit is an IETF RateLimit-Policy and RateLimit pair of n
// items each, every item with nine parameters (one more than the parser's
// buffer holds), all naming one policy.
func hostileRateLimit(n int) http.Header {
	pol := strings.TrimSuffix(strings.Repeat(`"p";q=10;w=60;a;b;c;d;e;f;g, `, n), ", ")
	rl := strings.TrimSuffix(strings.Repeat(`"p";r=5;t=30;a;b;c;d;e;f;g, `, n), ", ")
	return http.Header{"Ratelimit-Policy": {pol}, "Ratelimit": {rl}}
}

// A long RateLimit field whose items carry more than eight parameters each
// costs an allocation per item: 2,000 such items (114 KB) made ParseQuota
// allocate 4,000 times, some 50 bytes for each byte of the field, where the
// same field with eight parameters an item allocates nothing.
func TestManyParametersAnItemAllocateOnce(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	h := hostileRateLimit(2000)
	q, ok := throttle.ParseQuota(h, now)
	require.True(t, ok)
	require.Equal(t, 5, q.Remaining)
	allocs := testing.AllocsPerRun(5, func() { throttle.ParseQuota(h, now) })
	assert.LessOrEqual(t, allocs, 4.0, "allocations of one ParseQuota of %d bytes", len(h["Ratelimit"][0])+len(h["Ratelimit-Policy"][0]))
}

// The same through the Transport: every answer carrying that field is
// parsed several times (its quota, the policies it lists), and each 200
// cost thousands of allocations where the field of eight parameters an
// item costs none.
func TestManyParametersAnItemCostNoAllocationsPerAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := hostileRateLimit(2000)
		rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
			resp := reply(r, http.StatusOK)
			resp.Header = h.Clone()
			return resp, nil
		}))
		defer rt.Close()
		for range 20 { // past the first answers the key reads more closely
			require.NoError(t, do(t, rt, "http://api.test/"))
		}
		allocs := testing.AllocsPerRun(10, func() { _ = do(t, rt, "http://api.test/") })
		assert.Less(t, allocs, 100.0, "allocations of one RoundTrip")
	})
}

// An RFC 850 date's zone must be GMT (RFC 9110, Section 5.6.7). One in
// another zone was accepted, and read by the client machine's own time
// zone: a zone it knows by that name gets that zone's offset, any other is
// taken for GMT. The same 429, "Retry-After: Saturday, 01-Jan-00 00:01:00
// EST" (as PHP's DATE_RFC850 writes a local time), paused the key a minute
// on a machine in UTC, and 5 h 1 min on one in New York, where the request
// came back refused at once and every request after it failed with
// ErrPaused.
func TestAnRFC850DateInAnotherZoneIsMalformed(t *testing.T) {
	const value = "Saturday, 01-Jan-00 00:01:00 EST"
	_, ok := throttle.ParseRetryAfter(value, time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC))
	assert.False(t, ok, "%q is no HTTP-date", value)

	for _, local := range []*time.Location{time.UTC, time.FixedZone("EST", -5*3600)} {
		t.Run(local.String(), func(t *testing.T) {
			saved := time.Local
			time.Local = local
			defer func() { time.Local = saved }()
			synctest.Test(t, func(t *testing.T) {
				s := newScript(0, func(r *http.Request, n int) *http.Response {
					if r.URL.Path == "/a" && n == 1 {
						return reply(r, http.StatusTooManyRequests, "Retry-After", value)
					}
					return reply(r, http.StatusOK)
				})
				rt := throttle.New(s)
				defer rt.Close()
				start := time.Now()
				code, err := status(t, rt, http.MethodGet, "http://api.test/a")
				require.NoError(t, err)
				assert.Equal(t, http.StatusOK, code, "the refused request's retry")
				code, err = status(t, rt, http.MethodGet, "http://api.test/b")
				require.NoError(t, err, "the request after it")
				assert.Equal(t, http.StatusOK, code)
				// A value with no valid wait is a refusal that states none: a second.
				assert.Less(t, time.Since(start), 5*time.Second)
			})
		})
	}
}

// RFC 9110, Section 5.6.7: a recipient MUST read an rfc850-date's two-digit
// year that appears to be more than 50 years in the future as the most
// recent year in the past with the same last two digits (and so as in the
// future one that is not). time.Parse's fixed pivot (69-99: 19xx, 00-68:
// 20xx) is not that rule: at 2000-01-01, testing/synctest's clock, year 60
// was read as 2060, a key held for 60 years; in 2026, year 76 is 1976, a
// date in the past, where the RFC says 2076.
func TestAnRFC850TwoDigitYearIsRFC9110s(t *testing.T) {
	y2000 := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	got, ok := throttle.ParseRetryAfter("Friday, 01-Jan-60 00:00:00 GMT", y2000)
	assert.True(t, ok)
	assert.Equal(t, time.Duration(0), got, "1960, in the past")

	y2026 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	got, ok = throttle.ParseRetryAfter("Wednesday, 01-Jan-76 00:00:00 GMT", y2026)
	assert.True(t, ok)
	assert.Equal(t, time.Date(2076, 1, 1, 0, 0, 0, 0, time.UTC).Sub(y2026), got, "2076, not 1976")

	// Through the Transport, at testing/synctest's 2000-01-01: the 1960
	// date is a wait already over, no hold of 60 years.
	synctest.Test(t, func(t *testing.T) {
		s := newScript(0, func(r *http.Request, n int) *http.Response {
			if r.URL.Path == "/a" && n == 1 {
				return reply(r, http.StatusTooManyRequests, "Retry-After", "Friday, 01-Jan-60 00:00:00 GMT")
			}
			return reply(r, http.StatusOK)
		})
		rt := throttle.New(s)
		defer rt.Close()
		code, err := status(t, rt, http.MethodGet, "http://api.test/a")
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, code, "the refused request's retry")
		_, err = status(t, rt, http.MethodGet, "http://api.test/b")
		assert.NoError(t, err, "the request after it")
	})
}
