package throttle

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// This file keeps, for the mirror of a server's quota (told.go), the
// answers the server accepted without a reading, though it sends them on
// others: whether they spent the quota, which they do not say, is told by
// the readings that follow them.
//
// The mirror is what remained when the server answered a request, less
// the requests sent after that one. One of those answered without a
// reading stays taken from what remained: a server that sends its headers
// on some answers and not on others may count them all (regression, found
// in review 47: forgotten once answered, a window told Limit 3, Remaining
// 2, Reset 60 on one answer, then nothing, let five requests go at once,
// one at a time, where two remained). But a host whose quota guards one
// endpoint (express-rate-limit on /login, /items with no limiter and no
// headers, all under one key) does not count the others, and taken from
// what remained they spend it with no signal from the server (regression,
// found in review 48 in a first fix that took them and nothing more: 60 a
// minute, 1,000 requests, one in 50 to /login, took 3 min where 250 ms
// was, the key held to each reset; 1,000 an hour, 5,000 requests, one in
// 20, 3,872 failed at once, held past MaxRetryAfter, though the server
// refused nothing). So:
//
//   - one is taken from a window's count, or a kind's not known yet, only
//     if sent after the reading's answer came (sent before, it may have
//     reached the server first, and be counted in the reading), and more
//     than a second before the reset (the reset, in whole seconds, is late
//     by up to one: it may be counted in the next window);
//   - a reading of a request sent after them all that finds more than
//     remained less them gives them back (see tellBare): they were not
//     counted, or the quota gave back (a log, a bucket, taken for a window,
//     which they held to its reset: a log of 100 a minute, half its
//     answers without headers, took 8 min for 500 requests where 4 min
//     was);
//   - a count spent only by such answers from other endpoints (method and
//     path) than the reading's holds the key for no reset: one request
//     goes, the others wait for its answer, and it tells (see tried,
//     endTry). Accepted where, counting them, the server would have had no
//     room left, they are not counted, and no longer taken; refused for
//     this quota, they are, and none goes to ask again for two of the
//     quota's length, then four, eight... (another client of the quota may
//     have spent it: see endTry); anything else
//     tells nothing, and the next request beyond them asks. (Without it,
//     60 a minute, one in 100 to /login, 1,000 requests, took 1 min where
//     250 ms was; 1,000 an hour, one in 2,000, 5,000 requests, 3,994
//     failed at once.) Spent by answers from the reading's own endpoint,
//     which sends the headers, the count holds the key to the reset, as a
//     reading would have.

// A cache's stored answer, which its Age field marks (see storedAnswer),
// is no such answer: the server never saw the request (learn leaves it
// out, and the count its headers carry too). Nor is a 5xx, which the
// server may have counted, and which is taken as counted (see unread). A
// bucket takes ours as they are sent, whatever their answers (see bucket),
// and a log counts ours from its own count of them (see exact): neither
// keeps these.

// storedAnswer reports whether an answer with header h is a cache's stored
// answer, as its Age field marks one (RFC 9111, Section 5.1): an Age of 0
// is a cache's miss, the server's answer just now (Varnish and Fastly add
// one to every answer); any other value, or one that is not a number, was
// put there by a cache that kept the answer. Of several, the first counts
// (Section 5.1).
func storedAnswer(h http.Header) bool {
	v := h["Age"]
	if len(v) == 0 {
		return false
	}
	first, _, _ := strings.Cut(v[0], ",")
	n, err := strconv.ParseUint(strings.TrimSpace(first), 10, 64)
	return err != nil || n > 0
}

// endpoint is a request's method and URL path: answers without a reading
// from the endpoint whose answers carry readings are counted by the quota
// that the readings describe; from another, perhaps not.
type endpoint struct{ method, path string }

