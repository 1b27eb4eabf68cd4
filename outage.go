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
// Then the key pauses like a throttled one, for the failed answer's
// Retry-After (without one, for the failed request's backoff); one request
// probes when the pause ends, and a probe that fails again extends the
// pause: during an outage each worker sends about one request, then only
// probes reach the server, one per Retry-After. (A failed probe's own retry
// waits its backoff, which grows; the next request in line probes next.)
// The first answer that is not a failure ends the outage and the record
// starts afresh.
const (
	outageAnswers = 20          // the answers looked at
	outageMin     = 5           // failures that can make an outage
	outageForget  = time.Minute // a gap this long between answers forgets the rest
	refusalsMin   = 3           // quota refusals among them that are more than collisions (pause.go)
)

// health is a key's record of its recent answers: one bit each, newest in
// the lowest bit, 1 for a failure (in failed) or a quota refusal (in
// refused).
type health struct {
	failed  uint32
	refused uint32
	n       uint8         // answers recorded, <= outageAnswers
	outage  bool          // the key is paused for an outage
	last    time.Duration // when the newest was recorded, from the epoch
}

// record adds an answer at now, failed or refused for the quota, and
// reports whether failures now dominate.
func (h *health) record(now time.Duration, failed, refused bool) bool {
	h.push(now)
	if failed {
		h.failed |= 1
	}
	if refused {
		h.refused |= 1
	}
	return h.dominate(h.failed)
}

// push adds an answer at now that neither failed nor was refused.
func (h *health) push(now time.Duration) {
	if h.n > 0 && now-h.last > outageForget {
		h.failed, h.refused, h.n = 0, 0, 0
	}
	h.last = now
	h.failed = h.failed << 1 & (1<<outageAnswers - 1)
	h.refused = h.refused << 1 & (1<<outageAnswers - 1)
	h.n = min(h.n+1, outageAnswers)
}

// dominate reports whether the answers marked in b dominate the recent
// ones: at least outageMin of them, and more than half.
func (h *health) dominate(b uint32) bool {
	k := bits.OnesCount32(b)
	return k >= outageMin && 2*k > int(h.n)
}

// recovered forgets the failures: the server answered again.
func (h *health) recovered() {
	h.failed, h.refused, h.n, h.outage = 0, 0, 0, false
}

// refusing reports whether quota refusals are more than collisions: at
// least refusalsMin of the recent answers.
func (h *health) refusing() bool {
	return bits.OnesCount32(h.refused) >= refusalsMin
}

// refusedMost reports whether quota refusals dominate the recent answers,
// as failures must to make an outage.
func (h *health) refusedMost() bool { return h.dominate(h.refused) }
