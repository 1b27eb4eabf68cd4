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
//   - a fixed window adds nothing until its reset, then gives back
//     everything at once: Remaining only jumps, at the stated reset, back
//     to about Limit. A short one, its reset stated in whole seconds, is
//     spread evenly over the time to its reset rather than spent at once:
//     another client on the same quota, whose whole-second waits wake it
//     at the same point of every window, finds some left whenever it
//     comes, not a window spent at its reset (which costs a job that ends
//     within one window up to that window's length). While others spend it
//     too, its last request near the reset is left to them (see
//     spentByOthers), and so is all of it near the reset when nothing was
//     read of it since the reset before (the key was paused across it:
//     the others had all of it to spend);
//   - a log of recent requests gives back each request a window's length
//     after it reached the server: what comes back before the stated reset
//     is no more than what the key sent a window's length before (within a
//     round trip). The key then keeps its own count: never more than Limit
//     of its requests within a window's length and a round trip, whatever
//     the order of the answers. While others spend it too, it counts as
//     many of theirs on their way as it has of its own, and an answer
//     overtaken by a later one does not lower its count of theirs. Once
//     others were seen (in its own count: what the log gives back hides
//     their spending from the fall of Remaining), it sends no faster than
//     the limit per window's length, evenly, and half of what the latest
//     reading says remains at a time, then reads again;
//   - a bucket refills continuously: Remaining climbs back, before any
//     reset, by more than a log would give back. Its Reset (the time until
//     the bucket is full, or until its next token) says little: a client
//     at the quota sees Remaining near 0 and a Reset of one second all the
//     time, and waiting for it would be far too slow. Its rate is measured
//     instead: the climb of Remaining, plus the accepted requests in
//     between, over the time between the two answers. A Reset that says
//     when the bucket is full tells a deep one spent faster than it
//     refills before any climb shows, even from answers that came
//     together: it moves later by 1/rate with each request the bucket
//     takes, where a window's end stays put (see endMoved). Others spending the
//     same quota show as a slower climb, so the rate measured is what is
//     left for us. Its level is read with care for answers that overtake
//     one another, and credited what the bucket refilled since the server
//     read its count, before it answered (see readLevel); a few tokens
//     are held back (what its rate sends within the jitter, and two; at
//     most a quarter of its depth, and what it refills in a quarter
//     second), which costs nothing once the bucket has been spent: it
//     refills at its rate whatever it holds, short of full. A bucket far
//     away, whose requests on their way are about as many as it holds,
//     hides its climb among them: it shows instead in what it took, more
//     of ours within a reset's length than a window (twice its limit,
//     across a reset) or a log (its limit) could take (see overTaken), and
//     its refill is measured over spans long enough to rise above them.
//     A bucket found full at both ends of a span refills at least as fast
//     as the key took from it, no more: its rate is probed upward, to
//     twice what the key took at most.
//
// Until it knows, the key takes the quota for a window: it never sends more
// than Remaining before the reset, and, told only by X-RateLimit-*, no more
// after it than a log of recent requests would hold. When the reset is a
// second or two away, stated in whole seconds (a short window, a log, or a
// bucket: the headers cannot tell), it spreads what remains evenly over the
// first half of the window rather than sending it at once, so that a bucket
// shows its refill, and a window is used evenly (others seen spending it
// too, over half the time that remains, again and again). Once spent, one
// request tries an eighth of the way to the reset (after a refused try,
// twice as far, then twice as far again, then at the reset), and what it
// finds tells a bucket or a log from a window; but in the first window, when the
// spread showed nothing given back and no others are seen, the key waits
// for the reset (a bucket would have climbed). A reset after which a
// reading finds the quota not back to whole, less ours since, was no
// window's end (a bucket's next token, as RateLimit's t says, a log's
// oldest leaving: see wholeAgain): until a reading says otherwise, such a
// reset gives back one, not the whole quota.
//
// A reset stated in whole seconds is late by up to one (a server's windows
// follow its clock, not the key's first request): a count that comes back
// within that second, to half what the quota has held or more, is taken
// for the reset, though others may have spent some of the new window
// already; not twice within most of a window's length, as a bucket that
// others spend climbs again and again. A log is not told from a count that
// climbs no more than a log would give back unless it climbs no less
// either, nor from a quota never seen to hold half its limit, as a log
// does when first used (a bucket told by RateLimit-Policy's q per w holds
// only its depth). Once the reset of a short window that others spend too
// has passed, the next is due a window's length later (the longest reset
// seen), unless a reading says sooner: a refusal near the window's end,
// its reset rounded up to a whole second, would put it up to a second late.
//
// Others are seen spending the quota when a reading shows more of their
// requests than ours and the order of arrival explain: 16, or a quarter of
// a smaller quota's limit, one at least; or when a request is refused
// while the count, read since the window's reset, held room for it. A key
// that others starve sees nothing it could come sooner by (its whole-second
// Retry-After wakes it at the same point of every window, where they have
// spent it), and they see nothing of it while it is refused: for 8 windows'
// length after others were seen, or any of their requests was, a key whose
// own requests within a window's length hold all of the quota but one
// leaves that one to them (see holdsLast).
//
// A verdict the server's refusals contradict is overturned: a "window"
// refused after its reset (which gives a window back whole) is counted as a
// log from then on, which is safe for both, when the request refused went
// before any reading of the new window and within a quarter of its length
// of the reset (one sent later, or after a reading said what was left, may
// find it spent by others); a "bucket" refused in episode
// after episode, each within two of the quota's length of the one before,
// whatever its measured rate, is told again from what follows; so is a
// "log" (a sliding counter looks like one, but refuses what a log would
// take), but for one that came from a window refused after its reset, and,
// while no others were ever seen spending the quota, at its first refusal
// (alone, the key's count of its own is exact: a log would not refuse). A
// "log" is told again, too, when Remaining is more than a log could hold:
// ours answered within the window's length are still counted in it (see
// notALog); one that came from a window refused after its reset, only
// once unrefused and alone for a while, its requests spread evenly, and
// at every reading for a window's length (see overLog: a window shows so
// only after its resets); and a "window" whose first reading after a reset shows it not
// back to whole, no others ever seen (a sliding counter, whose count of the
// window before decays evenly, is back to half or more some way into the
// next window), or, others seen and the window's length stated, not back
// to half (see backWhole), when read within a quarter of its length of
// that reset (later, others may have spent most of it). Small quotas
// spent within a few round trips show neither kind plainly at first.
//
// A refusal whose headers say enough remains for the request refused was
// a limit's the headers do not describe (a day's quota told while a
// second's refuses; a Remaining that never falls): the key learns a pace
// from its refusals as well (learn.go), and the mirror goes on holding back
// what its count says.
//
// A refusal without quota headers, while the mirror held room for the request
// beyond those on their way, was not this quota's either: a gateway's, most
// often, which refuses a share of the requests at random and never reaches
// the server that counts. It delays only its own retry, and cuts no
// configured pace; once such refusals dominate the key's recent answers, as
// failures must to make an outage, they pause the key, and are a limit's
// the headers do not describe: the key learns a pace from them, as above
// (see collision, pause.go; slow, adapt.go). A configured pace is then
// proven lower by what the server took (adapt.go's rule 1). A refusal
// without quota headers from a server whose refusals of the key carried them
// is unexplained too, mirror or not: one that sends them on its 429s only
// teaches the key its pace from those (learn.go), not from a gateway's.
//
// The mirror begins with the first reading on an answer the server
// accepted. A server that sends its headers on refusals only says only
// that nothing remains, which the refusal says too: its key learns its
// pace from the refusals (learn.go), and forgets that pace once accepted
// answers carry readings.
//
// A 5xx answer's request may have been counted by the server (a backend's
// 503 behind the quota's gateway): one without a reading is counted as
// accepted (see unread), which only ever sends less; one with a reading
// (the gateway counts, and its headers ride on the failure) is read as an
// accepted answer's, Remaining 0 included: it says what is left after the
// request, not that the quota refused it (a quota's refusal is a 429, or
// a 403 with the quota spent). Read as a refusal, its unit went back to a
// bucket's level and out of the climb its refill is measured by, and each
// cut the rate. An answer
// accepted without a reading, from a server that sends them, is taken from
// a window's count too, until the readings that follow show such answers
// not counted (another endpoint's, which the quota does not guard); a
// count only those from other endpoints spent holds the key for no reset,
// but lets one request go to ask (see toldbare.go).
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
	kindLog               // a log of recent requests: each counts for a window's length after it reached the server
)

