package throttle

import (
	"math"
	"time"

	"golang.org/x/time/rate"
)

// A server that sends quota headers on its answers (Remaining, and Reset,
// Limit, RateLimit-Policy; see ParseQuota) tells the key how much it may
// still send. The key keeps a mirror of the server's count: what remained
// when the server answered a request, less the requests sent after that one
// (the server had not counted them yet), plus what the server adds back
// since. A request waits until the mirror holds one. A configured Policy
// still applies: the mirror only ever holds requests back.
//
// What the server adds back depends on its kind of quota, told apart by how
// Remaining moves from one answered request to a later one, the accepted
// requests between them taken into account:
//
//   - a window (fixed, or a log of recent requests) adds nothing until its
//     reset, then gives back everything at once: Remaining only jumps, at
//     the stated reset, back to about Limit;
//   - a bucket refills continuously: Remaining climbs back by small steps
//     whenever it is below Limit. Its Reset (the time until the bucket is
//     full, or until its next token) says little: a client at the quota
//     sees Remaining near 0 and a Reset of one second all the time, and
//     waiting for it would be far too slow. Its rate is measured instead:
//     the climb of Remaining, plus the accepted requests in between, over
//     the time between the two answers. Others spending the same quota show
//     as a slower climb, so the rate measured is what is left for us.
//
// Until it knows, the key takes the quota for a window: it never sends more
// than Remaining before the reset. When the reset is a second or two away,
// stated in whole seconds (a short window, or a bucket: the headers cannot
// tell), it spreads what remains over the time to the reset rather than
// sending it at once, so that a bucket shows its refill, and a window is
// used evenly.
//
// The headers of every answer are read, 2xx included, while the server
// sends them; a server that does not is checked on its first hdrTries
// answers and then on one in hdrSample, so that answers without them cost
// next to nothing.

// quotaKind is what the headers show of the server's quota.
type quotaKind uint8

const (
	kindUnknown quotaKind = iota
	kindWindow            // nothing comes back before the reset
	kindBucket            // Remaining climbs back continuously
)

const (
	hdrSeen    = 1 << 31 // keyState.hdr: the server sent quota headers
	hdrTries   = 16      // answers always checked before the server is taken for one that sends none
	hdrSample  = 64      // then one answer in this many
	minSpan    = 50 * time.Millisecond
	minReads   = 4               // a refill is measured over at least this many answers, and minSpan
	coarseWait = 2 * time.Second // a reset this close, in whole seconds, may be late by up to a second
)

// wantsQuota reports whether the headers of the answer to admission adm
// are worth reading. It takes no lock.
func (ks *keyState) wantsQuota(adm uint64) bool {
	v := ks.hdr.Load()
	return v&hdrSeen != 0 || v < hdrTries || adm%hdrSample == 0
}

// sawQuota records whether an answer carried quota headers.
func (ks *keyState) sawQuota(ok bool) {
	switch v := ks.hdr.Load(); {
	case ok && v&hdrSeen == 0:
		ks.hdr.Or(hdrSeen)
	case !ok && v < hdrTries:
		ks.hdr.Add(1)
	}
}

// told mirrors the server's count of the key's quota.
type told struct {
	limit      int           // the most the server holds at once (Limit; else the most Remaining seen)
	left       int           // what remained, as of leftAt: see read
	leftAdm    uint64        // the admission whose answer said so
	leftAt     time.Duration // when that answer came (from the epoch); 0: no reading yet
	resetAt    time.Duration // the window's reset; 0: unknown
	rollAdm    uint64        // admissions before the last reset: the window before
	period     time.Duration // a window's length (RateLimit-Policy w); 0: unknown
	rate       float64       // requests per second the server makes room for us (a bucket's refill, net of others)
	kind       quotaKind
	on         bool            // the server sent quota headers
	coarse     bool            // the reset is in whole seconds, and near
	passed     bool            // a reset passed since the mark
	still      bool            // a span before a reset showed nothing given back
	tested     bool            // a request went beyond the mirror before this reset (see lowerBound)
	spread     time.Duration   // the last request admitted while spreading
	lastAdm    uint64          // the latest admission answered
	refusedAdm uint64          // admissions up to this one were sent before the last refusal
	longest    time.Duration   // the longest reset seen: about a window's length
	sends      []time.Duration // our admissions over the last window length, oldest first
	// How far what came back missed what a bucket at rate, and a log that
	// gives back what was sent a window's length ago, would have given back.
	bucketMiss, logMiss float64

	shownKind string  // what EventPace last said
	shownRate float64 //

	// The answer the refill is measured from.
	markAt  time.Duration
	markRem int
	markAcc int64
	markOut int   // our requests on their way then
	acc     int64 // our answers the server counted
	reads   int
}

