package throttle

import (
	"math"
	"math/bits"
	"net/http"
	"strings"
	"time"
)

// Quota is what a response says about the caller's quota with the server: how
// many requests a window allows, how many are left, and when the quota resets.
// ParseQuota reads it from a response header. The Has fields tell a value the
// response did not carry from a zero it did carry; a field not carried is zero.
type Quota struct {
	Limit     int           // requests allowed per window (X-RateLimit-Limit, RateLimit-Policy q)
	Remaining int           // requests left in the window (X-RateLimit-Remaining, RateLimit r)
	Reset     time.Duration // time until the quota resets (X-RateLimit-Reset, RateLimit t); never negative
	Window    time.Duration // the policy's window length (RateLimit-Policy w), 0 when not given
	Policy    string        // the IETF policy name, e.g. "default"; "" for X-RateLimit-*

	HasLimit, HasRemaining, HasReset bool // which of Limit, Remaining, Reset the response carried
}

// Exhausted reports whether the quota says no request is left: the response
// carried a remaining count and it is zero. Reset, when HasReset, then says how
// long until requests are accepted again.
func (q Quota) Exhausted() bool { return q.HasRemaining && q.Remaining == 0 }

// ParseQuota reads the quota fields of a response header h, as of now (the time
// the response arrived). It reads two families of fields.
//
// The IETF fields of draft-ietf-httpapi-ratelimit-headers are Structured Field
// Lists (RFC 9651), which may be split over several field lines:
//
//	RateLimit: "default";r=0;t=30
//	RateLimit-Policy: "burst";q=100;w=60, "daily";q=1000;w=86400
//
// When RateLimit lists several policies, the most restrictive is reported: the
// lowest r, on a tie the longest t, then the first listed. Its Limit and Window
// come from the RateLimit-Policy item of the same name, if any. When RateLimit
// gives no usable item, the RateLimit-Policy item with the lowest quota per
// second (q/w) is reported, without Remaining or Reset; items without w are
// chosen only when none has one, the lowest q first. Names are Strings (or
// Tokens); r and q must be non-negative Integers; t and w non-negative Integers
// (or Decimals) of seconds. An item without a valid r or q is skipped; an invalid
// or zero w, or an invalid t, counts as absent. Policies whose qu is not
// "requests" (such as "content-bytes"), and RateLimit items naming them, are
// ignored: they do not count requests. A field that is not a valid List is
// ignored as a whole, as RFC 9651 requires; an Inner List, Date or Display
// String, which these fields never carry, also makes a field invalid.
//
// The older, widespread fields are looked up under the spellings X-RateLimit-*,
// X-Rate-Limit-* and the RateLimit-* of earlier drafts, in that order; the first
// that parses is used:
//
//	X-RateLimit-Limit: 5000
//	X-RateLimit-Remaining: 0
//	X-RateLimit-Reset: 1700000000
//
// Only the first field line counts, up to its first ',' or ';' (so the earlier
// drafts' "100, 100;w=60" reads 100). Limit and Remaining are non-negative
// numbers; a fraction ("599.0") is dropped and values too large for an int
// saturate. Reset is non-negative seconds, whole or decimal, told apart by
// magnitude: a value nearer now's Unix time than zero (at least half of it,
// and at least 1e8 seconds: no API asks for a wait of three years) is a Unix
// time in seconds, as GitHub sends; a value nearer now's Unix time in
// milliseconds than zero (at least half of it, and from 1e12 always) is a
// Unix time in milliseconds; below, a delay in seconds. Measuring against
// now, not a fixed date, keeps the rule right under a fake clock
// (testing/synctest starts in 2000). An HTTP-date is also accepted. A time in the past gives a Reset of 0. A negative
// or malformed value leaves just that field absent.
//
// Where both families are present, the IETF fields give the values they carry
// and the older ones fill in the rest.
//
// ok is false, and q the zero Quota, when h carries none of Limit, Remaining
// and Reset in a form above. Field names are looked up in canonical form, as
// net/http stores them. ParseQuota takes time linear in the size of h and never
// panics.
func ParseQuota(h http.Header, now time.Time) (q Quota, ok bool) {
	q = parseIETF(h)
	if !q.HasLimit {
		q.Limit, q.HasLimit = legacyCount(h, limitKeys)
	}
	if !q.HasRemaining {
		q.Remaining, q.HasRemaining = legacyCount(h, remainingKeys)
	}
	if !q.HasReset {
		q.Reset, q.HasReset = legacyReset(h, now)
	}
	if !q.HasLimit && !q.HasRemaining && !q.HasReset {
		return Quota{}, false
	}
	return q, true
}

// Canonical keys (http.CanonicalHeaderKey) of the fields ParseQuota reads.
var (
	limitKeys     = [...]string{"X-Ratelimit-Limit", "X-Rate-Limit-Limit", "Ratelimit-Limit"}
	remainingKeys = [...]string{"X-Ratelimit-Remaining", "X-Rate-Limit-Remaining", "Ratelimit-Remaining"}
	resetKeys     = [...]string{"X-Ratelimit-Reset", "X-Rate-Limit-Reset", "Ratelimit-Reset"}
)

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

