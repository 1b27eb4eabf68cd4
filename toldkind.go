package throttle

import (
	"math"
	"time"
)

// This file tells the kind of the server's quota from how its headers move
// (see told.go): a fixed window, a log of recent requests, or a bucket.

// measure learns from how Remaining, r, read at now in the answer to a
// request sent at sent, moved since the mark, at least minSpan and
// minReads answers before:
//
//   - a jump back to about the limit across the stated reset, after a span
//     that gave nothing back, shows a window: to the limit less ours since
//     the reset, or, once others were seen spending the quota, to half
//     the limit or more (a sliding counter, whose count of the window
//     before decays evenly, is back to half its limit half way into the
//     next);
//   - across that reset, Remaining that a log of ours explains, far below
//     a window back to whole, shows a log at once (see gaveBackAsALog);
//   - a climb before the reset, no more than a log would have given back of
//     ours, shows a log; more, a bucket, and its rate (a bucket full at
//     both ends refills faster than the key takes: the rate is raised, to
//     probeOver times what the key took at most);
//   - a climb back to full in one span shows nothing yet: a bucket that
//     refilled, or a window's reset known late (whole seconds); nor does a
//     climb to half what it held or more within the second a reset in
//     whole seconds was known to (see earlyReset), Remaining above the
//     mark's;
//   - across a reset that gave back less than whole (see wholeAgain), a
//     span shows what any span does: such a reset is no window's;
//   - a bucket that gave nothing back is spent by others as fast as it
//     refills; any other quota that gave nothing back is still, if the
//     answer read was to a request sent after the mark's: the server read
//     each count when the request reached it, which a leaky bucket's
//     queue makes up to its length before the answer, so answers to
//     requests sent together show nothing given back in any span
//     (regression: a leaky bucket of 50 a second with three places to
//     wait, its first burst's answers 0-60 ms apart, was taken for a
//     still window of 4 a second at its reset, and held to that: 12.5x
//     the ideal in 4 runs of 16).
//
// A bucket's span whose climb is no more than the requests on their way at
// its ends could make goes on to later answers, up to a second: far away,
// those are about as many as the bucket holds.
func (m *told) measure(now, sent time.Duration, r int, inflight int64, since uint64) {
	if m.markAt == 0 {
		m.markAt, m.markRem, m.markAcc, m.markOut = now, r, m.acc, inflight
		return
	}
	m.reads++
	if m.passed && m.still && m.kind == kindUnknown && !m.sharedNow(now) && m.gaveBackAsALog(now, r, inflight, since) {
		// Across a reset, after a span that gave nothing back: a window
		// would be back to whole, less ours since; a log gives back only
		// what it took a window's length before. The first answer after
		// the reset tells, without waiting for a span (a log spread over
		// its first window gives back as unevenly: every part of it
		// known late is used late in every window that follows).
		m.kind = kindLog
		m.markAt, m.markRem, m.markAcc, m.markOut, m.reads, m.passed = now, r, m.acc, inflight, 0, false
		return
	}
	dt := now - m.markAt
	if dt < minSpan || m.reads < minReads {
		return
	}
	// What the server gave back meanwhile: the climb, plus our requests it
	// counted, within the requests on their way at either end, which it
	// may have counted on either side.
	back := int64(r-m.markRem) + m.acc - m.markAcc
	noise := m.markOut + inflight
	// A full bucket loses what it would add: a span that ends or begins
	// full shows a rate it bears at least; one full at both ends, a
	// bucket that refills faster than the key takes from it.
	// (Remaining is read after the answered request took its own.)
	top := max(1, m.depth-m.depth/8)
	full, fuller := m.markRem+1 >= top || r+1 >= top, m.markRem+1 >= top && r+1 >= top
	if m.kind == kindBucket && back <= noise && dt < time.Second {
		// Lost among the requests on their way at either end: a longer
		// span tells. So is a climb below nothing by no more than they
		// (regression: a bucket 100-200 ms away, alone, taken as spent by
		// others as fast as it refills, its rate set to 0).
		return
	}
	echo := int64(0)
	if m.kind != kindBucket {
		echo = int64(m.echoes(m.markAt, now)) // only more than a log gives back shows a bucket
	}
	switch {
	case m.passed && m.still && back >= int64(m.limit/2) && m.kind == kindUnknown && m.backWhole(r, since):
		m.kind = kindWindow // nothing back before the reset, everything at it
	case m.passed && !m.notWhole:
	case back > noise && back <= noise+echo && m.kind != kindLog &&
		back+noise+2 >= int64(m.surelyEchoed(m.markAt, now)) && m.depth >= m.limit/2:
		// Back before the reset, no more than a log would give, nor less
		// (a bucket that others spend most of climbs slowly too), of a
		// quota once seen to hold half its limit or more, as a log does
		// when first used (a bucket told by its rate, RateLimit-Policy's
		// q per w, holds only its depth: taken for a log, it was held to
		// its depth per window).
		m.kind = kindLog
	case m.kind == kindWindow:
		// Told apart once: a span that crossed a reset the key placed
		// late (resets in whole seconds are known to within a second)
		// would look like a climb.
	case back > noise+echo && m.kind == kindUnknown && m.earlyReset(now, r, inflight) && r > m.markRem:
		// A climb to half the most it held or more, within the second a
		// reset in whole seconds was known to: a window's reset, early,
		// that others spent some of already, perhaps (read takes it so).
		// Only what follows tells: a bucket climbs again within the
		// window's length. A reset shows as Remaining higher than at the
		// mark; one that fell, by less than ours took, was refilled
		// (regression: a bucket of 5 a second, spent in each second
		// after a pause, was never told from a window, 15% of requests
		// refused).

	case back > noise+echo && !full && m.kind != kindLog:
		// A climb, below the limit. A bucket known to refill, within
		// the span, what it lacked at the mark and what the key took,
		// that the key took less than half of its refill from, sat
		// idle: it may have been full in between, losing what it would
		// add, and such a span shows only a rate it bears at least
		// (regression, found in review: a bucket of 1 a second, 3
		// deep, its span across a job's 45 s pause measured 3/46 s, and
		// the next job took 2.2x its ideal; 5 a second 5 deep, 5.3x). A
		// key that took more, sent at about its rate, measures it
		// (without that, a rate measured high could never come down by
		// a span: a bucket of 1,000 a second, 5 deep, 4 workers, 1.31x
		// -> 1.56x the ideal).
		took := float64(m.acc - m.markAcc)
		if refill := m.rate * dt.Seconds(); m.kind == kindBucket && m.rate > 0 && took < refill/2 && refill-took >= float64(m.depth-m.markRem) {
			m.rate = max(m.rate, float64(back)/dt.Seconds())
		} else {
			m.kind = kindBucket
			m.rate = float64(back) / dt.Seconds()
		}
	case back > noise+echo && m.kind == kindUnknown && m.depth >= minDepth && r+1 >= top && m.markRem+1 < top:
		// Back to full in one span: a bucket that refilled, or a
		// window's reset before the one the key knew of (resets in whole
		// seconds are known to within one). Only what follows tells.
		m.passed = true
	case back > noise+echo && m.kind != kindLog:
		m.kind = kindBucket // it gave back before the reset
		m.rate = max(m.rate, float64(back)/dt.Seconds())
		if fuller {
			// Probing: quickly until the first refusal, then by a
			// twentieth per quiet second, and quickly again once
			// regrowAfter passed unrefused: the others that spent it
			// left (regression: two transports on a leaky bucket of 200
			// a second with one place to wait, the one starved while the
			// other took it measured 1 a second, and took 20 s after the
			// other's end to climb back; 5.8x the ideal of both jobs).
			grow := 1.0
			switch {
			case m.refusedAt == 0 || now-m.refusedAt >= regrowAfter:
				grow = 1.25
			case now-m.refusedAt >= time.Second && now-m.raisedAt >= time.Second:
				grow = 1.05
				m.raisedAt = now
			}
			// A bucket full at both ends shows only that it refills at
			// least as fast as the key took from it: the probe goes no
			// higher than probeOver times what the key took over the
			// span (regression, found in review 46: a key sending 25 a
			// second to a bucket of 200 a second, 20 deep, raised its
			// rate at every span, to 1e6 a second; a job of 2,000 that
			// followed was refused 45 times and took 1.37x the ideal).
			// A key the mirror holds back takes less than its rate:
			// about half of it from a bucket of 2, a quarter of it held
			// back and each answer a trip away; raised only once the key
			// took 0.8 of it (reachedShare, as a learned pace is), a
			// leaky bucket of 200 a second with one place to wait took
			// 1.28x the ideal over 8 seeds, not 1.22x; held to the q per
			// w of its RateLimit-Policy (q=200;w=1), 1.32x. Never past
			// what any client sends either (found in review: a bucket
			// whose Remaining said 0 at every answer was raised at every
			// span, to 5e38 a second).
			took := float64(m.acc-m.markAcc) / dt.Seconds()
			m.rate = max(m.rate, min(m.rate*grow, probeOver*took))
			m.rate = min(m.rate, float64(fastestRate))
		}
	case m.kind == kindBucket && back <= 0:
		m.rate = 0 // others spend all it adds
	case back <= 0 && sent > m.markAt:
		m.still = true
	}
	m.markAt, m.markRem, m.markAcc, m.markOut, m.reads, m.passed = now, r, m.acc, inflight, 0, false
}

