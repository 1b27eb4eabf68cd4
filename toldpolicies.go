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
// for the request refused, and of no other: a policy with plenty left is
// not a bucket refilling slower than measured, nor a window refused after
// its reset. When none says so, a limit the headers do not describe
// refused it, with one policy as with several (pause.go learns from it as
// such; blamed on the one mirror, as it was, a Remaining that never falls
// made a bucket of 100 a second a window of 5 a second: see readQuota).
//
// Readings without a policy name (X-RateLimit-*, Shopify's), and those of
// an answer that lists one policy, go to the first mirror, as they always
// did; it takes the name of the first policy it reads. But readings without
// a name that state different Limits are of different quotas: a gateway
// that counts each request against several limits (a second's and an
// hour's; Kong, Envoy, IBM's) and has one set of fields describes the one
// nearest to running out, which changes from answer to answer. Each Limit
// so read has a mirror of its own, as a named policy would (the first
// maxPolicies, a dropped one's place taken again; readings of more Limits
// go to the first mirror, as before, and of more named policies or
// resources to none: a fifth GitHub resource's 3,999, read as core's, took
// core's count for back early, and a sixth request went to core where
// five remained, found in review): one
// mirror, fed a second's limit with one answer and an hour's with the next,
// took the hour's reset for the length of a log of the second's limit, and
// at the hour's reset held the key for 58 minutes after its first 10
// requests (found in review). A mirror is kept true by its readings, and
// one whose Limit the server no longer states (the quota's Limit changed:
// a plan upgraded, from 2 a second to 20) is read no more: it held the key
// to its last reading, 2 on their way at most, and its count of ours, kept
// from the answers it read, sent nothing for a window's length at a time
// (6m39s for what took 22.5 s). So is a named policy or a resource no
// longer listed (a policy named after a plan, "basic" at 10 a second that
// became "pro" at 100: its mirror, a log or a bucket the key's own
// requests kept spending, held the key to 10 a second for good, 10x the
// ideal; found in review). So a mirror not read for staleAfter of its
// window's length, while other answers are read, holds nothing until it
// is read again, and then begins anew: the fields describe the limit
// nearest to running out, so one that binds is read.

// mirrors yields the key's mirrors of the server's count: the first, if
// the key has one, then one for each further policy its answers list.
func (ks *keyState) mirrors() iter.Seq[*told] {
	return func(yield func(*told) bool) {
		m := ks.mirror()
		if m == nil || !m.dropped && !yield(m) {
			return
		}
		for i := range ks.tr.x.more {
			if m := &ks.tr.x.more[i]; !m.dropped && !yield(m) {
				return
			}
		}
	}
}

// unnamedLimit is the Limit of a reading that names no policy, by which
// its mirror is told apart; 0 for a named one, or one without a Limit.
func unnamedLimit(q *Quota) int {
	if q.Policy != "" || !q.HasLimit || q.Limit <= 0 {
		return 0
	}
	return q.Limit
}

// mirrorName is what tells the mirror of the reading q apart beside its
// Limit: its IETF policy's name, or, of the other fields, the resource
// they name (GitHub's X-RateLimit-Resource: core and graphql, each 5,000
// an hour, are counted apart; one mirror of both took a graphql reading
// of 3,999 after core's last for core's early reset, and a sixth request
// went to core where five remained, its 403 pausing the key half an hour,
// found in review), marked by a NUL no policy name holds.
func mirrorName(q *Quota) string {
	if q.Policy == "" && q.Resource != "" {
		return "\x00" + q.Resource
	}
	return q.Policy
}

// mirrorOf returns the mirror of the reading q, or the first if none is
// its. The key must have a mirror.
func (ks *keyState) mirrorOf(q *Quota) *told {
	x := ks.tr.x
	if name, lim := mirrorName(q), unnamedLimit(q); (name != "" || lim != 0) && !x.told.is(name, lim) {
		for i := range x.more {
			if x.more[i].is(name, lim) {
				return &x.more[i]
			}
		}
	}
	return &x.told
}

