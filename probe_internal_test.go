package throttle

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"golang.org/x/time/rate"
)

// probed returns a key cruising at a learned pace of 100 a second, the
// slowest pace refused 300, whose probes climbed from 100 by 1%, 2%, 4%...
// each step held a test, until the pace is at least to; and the time then.
func probed(t *testing.T, to rate.Limit) (*keyState, time.Duration) {
	t.Helper()
	ks := &keyState{pol: &policy{}}
	ks.lim = rate.NewLimiter(100, learnedBurst)
	ks.rarely().learn = learner{on: true, edge: true, mode: modeCruise, step: probeFirst,
		lo: 100, hi: 300, tested: 100, low: 100, test: 2 * time.Second, hold: probeHold,
		peakAt: longAgo, noiseEnd: longAgo}
	l := ks.learning()
	now, at := time.Now(), time.Duration(0)
	for ks.lim.Limit() < to {
		// The key sends at its pace for a test, all accepted, and waits
		// its turn: the probe's time comes.
		at += l.test
		ks.admitted += uint64(float64(ks.lim.Limit()) * l.test.Seconds())
		ks.waiting = 1
		l.lastOK = at - time.Millisecond
		l.accept(&ticket{adm: ks.admitted})
		ks.climbLearned(now, at)
	}
	return ks, at
}

// refusedAt readies the key's count for a refusal at at: the server took
// the 40 answers to what the key sent since its last cut, over 0.44 s, 91
// a second, which sets no bound above the probes' fallback (see relearn).
func refusedAt(ks *keyState, at time.Duration) {
	l := ks.learning()
	l.cut, l.since, l.accepted = ks.admitted-2*minCount, at-440*time.Millisecond, 2*minCount
}

// A probe refused after a big step (more than an eighth over the step below)
// falls back to 0.95 of the step below, which held a whole test, not to the
// pace the probes began from: the big step, not the one below, drew the
// refusal (regression: a bucket 30-60 ms away, whose first burst of
// refusals left the pace far below the quota, climbed from there again
// after each refused probe, 1.13x the ideal on average, 1.08x with this
// rule). A smaller step refused goes back to where the probes began.
func TestRefusedBigProbeFallsBackToTheStepBelow(t *testing.T) {
	ks, at := probed(t, 150)
	l := ks.learning()
	below := l.lo // the step below, which held its test
	p := ks.lim.Limit()
	assert.Greater(t, float64(p), float64(below)*(1+bigStep), "a big step")
	refusedAt(ks, at)
	ks.relearn(time.Now(), at, p, time.Second)
	assert.InDelta(t, float64(below)*cutShare, float64(ks.lim.Limit()), 0.01, "0.95 of the step below")

	ks, at = probed(t, 110) // 100, 101, 103, 107, then 116: a step of 8%
	l = ks.learning()
	p = ks.lim.Limit()
	assert.LessOrEqual(t, float64(p), float64(l.lo)*(1+bigStep), "a small step")
	refusedAt(ks, at)
	ks.relearn(time.Now(), at, p, time.Second)
	assert.InDelta(t, 100, float64(ks.lim.Limit()), 0.01, "back to where the probes began")
}