// gaveBackAsALog reports whether Remaining, r, read at now with inflight of
// ours on their way, since of ours admitted after the last reset, is what
// a log of ours would hold, and far below what a window back to whole
// would: no more than the limit less ours surely in the log (answered
// within the window's length, a round trip from either end), no less
// than the limit less ours that may be (sent within it and a round trip).
// Others spending a window make it look lower; a bucket, higher.
func (m *told) gaveBackAsALog(now time.Duration, r int, inflight int64, since uint64) bool {
	p := m.length()
	if p <= 0 || p > maxCounting || m.limit > maxCounted || since >= uint64(m.limit) {
		return false
	}
	noise := m.markOut + inflight
	held := int64(m.sentBetween(now-p-m.rtt, now))
	surely := int64(m.answeredBetween(now-p+m.rtt, now-m.rtt))
	lim := int64(m.limit)
	return int64(r)+int64(since)+othersShown < lim && // not a window back to whole
		int64(r)+noise+2 >= lim-held && int64(r) <= lim-surely+noise+2
}

// overTaken tells a bucket by what the server took of ours: more within a
// window's length than a window could take (its limit twice, across a
// reset) or a log (its limit once). A key whose requests on their way are
// about as many as the quota holds cannot see the quota climb back between
// two answers (the climb is lost among the requests counted on either
// side), but it sees this: the server counted each answered request
// before it answered, so those answered within a window's length less a
// round trip were all counted within that length. The bucket's rate is at
// least what they took, less what it drew from the depth: Remaining, r,
// now says how much that was.
func (m *told) overTaken(now time.Duration, r int) {
	p := m.length()
	span := p - m.rtt
	if m.limit <= 0 || m.depth < minDepth || span < p/2 || p > maxCounting || m.limit > maxCounted {
		return
	}
	k := m.answeredBetween(now-span, now)
	if k <= 2*m.ceiling()+minDepth {
		return
	}
	m.kind = kindBucket
	m.rate = max(m.rate, float64(k-max(0, m.depth-r))/span.Seconds())
	m.markAt = 0
}

