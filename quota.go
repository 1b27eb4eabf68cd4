package throttle

import (
	"math/bits"
	"net/http"
	"strings"
	"time"
)

// Quota is what a response says about the caller's quota with the server: how
// many requests a window allows, how many are left or spent, and when the
// quota resets. ParseQuota reads it from a response header. The Has fields
// tell a value the response did not carry from a zero it did carry; a field
// not carried is zero.
type Quota struct {
	Limit     int           // requests allowed per window (X-RateLimit-Limit, RateLimit-Policy q, RateLimit limit, Shopify's "/40")
	Remaining int           // requests left in the window (X-RateLimit-Remaining, RateLimit r or remaining; else Limit - Used)
	Used      int           // requests spent in the window (X-RateLimit-Used, Shopify's "32/"; else Limit - Remaining, but for the IETF List fields, which state no use)
	Reset     time.Duration // time until the quota resets (X-RateLimit-Reset, RateLimit t or reset); never negative
	Window    time.Duration // the policy's window length (RateLimit-Policy w), 0 when not given
	Policy    string        // the IETF policy name, e.g. "default"; "" for the other fields and unnamed items

	// Resource names which of the server's quotas the values describe, when
	// it keeps several per caller: GitHub's X-RateLimit-Resource ("core",
	// "search", "graphql", ...). Answers naming different resources count
	// against different quotas. "" when not given.
	Resource string

	HasLimit, HasRemaining, HasUsed, HasReset bool // which of Limit, Remaining, Used, Reset the response carried
}

// Exhausted reports whether the quota says no request is left: the response
// carried a remaining count and it is zero. Reset, when HasReset, then says how
// long until requests are accepted again.
func (q Quota) Exhausted() bool { return q.HasRemaining && q.Remaining == 0 }

// ParseQuota reads the quota fields of a response header h, as of now (the time
// the response arrived; the Transport passes the server's clock, as the
// answer's Date field shows it, when that differs from its own: see
// ParseRetryAfter). It reads three families of fields.
//
// The IETF fields of draft-ietf-httpapi-ratelimit-headers are Structured Field
// Lists (RFC 9651), which may be split over several field lines:
//
//	RateLimit: "default";r=0;t=30
//	RateLimit-Policy: "burst";q=100;w=60, "daily";q=1000;w=86400
//
// When RateLimit lists several policies, the most restrictive is reported: the
// lowest r, on a tie the longest t, then the first listed. Its Limit and Window
// come from the RateLimit-Policy item of the same name, if any. (The
// Transport does not reduce them so: it keeps a count of each of the first
// four policies listed, and obeys them all.) When RateLimit
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
// Draft 07 of that draft, which express-rate-limit sends with standardHeaders
// 'draft-7', writes RateLimit as a Structured Field Dictionary instead, and
// RateLimit-Policy's items without names, as draft 06 did:
//
//	RateLimit: limit=5, remaining=3, reset=40
//	RateLimit-Policy: 10;w=1, 5;w=60
//
// A RateLimit that is not a valid List is read as such a Dictionary (a List
// member is never followed by '='): its limit, remaining and reset are read
// as draft 06's RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset
// below are, of the same numbers (Integers or Decimals; a member of another
// type counts as absent), with Used Limit - Remaining; other members and
// parameters are ignored, a key given twice counts as given last, and a
// field that is not a valid Dictionary either is ignored. An item of
// RateLimit-Policy without a name, an Integer quota with its w (and qu as
// above), says which policies apply, not which one the counts are of: the
// first item whose quota equals the Limit read (draft 07's limit, draft 06's
// RateLimit-Limit, or any other field's but a named policy's) gives its w
// as Window; when no field gives a Limit, the item with the lowest quota
// per second gives Limit and Window, as a named one would.
//
// The older, widespread fields are looked up under the spellings X-RateLimit-*,
// X-Rate-Limit-* and the RateLimit-* of earlier drafts, in that order; the first
// that parses is used:
//
//	X-RateLimit-Limit: 5000
//	X-RateLimit-Remaining: 4999
//	X-RateLimit-Used: 1
//	X-RateLimit-Reset: 1700000000
//	X-RateLimit-Resource: core
//
// Only the first field line counts, up to its first ',' or ';' (so the earlier
// drafts' "100, 100;w=60" reads 100). Limit, Remaining and GitHub's Used are
// non-negative numbers; a fraction ("599.0") is dropped and values too large
// for an int saturate. When Remaining is left out, it is Limit - Used; when
// Used is, Limit - Remaining; neither below 0. GitHub's X-RateLimit-Resource
// (letters, digits, '_', '-', '.') gives Resource; it and Used are read only
// with one of Limit, Remaining or Reset.
//
// Reset is non-negative seconds, whole or decimal, told apart by
// magnitude: a value nearer now's Unix time than zero (at least half of it,
// and at least 1e8 seconds: no API asks for a wait of three years) is a Unix
// time in seconds, as GitHub sends; a value nearer now's Unix time in
// milliseconds than zero (at least half of it, and from 1e12 always) is a
// Unix time in milliseconds; below, a delay in seconds. Measuring against
// now, not a fixed date, keeps the rule right under a fake clock
// (testing/synctest starts in 2000). A Go duration as time.Duration.String
// writes it ("6m0s", "1h2m3.5s", "500ms"; a unit on every number, no sign) and
// an HTTP-date are also accepted. A time in the past gives a Reset of 0, a
// reset too far for a time.Duration saturates. A negative or malformed value
// leaves just that field absent.
//
// Shopify's X-Shopify-Shop-Api-Call-Limit: 32/40 gives Used 32, Limit 40 and
// Remaining 8 (never below 0). It describes a leaky bucket, not a window: the
// bucket holds Limit requests and leaks at a steady rate (2 a second on
// standard plans) that the field does not give, so it carries no Reset, and
// Remaining grows back one request at a time rather than all at once.
//
// Where several families are present, the IETF fields give the values they
// carry, then X-RateLimit-* fill in the rest (then RateLimit-Policy's
// unnamed items a Limit, as above), then Shopify's.
//
// ok is false, and q the zero Quota, when h carries none of Limit, Remaining
// and Reset in a form above. Field names are looked up in canonical form, as
// net/http stores them. An answer without any of these fields costs a dozen
// map lookups and no allocation. ParseQuota takes time linear in the size of
// h and never panics.
func ParseQuota(h http.Header, now time.Time) (q Quota, ok bool) {
	return parseQuota(h, &instant{now: now})
}

