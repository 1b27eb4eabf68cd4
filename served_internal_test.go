package throttle

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"golang.org/x/time/rate"
)

// The floor of rule 8 is servedShare of the most answers accepted in one
// whole second of the last servedOver, for servedFor after noise was
// found, and nothing otherwise; the second going on does not count yet,
// and seconds with no answer count as none, however long the gap.
func TestServedFloor(t *testing.T) {
	var l learner
	sec := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	serve := func(at time.Duration, n int) {
		for range n {
			l.serve(at)
		}
	}
	serve(sec(3.5), 50)
	serve(sec(5.1), 120)
	serve(sec(6.2), 80)
	assert.Zero(t, l.floor(sec(7)), "no noise found: no floor")

	l.noiseAt = sec(6.5)
	serve(sec(7.3), 200) // the second going on
	assert.InDelta(t, 0.8*120, float64(l.floor(sec(7.5))), 1e-9, "the most in a whole second")
	assert.InDelta(t, 0.8*200, float64(l.floor(sec(8.1))), 1e-9, "a second counts once it is whole")
	assert.InDelta(t, 0.8*200, float64(l.floor(sec(37.9))), 1e-9, "second 7 is within the last 30")
	assert.InDelta(t, 0.8*0, float64(l.floor(sec(38.1))), 1e-9, "older seconds are out")
	assert.Zero(t, l.floor(sec(66.6)), "a minute after the noise was found: no floor")

	// A gap longer than the ring: what it held is gone.
	l.noiseAt = sec(100)
	serve(sec(100.2), 30)
	assert.InDelta(t, 0.8*30, float64(l.floor(sec(101))), 1e-9)
	for s := 0; s < servedRing; s++ {
		if s != 100%servedRing {
			assert.Zero(t, l.served[s], "second %d of the ring was cleared", s)
		}
	}
}

// A refusal that rule 3 would answer with a deep cut (a quick one, most of
// the key's last answers refused) takes a learned pace no lower than the
// floor after noise was found; a pace already under it stays where it
// is.
func TestCutAfterNoiseKeepsToWhatWasServed(t *testing.T) {
	cut := func(t *testing.T, noiseAt time.Duration, pace rate.Limit) rate.Limit {
		ks := &keyState{pol: &policy{}}
		ks.lim = rate.NewLimiter(pace, learnedBurst)
		ks.rarely().learn = learner{on: true, edge: true, mode: modeCruise, lo: pace, hi: 2 * pace, tested: pace, low: pace,
			test: 2 * time.Second, hold: probeHold, accepted: 5, since: 19 * time.Second, peakAt: longAgo, noiseAt: noiseAt}
		l := ks.learning()
		for range 120 {
			l.serve(15 * time.Second)
		}
		ks.ev.recent[0] = mask(outageAnswers) // the last 20 answers all refused: a cut to half
		ks.admitted = 1000
		ks.relearn(time.Now(), 20*time.Second, pace, time.Second)
		return ks.lim.Limit()
	}
	assert.InDelta(t, 50, float64(cut(t, 0, 100)), 1e-9, "no noise found: to half")
	assert.InDelta(t, 96, float64(cut(t, 10*time.Second, 100)), 1e-9, "noise found: to 0.8 of the 120 served")
	assert.InDelta(t, 90, float64(cut(t, 10*time.Second, 90)), 1e-9, "a pace under the floor stays: neither raised nor cut")
	assert.InDelta(t, 50, float64(cut(t, -time.Minute, 100)), 1e-9, "noise found over a minute before: to half")
}

// Rule 6's verdict (a pace cut to 0.7 of where refusals came, and refused
// as often) finds noise as a trial's does: the floor holds after it.
func TestRuleSixNoiseSetsTheFloor(t *testing.T) {
	ks := &keyState{pol: &policy{}}
	ks.lim = rate.NewLimiter(100, learnedBurst)
	ks.rarely().learn = learner{on: true, edge: true, mode: modeCruise, lo: 100, hi: 200, accepted: 30, peakAt: longAgo}
	l := ks.learning()
	now := time.Now()
	assert.False(t, ks.noise(now, 10*time.Second, 100), "the first: the reference")
	l.edge, l.accepted = true, 30
	assert.True(t, ks.noise(now, 12*time.Second, 70), "cut to 0.7 and refused as often: noise")
	assert.Equal(t, 12*time.Second, l.noiseAt)
	for range 90 {
		l.serve(11 * time.Second)
	}
	assert.InDelta(t, 72, float64(l.floor(13*time.Second)), 1e-9)
}