// wholeAgain notes, while the kind is not known, what Remaining, r, read
// at now in the answer to admission adm, with admitted of ours admitted
// so far, shows of the last reset: read of a request sent after it,
// within a quarter of the quota's length, a quota not back to whole, less
// ours since (see backWhole), shows that reset no window's end; one back
// to whole exactly, less ours since, a window's again. A bucket's
// RateLimit t says when its next token comes, a log's when its oldest
// leaves, a sliding counter's when it admits one more: past any of them
// the quota gives back one, or a few, not all, as a window does. Until a
// reading says otherwise (notWhole), such a reset gives back one, not the
// whole quota (see rollover), and a span of Remaining across it is read
// as any other (see measure): its climb shows a bucket's refill, or what a
// log gave back. (Regression, found in review 46: a bucket of 2 a second,
// 10 deep, told by IETF fields on every answer, 5 ms away, says t=1 at
// every answer, and RateLimit-Policy's q=10;w=5 is a bucket's rate as
// well as a window's; sent 16 requests 250 ms apart, it was given back
// whole at each reset, about a second apart, and every span of Remaining
// crossed one and showed nothing: after a second of quiet, at 5 s Stats
// said 10 remained where the server held about 4, and of 10 requests
// sent then, 5 went within a third of a second and 2 were refused. Now
// the bucket and its rate are known by 3 s, Stats says 3 at 5 s, and the
// 10 go 3 at once and the rest at its refill, none refused.) Not once
// others are seen spending the quota: a window they spend most of at its
// start is not back to whole after its reset either, and it gives back
// what they left (found in review 48: a window of 100 a second told by
// IETF fields, another client spending 80 at each window's start, taken
// for no window's end gave back one a reset: 400 requests took 1.118x
// where 0.979x was, 20.5 refused where 9.1 were; now 1.000x and 10.6).
func (m *told) wholeAgain(now time.Duration, r int, adm, admitted uint64) {
	if m.rollAdm == 0 || adm <= m.rollAdm || now-m.rolledAt >= m.length()/4 || m.othersSeen != 0 {
		return
	}
	since := admitted - m.rollAdm
	switch {
	case !m.backWhole(r, since):
		m.notWhole = true
	case int64(r)+int64(since) >= int64(m.limit):
		m.notWhole = false
	}
}