// read takes a reading: q came with the answer to admission adm, at now,
// when inflight of our requests were still on their way; accepted says the
// server counted the request.
//
// The server counts requests in about the order they were sent, but not
// exactly: requests sent together are counted in any order. So for a
// window the lowest Remaining of the window is the latest count, and every
// request the server counted after it is one still on its way; for a
// bucket, whose count climbs, the answer to the latest admission is the
// latest count, within the few requests sent together.
func (m *told) read(q Quota, now time.Duration, adm uint64, inflight int, accepted bool) {
	if accepted {
		m.acc++
	} else if m.kind == kindBucket && m.rate > 0 && adm > m.refusedAdm {
		// Refused: the bucket refills slower than measured, or others
		// spend more of it. Once per refusal episode, a fifth less, and a
		// new measurement.
		m.rate *= slowFactor
		m.refusedAdm, m.markAt = m.lastAdm, 0
	}
	m.lastAdm = max(m.lastAdm, adm)
	if !q.HasRemaining {
		return
	}
	r := q.Remaining
	if q.HasLimit && q.Limit > 0 {
		m.limit = q.Limit
	}
	m.limit = max(m.limit, r)
	if q.Window > 0 {
		m.period = q.Window
	}
	m.measure(now, r, inflight)
	if m.kind == kindUnknown && m.tested && accepted && adm > m.leftAdm && r > m.left+inflight {
		// The request that tried beyond the mirror found more than was
		// left: the quota gives back before its reset.
		m.kind, m.rate = kindBucket, float64(r-m.left+1)/(now-m.leftAt).Seconds()
	}
	switch {
	case m.leftAt == 0,
		m.kind == kindBucket && adm >= m.leftAdm,
		m.kind != kindBucket && adm > m.rollAdm && r < m.left:
		// The first reading; a bucket's latest; a window's lowest (a
		// request sent before the reset says nothing of the window now).
		m.left, m.leftAdm, m.leftAt = r, adm, now
	}
	if q.HasReset {
		m.longest = max(m.longest, q.Reset)
		at := now + q.Reset
		m.coarse = q.Reset <= coarseWait && q.Reset%time.Second == 0
		switch {
		case m.kind == kindBucket:
			m.resetAt = 0 // a bucket's reset says when it is full, not when it refills
		case m.resetAt <= now || at < m.resetAt:
			m.resetAt = at // the tightest: a reset rounded up is late by less than a second
		}
	}
}

// news reports what is new in the mirror since it last reported: its kind
// ("window", "bucket" or "log"), and a bucket's rate when it moved by a
// tenth or more.
func (m *told) news() (kind string, r rate.Limit, changed bool) {
	switch {
	case m.kind == kindWindow:
		kind = "window"
	case m.kind == kindBucket && m.length() > 0 && 2*m.logMiss < m.bucketMiss:
		kind = "log"
	case m.kind == kindBucket:
		kind, r = "bucket", rate.Limit(m.rate)
	default:
		return "", 0, false
	}
	if kind == m.shownKind && math.Abs(m.rate-m.shownRate) < m.shownRate/10 {
		return kind, r, false
	}
	m.shownKind, m.shownRate = kind, m.rate
	return kind, r, true
}

// measure learns from how Remaining moved since the mark: a climb shows a
// bucket and its rate, a jump back to about the limit across the stated
// reset, after a span that gave nothing back, shows a window.
func (m *told) measure(now time.Duration, r, inflight int) {
	if m.markAt == 0 {
		m.markAt, m.markRem, m.markAcc, m.markOut = now, r, m.acc, inflight
		return
	}
	m.reads++
	dt := now - m.markAt
	if dt < minSpan || m.reads < minReads {
		return
	}
	// What the server gave back meanwhile: the climb, plus our requests it
	// counted, within the requests on their way at either end, which it
	// may have counted on either side.
	back := r - m.markRem + int(m.acc-m.markAcc)
	noise := m.markOut + inflight
	if p := m.length(); m.kind == kindBucket && p > 0 && !m.passed {
		echo := m.sentBetween(m.markAt-p, now-p)
		m.logMiss = 0.8*m.logMiss + math.Abs(float64(back-echo))
		m.bucketMiss = 0.8*m.bucketMiss + math.Abs(float64(back)-m.rate*dt.Seconds())
	}
	full := m.markRem >= m.limit-1 || r >= m.limit-1 // a full bucket loses what it would add
	switch {
	case m.passed && m.still && back >= m.limit/2 && m.kind != kindBucket:
		m.kind = kindWindow // nothing back before the reset, everything at it
	case m.passed:
	case back > noise && !full:
		m.kind = kindBucket // a climb, below the limit
		m.rate = float64(back) / dt.Seconds()
	case back > noise:
		m.kind = kindBucket                              // it gave back before the reset
		m.rate = max(m.rate, float64(back)/dt.Seconds()) // a full bucket: at least this
	case m.kind == kindBucket && back <= 0:
		m.rate = 0 // others spend all it adds
	case back <= 0:
		m.still = true
	}
	m.markAt, m.markRem, m.markAcc, m.markOut, m.reads, m.passed = now, r, m.acc, inflight, 0, false
}

