package throttle

import (
	"math"
	"math/bits"
	"net/http"
	"strings"
	"time"
)

// The quota fields APIs made up before the IETF draft: X-RateLimit-* and its
// spellings, GitHub's additions to them, and Shopify's call limit. quota.go
// says what ParseQuota makes of them.

// Canonical keys (http.CanonicalHeaderKey) of the X-RateLimit-* family, in the
// order its spellings are tried.
var (
	limitKeys     = [...]string{"X-Ratelimit-Limit", "X-Rate-Limit-Limit", "Ratelimit-Limit"}
	remainingKeys = [...]string{"X-Ratelimit-Remaining", "X-Rate-Limit-Remaining", "Ratelimit-Remaining"}
	resetKeys     = [...]string{"X-Ratelimit-Reset", "X-Rate-Limit-Reset", "Ratelimit-Reset"}
)

// GitHub's additions to X-RateLimit-*, and Shopify's field.
const (
	usedKey     = "X-Ratelimit-Used"
	resourceKey = "X-Ratelimit-Resource"
	shopifyKey  = "X-Shopify-Shop-Api-Call-Limit"
)

// xRateLimit reads the X-RateLimit-* family from the field lines f found.
// Used and Resource are looked up in h only here: without a count or a reset
// they say nothing ParseQuota reports. A remaining count left out is Limit -
// Used, and Used left out is Limit - Remaining, neither below 0.
func (f *quotaFields) xRateLimit(h http.Header, now *instant) Quota {
	var q Quota
	q.Limit, q.HasLimit = firstCount(&f.limit)
	q.Remaining, q.HasRemaining = firstCount(&f.remaining)
	q.Reset, q.HasReset = firstReset(&f.reset, now)
	if !q.HasLimit && !q.HasRemaining && !q.HasReset {
		return Quota{}
	}
	q.Used, q.HasUsed = count(h[usedKey])
	if v := h[resourceKey]; len(v) > 0 && isResourceName(strings.Trim(v[0], " \t")) {
		q.Resource = strings.Trim(v[0], " \t")
	}
	switch {
	case q.HasLimit && q.HasUsed && !q.HasRemaining:
		q.Remaining, q.HasRemaining = max(q.Limit-q.Used, 0), true
	case q.HasLimit && q.HasRemaining && !q.HasUsed:
		q.Used, q.HasUsed = max(q.Limit-q.Remaining, 0), true
	}
	return q
}

// shopify reads Shopify's X-Shopify-Shop-Api-Call-Limit, "used/limit": two
// counts with optional spaces around the slash. Remaining is limit - used, at
// least 0.
func shopify(lines []string) Quota {
	if len(lines) == 0 {
		return Quota{}
	}
	u, l, ok := strings.Cut(lines[0], "/")
	used, okU := parseCount(strings.Trim(u, " \t"))
	limit, okL := parseCount(strings.Trim(l, " \t"))
	if !ok || !okU || !okL {
		return Quota{}
	}
	return Quota{Limit: limit, Remaining: max(limit-used, 0), Used: used, HasLimit: true, HasRemaining: true, HasUsed: true}
}

// isResourceName reports whether s is a quota's name as GitHub writes it:
// letters, digits, '_', '-' and '.', at least one.
func isResourceName(s string) bool {
	for i := range len(s) {
		if c := s[i] | 0x20; !isASCIIDigit(s[i]) && (c < 'a' || c > 'z') && s[i] != '_' && s[i] != '-' && s[i] != '.' {
			return false
		}
	}
	return s != ""
}

const (
	minEpochSeconds = 100_000_000       // a reset below this is a delay (about 3 years)
	minEpochMillis  = 100_000_000_000   // a reset from here on may be a Unix time in milliseconds
	maxEpochMillis  = 1_000_000_000_000 // and from here on always is
)

// epochMillis is the least reset value that is a Unix time in milliseconds
// at now: half of now's, within [1e11, 1e12] (a time in seconds that large
// is thousands of years away).
func epochMillis(now time.Time) int64 {
	return min(max(now.UnixMilli()/2, minEpochMillis), maxEpochMillis)
}

// epochSeconds is the least reset value that is a Unix time in seconds at now.
func epochSeconds(now time.Time) int64 {
	return min(max(now.Unix()/2, minEpochSeconds), epochMillis(now)-1)
}

// firstElement returns the first field line of lines up to its first ',' or
// ';', trimmed.
func firstElement(lines []string) string {
	if len(lines) == 0 {
		return ""
	}
	s := lines[0]
	if i := strings.IndexAny(s, ",;"); i >= 0 {
		s = s[:i]
	}
	return strings.Trim(s, " \t")
}