// stated is a reading's reset as an instant: when the quota said it would
// be whole again.
type stated struct {
	end  time.Duration // the answer's time plus its reset
	at   time.Duration // when the answer came; 0: no reading
	trip time.Duration // its round trip: the server read its count within it
	rem  int           // Remaining
	lim  int           // Limit, 0 when not stated
}

// endResolution is how far apart two readings of one fixed instant may
// place it, beyond the round trips in which the server read them: a second
// of rounding (resets are stated in whole seconds), and a second more for
// a reset stated as a time, read against the server's clock as its Date
// shows it, truncated to its second (see instant).
const endResolution = 2 * time.Second

// endMoved tells a bucket by where its reset places the quota's end, as
// an instant (the answer's time plus the reset), from Remaining, r, read
// at now in the answer to a request sent at sent, and the reading of a
// kind not yet known that stated the earliest end (firstEnd). A window's
// end is fixed: a reset in seconds shrinks as time passes, a time stays
// put. A log is whole a window's length after its newest request, so its
// end moves no later than the answers come. A bucket whose Reset says
// when it is full again (X-RateLimit-Reset of Twitch's kind, and
// throttletest's) is full once it refilled what it lacks: its end moves
// later by 1/rate with each request it takes, whenever they come. So two
// readings whose ends are further apart than the resolution
// (endResolution, the round trips of both and the time between the
// answers), the later end with less remaining, are a bucket's, when both
// were read before the earlier end (less the same resolution: past it, a
// window may have reset, a log let its oldest go), and one rate fits both
// (see refills): each reset is what the bucket lacked of its depth at that
// rate. (A sliding counter's reset, the end of the window after the
// current one, moves a window's length at each of its windows' ends, but
// that move fits no one rate: a counter of 10 a minute read at 59 s with
// 4 remaining and a reset of 61 s, then at 60.5 s with 3 and 119.5 s,
// would refill at 0.08-0.10 a second by the one and 0.05-0.06 by the
// other.) Its rate is the lesser of what the move shows (the fall of
// Remaining over the time the end moved, less the time between the
// answers, in which the bucket refilled) and of what the later reading
// shows (what it lacks of the depth over its time until full).
//
// Spans of Remaining (see measure) cannot show a slow bucket whose answers
// came together, and while the kind is unknown the key takes the earliest
// reset for a window's end, back whole, and then, refused, the latest
// reset for the wait (regression, found in review: a bucket of 2 a
// second, 100 deep, told by X-RateLimit-* on every answer, 4 workers, 140
// requests: its first 100 read Remaining 99 to 0 and resets of 1 to 50 s
// within 80 ms; the key let 4 go at the first reset, 2 refused, and then
// held the rest 50 s: 2.55x the ideal; 500 deep, 540 requests, 12.6x).
// A bucket's reset that says when its next token comes, as RateLimit's t
// does, moves no later while tokens are taken, and tells nothing; nor
// does RateLimit-Policy's q per w, which is a bucket's rate and a window's
// alike.
func (m *told) endMoved(q Quota, now, sent time.Duration, r int, inflight int64) {
	cur := stated{end: now + min(q.Reset, longestReset, holdsForAnswer-1-now), at: now, trip: now - sent, rem: r}
	if q.HasLimit {
		cur.lim = q.Limit
	}
	a := &m.firstEnd
	if a.at != 0 && (a.lim != cur.lim || now >= a.end-endResolution-a.trip) {
		*a = stated{} // another limit, or a reset may have passed
	}
	if a.at != 0 && r != a.rem {
		hi, lo := *a, cur // the higher count, read first by the server
		if r > a.rem {
			hi, lo = cur, *a
		}
		apart := lo.at - hi.at
		slack := endResolution + hi.trip + lo.trip + max(apart, -apart)
		depth := max(m.depth, m.limit)
		loA, hiA := hi.refills(depth)
		loB, hiB := lo.refills(depth)
		if move := lo.end - hi.end; move > slack && now < hi.end-endResolution-hi.trip && max(loA, loB) <= min(hiA, hiB) {
			moved := float64(hi.rem-lo.rem) / (move - max(0, apart)).Seconds()
			full := float64(depth-lo.rem) / (lo.end - lo.at).Seconds()
			m.kind, m.rate, m.markAt = kindBucket, max(0, min(moved, full)), 0
			// Its level, from what the window's count knew: the lowest
			// Remaining read, less ours on their way. The server counts
			// requests sent together in any order, and the answer to the
			// latest admission, which a bucket's level is read from, may
			// be of one it counted first (regression: a bucket of 2 a
			// second, 20 deep, met by 16 requests at once, was told so
			// within the burst; its level, read from a request counted
			// fifth of the first fourteen, said 11 where 4 remained, and
			// the next 12 went: 8 refused).
			left := int64(r)
			if m.leftAt != 0 {
				left = min(left, m.readLeft())
			}
			m.level, m.levelAt, m.leftSent, m.levelAdm = float64(left-max(inflight, 0)), now, m.sent, m.lastAdm
			return
		}
	}
	if a.at == 0 || cur.end < a.end {
		*a = cur
	}
}

