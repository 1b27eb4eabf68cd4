package throttletest

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ceilSeconds rounds d up to whole seconds: a positive d gives at least 1.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
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
		q := qs[bind]
		h.Set("X-RateLimit-Limit", strconv.Itoa(q.limit))
		h.Set("X-RateLimit-Remaining", strconv.Itoa(q.remaining))
		h.Set("X-RateLimit-Reset", strconv.FormatInt(ceilSeconds(q.reset), 10))
	}
	if c.IETF {
		limits := make([]string, len(qs))
		policies := make([]string, len(qs))
		for i, q := range qs {
			name := sfString(q.name)
			limits[i] = name + ";r=" + strconv.Itoa(q.remaining) +
				";t=" + strconv.FormatInt(ceilSeconds(q.reset), 10)
			policies[i] = name + ";q=" + strconv.Itoa(q.limit) +
				";w=" + strconv.FormatInt(max(ceilSeconds(q.window), 1), 10)
		}
		h.Set("RateLimit", strings.Join(limits, ", "))
		h.Set("RateLimit-Policy", strings.Join(policies, ", "))
	}
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