// headerFirstLine returns the first field line of key in h, trimmed.
func headerFirstLine(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return strings.Trim(v[0], " \t")
	}
	return ""
}

// firstListElement returns s up to its first ',' or ';', trimmed.
func firstListElement(s string) string {
	if i := strings.IndexAny(s, ",;"); i >= 0 {
		s = s[:i]
	}
	return strings.Trim(s, " \t")
}

func legacyCount(h http.Header, keys [3]string) (int, bool) {
	for _, k := range keys {
		if n, ok := parseDecimal(firstListElement(headerFirstLine(h, k))); ok {
			return saturateInt(n.whole), true
		}
	}
	return 0, false
}

func legacyReset(h http.Header, now time.Time) (time.Duration, bool) {
	for _, k := range resetKeys {
		line := headerFirstLine(h, k)
		if n, ok := parseDecimal(firstListElement(line)); ok {
			switch {
			case n.whole >= epochMillis(now):
				return durationUntil(time.UnixMilli(n.whole), now), true
			case n.whole >= epochSeconds(now):
				return durationUntil(time.Unix(n.whole, n.milli*int64(time.Millisecond)), now), true
			}
			return n.duration(), true
		}
		if date, err := http.ParseTime(line); err == nil {
			return durationUntil(date, now), true
		}
	}
	return 0, false
}

// saturateInt converts v to an int, saturating where int is 32 bits wide.
func saturateInt(v int64) int {
	if int64(int(v)) != v {
		return math.MaxInt
	}
	return int(v)
}

// quotaPolicy is a usable item of RateLimit-Policy.
type quotaPolicy struct {
	name     string
	q        int
	w        time.Duration
	requests bool // its quota unit is requests
}

// parseIETF reads the RateLimit and RateLimit-Policy fields.
func parseIETF(h http.Header) Quota {
	if len(h["Ratelimit"]) == 0 && len(h["Ratelimit-Policy"]) == 0 {
		return Quota{}
	}
	var policies []quotaPolicy
	byName := map[string]int{} // index in policies of the first item of each name
	if !parseSFList(h["Ratelimit-Policy"], func(it *sfItem) {
		name, named := it.name()
		q, hasQ := it.count("q")
		if _, dup := byName[name]; !named || !hasQ || dup {
			return
		}
		w, _ := it.seconds("w")
		u, hasU := it.param("qu")
		byName[name] = len(policies)
		policies = append(policies, quotaPolicy{name, q, w, !hasU || u.isText() && u.str == "requests"})
	}) {
		policies, byName = nil, nil
	}

	var best Quota
	if !parseSFList(h["Ratelimit"], func(it *sfItem) {
		name, named := it.name()
		r, hasR := it.count("r")
		i, known := byName[name]
		if !named || !hasR || known && !policies[i].requests {
			return
		}
		t, hasT := it.seconds("t")
		if !best.HasRemaining || r < best.Remaining || r == best.Remaining && t > best.Reset {
			best = Quota{Remaining: r, Reset: t, Policy: name, HasRemaining: true, HasReset: hasT}
		}
	}) {
		best = Quota{}
	}

	if best.HasRemaining {
		if i, ok := byName[best.Policy]; ok {
			best.Limit, best.Window, best.HasLimit = policies[i].q, policies[i].w, true
		}
		return best
	}
	var p *quotaPolicy
	for i := range policies {
		if c := &policies[i]; c.requests && (p == nil || stricterPolicy(c, p)) {
			p = c
		}
	}
	if p == nil {
		return Quota{}
	}
	return Quota{Limit: p.q, Window: p.w, Policy: p.name, HasLimit: true}
}

// stricterPolicy reports whether a allows fewer requests per second than b. Items with
// a window are stricter than items without one; items without one compare by q.
func stricterPolicy(a, b *quotaPolicy) bool {
	switch {
	case a.w > 0 && b.w > 0: // a.q/a.w < b.q/b.w, in 128 bits
		ah, al := bits.Mul64(uint64(a.q), uint64(b.w))
		bh, bl := bits.Mul64(uint64(b.q), uint64(a.w))
		return ah < bh || ah == bh && al < bl
	case a.w > 0 || b.w > 0:
		return a.w > 0
	}
	return a.q < b.q
}

// name returns the policy name an item carries: a String, or a Token.
func (it *sfItem) name() (string, bool) { return it.value.str, it.value.isText() }

// count returns the parameter key as a non-negative Integer.
func (it *sfItem) count(key string) (int, bool) {
	v, ok := it.param(key)
	if !ok || v.kind != 'i' || v.neg {
		return 0, false
	}
	return saturateInt(v.num.whole), true
}

// seconds returns the parameter key as a non-negative Integer or Decimal number
// of seconds.
func (it *sfItem) seconds(key string) (time.Duration, bool) {
	v, ok := it.param(key)
	if !ok || v.kind != 'i' && v.kind != 'd' || v.neg {
		return 0, false
	}
	return v.num.duration(), true
}
