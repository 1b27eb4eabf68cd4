package throttle

import (
	"math/bits"
	"time"
)

// This file tells an outage from a bad moment. A 502, 503, 504 or a network
// error says the server had trouble with one request; on its own it delays
// only that request's retry. The key pauses as a whole only when such
// failures dominate its recent answers:
//
//	of the key's last 20 answers within a minute of each other, at least 5
//	failed, and more than half did.
//
// A request counts one failure among them at a time, unless the server
// fails the others too: a failed retry replaces its own earlier failure
// (which then counts neither as a failure nor as an answer, though its
// place still ages the record) when no other request failed since it, or
// when some request was served since it. One broken item among healthy
// answers, retried eight times, is one failure, never an outage (found in
// review: its 5 retries among the key's last 9 answers made one, and the
// key paused for its own backoff, up to 30 s, while every other request
// was answered). Where others fail too and none is served, each failed
// attempt is news of the server, and counts, as before: two workers whose
// every request fails make an outage as fast as they did. And where none
// of the last 20 answers was served, the key is in an outage whoever
// failed: one worker's requests, one after another, each retried alone.
//
// Then the key pauses like a throttled one, for the failed answer's
// Retry-After (without one, for the failed request's backoff, never past
// MaxRetryAfter: no server asked for it, and past it the requests
// arriving would fail at once with ErrPaused); one request
// probes when the pause ends, and a probe that fails again extends the
// pause: during an outage each worker sends about one request, then only
// probes reach the server, one per Retry-After. A failed probe goes behind
// the requests waiting, and the next in line probes next (its own retry
// waits its backoff, which grows): a request that fails whatever the
// server's health must not probe, and fail, at every pause while the
// requests behind it wait (found in review: three broken items beside one
// healthy worker held it 20 s on average, up to 47 s). Once nothing was
// served among the key's last 20 answers, the pause is at least the
// outage's own backoff: InitialDelay, doubled at each failed probe since,
// up to MaxDelay, with full jitter, so that the probes of a server that
// serves nothing thin out whichever requests send them (fresh requests'
// first backoffs are short). Only then: a server failing half its answers
// at random fails a probe as often as not, and a backoff doubled per
// failed probe grows without bound on average there (found in review: at
// 50% of failures the key served half what it had). The first answer that
// is not a failure ends the outage and the record starts afresh.
const (
	outageAnswers = 20          // the answers looked at
	outageMin     = 5           // failures that can make an outage
	outageForget  = time.Minute // a gap this long between answers forgets the rest
	refusalsMin   = 3           // quota refusals among them that are more than collisions (pause.go)
)

// health is a key's record of its recent answers: one bit each, newest in
// the lowest bit, 1 for a failure (in failed), a quota refusal (in
// refused), or a failure that a later one of its request replaced (in
// gone: see fail).
type health struct {
	failed  uint32
	refused uint32
	gone    uint32
	seq     uint32        // answers recorded, ever (wrapping): a failMark's place
	n       uint8         // answers recorded, <= outageAnswers
	outage  bool          // the key is paused for an outage
	grown   uint8         // failed probes of the outage since nothing was served: its backoff doubled so often (see outageFloor)
	last    time.Duration // when the newest was recorded, from the epoch
}

// failMark is where a request's last failure counted in its key's record:
// the record's seq then.
type failMark struct {
	seq uint32
	set bool
}

// record adds an answer at now, failed or refused for the quota, and
// reports whether failures now dominate. own is the request's mark of its
// last failure counted (unset: none known).
func (h *health) record(now time.Duration, failed, refused bool, own *failMark) bool {
	h.push(now)
	if failed {
		h.fail(own)
	}
	if refused {
		h.refused |= 1
	}
	if h.n == outageAnswers && (h.failed|h.gone) == 1<<outageAnswers-1 {
		// None of the last 20 was served: every failure is news of the
		// server, a request's retries too (found in review: one worker
		// sending one request after another, each retried alone, held at
		// most 3 failures in the record, and the outage of a server that
		// served nothing for 10 minutes never began).
		return true
	}
	return h.dominate(h.failed, int(h.n)-bits.OnesCount32(h.gone))
}

// fail marks the newest answer, just pushed, a failure of the request
// whose mark is own, which then marks it. Its earlier failure, if still in
// the record, is replaced (it goes to gone) when no other request failed
// since it, or when some request was served since it (an answer neither
// failed nor replaced): the request counts one failure at a time, unless
// the others fail too and none is served.
func (h *health) fail(own *failMark) {
	h.failed |= 1
	if p := h.seq - own.seq; own.set && p > 0 && p < uint32(h.n) && h.failed&(1<<p) != 0 {
		between := uint32(1)<<p - 2 // the answers since, this one left out
		failing := h.failed | h.gone
		if between&failing == 0 || between&^failing != 0 {
			h.failed &^= 1 << p
			h.gone |= 1 << p
		}
	}
	own.seq, own.set = h.seq, true
}

// push adds an answer at now that neither failed nor was refused. A gap
// of outageForget since the last forgets the rest, unless the key is in an
// outage (learn forgets one whose last pause ended that long ago): there,
// the gap is the outage's own pause, which passes a minute where MaxDelay
// does, and its record is what keeps the probes apart (found in review:
// forgotten, the floor fell to 0, and 20 fresh requests probed within 5 s
// after every pause past a minute).
func (h *health) push(now time.Duration) {
	if h.n > 0 && now-h.last > outageForget && !h.outage {
		h.failed, h.refused, h.gone, h.n = 0, 0, 0, 0
	}
	h.last = now
	h.seq++
	h.failed = h.failed << 1 & (1<<outageAnswers - 1)
	h.refused = h.refused << 1 & (1<<outageAnswers - 1)
	h.gone = h.gone << 1 & (1<<outageAnswers - 1)
	h.n = min(h.n+1, outageAnswers)
}

// dominate reports whether the answers marked in b dominate the n recent
// ones counted: at least outageMin of them, and more than half.
func (h *health) dominate(b uint32, n int) bool {
	k := bits.OnesCount32(b)
	return k >= outageMin && 2*k > n
}

// recovered forgets the failures: the server answered again.
func (h *health) recovered() {
	h.failed, h.refused, h.gone, h.n, h.outage, h.grown = 0, 0, 0, 0, false, 0
}

// refusing reports whether quota refusals are more than collisions: at
// least refusalsMin of the recent answers.
func (h *health) refusing() bool {
	return bits.OnesCount32(h.refused) >= refusalsMin
}

// refusedMost reports whether quota refusals dominate the recent answers,
// as failures must to make an outage.
func (h *health) refusedMost() bool { return h.dominate(h.refused, int(h.n)) }

// outageFloor is the least pause of a key in an outage for a failed answer
// that states no wait (a probe's, if probe): 0 while one of the last 20
// answers was served, else InitialDelay (initial) doubled at each failed
// probe since, up to most, with full jitter.
func (h *health) outageFloor(probe bool, initial, most time.Duration) time.Duration {
	served := (uint32(1)<<h.n - 1) &^ (h.failed | h.gone)
	if h.n < outageAnswers || served != 0 {
		return 0
	}
	if probe && h.outage && h.grown < 62 {
		h.grown++
	}
	d := initial
	for range h.grown {
		if d >= most/2 {
			d = most
			break
		}
		d *= 2
	}
	return fullJitter(min(d, most))
}