// parseQuota is ParseQuota, at now: the transport's reads the server's
// clock from the answer's Date for the absolute times (see instant).
func parseQuota(h http.Header, now *instant) (q Quota, ok bool) {
	f := lookupQuotaFields(h)
	if f.none() {
		return Quota{}, false
	}
	q = parseIETF(f.ietf, f.ietfPolicy, now, nil)
	q.fill(f.xRateLimit(h, now))
	if q.Policy == "" && len(f.ietfPolicy) > 0 {
		q.fillUnnamed(f.ietfPolicy)
	}
	q.fill(shopify(f.shopify))
	if !q.HasLimit && !q.HasRemaining && !q.HasReset {
		return Quota{}, false
	}
	return q, true
}

// quotaFields holds the field lines of every field that can make ParseQuota's
// ok true, each looked up once.
type quotaFields struct {
	ietf, ietfPolicy        []string
	limit, remaining, reset [3][]string // by spelling: limitKeys, remainingKeys, resetKeys
	shopify                 []string
}

func lookupQuotaFields(h http.Header) (f quotaFields) {
	f.ietf, f.ietfPolicy, f.shopify = h["Ratelimit"], h["Ratelimit-Policy"], h[shopifyKey]
	for i := range limitKeys {
		f.limit[i], f.remaining[i], f.reset[i] = h[limitKeys[i]], h[remainingKeys[i]], h[resetKeys[i]]
	}
	return f
}

// none reports whether h carries none of the fields.
func (f *quotaFields) none() bool {
	n := len(f.ietf) + len(f.ietfPolicy) + len(f.shopify)
	for i := range f.limit {
		n += len(f.limit[i]) + len(f.remaining[i]) + len(f.reset[i])
	}
	return n == 0
}

// fill sets the values q lacks from o. Window and Policy come with an IETF
// Limit, Resource with X-RateLimit-*.
func (q *Quota) fill(o Quota) {
	if !q.HasLimit && o.HasLimit {
		q.Limit, q.Window, q.HasLimit = o.Limit, o.Window, true
	}
	if !q.HasRemaining && o.HasRemaining {
		q.Remaining, q.HasRemaining = o.Remaining, true
	}
	if !q.HasUsed && o.HasUsed {
		q.Used, q.HasUsed = o.Used, true
	}
	if !q.HasReset && o.HasReset {
		q.Reset, q.HasReset = o.Reset, true
	}
	if q.Resource == "" {
		q.Resource = o.Resource
	}
}