const (
	hdrSeen     = 1 << 31 // keyState.hdr: the server sent quota headers
	hdrTries    = 16      // answers always checked before the server is taken for one that sends none
	hdrSample   = 64      // then one answer in this many
	minSpan     = 50 * time.Millisecond
	minReads    = 4                // a refill is measured over at least this many answers, and minSpan
	coarseWait  = 2 * time.Second  // a reset this close, in whole seconds, may be late by up to a second
	maxCounted  = 10000            // a quota of at most this many has our requests kept, to compare
	minDepth    = 4                // a quota that holds fewer cannot show a reset apart from a refill
	maxCounting = 10 * time.Second // and a window of at most this long, counted exactly
	othersShown = 16               // Remaining fell by this many more than ours: others spend the quota (see shown)
	starvedFor  = 3                // windows a key is refused in, in a row, before its pause is shifted (see shifted)
	shareMemory = 8                // others seen are remembered this many windows' length for the quota's last one (see holdsLast)
	reserveFor  = time.Second / 4  // a bucket's tokens held back are at most what it refills in this long
	regrowAfter = 5 * time.Second  // a bucket unrefused this long, full at both ends of a span, is probed quickly again
	probeOver   = 2                // nor probed past this many times what the key took from it over the span

	longestReset = holdsForAnswer / 4 // a reset further off (73 years) is taken as this far: sums of it never overflow
	tallReset    = 8                  // a reset more than this many times the longest seen waits for the next reading to agree (see long)
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
	policy     string        // the IETF policy it mirrors (see toldpolicies.go); "" for the other fields, or NUL and the resource they name (see mirrorName)
	limitOf    int           // of the other fields, the Limit its readings state (see toldpolicies.go); 0: none stated, or a named policy's
	readLast   time.Duration // of a Limit read without a name, when it was last read; 0: never
	dropped    bool          // not read too long while another was (see mirrorFor): it holds nothing until read again
	limit      int           // the most the server holds at once (Limit; else the most Remaining seen)
	depth      int           // the most Remaining seen, counting an accepted answer's own, within Limit: a bucket's depth
	left       int           // what remained, as of leftAt: see read
	leftAdm    uint64        // the admission whose answer said so
	leftSeen   uint64        // admissions when that answer came: those after it were sent knowing it
	level      float64       // a bucket's tokens as of levelAt, our requests sent by then counted (see readLevel)
	levelAt    time.Duration // 0: no level read yet
	levelAdm   uint64        // the admission whose answer's reading set level: ours after it are taken from it
	refusals   []refusal     // the latest of ours refused, oldest first (see refusedAfter)
	unreads    []unreadAns   // a window's: ours answered by a 5xx without a reading since left was last given back whole (see unread)
	sent       uint64        // our admissions since the mirror began
	leftSent   uint64        // sent, as of levelAt
	foldAt     time.Duration // an admission after levelAt, whose units sent by then (foldSent) are taken into level a trip later (see fold)
	foldSent   uint64        // sent, as of foldAt
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
	testAdm    uint64          // the admission that went beyond it last
	tryShift   uint8           // a kind not yet known: tries refused in a row; the next goes 2^tryShift eighths of the way to the reset (see lowerBound)
	rolled     bool            // left is the limit a reset gave back, not a reading (see logBound)
	rolledAt   time.Duration   // when the last reset passed
	blindAdm   uint64          // admissions before the first reading after it
	spanAt     time.Duration   // a reading to tell others' requests from; 0: none yet
	spanRem    int             // what it said remained
	spanAdm    uint64          // in the answer to this admission
	spanSent   time.Duration   // sent then
	othersSeen time.Duration   // when readings last showed others spending the quota; 0: never
	othersHint time.Duration   // when a reading last showed any of others' requests on a small quota (see sawOthers); 0: never
	began      time.Duration   // the first reading: ours admitted before it are not in sends (see counted)
	logRefused bool            // the kind is a log because a window was refused after its reset
	overSince  time.Duration   // a settled log told by a window's refusal: the first of the readings since that a log could not hold (see overLog); 0: none
	spread     time.Duration   // the last request admitted while spreading
	lastAdm    uint64          // the latest admission answered
	refusedAdm uint64          // admissions up to this one were sent before the last refusal
	refusedAt  time.Duration   // when a bucket was last refused (a refusal episode began), or a log told by a window's refusal; 0: never
	recurred   int             // refusal episodes of a bucket in a row, each soon after the one before (see retell)
	raisedAt   time.Duration   // when probing last raised it
	longest    time.Duration   // the longest reset seen: about a window's length
	tall       time.Duration   // the reading before's reset, when far longer than longest (see long)
	earlyAt    time.Duration   // when the count last came back before the reset known (see earlyReset)
	notWhole   bool            // a kind not yet known: a reading after the last reset found the quota not back whole (see wholeAgain)
	firstEnd   stated          // a kind not yet known: the reading that stated the earliest end (see endMoved)
	sends      []time.Duration // our admissions over the last window length, oldest first
	answers    []time.Duration // our accepted answers over the last window length, oldest first
	rtt        time.Duration   // about the longest a request takes to reach the server
	jit        time.Duration   // how much later one request may reach it than one sent after it
	others     int64           // others' requests in the log at the last reading
	othersAt   time.Duration   // when that was: all have left the log a window's length later
	othersSet  time.Duration   // when a reading set others (see read)
	logPace    time.Duration   // when a shared log's next request may go (see lowerBound)
	shareRem   int             // Remaining in the answer to the latest admission read
	shareAdm   uint64          // that admission
	cutShort   time.Duration   // when a refusal's pause last ended where the log gives back (see logPause); 0: never
	starved    int             // windows in a row in which ours were refused and none accepted (see shifted)
	starvedAt  time.Duration   // the latest refusal counted in starved

	// Answers accepted without a reading (see toldbare.go).
	bare      int           // units of ours so answered since left was set, sent after its reading's answer came, and taken from it
	bareOther int           // of them, those to another endpoint than readAt's
	bareLast  uint64        // the latest admission of them
	bareAt    time.Duration // when the latest of ours so answered was sent, whenever; 0: none (see heldRoom)
	bareSays  bareVerdict   // whether the server counts such answers, as far as the key was told
	bareUntil time.Duration // a verdict that they are counted holds until then (see endTry)
	bareAsked uint8         // how many times a try told them counted
	bareTry   uint64        // the admission that went beyond a count only bareOther spent; 0: none on its way
	readAt    endpoint      // the endpoint of the latest request whose accepted answer carried a reading

	shownKind string  // what EventPace last said
	shownRate float64 //

	// The answer the refill is measured from.
	markAt  time.Duration
	markRem int
	markAcc int64
	markOut int64 // our requests on their way then
	acc     int64 // our answers the server counted
	reads   int
}