// parseCount parses a non-negative number, dropping a fraction and saturating.
func parseCount(s string) (int, bool) {
	n, ok := parseDecimal(s)
	return saturateInt(n.whole), ok
}

func count(lines []string) (int, bool) { return parseCount(firstElement(lines)) }

// firstCount returns the count of the first spelling that parses.
func firstCount(spellings *[3][]string) (int, bool) {
	for _, lines := range spellings {
		if n, ok := count(lines); ok {
			return n, true
		}
	}
	return 0, false
}

// firstReset returns the reset of the first spelling that parses.
func firstReset(spellings *[3][]string, now *instant) (time.Duration, bool) {
	for _, lines := range spellings {
		if d, ok := parseReset(lines, now); ok {
			return d, true
		}
	}
	return 0, false
}

// parseReset reads a reset: seconds or a Unix time (quota.go says how they
// are told apart), a Go duration, or an HTTP-date.
func parseReset(lines []string, now *instant) (time.Duration, bool) {
	s := firstElement(lines)
	if s == "" {
		return 0, false
	}
	if n, ok := parseDecimal(s); ok {
		return resetIn(n, now), true
	}
	if d, ok := parseGoDuration(s); ok {
		return d, true
	}
	if date, ok := parseHTTPDate(strings.Trim(lines[0], " \t"), now.now); ok {
		return durationUntil(date, now.server()), true
	}
	return 0, false
}

// resetIn returns the reset a number of seconds n gives: a Unix time in
// milliseconds or in seconds, told apart by magnitude (quota.go says how),
// else a delay.
func resetIn(n decimal, now *instant) time.Duration {
	switch {
	case n.whole >= epochMillis(now.now):
		return durationUntil(time.UnixMilli(n.whole), now.server())
	case n.whole >= epochSeconds(now.now):
		return durationUntil(time.Unix(n.whole, n.milli*int64(time.Millisecond)), now.server())
	}
	return n.duration()
}

// saturateInt converts v to an int, saturating where int is 32 bits wide.
func saturateInt(v int64) int {
	if int64(int(v)) != v {
		return math.MaxInt
	}
	return int(v)
}

// durationUnit returns a Go duration's unit in nanoseconds.
func durationUnit(u string) (uint64, bool) {
	switch u {
	case "ns":
		return 1, true
	case "us", "µs", "μs": // U+00B5 and U+03BC, as time.ParseDuration
		return 1e3, true
	case "ms":
		return 1e6, true
	case "s":
		return 1e9, true
	case "m":
		return 60e9, true
	case "h":
		return 3600e9, true
	}
	return 0, false
}

// parseGoDuration parses a duration as time.Duration.String writes it and
// time.ParseDuration reads it ("6m0s", "1h2m3.5s", "500ms", "1.5h"), without
// a sign: numbers, each with a unit. A value too large for a time.Duration
// saturates; digits below the nanosecond round it up, so a reset never comes
// early. It does not allocate and takes time linear in len(s).
func parseGoDuration(s string) (time.Duration, bool) {
	if s == "" {
		return 0, false
	}
	var total uint64 // at most math.MaxInt64
	for s != "" {
		i := 0
		var whole uint64
		for ; i < len(s) && isASCIIDigit(s[i]); i++ {
			whole = addSat(mulSat(whole, 10), uint64(s[i]-'0'))
		}
		hasWhole := i > 0
		var frac, scale uint64 = 0, 1 // the digits after the point are frac/scale, scale at most 1e18
		hasFrac, rest := false, false // rest: a digit past those is not 0
		if i < len(s) && s[i] == '.' {
			for i++; i < len(s) && isASCIIDigit(s[i]); i++ {
				hasFrac = true
				if scale < 1e18 {
					frac, scale = frac*10+uint64(s[i]-'0'), scale*10
				} else if s[i] != '0' {
					rest = true
				}
			}
		}
		j := i
		for j < len(s) && s[j] != '.' && !isASCIIDigit(s[j]) {
			j++
		}
		unit, ok := durationUnit(s[i:j])
		if !ok || !hasWhole && !hasFrac {
			return 0, false
		}
		// frac*unit/scale < unit, so the 128-bit quotient fits 64 bits.
		hi, lo := bits.Mul64(frac, unit)
		ns, r := bits.Div64(hi, lo, scale)
		if r != 0 || rest {
			ns++
		}
		total = addSat(total, addSat(mulSat(whole, unit), ns))
		s = s[j:]
	}
	return time.Duration(total), true
}

// mulSat returns a*b, saturating at math.MaxInt64.
func mulSat(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	if hi != 0 || lo > math.MaxInt64 {
		return math.MaxInt64
	}
	return lo
}

// addSat's a and b are at most math.MaxInt64, so a+b does not wrap.
func addSat(a, b uint64) uint64 { return min(a+b, math.MaxInt64) }