// quotaPolicy is a usable item of RateLimit-Policy.
type quotaPolicy struct {
	name     string
	q        int
	w        time.Duration
	requests bool // its quota unit is requests
}

// maxPolicies is the most IETF policies of one answer whose counts the key
// keeps apart (told.go): the first listed; the rest are not read.
const maxPolicies = 4

// policyReadings is what one answer says of each IETF policy it lists in
// RateLimit: the first item of each name, at most maxPolicies, each with
// its Limit and Window from RateLimit-Policy as ParseQuota gives them.
type policyReadings struct {
	q [maxPolicies]Quota
	n int
}

// read reads h's readings. An answer that lists fewer than two policies in
// RateLimit leaves n 0: ParseQuota's Quota says it all.
func (rs *policyReadings) read(h http.Header) {
	rs.n = 0
	lines := h["Ratelimit"]
	if len(lines) == 0 || len(lines) == 1 && strings.IndexByte(lines[0], ',') < 0 {
		return
	}
	if parseIETF(lines, h["Ratelimit-Policy"], nil, rs); rs.n < 2 {
		rs.n = 0
	}
}

// add keeps q unless it names a policy kept already, or rs is full.
func (rs *policyReadings) add(q Quota) {
	if rs == nil || rs.n == len(rs.q) {
		return
	}
	for i := range rs.n {
		if rs.q[i].Policy == q.Policy {
			return
		}
	}
	rs.q[rs.n] = q
	rs.n++
}

