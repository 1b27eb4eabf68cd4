package throttletest

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ceilSeconds rounds d up to whole seconds: a positive d gives at least 1.
// (d + time.Second - 1 overflowed within a second of the longest Duration:
// a quota of Per math.MaxInt64, one that never comes back, was told
// Retry-After: 1, X-RateLimit-Reset: -9223372035 and w=1; found in review
// t10.)
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}

// retryAfter formats a wait of d from now, or returns "" for RetryAfterNone. Seconds
// are rounded up and never 0; a date is rounded up to the next whole second, so it
// never falls before now+d.
func retryAfter(format RetryAfterFormat, now time.Time, d time.Duration) string {
	switch format {
	case RetryAfterNone:
		return ""
	case RetryAfterDate:
		at := now.Add(d)
		date := at.Truncate(time.Second)
		if date.Before(at) {
			date = date.Add(time.Second)
		}
		return date.UTC().Format(http.TimeFormat)
	default:
		return strconv.FormatInt(max(ceilSeconds(d), 1), 10)
	}
}

// setQuotaHeaders adds the enabled header families for qs; bind is the index in qs
// of the limit the X-RateLimit family describes.
func (c *Config) setQuotaHeaders(h http.Header, qs []quota, bind int) {
	if len(qs) == 0 {
		return
	}
	if c.XRateLimit {
		a := c.TokenBucketHeaders.announce(qs[bind])
		h.Set("X-RateLimit-Limit", strconv.Itoa(a.limit))
		h.Set("X-RateLimit-Remaining", strconv.Itoa(a.remaining))
		h.Set("X-RateLimit-Reset", strconv.FormatInt(a.reset, 10))
	}
	if c.IETF && c.IETFDraft07 {
		a := c.TokenBucketHeaders.announce(qs[bind])
		h.Set("RateLimit", "limit="+strconv.Itoa(a.limit)+", remaining="+strconv.Itoa(a.remaining)+
			", reset="+strconv.FormatInt(a.reset, 10))
		policies := make([]string, len(qs))
		for i, q := range qs {
			a := c.TokenBucketHeaders.announce(q)
			policies[i] = strconv.Itoa(a.q) + ";w=" + strconv.FormatInt(a.w, 10)
			if a.burst > 0 {
				policies[i] += ";throttletest-burst=" + strconv.Itoa(a.burst)
			}
		}
		h.Set("RateLimit-Policy", strings.Join(policies, ", "))
	} else if c.IETF {
		limits := make([]string, len(qs))
		policies := make([]string, len(qs))
		for i, q := range qs {
			a := c.TokenBucketHeaders.announce(q)
			name := sfString(q.name)
			limits[i] = name + ";r=" + strconv.Itoa(a.remaining) + ";t=" + strconv.FormatInt(a.t, 10)
			policies[i] = name + ";q=" + strconv.Itoa(a.q) + ";w=" + strconv.FormatInt(a.w, 10)
			if a.burst > 0 {
				policies[i] += ";throttletest-burst=" + strconv.Itoa(a.burst)
			}
		}
		h.Set("RateLimit", strings.Join(limits, ", "))
		h.Set("RateLimit-Policy", strings.Join(policies, ", "))
	}
}

// announcement is what the quota headers say of one limit, in whole numbers.
type announcement struct {
	limit, remaining int   // X-RateLimit-Limit, -Remaining; RateLimit's r is remaining too
	reset            int64 // X-RateLimit-Reset, seconds
	t                int64 // RateLimit's t, seconds
	q                int   // RateLimit-Policy's q per w seconds
	w                int64
	burst            int // RateLimit-Policy's throttletest-burst; 0 when not sent
}

// announce says what the headers announce of q in form f (the package doc
// says what and why for the truthful form, TokenBucketHeaders for the others).
func (f TokenBucketHeaders) announce(q quota) announcement {
	if q.algorithm == TokenBucket && f != TruthfulBucket {
		return f.mislead(q)
	}
	a := announcement{
		limit: q.limit, remaining: q.remaining,
		reset: ceilSeconds(q.reset), t: max(ceilSeconds(q.next), 1),
	}
	a.q, a.w, a.burst = policy(q)
	return a
}

// policy returns RateLimit-Policy's q per w seconds for q, and the depth to
// announce as throttletest-burst, 0 for none.
func policy(q quota) (n int, w int64, burst int) {
	switch q.algorithm {
	case TokenBucket, LeakyBucket:
		n, w = bucketPolicy(q.limit, q.window)
		if n != q.limit {
			burst = q.limit
		}
		return n, w, burst
	case SlidingCounter:
		// Its estimate counts the last window's requests too: N-1 per Per is
		// what it admits for ever; N = 1 admits one per two windows.
		if q.limit == 1 {
			if q.window > math.MaxInt64/2 { // 2·Per overflows
				return 1, 2 * ceilSeconds(q.window), 0
			}
			return 1, max(ceilSeconds(2*q.window), 1), 0
		}
		return q.limit - 1, max(ceilSeconds(q.window), 1), 0
	}
	return q.limit, max(ceilSeconds(q.window), 1), 0
}

// mislead announces a token bucket in f, one of the misleading forms.
func (f TokenBucketHeaders) mislead(q quota) announcement {
	a := announcement{limit: q.limit, remaining: q.remaining, reset: 1, t: 1, q: q.limit, w: 1}
	if f == RatePerSecond {
		perSecond := max(int(math.Round(float64(q.limit)*float64(time.Second)/float64(q.window))), 1)
		a.limit, a.remaining, a.q = perSecond, min(q.remaining, perSecond), perSecond
	}
	return a
}

// slack absorbs float rounding when a bucket's policy counts whole requests.
const slack = 1e-9

// bucketPolicy returns the q per w seconds that describes a bucket of depth b
// that takes fill to refill from empty (the package doc says why): of b per
// ceil(fill) seconds, and floor(rate·w) per w = floor(fill) seconds (at least
// 1), the faster, which is never faster than the bucket; on a tie, the one
// with q = b.
func bucketPolicy(b int, fill time.Duration) (q int, w int64) {
	q, w = b, max(ceilSeconds(fill), 1)
	w2 := max(int64(fill/time.Second), 1)
	q2 := int(math.Floor(float64(w2)*float64(time.Second)*float64(b)/float64(fill) + slack))
	if q2 >= 1 && int64(q2)*w > int64(q)*w2 {
		return q2, w2
	}
	return q, w
}

// fewestRemaining picks the quota a client should mind most: the fewest requests
// remaining, then the longest reset.
func fewestRemaining(qs []quota) int {
	best := 0
	for i, q := range qs {
		b := qs[best]
		if q.remaining < b.remaining || q.remaining == b.remaining && q.reset > b.reset {
			best = i
		}
	}
	return best
}

// sfString quotes s as a structured-field string (RFC 8941); s is printable ASCII.
func sfString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// apiKey reads the key from the header name, else from "Authorization: Bearer
// <key>" or GitHub's "Authorization: token <key>" (scheme matched
// case-insensitively); "" means none.
func apiKey(h http.Header, name string) string {
	if key := strings.TrimSpace(h.Get(name)); key != "" {
		return key
	}
	scheme, token, ok := strings.Cut(strings.TrimSpace(h.Get("Authorization")), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") && !strings.EqualFold(scheme, "token") {
		return ""
	}
	return strings.TrimSpace(token)
}