// refills is the range of rates at which a bucket of depth would be full
// at the end x states: what it lacked when the server read its count
// (depth less Remaining, and up to one more: Remaining is whole tokens)
// over the time from then to that end, each within the reset's resolution
// and x's round trip.
func (x stated) refills(depth int) (lo, hi float64) {
	lacked := float64(depth - x.rem)
	lo = max(0, lacked-1) / (x.end + endResolution + x.trip - x.at).Seconds()
	hi = math.Inf(1)
	if least := x.end - endResolution - x.trip - x.at; least > 0 {
		hi = lacked / least.Seconds()
	}
	return lo, hi
}

// notALog reports whether Remaining, r, read at now, is more than a log of
// recent requests could hold: ours answered from a window's length less a
// round trip ago to a round trip ago were counted within the window's
// length before the server read r, so a log still holds them all. A log
// verdict is never contradicted by refusals (it only ever sends less), so
// a bucket taken for a log (a bucket that refills faster than the key
// takes, sent to steadily, gives back what a log would) would stay held to
// the limit per window for ever without this.
func (m *told) notALog(now time.Duration, r int) bool {
	p := m.length()
	if p-2*m.rtt < p/2 || p > maxCounting || m.limit > maxCounted {
		return false
	}
	k := m.answeredBetween(now-p+m.rtt, now-m.rtt)
	return k >= minDepth && r > m.limit-k+2
}