// read takes a reading: q came with the answer to admission adm, at now,
// when inflight of our requests were still on their way; accepted says the
// server counted the request, as n (its cost: see Cost). Requests are
// counted in units throughout: adm and admitted are numbers of units, and
// inflight the units of the requests on their way. A refusal, !accepted,
// is news of this quota's only when blamed: another policy listed on the
// same answer may have refused it (see toldpolicies.go).
//
// The server counts requests in about the order they were sent, but not
// exactly: requests sent together are counted in any order. So for a
// window the lowest Remaining of the window is the latest count, and every
// request the server counted after it is one still on its way; for a
// bucket, whose count climbs, the answer to the latest admission is the
// latest count, within the few requests sent together.
func (m *told) read(q Quota, now, sent time.Duration, adm, admitted uint64, inflight int64, n int, accepted, blamed bool) {
	if m.began == 0 {
		m.began = now
	}
	if !accepted && blamed && m.heldRoom(now, adm, inflight, n) {
		m.othersSeen = now
	}
	if !accepted {
		m.refused(adm, n)
		if blamed && m.kind == kindUnknown && m.tested && adm == m.testAdm && m.tryShift < 3 {
			m.tryShift++ // see lowerBound
		}
	} else if adm == m.testAdm && m.depth > 1 {
		// The try went through: the next begins an eighth of the way
		// again (kept, a shift that waited for the reset let a leaky
		// bucket's line go at once there, job after job: 121 429s where
		// 31 were, found in review). Not for a quota of one, whose next
		// unit is all a try can find (it never held more): the next finds it at that distance
		// too (a bucket 1 deep told by IETF fields, sent tries that went
		// through at an eighth of the way and were refused after: 2.33x
		// the ideal where 2.05x was).
		m.tryShift = 0
	}
	if accepted {
		m.starved = 0
	} else if blamed && (m.starved == 0 || now-m.starvedAt >= m.length()/2) {
		m.starved, m.starvedAt = m.starved+1, now // see shifted
	}
	if accepted {
		m.acc += int64(n)
		m.accepted(now, n)
	} else if !blamed {
		// Another policy's refusal: this one's reading stands, and says
		// nothing of its kind.
	} else if (m.kind == kindBucket || m.kind == kindLog && !m.logRefused) && adm > m.refusedAdm {
		// Refused: the bucket refills slower than measured, or others
		// spend more of it. Once per refusal episode, a fifth less, and a
		// new measurement; episodes that keep coming show no bucket. Nor
		// a log, which the key counts exactly: a sliding counter, whose
		// count of the window before decays evenly whatever reached it
		// when, looks like a log but refuses what a log would take. A
		// log never seen spent by others is told again at its first
		// refusal: alone, the key's count of its own is exact, and a log
		// would not have refused (regression: a sliding counter of 200 a
		// second, told by IETF fields, taken for a log at its first
		// reset, was refused and paused a second at every reset until
		// the third).
		if m.kind == kindBucket {
			m.rate *= slowFactor
		}
		if m.refusedAt != 0 && now-m.refusedAt < max(coarseWait, 2*m.length()) {
			m.recurred++
		} else {
			m.recurred = 0
		}
		m.refusedAdm, m.refusedAt, m.markAt = admitted, now, 0
		if m.recurred >= retellAfter || m.kind == kindLog && m.othersSeen == 0 {
			m.retell()
		}
	} else if m.kind == kindWindow && m.rollAdm > 0 && adm > m.rollAdm && (m.rolled || adm <= m.blindAdm) &&
		now-m.rolledAt < m.length()/4 {
		// Refused after a reset, which gives a window back whole: it was
		// a log of recent requests, which gives back only what it took a
		// window's length before (the headers of a log spent at once
		// look like a window's). Counted as a log, it is safe either way,
		// and no reading overturns it (see notALog). Not so a request
		// sent after a reading of the new window, or late in it (the
		// key paused across it): others may have spent it (regression:
		// two transports on one window, each taken for a log by turns,
		// each sent what the log bound let go at once, and drew a
		// hundred refusals).
		m.kind, m.logRefused, m.refusedAt = kindLog, true, now
	} else if m.kind == kindLog && m.logRefused {
		m.refusedAt = now // see logSettled
	}
	m.lastAdm = max(m.lastAdm, adm)
	if !q.HasRemaining {
		return
	}
	r := q.Remaining
	if adm >= m.shareAdm {
		m.shareRem, m.shareAdm = r, adm
	}
	if q.HasLimit && q.Limit > 0 {
		m.limit = q.Limit
		// The quota holds no more than its Limit: the most Remaining
		// seen before it changed says nothing of the new one
		// (regression: a window halved to 50, back to 49 at its reset,
		// was taken for a bucket's climb, not a reset, as half of the
		// old 100 was not reached).
		m.depth = min(m.depth, m.limit)
	}
	m.limit = max(m.limit, r)
	m.depth = max(m.depth, r)
	if accepted {
		m.depth = max(m.depth, r+n) // it held this request's too
	}
	if q.Window > 0 {
		m.period = q.Window
	}
	if accepted {
		m.tellBare(r, adm, inflight) // before anything compares r with left
	}
	m.measure(now, sent, r, inflight, admitted-m.rollAdm)
	if m.kind == kindUnknown && accepted {
		m.overTaken(now, r)
	}
	if m.kind == kindUnknown && accepted && q.HasReset {
		m.endMoved(q, now, sent, r, inflight)
	}
	if lo := m.readLeft(); m.kind == kindUnknown && m.tested && accepted && (adm > m.leftSeen || m.depth < minDepth) && int64(r)+1 > lo+inflight &&
		(m.depth < minDepth || int64(r)+inflight+2 < int64(m.depth)) && // back to full: a reset, perhaps
		!m.earlyReset(now, r, inflight) {
		// The request that tried beyond the mirror was accepted: the
		// quota gave back before its reset. Only a request sent after
		// the answer that said what was left can show so: one sent with
		// it may have reached the server first and been counted in it
		// (a small window met by many workers at once; a quota below
		// minDepth is read from its earliest answers, so its own). No
		// more than a log would have given back shows a log; more, a
		// bucket; so does a quota never seen to hold half its limit, as
		// a log does when first used (see measure).
		// (Answers without a reading not told counted are left out of
		// what remained: see readLeft.)
		if echo := m.echoes(m.leftAt, now); echo > 0 && int64(r)+1 <= lo+inflight+int64(echo) && m.depth >= m.limit/2 {
			m.kind = kindLog
		} else {
			m.kind, m.rate = kindBucket, float64(int64(r)-lo+1)/(now-m.leftAt).Seconds()
		}
	}
	if m.kind == kindUnknown && accepted {
		m.wholeAgain(now, r, adm, admitted)
	}
	switch m.kind {
	case kindBucket:
		m.readLevel(r, now, sent, adm, admitted)
	case kindLog:
		if accepted && m.logRefused && m.overLog(now, r) {
			m.retell()
			break
		}
		if accepted && !m.logRefused && m.notALog(now, r) {
			m.retell()
			break
		}
		// What the log holds of others': all it holds, less ours that it
		// may hold (those on their way may not be counted yet).
		ours := int64(m.sentBetween(now-m.length()-m.rtt, now)) - inflight
		// Others spending it too, a reading that says they hold fewer
		// within two round trips of one that said more is taken for an
		// answer that overtook a later one: the later one's count stands.
		others := max(0, int64(m.limit-r)-ours)
		if accepted {
			// Others are seen spending it so: a log gives back as much as
			// it took of theirs, a window's length before, so Remaining
			// seldom falls by more than ours, as spentByOthers would see.
			// For a small quota's fewer (see shown), ours it may hold are
			// all it may have counted: any sent within a trip of a
			// window's length before this request, and any sent within a
			// trip after it (those on their way may be counted already).
			// Counted from now and less those on their way, a log of 50
			// per 10 s alone, 16 or 4 workers, took one or two of its own
			// for others' now and then, and left one request a window to
			// them (see holdsLast): 3m20s for a job of 1,000, a window
			// more than the 3m10s it takes, in 4 seeds of 4 (found in
			// review of review 47's fix).
			from := sent - m.length() - m.rtt
			m.sawOthers(now, others, int64(m.limit-r)-int64(m.sentBetween(from, sent+m.rtt)), from)
		}
		if others >= m.others || now-m.othersSet >= 2*m.rtt || !m.sharedNow(now) {
			m.others, m.othersSet = others, now
		}
		m.othersAt = now
	}
	if early := m.earlyReset(now, r, inflight); (m.kind == kindWindow || m.kind == kindUnknown) && m.leftAt != 0 && adm > max(m.rollAdm, m.leftSeen) &&
		int64(r) > m.readLeft()+inflight+2 && (int64(r)+inflight+2 >= int64(m.depth) || early) {
		// The count came back before the reset the key knew of: that one
		// was known late (whole seconds are late by up to one), and has
		// passed. This answer's reset is the next. Others may have spent
		// some of the new window already: a count that comes back within
		// the second its reset was known to, to half the most it held or
		// more, is taken for the reset (see earlyReset). Only a request
		// sent after the answer that said what was left can show so:
		// one sent with it may have reached the server first, its count
		// read before, and its answer come after (regression, found in
		// review: a window of 10 a minute, 16 workers, the answers to
		// requests sent together read out of order as a reset at every
		// window, up to 18 requests sent into a window of 10).
		m.resetAt, m.left, m.leftAdm, m.leftSeen, m.leftAt, m.tested, m.rolled = 0, r, adm, admitted, now, false, false
		m.bare, m.bareOther, m.bareLast = 0, 0, 0
		m.unreads = m.unreads[:0]
		if early {
			m.markAt = 0 // a span across it would show a bucket's climb
		}
		m.earlyAt = now
	}
	if m.kind == kindWindow && m.rolled && accepted && adm > m.rollAdm && !m.backWhole(r, admitted-m.rollAdm) &&
		now-m.rolledAt < m.length()/4 {
		// The first reading after a reset, of a request sent after it,
		// shows the window not given back whole, and no others were
		// ever seen spending it: it was never a window. A sliding
		// counter, whose count of the window before decays evenly, is
		// back to half or more some way into its next window, as a
		// window that others spent some of (regression: taken for a
		// window, a counter of 100 a second told by IETF fields, which
		// say its reset is a second away, was sent what remained at each
		// reset and then nothing until the next: 2.0x the ideal in one
		// run in five). Only within a quarter of the window's length of
		// the reset: later, others may have spent most of it (regression:
		// three transports on a window of 100 a second told by IETF
		// fields; one paused across a reset read it late, found less
		// than half, took it for no window, and tried beyond the mirror
		// at every window, refused each time: 55 429s a run).
		m.retell()
	}
	switch {
	case m.leftAt == 0,
		m.kind == kindBucket && adm >= m.leftAdm,
		m.kind != kindBucket && (adm > m.rollAdm || r >= m.limit/2) && r-m.unreadSince(sent) < m.left:
		// The first reading; a bucket's latest; a window's lowest. A
		// request sent before the reset says nothing of the window now,
		// unless it reached the server after the reset: then it found
		// the window nearly whole, and was counted in it. (A window not
		// spent before its reset may look so too; the key then only
		// sends less.)
		if m.rolled {
			m.blindAdm = admitted
		}
		if m.kind != kindBucket {
			// Ours answered by a 5xx without a reading after this one
			// was sent may have been counted after it (see unread).
			r -= m.unreadSince(sent)
		}
		m.left, m.leftAdm, m.leftSeen, m.leftAt, m.rolled = r, adm, admitted, now, false
		m.bare, m.bareOther, m.bareLast = 0, 0, 0
	}
	if m.kind != kindBucket {
		m.spentByOthers(now, sent, r, adm, n)
	}
	if q.HasReset {
		// A reset of centuries (ParseQuota saturates one too far for a
		// Duration) is kept short of what would overflow the sums made
		// of it (regression, found in review: now plus a saturated reset
		// wrapped around, and Remaining 0 on a 2xx let the next request
		// go, or, read at the epoch, held it for an answer that never
		// came).
		reset := min(q.Reset, longestReset)
		m.long(reset)
		at := now + min(reset, holdsForAnswer-1-now)
		m.coarse = q.Reset <= coarseWait && q.Reset%time.Second == 0
		switch {
		case m.kind == kindBucket:
			m.resetAt = 0 // a bucket's reset says when it is full, not when it refills
		case adm <= m.rollAdm && r < m.limit/2:
			// A late answer to a request sent before the last reset,
			// counted in the window before (it found it half spent or
			// more, as its reading of left is not taken either): its
			// reset is that window's, passed, and moved as late as its
			// answer, not the end of the window now going on
			// (regression, found in review: a window of 20 per 10 s
			// told by IETF fields; answers to 5 requests counted at 6.5
			// s, t=4, came 5 s late, took the window's end from 20 s to
			// 15.5 s, and the key gave the window back whole there: 20
			// sent into a window that held 10, 10 refused).
		case m.resetAt <= now || at < m.resetAt:
			// The tightest: a reset rounded up is late by less than a
			// second. Each policy of several has a mirror of its own
			// (toldpolicies.go), so the earlier is never another
			// policy's: one that ran out, stating a later reset, is not
			// let go at the other's (found in review, R7 (6)).
			m.resetAt = at
		}
	}
}