// endpoint is the endpoint of tk's request; zero if none is known.
func (tk *ticket) endpoint() endpoint {
	if tk.req == nil || tk.req.URL == nil {
		return endpoint{}
	}
	method := tk.req.Method
	if method == "" {
		method = http.MethodGet // (as net/http reads it)
	}
	return endpoint{method, tk.req.URL.Path}
}

// bareVerdict is what a try told of answers accepted without a reading.
type bareVerdict uint8

const (
	bareUntold    bareVerdict = iota // nothing yet: taken from what remained
	bareCounted                      // the try beyond them was refused: taken, and no other tries
	bareUncounted                    // the try beyond them was accepted where, counting them, the server had no room: not taken
)

// keepsBare reports whether the mirror keeps answers without a reading:
// a window's, or a kind not known yet.
func (m *told) keepsBare() bool {
	return m.kind != kindBucket && m.kind != kindLog && m.leftAt != 0
}

// bareAnswer records the answer to admission adm, of n units, sent at
// sent, to a request for endpoint at, that the server accepted without a
// reading, with inflight of ours on their way: taken from what remained,
// unless readings showed such answers not counted. The answer to the
// request that went beyond a count only those from other endpoints spent
// (see bareTry) shows them not counted if the server, counting them, would
// have had no room for it (see tried).
func (m *told) bareAnswer(adm uint64, sent time.Duration, n int, at endpoint, inflight int64) {
	m.bareAt = max(m.bareAt, sent)
	switch {
	case !m.keepsBare():
		return
	case adm <= m.leftSeen:
		// Sent before the reading's answer came: it may have reached the
		// server before the reading's request, and be counted in it.
		// Forgotten once answered, as before: taken, those sent together
		// at a window's start were taken twice (a window of 50 per 10 s,
		// a third of its answers without headers, 16 at a time, took
		// 6m40s for 2,000 requests in 4 seeds of 4 where 6m30s was, a
		// window more).
		return
	case m.resetAt != 0 && sent > m.resetAt-time.Second:
		// Sent within a second of the reset, which, in whole seconds, is
		// late by up to one: it may have reached the server after its
		// reset, and be counted in the next window, which the readings
		// of that window count. Taken, a window of 100 a second, half
		// its answers without headers, 16 at a time, was sent 98.4-98.9
		// a second in 4 seeds where 99.6 was: the key held its window's
		// last one or two to the reset it knew, a few ms after the
		// server's.
		return
	}
	if m.tried(adm, 0, inflight) {
		return
	}
	other := at != m.readAt
	if other && m.bareSays == bareUncounted {
		// Told not counted (see tried). The verdict is of answers from
		// other endpoints: those from the reading's own, which the quota
		// counts, are still taken (regression, found in review: once a
		// try showed another endpoint's answers uncounted, a window told
		// on some answers of its own endpoint and not others, 8 left, let
		// 12 requests to it go at once, 4 refused).
		return
	}
	m.bare += n
	m.bareLast = max(m.bareLast, adm)
	if other {
		m.bareOther += n
	}
	m.left -= n
}

// tellBare reads what Remaining r, in the answer to admission adm,
// accepted, with inflight of ours on their way, tells of the answers
// without a reading since the reading that set left: the try's answer
// tells (see tried); so does a reading of a request sent after them all
// that finds more than remained less them: they were not counted, or the
// quota gave back (a log, a bucket, taken for a window). Either way that
// reading says what remains now, as a window's lowest does (see read):
// what they took is given back.
func (m *told) tellBare(r int, adm uint64, inflight int64) {
	if !m.keepsBare() || adm <= m.leftSeen || m.tried(adm, r, inflight) {
		return
	}
	if m.bare > 0 && adm > m.bareLast && r > m.left {
		m.left += m.bare
		m.bare, m.bareOther, m.bareLast = 0, 0, 0
	}
}