// is reports whether m mirrors the policy named name, or the quota of
// Limit lim that readings without a name state.
func (m *told) is(name string, lim int) bool {
	return m.policy == name && m.limitOf == lim
}

// staleAfter is how many of its window's lengths a mirror may go unread,
// while other answers are read, before it holds nothing (see above).
const staleAfter = 2

// mirrorFor returns the mirror of the reading q, at at, made at its first
// reading, or begun anew if it was dropped; nil if the key mirrors
// maxPolicies others already and q names its policy or resource. It drops
// the other mirrors that went unread too long while the answers read at
// prev (the key's last answer read before this one) and before were read:
// a Limit no longer stated, a policy or a resource no longer listed (a
// policy named after a plan, "basic", that became "pro": its mirror, a
// log or a bucket that the key's own requests kept spending, held the key
// to the old plan's pace for good; found in review). A key idle across
// them drops none: its last answer read them all.
func (x *rare) mirrorFor(q *Quota, at, prev time.Duration) *told {
	m := x.mirrorAt(mirrorName(q), unnamedLimit(q))
	if m == nil {
		return nil
	}
	if m.dropped {
		*m = told{policy: m.policy, limitOf: m.limitOf}
	}
	for o := range x.all() {
		if p := o.length(); o != m && !o.dropped && o.readLast != 0 && p > 0 && prev-o.readLast > staleAfter*p {
			o.dropped = true
		}
	}
	m.readLast = at
	return m
}

// all yields every mirror, the first one's included, dropped or not.
func (x *rare) all() iter.Seq[*told] {
	return func(yield func(*told) bool) {
		if !yield(&x.told) {
			return
		}
		for i := range x.more {
			if !yield(&x.more[i]) {
				return
			}
		}
	}
}

func (x *rare) mirrorAt(name string, lim int) *told {
	m := &x.told
	switch {
	case name == "" && lim == 0:
		return m
	case m.policy == "" && m.limitOf == 0, m.is(name, lim):
		m.policy, m.limitOf = name, lim
		return m
	}
	for i := range x.more {
		if x.more[i].is(name, lim) {
			return &x.more[i]
		}
	}
	if len(x.more) == maxPolicies-1 {
		for i := range x.more {
			if d := &x.more[i]; d.dropped {
				*d = told{policy: name, limitOf: lim, dropped: true} // begun anew: see mirrorFor
				return d
			}
		}
		if name == "" {
			return m // as before there were mirrors by Limit
		}
		// Not another's: a fifth resource's reading (GitHub's
		// dependency_snapshots), fed to the first mirror, core's, took
		// its 3,999 for core's early reset, and a sixth request went to
		// core where five remained (found in review).
		return nil
	}
	if x.more == nil {
		x.more = make([]told, 0, maxPolicies-1) // never moved: its mirrors are pointed at
	}
	x.more = append(x.more, told{policy: name, limitOf: lim})
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
	x := ks.rarely()
	if !x.told.on {
		x.told.on = true
		ks.unlearn()
	}
	prev := x.readAt
	x.readAt = at
	for i := range rs.n {
		q := &rs.q[i]
		m := x.mirrorFor(q, at, prev)
		if m == nil {
			continue
		}
		m.on = true
		m.rtt = ks.lat.srtt + ks.lat.jitter()
		m.jit = ks.lat.jitter()
		m.rollover(at, ks.admitted)
		m.recount(tk.mono, int(tk.cost), units)
		// A refusal is this policy's only when its reading says too
		// little remains: one whose reading says enough remains was a
		// limit's the headers do not describe (a Remaining that never
		// falls), and blamed on the mirror it cut a bucket's rate and,
		// recurring, told the bucket again, then held it to a window's
		// Limit per reset for good (found in review r13: 5 a second on a
		// bucket of 100, a job 3.8x go-retryablehttp's time).
		m.read(*q, at, tk.mono, tk.adm, ks.admitted, ks.outUnits, units, ok, q.Remaining < units)
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