// backWhole reports whether Remaining, r, read after a reset, with since of
// ours admitted after that reset, is what a window back to whole would
// show: the limit less ours, within an eighth of it (at least minDepth).
// If others were ever seen spending the quota, they may have spent some of
// the new window already: then half the limit, less ours, will do; and
// anything, without a window's length stated (RateLimit-Policy's w), as
// the key then holds a window to what a log would hold too (see
// logBound). With it stated, the key sends a window's all at its reset:
// a quota that others share and that is back to less than half at the
// first reading after a reset gives back as a sliding counter does, as
// the window before decays, and is no window.
func (m *told) backWhole(r int, since uint64) bool {
	switch {
	case since >= uint64(max(m.limit, 0)):
		return true
	case m.othersSeen != 0:
		return m.period == 0 || int64(r)+int64(since) >= int64(m.limit/2)
	}
	return int64(r)+int64(since)+int64(max(minDepth, m.limit/8)) >= int64(m.limit)
}

// earlyReset reports whether Remaining, r, read at now with inflight of
// ours on their way, may show a window's reset, stated in whole seconds,
// passed before the time the key knew of (it is late by up to a second),
// though others may have spent some of the new window already: at least
// half the most it held. Not twice within most of a window's length: a
// bucket that others spend as fast as it refills climbs again and again,
// and seldom half way at once.
func (m *told) earlyReset(now time.Duration, r int, inflight int64) bool {
	return m.coarse && m.resetAt > now && m.resetAt-now < time.Second &&
		m.depth >= minDepth && int64(r)+inflight >= int64(m.depth/2) &&
		(m.earlyAt == 0 || now-m.earlyAt >= m.length()*3/4)
}

// unread records the answer to admission adm, of n units, at now, that
// carried no reading but that the server may have counted: a 5xx (a
// backend's 503 behind the quota's gateway). It counts as accepted, which
// only ever sends less: in a log's count of ours, in what a bucket's climb
// is measured with, and as taken from a window's count.
//
// A window's count is its lowest reading, less ours on their way: those
// the server counted after that reading's request are still on theirs, or
// their own lower readings set the count. Not one answered by such a 5xx:
// no reading comes, and it is no longer on its way. The server counts
// requests sent together in any order, so one answered after a reading's
// request was sent may have been counted after it, sent before it or
// after: it stays taken from that reading, and from any later one whose
// request went before its answer came (regression, found in review: taken
// only when sent after the lowest reading's request, and given back by a
// lower reading, a window of 10 per 10 s told by IETF fields, a third of
// its answers 500s without headers, 4 workers, had up to 12 sent into a
// window of 10, 1-8 of 100 refused).
func (m *told) unread(now time.Duration, adm uint64, n int) {
	m.acc += int64(n)
	m.lost(now, n)
}

// lost records a request of ours, of n units, that ended at now without an
// answer: the connection reset on the answer's way back, the caller gone
// after it left. The server may have counted it, and it is counted as a
// 5xx without a reading is (see unread), in a log's count of ours and as
// taken from a window's, which only ever sends less (regression, found in
// review: its unit went back to the window's count with the end of its
// trip; an IETF window of 10 per 10 s, a third of the requests lost so
// after the server counted them, 3-7 of 100 refused). Not in what a
// bucket's climb is measured with: one the server never saw (a connection
// refused), counted there, would measure the refill faster than it is.
func (m *told) lost(now time.Duration, n int) {
	m.accepted(now, n)
	if m.kind != kindBucket && m.leftAt != 0 {
		m.left -= n // answered after the lowest reading's request was sent
		if len(m.unreads) == maxRefusals {
			m.unreads = append(m.unreads[:0], m.unreads[1:]...)
		}
		m.unreads = append(m.unreads, unreadAns{now, n})
	}
}

// unreadAns is an answer of ours by a 5xx without a reading (see unread).
type unreadAns struct {
	at time.Duration // when it came
	n  int           // its units
}

// unreadSince is how many units of ours were answered by a 5xx without a
// reading after sent, since the window's count was last given back: the
// server may have counted them after a request sent then.
func (m *told) unreadSince(sent time.Duration) int {
	k := 0
	for _, u := range m.unreads {
		if u.at > sent {
			k += u.n
		}
	}
	return k
}

// readLevel corrects a bucket's level with a reading of r, in the answer
// to admission adm, at now, with admitted requests admitted so far.
//
// Every request sent after adm is taken as not yet counted in r, the
// others as counted: the reading's level is r less those. The server counts
// in about the order of sending, not exactly, so this errs both ways: low
// by those sent after adm that reached the server before it, high by those
// sent before adm that reached it after. An earlier reading has counted
// the latter, so the lower of the new reading and the level carried
// forward from the earlier ones (refill in, our requests out) is the more
// nearly right; a higher reading lifts the level by an eighth of the gap,
// so an error low does not stay.
func (m *told) readLevel(r int, now, sent time.Duration, adm, admitted uint64) {
	// The server read its count between the request's sending and its
	// answer, and what it refilled since is in the bucket now: half the
	// least round trip the key sees (its smoothed round trip less twice
	// its mean deviation), never more than half this one's, is credited.
	// So is as much again beyond the depth: a request sent now reaches
	// the server that much later, and the bucket refills meanwhile, as
	// those on their way take from it (regression: a bucket of 100 a
	// second, 5 deep, 40-60 ms away, was held about a trip's refill below
	// what it could take, more than it holds: 1.25x the ideal). But only
	// a sixteenth of the depth or more: less leaves the bucket as good as
	// drained, and tilts two keys that share it toward the one that
	// measured the faster rate, which then takes more (regression: two
	// transports on a bucket of 200 a second, 20 deep, a millisecond
	// away, were shared fairly in 99 runs of 200 of the model, 182
	// before; both jobs end together either way).
	// A round trip longer than that waited somewhere (a leaky bucket's
	// queue, a slow backend), before the count or after it: the key cannot
	// tell, and credits none of it; nor any while the bucket was refused
	// within regrowAfter (others spend it too, or its rate was measured
	// high: its readings are taken at their word).
	credit := min(now-sent, max(0, m.rtt-m.jit*3/2)) / 2
	if m.refusedAt != 0 && now-m.refusedAt < regrowAfter {
		credit = 0
	}
	there := m.rate * credit.Seconds()
	if there < float64(m.depth)/16 {
		there = 0 // a sliver: see above
	}
	v := min(float64(r)+m.rate*credit.Seconds(), float64(m.depth)) + there - float64(admitted-adm) + float64(m.refusedAfter(adm))
	if m.levelAt != 0 {
		if carried := m.bucket(now); v > carried {
			v = carried + (v-carried)/8
		}
	}
	m.level, m.levelAt, m.leftSent, m.levelAdm = v, now, m.sent, adm
}

