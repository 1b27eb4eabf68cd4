package throttle

import (
	"math"
	"time"
)

// This file holds what a key observes of its round-trip times, and the two
// sizes that follow from it: the token reserve against latency jitter and
// the longest wait for a probe's answer.
//
// The estimator is TCP's (RFC 6298): a smoothed round-trip time and a
// smoothed mean deviation, each answer moving them by 1/8 and 1/4. Their
// sum srtt + 4·rttvar bounds almost every round trip, and 4·rttvar how much
// later one request may reach the server than the one sent after it. Unlike
// TCP's, the deviation starts at zero, not at half the first round trip: it
// measures jitter, and the reserve it sizes never shrinks, so a guess would
// stay.

const (
	// A key samples one round trip at least every sampleEvery, and every
	// one of its first minSamples: reading the clock when an answer comes
	// cost about 28 ns of the 178 throttle added to a paced request
	// (BenchmarkRoundTrip, 2 cores), and a key that sends faster learns
	// its round trips as well from a sample a millisecond (TCP, before
	// timestamps, timed one segment a round trip). A key in trouble, or
	// with windows, times every answer (see keyState.enter).
	sampleEvery = time.Millisecond
	minSamples  = 8

	minProbeWait     = time.Second      // a probe holds the key at least this long
	maxProbeWait     = 10 * time.Second // and at most this long
	initialProbeWait = time.Second      // before any round trip is known (RFC 6298's initial RTO)
)

// latency is a key's estimate of its round-trip times.
type latency struct {
	srtt, rttvar time.Duration
	samples      int
	clipped      bool // the latest round trip was clipped (see observe)
}

// observe adds one round trip. Once one is known, one that took longer
// than srtt + max(srtt, 4·rttvar, 1 ms) counts as that long (the
// millisecond: round trips of nothing, a fake's, would clip every later
// one to nothing): a round trip holds the server's work as well as the
// way there, and one slow answer (a report the server built for 10 s) is
// no sign that requests bunch up on their way. Taken whole, it set rttvar
// to a quarter of itself: at 10 a second, a reserve of 48 tokens of a
// Burst of 50 for good, the answer charging the bucket 47 of them at
// once, and a key sending 8 at a time sent nothing for 4.8 s (found in
// review). Round trips that stay long still count: each moves srtt and
// rttvar toward them, and the bound they are clipped at grows with
// rttvar, fourfold within a few answers; and one beyond the bound right
// after one clipped is taken whole: two in a row are a lasting change (a
// route moved from 20 ms to 2 s), not one slow answer, and clipped, the
// bound, a Store's booking margin, stayed near 20 ms for 8 answers of 2 s,
// and a Transport 1 ms from the server met A's requests there within one
// Per 6 times in 20 s (found in review). Not only once minSamples are
// known, as it was: the slow answer second of all took the reserve to
// Burst-2 for good (found in review). Nor is the first taken whole when
// the second is under half of it: the first was the outlier.
func (l *latency) observe(rtt time.Duration) {
	rtt = max(rtt, 0)
	if clip := l.srtt + max(l.srtt, 4*l.rttvar, sampleEvery); l.samples > 0 && rtt > clip && !l.clipped {
		rtt, l.clipped = clip, true
	} else {
		l.clipped = false
	}
	if l.samples == 0 || l.samples == 1 && l.srtt > rtt+max(rtt, sampleEvery) {
		// The first, or, the first beyond the bound this one would set,
		// the second in its place: a key's first round trip opens the
		// connection (DNS, TCP, TLS) or is a slow answer, and taken whole
		// it set rttvar to a quarter of the gap, the reserve with it, for
		// good (found in review: a first answer of 300 ms then 20 ms at
		// 100 a second, a Burst of 50, let 12 of 40 go at once).
		l.srtt, l.rttvar = rtt, 0
	} else {
		dev := l.srtt - rtt
		if dev < 0 {
			dev = -dev
		}
		l.rttvar += (dev - l.rttvar) / 4
		l.srtt += (rtt - l.srtt) / 8
	}
	l.samples++
}

// jitter is how much later one request may reach the server than one sent
// after it: 4·rttvar, zero before the second round trip.
func (l *latency) jitter() time.Duration {
	if l.samples < 2 {
		return 0
	}
	return 4 * l.rttvar
}

// bound is about the longest a round trip takes: srtt + 4·rttvar, and
// before the first, initialProbeWait, as cautious as TCP's first
// retransmission timeout. It is how much longer than Per a window's
// departure booked through a Store counts (see Transport.book): zero
// before the first answer, a key whose requests took 190 ms to reach the
// server had them counted for Per alone, and a request of another
// Transport, 1 ms from the server, went Per and 2 ms after them: 11 of a
// window of 10 reached the server within one Per (found in review 46).
// The caution costs a key at most a second in its windows' first Per in
// a MemoryStore, which counts each departure with its own margin. In
// Redis (package redisstore) it costs more: the windows' set stays in the
// order of booking, so every departure booked after one counted a second
// past Per, by any process, counts as long, until that one stops counting;
// a process booking one departure a second, with the second's margin
// throughout, next to one booking with margins of 2 ms cut the latter's
// bookings from 49 (MemoryStore) to 28 in 6 s (measured in review 46).
func (l *latency) bound() time.Duration {
	if l.samples == 0 {
		return initialProbeWait
	}
	return l.srtt + 4*l.rttvar
}

// reserve is how many tokens of a bucket of depth burst paced at r are kept
// back: one, against the dialing of the first connections and the float
// error of clocks, plus what r admits within the observed jitter, so that
// requests that bunch up on the way still find a token at the server.
//
// Two tokens stay usable when burst allows (one when it is 2, the only one
// when it is 1): a bucket of depth 1 loses the time by which its waiter
// wakes late, a few percent of the pace on a busy machine; one of depth 2
// carries it over.
func (l *latency) reserve(r float64, burst int) int {
	// At most what an int32 holds, as the key keeps it (found in review: a
	// Burst past 2^31 and a jitter worth as many tokens wrapped negative,
	// and the bucket held more than its Burst).
	most := min(max(burst-2, min(burst-1, 1)), math.MaxInt32)
	extra := math.Ceil(l.jitter().Seconds() * r)
	if extra >= float64(most) { // also catches +Inf
		return most
	}
	return min(1+int(extra), most)
}

// probeWait is how long a probe, or the head of a ramp, holds back the rest
// of the key without an answer before the next attempt may go: TCP's
// retransmission timeout srtt + 4·rttvar, within [1s, 10s].
func (l *latency) probeWait() time.Duration {
	if l.samples == 0 {
		return initialProbeWait
	}
	return min(max(l.srtt+4*l.rttvar, minProbeWait), maxProbeWait)
}