// parseIETF reads the field lines of RateLimit and RateLimit-Policy. Fields
// of a few items, with a few parameters each, take no allocation. With rs,
// it also gives every usable RateLimit item to rs. RateLimit is read as a
// List; when it is not one, as draft 07's Dictionary, if now is not nil
// (policyReadings has none: that form names no policy).
func parseIETF(rateLimit, policy []string, now *instant, rs *policyReadings) Quota {
	if len(rateLimit) == 0 && len(policy) == 0 {
		return Quota{}
	}
	var buf [8]sfParam // the parameters of each item in turn
	var few [4]quotaPolicy
	policies := few[:0]       // the usable items of RateLimit-Policy, the first of each name
	var byName map[string]int // index in policies, once they are too many to scan
	l := sfList{lines: policy}
	for v, ps, ok := l.next(buf[:0]); ok; v, ps, ok = l.next(ps[:0]) {
		name, named := v.str, v.isText() // a String, or a Token
		q, hasQ := ps.count("q")
		if !named || !hasQ || findPolicy(policies, byName, name) >= 0 {
			continue
		}
		w, _ := ps.seconds("w")
		u, hasU := ps.get("qu")
		policies = append(policies, quotaPolicy{name, q, w, !hasU || u.isText() && u.str == "requests"})
		byName = indexPolicies(policies, byName)
	}
	if l.invalid {
		policies, byName = nil, nil
	}

	var best Quota
	l = sfList{lines: rateLimit}
	for v, ps, ok := l.next(buf[:0]); ok; v, ps, ok = l.next(ps[:0]) {
		name, named := v.str, v.isText() // a String, or a Token
		r, hasR := ps.count("r")
		i := findPolicy(policies, byName, name)
		if !named || !hasR || i >= 0 && !policies[i].requests {
			continue
		}
		t, hasT := ps.seconds("t")
		rs.add(Quota{Remaining: r, Reset: t, Policy: name, HasRemaining: true, HasReset: hasT})
		if !best.HasRemaining || r < best.Remaining || r == best.Remaining && t > best.Reset {
			best = Quota{Remaining: r, Reset: t, Policy: name, HasRemaining: true, HasReset: hasT}
		}
	}
	if l.invalid {
		best = Quota{}
		if rs != nil {
			rs.n = 0
		}
		// Not a List: perhaps draft 07's Dictionary, which the List
		// stops at (a bare item is never followed by '='), so it costs
		// the answers that send the List nothing.
		if now != nil {
			if q := rateLimitDictionary(rateLimit, now); q.HasLimit || q.HasRemaining || q.HasReset {
				return q
			}
		}
	}
	if rs != nil {
		for i := range rs.n {
			if j := findPolicy(policies, byName, rs.q[i].Policy); j >= 0 {
				rs.q[i].Limit, rs.q[i].Window, rs.q[i].HasLimit = policies[j].q, policies[j].w, true
			}
		}
	}

	if best.HasRemaining {
		if i := findPolicy(policies, byName, best.Policy); i >= 0 {
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

// rateLimitDictionary reads RateLimit as draft 07 of
// draft-ietf-httpapi-ratelimit-headers writes it, and express-rate-limit
// sends it with standardHeaders 'draft-7': a Dictionary of limit, remaining
// and reset ("limit=5, remaining=3, reset=40"), each read as the draft-06
// field RateLimit-Limit, RateLimit-Remaining or RateLimit-Reset of the same
// number is. A member that is not a non-negative Integer or Decimal counts
// as absent; other members, and parameters, are ignored.
func rateLimitDictionary(lines []string, now *instant) Quota {
	var buf [4]sfParam
	var q Quota
	d := sfDict{sfList{lines: lines}}
	for key, v, ps, ok := d.next(buf[:0]); ok; key, v, ps, ok = d.next(ps[:0]) {
		n, num := v.num, (v.kind == 'i' || v.kind == 'd') && !v.neg
		if !num {
			n = decimal{}
		}
		switch key { // a key repeated: the last counts (RFC 9651)
		case "limit":
			q.Limit, q.HasLimit = saturateInt(n.whole), num
		case "remaining":
			q.Remaining, q.HasRemaining = saturateInt(n.whole), num
		case "reset":
			q.Reset, q.HasReset = 0, num
			if num {
				q.Reset = resetIn(n, now)
			}
		}
	}
	if d.invalid {
		return Quota{}
	}
	if q.HasLimit && q.HasRemaining {
		q.Used, q.HasUsed = max(q.Limit-q.Remaining, 0), true
	}
	return q
}

// fillUnnamed reads the items of RateLimit-Policy as drafts 06 and 07 write
// them, a quota with its window and no name ("5;w=60", express-rate-limit's
// form). They say which policies apply, not which one q's counts are of:
// that is the one whose quota is q's Limit, whichever field gave it (draft
// 07's RateLimit limit, draft 06's RateLimit-Limit). So a Limit takes the
// window of the first item of its quota; without a Limit, the item that
// allows the fewest requests a second gives Limit and Window, as a named
// one would.
func (q *Quota) fillUnnamed(lines []string) {
	var buf [8]sfParam
	var p quotaPolicy
	found := false
	l := sfList{lines: lines}
	for v, ps, ok := l.next(buf[:0]); ok; v, ps, ok = l.next(ps[:0]) {
		if v.kind != 'i' || v.neg {
			continue
		}
		if u, ok := ps.get("qu"); ok && (!u.isText() || u.str != "requests") {
			continue
		}
		c := quotaPolicy{q: saturateInt(v.num.whole), requests: true}
		c.w, _ = ps.seconds("w")
		if q.HasLimit && !found && c.q == q.Limit || !q.HasLimit && (!found || stricterPolicy(&c, &p)) {
			p, found = c, true
		}
	}
	switch {
	case !found || l.invalid:
	case q.HasLimit:
		q.Window = p.w
	default:
		q.Limit, q.Window, q.HasLimit = p.q, p.w, true
	}
}

// policyScanMax is the most policies findPolicy scans; past it, a map finds
// them, so that reading a field stays linear in its size.
const policyScanMax = 8

// findPolicy returns the index in policies of the one named name, or -1.
// byName indexes policies once they are more than policyScanMax.
func findPolicy(policies []quotaPolicy, byName map[string]int, name string) int {
	if byName != nil {
		if i, ok := byName[name]; ok {
			return i
		}
		return -1
	}
	for i := range policies {
		if policies[i].name == name {
			return i
		}
	}
	return -1
}

// indexPolicies returns byName updated for the last of policies, or made for
// all of them once they are more than policyScanMax.
func indexPolicies(policies []quotaPolicy, byName map[string]int) map[string]int {
	switch last := len(policies) - 1; {
	case byName != nil:
		byName[policies[last].name] = last
	case len(policies) > policyScanMax:
		byName = make(map[string]int, 2*len(policies))
		for i := range policies {
			byName[policies[i].name] = i
		}
	}
	return byName
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

// count returns the parameter key as a non-negative Integer.
func (ps sfParams) count(key string) (int, bool) {
	v, ok := ps.get(key)
	if !ok || v.kind != 'i' || v.neg {
		return 0, false
	}
	return saturateInt(v.num.whole), true
}

// seconds returns the parameter key as a non-negative Integer or Decimal number
// of seconds.
func (ps sfParams) seconds(key string) (time.Duration, bool) {
	v, ok := ps.get(key)
	if !ok || v.kind != 'i' && v.kind != 'd' || v.neg {
		return 0, false
	}
	return v.num.duration(), true
}