// refusal is a request of ours that the server refused: it took nothing
// from a bucket.
type refusal struct {
	adm uint64 // its admission
	n   int    // its units
}

// maxRefusals is the most refusals a mirror keeps: enough for a first
// burst of many workers, most of it refused.
const maxRefusals = 64

// refused records that the request of admission adm, of n units, was
// refused. A bucket's level took ours admitted after the reading it was
// set from as taken from it (see readLevel), and those refused took
// nothing: each gives its units back, as a later reading learns by
// refusedAfter. (Regression: a bucket of 2 a second, 20 deep, told by
// X-RateLimit-* and met by 64 requests at once, 40 of them refused, was
// told from a window within the burst (see endMoved); its level, read
// from an early answer, took the 40 refused as spent, 20 s of refill
// below what the server held: the key sent nothing for 17 s, 1.42x the
// ideal.)
func (m *told) refused(adm uint64, n int) {
	if m.kind == kindBucket && m.levelAt != 0 && adm > m.levelAdm {
		m.level += float64(n)
	}
	if len(m.refusals) == maxRefusals {
		m.refusals = append(m.refusals[:0], m.refusals[1:]...)
	}
	m.refusals = append(m.refusals, refusal{adm, n})
}

// refusedAfter is how many units of ours admitted after adm are known
// refused.
func (m *told) refusedAfter(adm uint64) int {
	k := 0
	for _, f := range m.refusals {
		if f.adm > adm {
			k += f.n
		}
	}
	return k
}

// bucket is a bucket's tokens at now, less our requests sent since the
// level was read, or taken into it (see fold).
func (m *told) bucket(now time.Duration) float64 {
	return m.refilled(now) - float64(m.sent-m.leftSent)
}

// refilled is a bucket's level at at, refilled from levelAt, within its
// depth: our requests sent since are not taken from it yet.
func (m *told) refilled(at time.Duration) float64 {
	if m.rate > 0 {
		return min(m.level+m.rate*(at-m.levelAt).Seconds(), float64(m.depth))
	}
	return m.level
}

// fold takes into a bucket's level, at an admission at now, our requests
// sent a trip or more ago since it was read: they have reached the server,
// which took them from the bucket as it refilled. Those still on their way
// are taken from what it will hold, the depth at most (see bucket): a
// request sent now reaches the server as the bucket refills. Taken so
// while no reading came for longer than the bucket takes to refill whole,
// the requests sent at its rate since counted against one bucket's
// depth, and the key stalled until a second passed and the bucket was
// taken for spent (see lowerBound). (Regression, found in session 43: a
// bucket of 100 a second, 5 deep, told by X-RateLimit-* on every answer,
// behind a gateway that refused every request for 50 ms every 4 s
// without them: the key, refused four times in a row with no reading,
// sent nothing for a second after each blip, then measured the bucket's
// rate over that second, capped at its depth, as 5 a second; 3,000
// requests took 43.5 and 44.6 s in two seeds where go-retryablehttp +
// x/time/rate told the quota took 31.0 and 31.1: see
// TestAGatewaysBlipsDoNotStallABucketToldByHeaders.)
func (m *told) fold(now time.Duration) {
	if m.levelAt == 0 {
		return
	}
	if m.foldAt > m.levelAt && now-m.foldAt >= m.rtt {
		m.level, m.leftSent = m.refilled(m.foldAt)-float64(m.foldSent-m.leftSent), m.foldSent
		m.levelAt = m.foldAt
	}
	if m.foldAt <= m.levelAt {
		m.foldAt, m.foldSent = now, m.sent
	}
}

// news reports what is new in the mirror since it last reported: its kind
// ("window", "bucket" or "log"), and a bucket's rate when it moved by a
// tenth or more.
func (m *told) news() (kind string, r rate.Limit, changed bool) {
	switch {
	case m.kind == kindWindow:
		kind = "window"
	case m.kind == kindLog:
		kind = "log"
	case m.kind == kindBucket:
		kind, r = "bucket", rate.Limit(m.rate)
	default:
		return "", 0, false
	}
	if kind == m.shownKind && math.Abs(m.rate-m.shownRate) <= m.shownRate/10 {
		return kind, r, false
	}
	m.shownKind, m.shownRate = kind, m.rate
	return kind, r, true
}

// rollover begins the next window once the reset has passed.
func (m *told) rollover(now time.Duration, admitted uint64) {
	if m.kind == kindBucket || m.resetAt == 0 || now < m.resetAt {
		return
	}
	if m.period > 0 && now-m.resetAt >= m.period {
		// Several windows passed unread (the key idle, or held by another
		// policy): the one going on began a whole number of periods after
		// the reset known. Moved on by one period at a time, the next
		// reset was still past, each call gave the window back whole
		// again, and the whole line went at once (found in review: a
		// window of 10 a second told by IETF fields, a job after 30 s
		// idle, 16 at once and 6 refused; at the reset of a minute's
		// policy, the second's was given back at each admission, 1-6
		// refused). A window told by X-RateLimit-*, whose period is
		// not stated, is not moved so: once what it gave back is spent,
		// the answers on their way tell the next reset (see lowerBound),
		// but a window of 2 s or less still lets its line go after such
		// a spell: not fixed yet.
		m.resetAt += (now - m.resetAt) / m.period * m.period
	}
	whole := m.limit
	if m.kind == kindUnknown && m.notWhole {
		// No window's end: see wholeAgain. (Ours answered without a
		// reading, or with a 5xx, may have taken left below 0: it gave
		// back one all the same.)
		whole = min(m.limit, max(m.left, 0)+1)
	}
	m.left, m.leftAdm, m.leftSeen, m.leftAt, m.rollAdm, m.passed, m.tested = whole, admitted, admitted, m.resetAt, admitted, true, false
	m.bare, m.bareOther, m.bareLast = 0, 0, 0
	m.unreads = m.unreads[:0]
	m.rolled, m.rolledAt = whole == m.limit, m.leftAt
	m.resetAt = 0
	switch {
	case m.period > coarseWait && whole < m.limit:
		// No window's end (see wholeAgain): the reset passed gave back
		// one, and the next is what the next reading says (a bucket's
		// next token, a log's oldest leaving), not a stated period
		// away. Taken for a window's, the one given back was spread
		// over half that period (regression, found in review: a bucket
		// of 2 a second, 500 deep, told by IETF fields, q=500;w=250 and
		// t=1, held its one token 125 s, and a job of 540, 16 at a
		// time, took 2m6s, 6.3x its ideal of 20 s; now 1.03x). A
		// period of a second or two is a short window's, which others
		// may have spent: its next reset is still due a period on.
	case m.period > 0:
		m.resetAt = m.leftAt + m.period
	case m.kind != kindLog && m.othersSeen != 0 && m.coarse && m.longest > 0 && m.longest <= coarseWait:
		// A short window, its reset in whole seconds, that others spend
		// too: windows follow the server's clock, so the next reset is
		// due a window's length (the longest reset seen) after this one,
		// and only a reading that says sooner moves it. Taken from the
		// first reading after it instead, it was late by up to a second
		// when that reading was a refusal near the window's end, and a
		// key that the others kept refused there, woken by each
		// whole-second Retry-After at the same point of the next window,
		// never knew the window's phase again (regression: three
		// transports on a window of 100 a second told by X-RateLimit-*,
		// one refused at the same point of 8 to 14 windows in a row, and
		// a request lost in 1 or 2 runs of 16: 1.15x the ideal on
		// average, 45-51 429s a run; now 1.03x and 28). So too for a kind
		// not yet known. Not for a log, whose reset says when its oldest
		// request leaves, not when a next window begins; nor alone, where
		// no refusal comes near a window's end (a window of 5 a second
		// took 1.29x with it, not 1.06x).
		m.resetAt = m.leftAt + m.longest
	}
}

// tokens is what the mirror holds at now, with inflight of our requests on
// their way.
//
// A bucket refills at its rate. A log of recent requests gives back each
// request a window's length after it reached the server: it holds its
// limit less our requests that may still count in it (up to a round trip
// after they were sent), whatever the order of the answers; what others
// spend shows in the readings, as a window's.
func (m *told) tokens(now time.Duration, inflight int64) float64 {
	t := float64(m.left)
	switch m.kind {
	case kindBucket:
		return m.bucket(now)
	case kindLog:
		t := m.exact(now, inflight) - float64(m.othersNow(now))
		if m.sharedNow(now) {
			// Others spend it too, and have as many on their way as we
			// have, as far as we know: not counted in any reading yet.
			t -= float64(inflight)
		}
		return t
	}
	if m.logBound() {
		return min(t-float64(inflight), m.exact(now, inflight))
	}
	return t - float64(inflight)
}