// rollover begins the next window once the reset has passed.
func (m *told) rollover(now time.Duration, admitted uint64) {
	if m.kind == kindBucket || m.resetAt == 0 || now < m.resetAt {
		return
	}
	m.left, m.leftAdm, m.leftAt, m.rollAdm, m.passed, m.tested = m.limit, admitted, m.resetAt, admitted, true, false
	m.resetAt = 0
	if m.period > 0 {
		m.resetAt = m.leftAt + m.period
	}
}

// tokens is what the mirror holds at now, with inflight of our requests on
// their way.
//
// A bucket refills at its rate, but a log of recent requests, which also
// gives back before its reset, gives back what was sent a window's length
// ago, no more: between answers the mirror counts what either would give
// back, whichever is less.
func (m *told) tokens(now time.Duration, inflight int) float64 {
	t := float64(m.left)
	if m.rate > 0 {
		back := m.rate * (now - m.leftAt).Seconds()
		if p := m.length(); p > 0 && 2*m.logMiss < m.bucketMiss {
			back = float64(m.sentBetween(m.leftAt-p, now-p)) // a log
		}
		t = min(t+back, float64(m.limit))
	}
	return t - float64(inflight)
}

// length is the window length of a log of requests: the RateLimit-Policy w,
// else the longest reset seen, in whole seconds; 0 if unknown.
func (m *told) length() time.Duration {
	if m.period > 0 {
		return m.period
	}
	return m.longest
}

// sentBetween counts our admissions in (from, to].
func (m *told) sentBetween(from, to time.Duration) int {
	n := 0
	for i := len(m.sends) - 1; i >= 0 && m.sends[i] > from; i-- {
		if m.sends[i] <= to {
			n++
		}
	}
	return n
}

// lowerBound is the earliest time, from the epoch, the mirror could let go
// a request with ahead others before it (0 for the head, which it lets go
// then).
func (m *told) lowerBound(now time.Duration, admitted uint64, inflight, ahead int) time.Duration {
	m.rollover(now, admitted)
	need := float64(ahead + 1)
	if m.kind == kindBucket {
		need++ // a token held back: answers that overtake one another, a rate measured a little high
	}
	t := m.tokens(now, inflight)
	switch {
	case t >= need && ahead == 0 && m.kind == kindUnknown && m.coarse && m.resetAt > now:
		// Spread what is left over the time to the reset.
		// Spread what is left over the time to the reset, less a tenth:
		// a window's last requests must not be late for it.
		return max(now, m.spread+time.Duration(0.9*float64(m.resetAt-now)/t))
	case t >= need:
		return now
	case m.rate > 0:
		return now + time.Duration(math.Ceil((need-t)/m.rate*1e9))
	case m.resetAt > now && ahead == 0 && m.kind == kindUnknown && m.coarse && !m.tested &&
		m.resetAt-m.leftAt >= coarseWait/8:
		// Spent, and the headers cannot tell a short window from a
		// bucket, or a log of requests that gives back as they age: one
		// request tries an eighth of the way to the reset. Refused, it
		// costs one 429, and the pause it brings lasts to the reset.
		return max(now, m.leftAt+(m.resetAt-m.leftAt)/8)
	case m.resetAt > now:
		return m.resetAt
	}
	return now // nothing known holds it: its answer will say more
}

// took records a request admitted at now, with inflight others on their
// way.
func (m *told) took(now time.Duration, inflight int) {
	m.spread = now
	if m.kind != kindWindow {
		old := 0
		for old < len(m.sends) && m.sends[old] <= now-m.length()-time.Second {
			old++
		}
		if old > 0 && old >= len(m.sends)/2 {
			m.sends = append(m.sends[:0], m.sends[old:]...)
		}
		m.sends = append(m.sends, now)
	}
	if m.tokens(now, inflight) < 1 {
		m.tested = true
	}
}