// logSettled reports whether a log told by a window refused after its
// reset (see read) may be told again when a reading shows more than a log
// could hold (see notALog): no refusal for two of the quota's length, and
// regrowAfter at least, and no others seen spending it within a window's
// length. Until then a reading that says so may be a window's reset, which
// others spent the window before (regression, found in review 46: two
// transports on a bucket of 100 a second, 5 deep, told by X-RateLimit-*;
// the one starved while the other drained it took it for a window, was
// refused after a reset, and was held to a log of 5 a second for good:
// from the other's end at 11 s it sent 5 a second, and 400-426 of its
// requests failed at a two-minute deadline).
func (m *told) logSettled(now time.Duration) bool {
	return m.refusedAt != 0 && now-m.refusedAt >= max(regrowAfter, 2*m.length()) && !m.sharedNow(now)
}

// overLog reports whether readings of a settled log told by a window's
// refusal have each shown more than a log could hold (see notALog) for a
// window's length: a bucket that refills faster than the key sends. A
// window shows so only after each reset, while ours of the window before
// are still counted in the log: not at its end.
func (m *told) overLog(now time.Duration, r int) bool {
	if !m.logSettled(now) || !m.notALog(now, r) {
		m.overSince = 0
		return false
	}
	if m.overSince == 0 {
		m.overSince = now
	}
	return now-m.overSince >= m.length()
}

// retellAfter is how many refusal episodes of a bucket in a row, after a
// first, each within two of the quota's length (at least coarseWait) of
// the one before, show the verdict wrong.
const retellAfter = 3

// retell forgets the kind: refusals that keep coming, whatever the rate
// measured, show a quota that is not a bucket (a log of recent requests
// spent unevenly climbs back as a bucket would, a little at a time, but
// refuses what a bucket would take). The key tells the kind again from
// what follows, as at the start, with what it knows of the quota's limit
// and its own requests kept.
func (m *told) retell() {
	m.kind, m.rate, m.recurred, m.refusedAt, m.logRefused, m.overSince = kindUnknown, 0, 0, 0, false, 0
	m.markAt, m.reads, m.passed, m.still, m.tested = 0, 0, false, false, false
	m.levelAt, m.notWhole, m.firstEnd, m.tryShift = 0, false, stated{}, 0
}

// ceiling is the most a window or a log, as far as the key has read it,
// would take of ours within its length: its limit, or what it was ever
// seen to hold, when less. In a window, our requests after a reading that
// said r remained are r at most; a log, while no others are seen, held
// what it took of ours. Others that spend a log may leave it nearly spent
// at every reading while it takes much of ours as theirs age: their share
// is theirs to give back, so the limit binds. (A bucket described by its
// rate, as RateLimit-Policy's q per w does, holds no more than its depth
// at once: regression: a bucket of 200 a second, 20 deep, 50 ms away, told
// "200 per second", was never told from a window, and spread what it had
// over half a second after each reading: 1.35-1.48x the ideal in 3 runs of
// 16.)
func (m *told) ceiling() int {
	if m.othersSeen == 0 && m.depth >= minDepth {
		return min(m.limit, m.depth)
	}
	return m.limit
}
