package throttle

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"golang.org/x/time/rate"
)

// served fills the learner's count: n answers accepted in each second from
// from to to, both included.
func served(l *learner, from, to int64, n int) {
	for s := from; s <= to; s++ {
		for range n {
			l.serve(time.Duration(s)*time.Second + 300*time.Millisecond)
		}
	}
}

// The floor of rule 8 is servedShare of the answers accepted in the median
// whole second of the last servedOver, for servedFor after noise was
// found, and nothing otherwise: a burst moves it little, the second going
// on does not count yet, and seconds with no answer count as none, however
// long the gap.
func TestServedFloor(t *testing.T) {
	sec := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	var l learner
	served(&l, 0, 34, 100)
	served(&l, 35, 35, 1000) // a deep bucket's burst
	served(&l, 36, 39, 100)
	assert.Zero(t, l.floor(sec(40.5)), "no noise found: no floor")

	l.noiseAt = sec(39)
	assert.InDelta(t, 80, float64(l.floor(sec(40.5))), 1e-9, "0.8 of the median second, the burst aside")
	served(&l, 40, 40, 5000)
	assert.Zero(t, l.floor(sec(99.5)), "a minute after the noise was found: no floor")

	// The second going on does not count: counted, the window would be
	// seconds 11 to 40, and the median 1.
	var m learner
	served(&m, 10, 24, 100)
	m.serve(sec(40.2))
	m.noiseAt = sec(40)
	assert.InDelta(t, 80, float64(m.floor(sec(40.5))), 1e-9, "seconds 10 to 39: 15 of 100, 15 of none")

	// The quota fell: the floor follows once most of the last 30 seconds
	// served less.
	served(&l, 41, 55, 40)
	l.noiseAt = sec(55)
	assert.InDelta(t, 80, float64(l.floor(sec(55.5))), 1e-9, "14 of 30 seconds at 40: not yet")
	served(&l, 56, 57, 40)
	assert.InDelta(t, 32, float64(l.floor(sec(57.5))), 1e-9, "16 of 30 at 40: the median is 40")

	// An answer that overtook another across a second counts in its own.
	l.serve(sec(56.9))
	assert.Equal(t, int32(41), l.served[56%servedRing])
	assert.Equal(t, int64(57), l.servedAt)

	// A gap: seconds with no answer count as none, and what the ring
	// held before it is gone.
	l.noiseAt = sec(100)
	served(&l, 100, 109, 30)
	assert.Zero(t, l.floor(sec(110.5)), "20 of the last 30 seconds served nothing")
	served(&l, 110, 125, 30)
	assert.InDelta(t, 24, float64(l.floor(sec(126.5))), 1e-9)
	for s := int64(0); s < servedRing; s++ {
		if s < 100%servedRing || s > 125%servedRing {
			assert.Zero(t, l.served[s], "second %d of the ring was cleared", s)
		}
	}
}

// After noise was found, a refusal that rule 3 would answer with a deep
// cut (a quick one, most of the key's last answers refused) takes a
// learned pace no lower than the floor, and 5% lower at least: a pace at
// or under the floor is cut as a collision is.
func TestCutAfterNoiseKeepsToWhatWasServed(t *testing.T) {
	cut := func(t *testing.T, noiseAt time.Duration, pace rate.Limit) rate.Limit {
		ks := &keyState{pol: &policy{}}
		ks.lim = rate.NewLimiter(pace, learnedBurst)
		ks.rarely().learn = learner{on: true, edge: true, mode: modeCruise, lo: pace, hi: 2 * pace, tested: pace, low: pace,
			test: 2 * time.Second, hold: probeHold, accepted: 5, since: 39 * time.Second, peakAt: longAgo, noiseAt: noiseAt}
		l := ks.learning()
		served(l, 10, 39, 120)
		ks.ev.recent[0] = mask(outageAnswers) // the last 20 answers all refused: a cut to half
		ks.admitted = 1000
		ks.relearn(time.Now(), 40*time.Second, pace, time.Second)
		return ks.lim.Limit()
	}
	assert.InDelta(t, 50, float64(cut(t, 0, 100)), 1e-9, "no noise found: to half")
	assert.InDelta(t, 96, float64(cut(t, 30*time.Second, 120)), 1e-9, "noise found: to 0.8 of the 120 served")
	assert.InDelta(t, 95, float64(cut(t, 30*time.Second, 100)), 1e-9, "a pace near the floor: 5% lower")
	assert.InDelta(t, 57, float64(cut(t, 30*time.Second, 60)), 1e-9, "a pace under the floor: 5% lower")
	assert.InDelta(t, 50, float64(cut(t, -30*time.Second, 100)), 1e-9, "noise found over a minute before: to half")
}

// Rule 6's verdict (a pace cut to 0.7 of where refusals came, and refused
// as often) finds noise as a trial's does: the floor holds after it.
func TestRuleSixNoiseSetsTheFloor(t *testing.T) {
	ks := &keyState{pol: &policy{}}
	ks.lim = rate.NewLimiter(100, learnedBurst)
	ks.rarely().learn = learner{on: true, edge: true, mode: modeCruise, lo: 100, hi: 200, accepted: 30, peakAt: longAgo}
	l := ks.learning()
	now := time.Now()
	assert.False(t, ks.noise(now, 40*time.Second, 100), "the first: the reference")
	l.edge, l.accepted = true, 30
	assert.True(t, ks.noise(now, 42*time.Second, 70), "cut to 0.7 and refused as often: noise")
	assert.Equal(t, 42*time.Second, l.noiseAt)
	served(l, 13, 42, 90)
	assert.InDelta(t, 72, float64(l.floor(43*time.Second)), 1e-9)
}

// A trial's verdict of noise (rule 7) sets the floor's clock as rule 6's
// does.
func TestTrialNoiseSetsTheFloor(t *testing.T) {
	ks := &keyState{pol: &policy{}}
	ks.lim = rate.NewLimiter(10, learnedBurst)
	ks.rarely().learn = learner{on: true, mode: modeCruise, lo: 10, hi: 20, cut: 1,
		tri: trial{adm: 1, at: 0, from: 10, base: 0.03, drop: learnDrop, quietUntil: longAgo, endedAt: longAgo}}
	l := ks.learning()
	l.tri.n, l.tri.k = 200, 6
	ks.admitted = 10
	ks.noiseFound(time.Now(), 35*time.Second)
	assert.Positive(t, l.bg, "noise found")
	assert.Equal(t, 35*time.Second, l.noiseAt)
	served(l, 5, 34, 12)
	assert.InDelta(t, 9.6, float64(l.floor(35500*time.Millisecond)), 1e-9)
}