// tried reports whether the answer to admission adm, accepted with at
// least r remaining after it, with inflight of ours on their way, is the
// try's (see bareTry) and shows answers without a reading not counted:
// counting them, the server would have had less than r left, however
// those sent with the reading and those on their way were counted. The
// try ends: the next request that goes beyond them tries again, one at a
// time (those sent with the reading, counted in it or not, blur what one
// try shows, and each try takes one more of them out of the blur).
func (m *told) tried(adm uint64, r int, inflight int64) bool {
	if m.bareTry == 0 || adm < m.bareTry {
		return false
	}
	m.bareTry = 0
	if int64(r) > m.leftIfCounted(adm)+inflight {
		m.judgeBare(bareUncounted)
		return true
	}
	return false
}

// readLeft is what remained as the readings alone say: answers without a
// reading are left out unless told counted. A reading above what remained
// less them shows a quota given back before its reset (a bucket, a log, a
// reset known late) only if it is above this too: had the server not
// counted them, it shows nothing.
func (m *told) readLeft() int64 {
	if m.bareSays == bareUntold {
		return int64(m.left) + int64(m.bare)
	}
	return int64(m.left)
}

// was is what remained before any answer without a reading was taken.
func (m *told) was() int64 {
	return int64(m.left) + int64(m.bare)
}

// leftIfCounted is the most that remains after admission adm, had the server
// counted every request of ours sent after the reading's answer came.
func (m *told) leftIfCounted(adm uint64) int64 {
	return m.was() - int64(adm-m.leftSeen)
}

// endTry ends the try beyond a count only answers without a reading from
// other endpoints spent, once its answer, to admission adm, came: refused
// for this quota (its reading says too little remains), it shows them
// counted; otherwise its reading, or its answer without one, told already
// (see tellBare, bareAnswer), or it told nothing (a 5xx, no answer, a
// gateway's refusal without headers), and another may try.
//
// A verdict that they are counted holds for two of the quota's length, then
// four, eight..., each time a try tells so again, up to 2^10: then one
// request asks again. Another client of the quota may have spent what the
// try found spent (two processes behind one address on express-rate-limit,
// /login limited, /items not): taken for good, that one refusal held the
// key to /login's every reset whenever /items' answers spent its count,
// 200 requests in 4 min where 200 ms was (found in review).
func (m *told) endTry(adm uint64, spent bool, now time.Duration) {
	if m.bareTry == 0 || adm < m.bareTry {
		return
	}
	if spent {
		m.judgeBare(bareCounted)
		hold := max(m.length(), time.Second)
		for range 1 + min(m.bareAsked, 9) {
			hold = satAdd(hold, hold)
		}
		m.bareUntil, m.bareAsked = satAdd(now, hold), min(m.bareAsked+1, 10)
	}
	m.bareTry = 0
}

// judgeBare sets the verdict on answers without a reading: told not
// counted, what those from other endpoints took from what remained is
// given back (those from the reading's own stay taken: see bareAnswer).
func (m *told) judgeBare(v bareVerdict) {
	if v == bareUncounted && m.bareSays != bareUncounted {
		m.left += m.bareOther
		m.bare -= m.bareOther
		m.bareOther = 0
	}
	m.bareSays, m.bareTry = v, 0
}

// spentByBare reports whether only answers without a reading from other
// endpoints than the reading's, not yet told counted (or told so longer
// ago than the verdict holds: see endTry), keep the mirror, at
// now, with inflight of ours on their way, from holding need: without
// them it would let the request go. Not within a second of the reset: a
// try then may reach the server after its reset (in whole seconds, late by
// up to one) and tell nothing, and the reset is near.
func (m *told) spentByBare(now time.Duration, inflight int64, need float64) bool {
	judged := m.bareSays == bareUncounted || m.bareSays == bareCounted && now < m.bareUntil
	if !m.keepsBare() || judged || m.bareOther == 0 || m.resetAt != 0 && now > m.resetAt-time.Second {
		return false
	}
	return float64(int64(m.left+m.bareOther)-inflight) >= need &&
		(!m.logBound() || m.exact(now, inflight) >= need)
}