// spentByOthers notes whether others spend the quota, from a reading of r
// in the answer to admission adm, sent at sent, at now: Remaining fell
// since an earlier reading by more than ours sent in between, by more than
// the order of arrival explains. A window or a log gives back only at a
// reset, or as requests age, which hides some of others' (never shows
// more); a sliding counter, which looks like a log, gives back as its last
// window's weight wanes: alone on it, a key sees none. Not read of a
// bucket, which gives back all the time.
//
// Requests sent within a trip to the server of one another may be counted
// in either order: the earlier reading may miss ours sent just before its
// request, the later one count ours sent just after its, and a fast key
// sends many in a trip (regression: a log of 1,000 per 5 s, its first
// 1,000 sent in 0.2 s, was taken as spent by others within 10 ms, paced
// evenly from then on, and took 1.22x the ideal in 3 runs of 8).
func (m *told) spentByOthers(now, sent time.Duration, r int, adm uint64, n int) {
	switch {
	case m.spanAt == 0:
		m.spanAt, m.spanRem, m.spanAdm, m.spanSent = now, r, adm, sent
	case adm <= m.spanAdm:
		return
	default:
		extra := int64(m.spanRem-r) - int64(adm-m.spanAdm) - m.reordered(m.spanSent, sent, n)
		m.sawOthers(now, extra, extra, m.spanSent-m.rtt)
	}
	if now-m.spanAt >= max(minSpan, m.length()/4) {
		m.spanAt, m.spanRem, m.spanAdm, m.spanSent = now, r, adm, sent
	}
}

// sawOthers notes what a reading shows of others spending the quota:
// extra of theirs counted beyond ours and beyond what the order of arrival
// explains, and beyond, the same counted beyond all of ours the server
// may have counted in it (fewer than extra where the key counts ours a
// quota holds as it likely does, not at most: a log, see read), our count
// of ours complete from from on. More than othersShown in extra shows
// others; so does more than a quarter of a smaller quota's limit, one at
// least (see shown), in beyond, and any at all counts for the quota's last
// one (see holdsLast), once ours from from on are all in our count (see
// counted): the requests of a first burst, sent before the mirror began,
// are counted by the server in any order, which reordered cannot bound
// (regression: a log of 5 a second alone, 16 workers, two answers of its
// first burst differing by 3 where 1 was admitted between them, was taken
// for one others spend, sent to evenly at its limit at most, and half of
// what remained at a time: 1.69x the ideal, not 1.07x).
func (m *told) sawOthers(now time.Duration, extra, beyond int64, from time.Duration) {
	switch {
	case extra > othersShown:
		m.othersSeen = now
	case !m.counted(from):
	case beyond > m.shown():
		m.othersSeen = now
	case beyond > 0 && m.shown() < othersShown:
		m.othersHint = now
	}
}

// shown is how many of others' requests a reading must show, beyond ours
// and the order of arrival, to show others spending the quota: othersShown,
// or a quarter of a smaller quota's limit, one at least. A quota of 10
// never shows 16 of others': two transports on a window of 10 a second
// were never seen to share it, and none of the rules for a shared quota
// ran (regression, found in review 47: see holdsLast).
func (m *told) shown() int64 {
	return int64(min(othersShown, max(1, m.limit/4)))
}

// counted reports whether our own count (sends) holds all of ours
// admitted from from on: the mirror began at its first reading, and ours
// admitted before it were never added.
func (m *told) counted(from time.Duration) bool {
	return m.began != 0 && from > m.began
}

// heldRoom reports whether a refusal of admission adm, of n units, read at
// now with inflight of ours on their way, came while the count held room
// for it: a window's, or a quota's of a kind not yet known, read since its
// reset by an answer to a request sent before this one, holds n or more
// beyond ours on their way. Others spent it. Not so a refusal before any
// reading of the window (it may show a log: see read), nor of one sent
// before the reading came (ours sent with the reading's request may be
// counted after it, in any order: a single key's first burst of 16 on a
// window of 10, refused in part, took its own for others'), nor within a
// window's length of an answer without a reading (the server counts those
// in any order with the readings, whatever the key was told of them: a
// window of 50 per 10 s alone, a third of its answers without headers,
// took a refusal of its own for others', left one request a window to
// them, and took 6m40s for 2,000 requests in 4 seeds of 4, not 6m30s;
// found in review of review 47's fix), nor of a log, which
// the key counts exactly (a refusal there shows a sliding counter: see
// read), nor of a bucket, whose refill is measured. A small quota seldom
// shows others in a fall of Remaining (see shown): the refusal is often
// all that does (review 47: two transports on a window of 5 a second; see
// holdsLast).
func (m *told) heldRoom(now time.Duration, adm uint64, inflight int64, n int) bool {
	return (m.kind == kindWindow || m.kind == kindUnknown) && m.leftAt != 0 && !m.rolled &&
		adm > m.blindAdm && adm > m.leftSeen && (m.bareAt == 0 || now-m.bareAt > m.length()) && m.tokens(now, inflight) >= float64(n)
}

// reordered is how many more of ours the server may have counted between
// two readings, of the answers to requests sent at a and b (this one of n
// units), than we admitted between them: ours sent within a trip before a
// (not yet counted in the first) and within a trip after b (counted in the
// second), or at b itself, beyond its own n: requests sent at one instant
// are counted in any order, and those admitted after b's were left out
// (regression: a window of 50 per 10 s alone, 16 workers, its burst at a
// window's start sent at one instant, of a fake clock or a coarse one,
// showed its own as others': 17 in its first burst, over othersShown, or
// 1-3 later, and left the window's last one to others that do not exist,
// see holdsLast: 3m20s for a job of 1,000, not 3m10s, in 4 seeds of 4;
// found in review of review 47's fix).
func (m *told) reordered(a, b time.Duration, n int) int64 {
	return int64(m.sentBetween(a-m.rtt, a) + max(0, m.sentBetween(b-1, b+m.rtt)-n))
}

// sharedNow reports whether others were seen spending the quota within a
// window's length of now.
func (m *told) sharedNow(now time.Duration) bool {
	return m.othersSeen != 0 && now-m.othersSeen < m.length()
}

// holdsLast reports whether a request that needs need leaves the quota's
// last one to others, as a token held back: they were seen spending it
// within shareMemory windows' length of now (or any of their requests
// was, see othersHint), and our own admissions within a window's length,
// with need, would take all of its limit. A key that others starve is
// refused at every wake: its whole-second Retry-After wakes it at the same
// point of every window, where the others have spent it, and it sees
// nothing of the quota that would let it come sooner; only the others can
// leave it room, and they see nothing of it either while it is refused.
// Two transports on a window of 10 a second told by X-RateLimit-* (8
// workers, 300 requests each): one sent the window's 10 at once at each
// of its resets, placed late (whole seconds), or, taken for a log by its
// refusal there, as each of its requests left the log, and the other's
// request, woken by each refusal at the same later point, gave up after 8
// attempts in 18 runs of 48, where 76.9 429s came a run on average (told
// nothing, the same jobs drew 19.7 and lost none; found in review 47). So
// on a window of 5 a second (18 of 48), and on logs and sliding counters
// of 10 or 5, by either form of headers (up to 5 of 48). Now none in 48
// runs of any of them (TestTwoTransportsOnASmallQuotaNeitherStarves). The
// last one is left only while our own requests take all the rest: two
// keys that share it take it by turns, and it costs nothing. Remembered for
// shareMemory windows' length, as long as a request so starved retries (8
// attempts, Retry's default, a window apart): remembered for 2, a request
// gave up in 33 runs of 192 on the window of 5 a second, 2 with 8 (it is
// seldom seen: it takes the last one after the readings of the key that
// leaves it). Not for a bucket, which refills whatever it holds, and
// whose rate is measured net of others.
func (m *told) holdsLast(now time.Duration, need float64) bool {
	p := m.length()
	seen := max(m.othersSeen, m.othersHint)
	if m.kind == kindBucket || m.limit <= 0 || seen == 0 || p <= 0 || (now-seen)/shareMemory >= p {
		return false
	}
	return float64(m.sentBetween(now-p, now))+need >= float64(m.limit)
}

// long takes a reading's reset into the longest seen: at once, unless it
// is more than tallReset times the longest so far; then only when the
// reading after it is too, and no more than the shorter of the two. (One
// mistaken or hostile reset of years made the key's window years long for
// good, found in review: its record of our requests was never trimmed,
// 40,000 of them kept after 40,000 requests to a bucket, and a log of 100
// a second drew 498 429s where it drew none.) A window's first reading may
// come at its end, a second before a reset of an hour: the hour is taken
// at the reading after.
func (m *told) long(reset time.Duration) {
	switch {
	case m.longest == 0 || reset <= tallReset*m.longest:
		m.longest, m.tall = max(m.longest, reset), 0
	case m.tall != 0:
		m.longest, m.tall = min(m.tall, reset), 0
	default:
		m.tall = reset
	}
}

