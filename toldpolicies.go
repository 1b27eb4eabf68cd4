package throttle

import (
	"iter"
	"net/http"
	"time"
)

// Several quotas on one answer: a server may count each request against
// several policies and list them all in RateLimit, one item each
// (draft-ietf-httpapi-ratelimit-headers):
//
//	RateLimit: "burst";r=7;t=1, "day";r=120;t=45
//
// The key keeps a mirror of each policy's count (told.go), by its name, for
// the first maxPolicies an answer lists (the rest are not read): a request
// waits until every mirror lets it go, and counts in each. So the key never
// sends more than any policy allows before that policy's reset, and never
// takes one policy's limit with another's reset (regression, found in
// review: one mirror, fed whichever policy had the least remaining, took a
// minute's limit with a second's reset, and once the minute's quota ran
// out each worker drew a 429: 2.9-3.7% of the requests refused, now 0.1%).
//
// A refusal is news of the policies whose reading says too little remains
// for the request refused, or of all of them when none does (a limit the
// headers do not describe refused it, as with one policy): a policy with
// plenty left is not a bucket refilling slower than measured, nor a window
// refused after its reset.
//
// Readings without a policy name (X-RateLimit-*, Shopify's), and those of
// an answer that lists one policy, go to the first mirror, as they always
// did; it takes the name of the first policy it reads.

// mirrors yields the key's mirrors of the server's count: the first, if
// the key has one, then one for each further policy its answers list.
func (ks *keyState) mirrors() iter.Seq[*told] {
	return func(yield func(*told) bool) {
		m := ks.mirror()
		if m == nil || !yield(m) {
			return
		}
		for i := range ks.tr.x.more {
			if !yield(&ks.tr.x.more[i]) {
				return
			}
		}
	}
}

// mirrorOf returns the mirror of the policy named name, or the first if
// none is its (or name is ""). The key must have a mirror.
func (ks *keyState) mirrorOf(name string) *told {
	x := ks.tr.x
	if name != "" && x.told.policy != name {
		for i := range x.more {
			if x.more[i].policy == name {
				return &x.more[i]
			}
		}
	}
	return &x.told
}

// mirrorFor returns the mirror of the policy named name, made at its first
// reading; nil if the key mirrors maxPolicies others already.
func (x *rare) mirrorFor(name string) *told {
	if m := &x.told; name == "" || m.policy == "" || m.policy == name {
		if name != "" {
			m.policy = name
		}
		return m
	}
	for i := range x.more {
		if x.more[i].policy == name {
			return &x.more[i]
		}
	}
	if len(x.more) == maxPolicies-1 {
		return nil
	}
	if x.more == nil {
		x.more = make([]told, 0, maxPolicies-1) // never moved: its mirrors are pointed at
	}
	x.more = append(x.more, told{policy: name})
	return &x.more[len(x.more)-1]
}

// readQuota gives the quota headers of the answer resp to tk (h's quota,
// with units counted, accepted if ok) to the mirror of each policy they
// read, at at, and reports in ls what the mirrors learned of the kind or
// rate of the quota. It turns the mirrors on.
func (ks *keyState) readQuota(ls *lesson, tk *ticket, resp *http.Response, h *hint, units int, ok bool, at time.Duration) {
	var rs policyReadings
	if h.quota.Policy != "" && resp != nil {
		rs.read(resp.Header)
	}
	if rs.n == 0 {
		rs.q[0], rs.n = h.quota, 1
	}
	short := false // a reading says too little remains for the request
	for i := range rs.n {
		short = short || rs.q[i].Remaining < units
	}
	x := ks.rarely()
	if !x.told.on {
		x.told.on = true
		ks.unlearn()
	}
	for i := range rs.n {
		q := &rs.q[i]
		m := x.mirrorFor(q.Policy)
		if m == nil {
			continue
		}
		m.on = true
		m.rtt = ks.lat.srtt + ks.lat.jitter()
		m.jit = ks.lat.jitter()
		m.rollover(at, ks.admitted)
		m.recount(tk.mono, int(tk.cost), units)
		m.read(*q, at, tk.mono, tk.adm, ks.admitted, ks.outUnits, units, ok, !short || q.Remaining < units)
		if ok {
			m.readAt = tk.endpoint() // one that sends the headers (see toldbare.go)
		}
		if h.throttled() {
			m.forget(tk.mono, units)
		}
		if kind, r, changed := m.news(); changed {
			ls.pace, ls.paceWhy = r, "quota headers: "+kind
		}
	}
}