// shifted is how much longer than its stated wait a refusal pauses the
// key: half a window's length, then a quarter, for a short window told in
// whole seconds that others spend too, when the key has been refused in
// starvedFor windows in a row, then one more, with none of its requests
// accepted.
//
// A whole-second Retry-After wakes the key at the same point of every
// window, and where the others spend the window before that point, it is
// refused there for good: a retried request gave up after 8 attempts, all
// refused at the same point of 8 windows (regression: two transports of 8
// workers on a window of 5 a second told by X-RateLimit-*, the one
// refused at x.93 of each second, the other spending each window from
// x.13 to x.50; 3 jobs of 2,400 lost a request, now 2 of 12,800). The
// others see nothing of the key while it is refused (see holdsLast), and
// a Retry-After is never cut short: only a later point can find the
// window's start. Two tries only, far apart: shifted again and again, the
// tries of a key starved on a sliding log, which has no start to find
// (and a kind not yet known may be one), spread past the others' memory
// of it, and requests given up there went from 5 jobs of 3,200 to 14; two
// tries took them to 7 of 9,600. A key alone is refused window after
// window only by a quota spent for longer than its stated resets, which
// this costs under a window's length, twice.
func (m *told) shifted() time.Duration {
	if m.starved < starvedFor || m.starved > starvedFor+1 || !m.coarse || m.othersSeen == 0 ||
		m.kind != kindWindow && m.kind != kindUnknown || m.longest <= 0 || m.longest > coarseWait {
		return 0
	}
	return m.longest >> (m.starved - starvedFor + 1)
}

// othersNow is how many of others' requests a log holds at now, as far as
// the key knows: all it held at the last reading, until a window's length
// after it, when each has left, whenever it was sent. (Held for ever, they
// would hold the key for ever once the others stopped and it had nothing
// on its way to read the log again.)
func (m *told) othersNow(now time.Duration) int64 {
	if now-m.othersAt >= m.length() {
		return 0
	}
	return m.others
}

// logBound reports whether the mirror holds no more than a log of recent
// requests would, whatever Remaining says after a reset. A log sent all at
// once gives back all at once too, as a window at its reset, and
// X-RateLimit-Reset cannot tell them apart (RateLimit-Policy's w can: a
// log's t is when its oldest leaves): taken for a window, it must still
// hold no more than a log would. Nor, without that w, can a kind not yet
// known, once a reset has passed with no reading since: a log gives back
// only what aged (regression: a log spread over the first half second was
// sent a burst at the first reset, refused, and the key paused a second).
func (m *told) logBound() bool {
	return m.period == 0 && (m.kind == kindWindow || m.kind == kindUnknown && m.rolled)
}

// lowerBound is the earliest time, from the epoch, the mirror could let go
// a request of cost n with ahead others before it (0 for the head, which it
// lets go then), or holdsForAnswer when only an answer on its way can tell.
// A cost beyond all the quota holds goes when it is whole: the server
// decides.
func (m *told) lowerBound(now time.Duration, admitted uint64, inflight int64, ahead, n int) time.Duration {
	m.rollover(now, admitted)
	if m.limit > 0 {
		n = min(n, m.limit)
	}
	if m.kind == kindBucket && m.depth > 0 {
		n = min(n, m.depth)
	}
	need := float64(ahead + max(1, n))
	switch {
	case m.kind == kindLog && m.sharedNow(now):
		// A token held back: others' requests on their way, which no
		// reading has counted yet. Alone, the key's count of its own is
		// exact (each until a window's length after its answer), and a
		// token held back would leave one of each window unused.
		need++
	case m.holdsLast(now, need):
		need++
	case m.kind == kindBucket:
		// Tokens held back: requests that arrive out of order (what the
		// pace sends within the jitter the key sees, as a configured
		// bucket's reserve: see latency.go), answers that overtake one
		// another, a rate measured a little high; up to a quarter of its
		// depth. A bucket refills at its rate whatever it holds, short of
		// full, so what is held back costs nothing once the bucket has
		// been spent; but a quota that only looks like a bucket (a
		// sliding counter, whose Remaining falls as the key's pace rises)
		// sends what it holds back the less, and a fixed quarter cost it
		// a quarter of its rate. Never more than it holds: a bucket of one
		// still lets one go.
		//
		// A quarter of its depth even when that is under one: a bucket
		// of 2 or 3 held back a whole token, so the key sent one request
		// per answer, the next once the mirror was full again, slower
		// than the bucket drains (regression: a leaky bucket of 200 a
		// second with one place to wait, whose headers say 2 remain at
		// most, took 1.34x the ideal on average in the model, 1.47x at
		// worst).
		//
		// Nor more than it refills in a quarter second: at a rate
		// measured slow (others spend most of it), two tokens held back
		// were seconds of waiting, in which the others took them, and
		// the key measured slower still (regression: a second transport
		// that joined a job 5 s in took over the bucket, the first
		// measured 0.6/s and sent nothing for 4 s after the second was
		// done; 1.07x the ideal of both jobs, 1.23x at worst).
		quarter := float64(m.depth / 4)
		if m.depth < 4 {
			quarter = float64(m.depth) / 4
		}
		hold := min(quarter, 2+math.Ceil(m.jit.Seconds()*m.rate), m.rate*reserveFor.Seconds())
		need = max(min(need+hold, float64(m.depth)), need)
	}
	t := m.tokens(now, inflight)
	if m.kind == kindLog && m.othersSeen != 0 && t >= need && inflight > 0 &&
		float64(m.shareRem)/2-float64(admitted-m.shareAdm) < need {
		// Others spend it too, or did: each key takes half of what the
		// latest reading says remains, then reads again, so that keys
		// that woke together do not each send what the log holds. They
		// are seldom seen again once both spend it: what the log gives
		// back hides theirs (regression: two transports on a log of 200 a
		// second, each spent it at once at every wake and was refused,
		// and paused a second, about once a second: 33-36 429s of 4,000).
		return holdsForAnswer
	}
	switch {
	case t >= need && m.rolled && m.othersSeen != 0 && (m.kind == kindWindow || m.kind == kindUnknown) &&
		m.resetAt > now && m.resetAt-now < m.length()/8:
		// Nothing read of this window since its reset, its end near, and
		// others spend the quota, or did: they had all of it to spend. The
		// key waits for the next reset (regression: three transports on a
		// window of 100 a second; one refused near a window's end was
		// paused by its whole-second Retry-After to the same point of the
		// next window, found that one spent too, and so on until its
		// request gave up, in 1 to 4 runs of 16 in the model).
		return m.resetAt
	case t >= need && ahead == 0 && m.kind == kindUnknown && m.coarse && m.resetAt > now && m.sharedNow(now):
		// Others spend it too: what is left goes over half the time that
		// remains, again and again, to the reset, so that the last of it
		// finds what the others left.
		return max(now, m.spread+time.Duration(0.5*float64(m.resetAt-now)/t))
	case t >= need && ahead == 0 && m.kind == kindUnknown && m.coarse && m.resetAt > now:
		// Spread what is left evenly over the first half of the window
		// (the time to the reset less half the longest reset seen): a
		// window's last requests must not be late for it, a bucket shows
		// its refill as well in half the time, and a log gives back as it
		// was sent, in every window after, so a spread longer than need
		// be costs a log's job that much at its end.
		r := m.resetAt - now
		return max(now, m.spread+time.Duration(float64(max(r-m.length()/2, r/8))/t))
	case t >= need && t < need+1 && m.kind == kindWindow && m.sharedNow(now) && m.resetAt > now &&
		m.resetAt-now < m.length()/8:
		// The window's last request, near its reset, while others spend
		// it too: they may have sent it already, as far as the last
		// reading knows, and a refusal here would pause the key past the
		// next window (its wait is whole seconds). It waits for the reset.
		return m.resetAt
	case t >= need && ahead == 0 && m.kind == kindWindow && m.coarse && m.resetAt > now:
		// A short window, told in whole seconds, is spread evenly over
		// the time to its reset, not spent at once: another client that
		// shares it, and whose whole-second waits wake it at the same
		// point of every window, finds some left, as it would at its
		// reset (regression: two transports on one window, the one
		// refused later was refused at every wake, and gave up). What
		// binds the rest (the log bound) still does.
		return max(now, m.spread+time.Duration(float64(m.resetAt-now)/float64(int64(m.left)-inflight)))
	case t >= need && m.kind == kindLog && (m.othersSeen != 0 || m.logRefused && m.logSettled(now)) && m.length() > 0 && m.limit > 0:
		// Others spend it too, or did: no faster than its limit per
		// window's length, evenly, but to catch up an eighth of a window
		// late (see took). A log gives back as it was spent: keys that
		// spend what it frees at once spend it in bursts for ever, and
		// collide at each; and a sliding counter, which weighs the window
		// before by how much of it is still within a window's length,
		// still holds some of a burst sent more than a window's length
		// before, which a log's count takes for others' (regression: a
		// key left alone on a counter of 100 a second, taken for a log,
		// sent what it freed at once, 55 a second for good).
		//
		// So too a log told by a window's refusal, once settled: sent
		// evenly, a bucket that refills faster shows Remaining back
		// between our requests, which a log would still count (see
		// notALog); replayed in bursts of its limit, each after the last
		// had aged, it shows exactly what a log would, for ever
		// (regression, found in review 46: a bucket of 100 a second, 5
		// deep, taken so, was sent 5 at once each second, and a job's
		// last 400 requests took 44 s, not 4).
		return max(now, m.logPace+time.Duration(ahead)*(m.length()/time.Duration(m.limit)))
	case t >= need:
		return now
	case m.spentByBare(now, inflight, need):
		// Spent only by answers without a reading from other endpoints
		// than the reading's, which the quota may not count: one request
		// goes, and the others wait for its answer, which tells (see
		// toldbare.go), not for the reset. Nothing on its way, its
		// answer came, or will not: another goes.
		if m.bareTry != 0 && inflight > 0 {
			return holdsForAnswer
		}
		return now
	case m.kind == kindLog:
		return m.aged(now, need-t)
	case m.logBound() && m.exact(now, inflight) < need && float64(int64(m.left)-inflight) >= need:
		return m.aged(now, need-m.exact(now, inflight)) // what a log would hold binds
	case m.kind == kindWindow && m.period == 0 && m.exact(now, inflight) < need && m.resetAt > now:
		return max(m.resetAt, m.aged(now, need-m.exact(now, inflight)))
	case m.kind == kindBucket && inflight == 0 && m.shortOf(need) && m.levelAt != 0 && now-m.levelAt >= m.spentAfter():
		// The requests sent since the last reading, long enough ago for
		// the bucket to refill whole, took more than it can hold back:
		// as counted, it never refills to need, and only a reading would
		// set it right, but none is on its way (their answers came
		// without headers: a cache, an endpoint that sends none). The bucket is taken for spent now,
		// and refills from here (regression, found in review: the key
		// waited for ever, nothing on the wire).
		m.level, m.levelAt, m.leftSent = 0, now, m.sent
		if m.rate > 0 {
			return later(now, need/m.rate)
		}
		return now
	case m.kind == kindBucket && ahead == 0 && m.rate > 0 && m.levelAt != 0 && m.shortOf(need):
		// As counted, the bucket never refills to what the head needs:
		// it holds its depth at most, less ours sent since its level was
		// read. No time at its rate changes that; only a reading on the
		// answer to one of ours on its way (each answer wakes the head),
		// or, none on its way, the case above, which takes the bucket
		// for spent. A wake-up at the time its rate would give found the
		// same answer at every turn (regression, found in review: a
		// bucket 3 deep, read at 2, 2 of ours sent since, its rate
		// measured at 6.6e9 a second from a Remaining of 4,102,444,800
		// read two answers before a Limit of 3; the head needed 1.75, the
		// mirror held 1, and it woke every nanosecond, 1e9 times in the
		// second before the case above fired, each retaking the key's
		// lock; in a synctest bubble, 12 requests never ended). A sane
		// rate did the same, slower: a leaky bucket 2 deep at 200 a
		// second woke its head every 2.5 ms, one of ours on its way,
		// until the answer came. So the rate measured from huge figures
		// is left as it is: capped, it would only make the steps longer.
		// Those behind the head are given a lower bound, to be refused
		// by, which the rate's time still is.
		if inflight > 0 {
			return holdsForAnswer
		}
		return m.levelAt + min(m.spentAfter(), holdsForAnswer-1-m.levelAt)
	case m.rate > 0:
		return later(now, (need-t)/m.rate)
	case m.kind == kindBucket && inflight > 0:
		// Spent, and others spend all it adds, as far as the key has
		// measured: nothing is known to refill it. The answers on their
		// way read it again.
		return holdsForAnswer
	case m.kind == kindBucket:
		return now // one request at a time reads it again
	case m.resetAt > now && ahead == 0 && m.kind == kindUnknown && m.coarse && !m.tested &&
		(!m.still || m.rollAdm > 0 || m.sharedNow(now)) && m.resetAt-m.leftAt >= coarseWait/8:
		// Spent, and the headers cannot tell a short window from a
		// bucket, or a log of requests that gives back as they age: one
		// request tries an eighth of the way to the reset, from when it
		// was spent: the last reading or our last request, whichever
		// came later. Refused, it costs one 429, and the pause it brings
		// lasts to the reset. Not in the first window when the spread
		// showed nothing given back, alone: a bucket would have climbed,
		// and a window, a log or a sliding counter gives back nothing
		// before the first reset (refused, the try paused the key a
		// whole second past a reset half that away); after it, a log or
		// a counter gives back before the next. (Regression: counted
		// from the last reading, the try went with the request that
		// spent what that reading left, and a leaky bucket of 200 a
		// second with one place to wait, whose X-RateLimit-* say 2 per
		// second, served the one and queued the other: it showed
		// nothing, and the key sent 2 a second for good, one job in
		// six.)
		// A try refused, the next goes twice as far, then twice as far
		// again, and then waits for the reset (regression, found in
		// review: a bucket of 2 a second, 1 deep, told by X-RateLimit-*,
		// Limit 1, Remaining 0 and Reset 1 at every answer, was tried
		// 125 ms after each answer, refused, and paused a second: one
		// 429 a request, 2.26x the ideal; now the third try, half way,
		// finds the bucket's token and tells the bucket).
		from := max(m.leftAt, m.spread)
		return max(now, from+(m.resetAt-from)/8<<m.tryShift)
	case m.resetAt > now:
		return m.resetAt
	case m.resetAt == 0 && inflight > 0 && (m.longest == 0 || m.longest > coarseWait):
		// Spent, and no reset ever told (Shopify's call limit, a leaky
		// bucket, says only how full it is): the answers on their way
		// read it again (regression, found in review: every waiting
		// request went, one 429 each, 2.6-12% of the requests). So too
		// once the reset of a window longer than a reset's whole-second
		// doubt passed, its length not stated (X-RateLimit-*): the next
		// reset is not known until a reading of the new window comes,
		// and what this one gave back is spent (regression, found in
		// review: a window of 3 a minute, 16 workers waiting at its
		// reset, drew 12 requests into the new window, 9 refused).
		return holdsForAnswer
	}
	return now // nothing known holds it: its answer will say more
}

// shortOf reports whether a bucket, as counted, never holds need: its
// depth, less ours sent since its level was read, is less.
func (m *told) shortOf(need float64) bool {
	return float64(m.depth)-float64(m.sent-m.leftSent) < need
}

// spentAfter is how long after its level was read a bucket that is short
// of what the head needs (see shortOf), and has no reading on its way, is
// taken for spent (see lowerBound): long enough to refill whole at its
// rate, and a second at least; a second with no rate measured. The head
// short of it waits for just that. (A float past the range of Duration
// converts differently by platform: a bucket 10 deep with no rate, its
// depth over 1e-9 a second, was taken for spent after a second on amd64
// and never on arm64; found in review 45.)
func (m *told) spentAfter() time.Duration {
	if m.rate <= 0 {
		return time.Second
	}
	ns := float64(m.depth) / m.rate * 1e9
	if ns >= math.MaxInt64 {
		return math.MaxInt64
	}
	return max(time.Second, time.Duration(ns))
}

// later is secs seconds after now, rounded up to the nanosecond, saturated
// short of holdsForAnswer (a wait of centuries is a wait, not one for an
// answer).
func later(now time.Duration, secs float64) time.Duration {
	if room := holdsForAnswer - 1 - now; secs >= float64(room)/1e9 {
		return now + room
	}
	return now + time.Duration(math.Ceil(secs*1e9))
}

// took records a request of cost n, admission adm, admitted at now, with
// inflight others on their way.
func (m *told) took(now time.Duration, adm uint64, inflight int64, n int) {
	m.spread = now
	if p := m.length(); m.kind == kindLog && p > 0 && m.limit > 0 {
		m.logPace = max(m.logPace, now-p/8) + time.Duration(n)*(p/time.Duration(m.limit))
	}
	m.sent += uint64(n)
	if m.kind == kindBucket {
		m.fold(now)
	}
	if m.limit <= maxCounted && (m.kind != kindWindow || m.length() <= maxCounting) {
		m.sends = keep(m.sends, now-m.length()-time.Second)
		for range min(n, maxCounted+1) { // more can never count
			m.sends = append(m.sends, now)
		}
		m.sends = newest(m.sends)
	}
	switch {
	case m.tokens(now, inflight) >= 1:
	case m.spentByBare(now, inflight, 1):
		m.bareTry = adm // it went beyond only answers that may not count (see toldbare.go)
	default:
		m.tested, m.testAdm = true, adm
	}
}
