package throttle

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"
)

// A trial that finds noise at a share over a third (a server refusing half
// the requests at random) quiets the key with a CUSUM whose step stays a
// number: at such a share its alternative, three times as often, was over
// one, the step NaN, and the quiet ended at the next refusal (found in
// review).
func TestQuietOfHeavyNoiseKeepsItsCount(t *testing.T) {
	ks := &keyState{pol: &policy{}}
	ks.lim = rate.NewLimiter(10, learnedBurst)
	ks.rarely().learn = learner{on: true, mode: modeCruise, lo: 10, hi: 20, cut: 1,
		tri: trial{adm: 1, at: 0, from: 10, base: 0.5, drop: learnDrop, quietUntil: longAgo, endedAt: longAgo}}
	l := ks.learning()
	l.tri.llr = -learnOdds // told: one more refusal ends it
	ks.admitted = 10
	done, _ := ks.tried(time.Now(), time.Second)
	assert.True(t, done)
	assert.Positive(t, l.bg, "noise found")
	for i := range 5 {
		l.accept(&ticket{adm: uint64(20 + i)})
	}
	assert.False(t, math.IsNaN(l.cusum), "the CUSUM is a number")
	done, _ = ks.tried(time.Now(), 2*time.Second)
	assert.True(t, done, "a refusal in the quiet of heavy noise cuts nothing")
}

// A cut that a trial finds noise goes whole: the pace, and the hold
// before the probes that the cut set (found in review: a slow pace's,
// 200 answers' worth, 37 s at 5 a second, outlived the verdict, and the
// next noise refusal began it again: a transport alone on a free quota
// sat at 5 a second for 172 s). The refusal here is a probe's (the pace
// rose from 4.9 since its last cut): its cut holds 200 answers' worth.
func TestNoiseVerdictUndoesTheCutsHold(t *testing.T) {
	ks := &keyState{pol: &policy{}}
	ks.lim = rate.NewLimiter(5, learnedBurst)
	ks.rarely().learn = learner{on: true, edge: true, mode: modeCruise, lo: 5, hi: 6, tested: 5, low: 4.9,
		test: 2 * time.Second, hold: probeHold, costs: true, next: 10 * time.Second,
		accepted: 150, cruiseN: 300, cruiseK: 9, peakAt: longAgo, noiseEnd: longAgo}
	l := ks.learning()
	now := time.Now()
	ks.admitted = 1000
	ks.relearn(now, 20*time.Second, 5, time.Second)
	require.NotZero(t, l.tri.adm, "the cut is tried")
	require.Greater(t, l.next, 40*time.Second, "a cut's hold: 200 answers' worth")
	for range 75 {
		ks.admitted++
		l.accept(&ticket{adm: ks.admitted})
	}
	// Three refusals in 78 answers, where 9 in 301 came before: as often.
	ks.relearn(now, 41*time.Second, ks.lim.Limit(), time.Second)
	ks.relearn(now, 42*time.Second, ks.lim.Limit(), time.Second)
	ks.relearn(now, 43*time.Second, ks.lim.Limit(), time.Second)
	require.Zero(t, l.tri.adm, "told")
	assert.Positive(t, l.bg, "noise")
	assert.Equal(t, rate.Limit(5), ks.lim.Limit(), "the pace back")
	assert.Equal(t, 10*time.Second, l.next, "the probes' time back")
}

// A learned pace's probes wait while the quiet after refusals found noise
// has seen them come more often than that noise since (its CUSUM above
// zero), and go once it is back at zero (regression: two transports on
// one bucket, told nothing, each took the other's refusals for noise and
// climbed into its share: one run in 90 drew over 40 429s of 4,000).
func TestProbesWaitWhileTheQuietSeesMoreRefusals(t *testing.T) {
	ks := &keyState{pol: &policy{}}
	ks.lim = rate.NewLimiter(50, learnedBurst)
	at := 100 * time.Second
	ks.rarely().learn = learner{on: true, mode: modeCruise, lo: 50, hi: 200, tested: 50, low: 50,
		test: 2 * time.Second, hold: probeHold, step: probeFirst, next: at - time.Second,
		reachAt: at - time.Second, lastOK: at - 10*time.Millisecond, peakAt: longAgo,
		bg: 0.01, cusum: 0.5, noiseEnd: at + 10*time.Second}
	ks.waiting, ks.admitted = 4, 1000
	ks.climbLearned(time.Now(), at)
	assert.Equal(t, rate.Limit(50), ks.lim.Limit(), "the probe waits")
	ks.learning().cusum = 0
	ks.climbLearned(time.Now(), at+10*time.Millisecond)
	assert.Equal(t, rate.Limit(50.5), ks.lim.Limit(), "the probe goes")
}

// recent counts the refusals over the last gaps between them, up to eight:
// none before two gaps, then each gap's answers, the refusal's own
// included.
func TestRecentShareCountsTheLastGaps(t *testing.T) {
	var l learner
	answers := func(n int) {
		for range n - 1 {
			l.count(false)
		}
		l.count(true)
	}
	answers(50) // the first refusal opens no gap
	answers(10)
	assert.Zero(t, l.recent(), "one gap tells nothing")
	answers(10)
	assert.InDelta(t, 0.1, l.recent(), 1e-9, "two gaps of 10")
	for range recentGaps {
		answers(100)
	}
	assert.InDelta(t, 0.01, l.recent(), 1e-9, "the last eight gaps only")
	answers(4)
	assert.InDelta(t, 8.0/704, l.recent(), 1e-9)
}

// A trial that stops at its second refusal among thirty answers, where
// refusals came at 2.7% before, has seen them neither twice as often at
// its odds nor as often as before: the share it saw runs high because it
// stopped at a refusal. It goes on; once its time is up, the answers so
// far make "as often" the likelier, and the cut goes back as noise's.
// (Regression: its count, two where 1.6 were twice as often, took them
// for the pace's and cut again; and "as often" at once, before the
// answers after the refusal could say otherwise, took another client
// growing into the room a cut left for noise.)
func TestATrialStoppedAtARefusalGoesOn(t *testing.T) {
	ks := &keyState{pol: &policy{}}
	ks.lim = rate.NewLimiter(50, learnedBurst)
	ks.rarely().learn = learner{on: true, edge: true, mode: modeCruise, lo: 50, hi: 60, tested: 50, low: 50,
		test: 2 * time.Second, hold: probeHold, costs: true, step: probeFirst,
		cut: 850, since: 16800 * time.Millisecond, accepted: 150, cruiseN: 400, cruiseK: 11, peakAt: longAgo, noiseEnd: longAgo}
	l := ks.learning()
	now, at := time.Now(), 20*time.Second
	ks.admitted = 1000
	ks.relearn(now, at, 50, time.Second)
	require.NotZero(t, l.tri.adm, "the cut is tried")
	require.Equal(t, rate.Limit(50*cutShare), ks.lim.Limit())
	accept := func(n int, every time.Duration) {
		for range n {
			at += every
			ks.admitted++
			l.accept(&ticket{adm: ks.admitted})
			ks.climbLearned(now, at)
		}
	}
	accept(28, 100*time.Millisecond)
	ks.relearn(now, at, ks.lim.Limit(), time.Second)
	ks.relearn(now, at, ks.lim.Limit(), time.Second)
	require.Equal(t, int32(2), l.tri.k)
	require.LessOrEqual(t, l.tri.llr, -float64(learnOdds), "not fallen to a fifth, at its odds")
	assert.NotZero(t, l.tri.adm, "the trial goes on")
	assert.Equal(t, rate.Limit(50*cutShare), ks.lim.Limit(), "the cut holds while it does")
	accept(23, 50*time.Millisecond)
	require.NotZero(t, l.tri.adm, "the trial's time is not up")
	accept(1, 100*time.Millisecond) // past the trial's time and the cut's hold, 4 s
	assert.Zero(t, l.tri.adm, "told")
	assert.Positive(t, l.bg, "noise")
	assert.Equal(t, rate.Limit(50), ks.lim.Limit(), "the pace back")
}

// A refusal that comes soon after another (a "quick" one) cuts a learned
// pace by the share of the key's last 20 answers the server refused, not
// to the rate accepted since the refusal before, counted over the few
// answers that came back since (regression: behind 3% random 429s, nearly
// one refusal in two came within 20 answers of the one before, and each
// cut the pace by 15-50%).
func TestAQuickRefusalCutsByTheShareRefused(t *testing.T) {
	for _, c := range []struct {
		refused int     // of the last 20 answers, this one included
		want    float64 // the pace after, from 100
	}{{1, 95}, {2, 90}, {6, 70}, {15, 50}} {
		ks := &keyState{pol: &policy{}}
		ks.lim = rate.NewLimiter(100, learnedBurst)
		ks.rarely().learn = learner{on: true, edge: true, mode: modeCruise, lo: 100, hi: 120, tested: 100, low: 100,
			test: 2 * time.Second, hold: probeHold, step: probeFirst, peakAt: longAgo, noiseEnd: longAgo}
		l := ks.learning()
		at := 10 * time.Second
		for i := range 40 {
			ks.ev.record(i >= 40-c.refused)
		}
		// Three answers accepted in the 100 ms since the last refusal: 30
		// a second, had they been the measure.
		ks.admitted, l.cut, l.since, l.accepted = 1000, 990, at-100*time.Millisecond, 3
		ks.relearn(time.Now(), at, 100, time.Second)
		assert.InDelta(t, c.want, float64(ks.lim.Limit()), 1e-9, "%d of 20 refused", c.refused)
	}
}

// A pause in the quiet after a trial found noise, of a pace no faster than
// a sixteenth past where the noise was found, cuts nothing: three
// refusals in twenty come by chance (regression: it halved the pace, to
// the fastest that held a whole test unrefused, which under noise is one
// from long ago; a bucket of 100 a second behind 3% random 429s took 3.5x
// the ideal on average in the model, 2.6x without that cut).
func TestAPauseInTheQuietCutsNothing(t *testing.T) {
	ks := &keyState{pol: &policy{}}
	ks.lim = rate.NewLimiter(80, learnedBurst)
	at := 100 * time.Second
	ks.rarely().learn = learner{on: true, edge: true, held: true, mode: modeCruise, lo: 80, hi: 90, tested: 30, low: 80,
		test: 2 * time.Second, hold: probeHold, step: probeFirst, peakAt: longAgo,
		bg: 0.03, bgPace: 78, noiseEnd: at + 10*time.Second}
	ks.heldLearned(time.Now(), at)
	assert.Equal(t, rate.Limit(80), ks.lim.Limit(), "the pace stays")
	assert.Positive(t, ks.learning().bg, "the quiet goes on")
	ks.learning().noiseEnd, ks.learning().held = at, true // the quiet over: the pause is the quota's
	ks.heldLearned(time.Now(), at+time.Second)
	assert.Equal(t, rate.Limit(40), ks.lim.Limit(), "to the fastest that held a whole test, not below half")
}

// But a pause in the quiet whose refusals came as a run, three or more
// with none accepted among them, is the quota's, whatever the pace: a
// window or a log spent refuses everything until it gives back, where
// noise refuses three in a row about once in a thousand refusals at 3%
// (regression, TestLearnedModel over 48 seeds, a window of 100 a second
// behind 3% random 429s: a pace that paused the key at each reset sat
// over the window in the quiet, 32.0 429s of the quota a job; now 29.9).
// Not to a bucket, where such a run is a gateway's blip (rule 9; found in
// review, session 49: behind 3% random 429s and a 50 ms blip every 4 s,
// each blip ended the quiet and cut a bucket's pace to the fastest that
// held a test, 2.23x the ideal over 8 seeds where 2.16x was).
func TestARunOfRefusalsEndsTheQuiet(t *testing.T) {
	at := 100 * time.Second
	for _, c := range []struct {
		recent uint64 // the last answers, a bit each, set for a refusal (newest lowest)
		bucket bool   // the key's first pause ended at its first peek: a run is a gateway's blip (rule 9)
		quiet  bool
	}{
		{0b111, false, false},    // three in a row, the newest three
		{0b1111, false, false},   // four
		{0b10101, false, true},   // three of five, answers accepted among them
		{0b1100001, false, true}, // two in a row
		{0b1111, true, true},     // four to a bucket: a blip's
	} {
		ks := &keyState{pol: &policy{}}
		ks.lim = rate.NewLimiter(80, learnedBurst)
		ks.rarely().learn = learner{on: true, edge: true, held: true, mode: modeCruise, lo: 80, hi: 90, tested: 60, low: 80,
			test: 2 * time.Second, hold: probeHold, step: probeFirst, peakAt: longAgo,
			bg: 0.03, bgPace: 78, noiseEnd: at + 10*time.Second, gradual: c.bucket, bucket: c.bucket}
		ks.ev.recent[0] = c.recent
		ks.heldLearned(time.Now(), at)
		if c.quiet {
			assert.Equal(t, rate.Limit(80), ks.lim.Limit(), "%b: the pace stays", c.recent)
			assert.Positive(t, ks.learning().bg, "%b: the quiet goes on", c.recent)
		} else {
			assert.Equal(t, rate.Limit(60), ks.lim.Limit(), "%b: to the fastest that held a whole test", c.recent)
			assert.Zero(t, ks.learning().bg, "%b: the quiet is over", c.recent)
		}
	}
}

// A learned pace's trial that goes on past its odds (refusals neither as
// often as before nor twice as often yet) goes on counting: refusals at
// 10% after three in its first hundred answers, where 1% came before,
// are twice as often within a few, and cut. (Found in review: the counts
// stopped at the odds a configured trial ends at, e^3; the refusals after
// were judged on the first hundred answers, eleven swallowed over 11 s.)
// The cut tried is a probe's (the pace rose from 9.9 since its last cut):
// its hold, 200 answers' worth, is the trial's time.
func TestATrialCountsPastItsOdds(t *testing.T) {
	ks := &keyState{pol: &policy{}}
	ks.lim = rate.NewLimiter(10, learnedBurst)
	ks.rarely().learn = learner{on: true, edge: true, mode: modeCruise, lo: 10, hi: 12, tested: 10, low: 9.9,
		test: 2 * time.Second, hold: probeHold, costs: true, step: probeFirst,
		accepted: 150, since: 5 * time.Second, cruiseN: 1000, cruiseK: 11, peakAt: longAgo, noiseEnd: longAgo}
	l := ks.learning()
	now, at := time.Now(), 20*time.Second
	ks.admitted = 1000
	ks.relearn(now, at, 10, time.Second)
	require.NotZero(t, l.tri.adm, "the cut is tried")
	first := l.tri.adm
	accept := func(n int) {
		for range n {
			at += 100 * time.Millisecond
			ks.admitted++
			l.accept(&ticket{adm: ks.admitted})
			ks.climbLearned(now, at)
		}
	}
	refuse := func() {
		at += 100 * time.Millisecond
		ks.admitted++
		ks.relearn(now, at, ks.lim.Limit(), time.Second)
	}
	for _, n := range []int{5, 44, 48} {
		accept(n)
		refuse()
	}
	require.NotZero(t, l.tri.adm, "three in a hundred: the trial goes on")
	require.Less(t, l.tri.llr, -float64(trialOdds), "past the odds a configured trial ends at")
	cut := ks.lim.Limit()
	for range 3 {
		accept(9)
		refuse()
	}
	assert.NotEqual(t, first, l.tri.adm, "twice as often: told (and the next cut tried)")
	assert.Less(t, float64(ks.lim.Limit()), float64(cut), "and cut")
}

// A cruising pace's cut is tried (rule 7) once three refusals came among
// 50 answers or more, and, once refusals were found noise on the key, when
// the refusal came before 20 answers were accepted since the one before, if
// it cut as a lone refusal's does (5%): behind random 429s nearly one
// refusal in two comes that soon after another (at 3%, 1 - 0.97^20), and a
// key needed 100 answers first. Both cuts sank the pace untried
// (TestLearnedModel over 48 seeds, a bucket of 100 a second behind 3%
// random 429s: 2.24x the ideal, 2.09x since; 5%: 7.96x, 6.94x). Before any
// noise was found, a quick refusal is not tried: another client growing
// into the quota brings them (found in review 36: a late joiner's job
// 1.21x -> 1.25x the ideal, one seed 1.05x -> 1.59x).
func TestQuickAndEarlyCutsAreTried(t *testing.T) {
	for _, c := range []struct {
		name             string
		cruiseN, cruiseK int32
		accepted         int
		noiseAt          time.Duration
		tried            bool
	}{
		{"three refusals in 60 answers", 60, 3, 25, 0, true},
		{"a refusal 5 answers after the last, noise found", 300, 9, 5, time.Second, true},
		{"a refusal 5 answers after the last, no noise found", 300, 9, 5, 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ks := &keyState{pol: &policy{}}
			ks.lim = rate.NewLimiter(50, learnedBurst)
			ks.rarely().learn = learner{on: true, edge: true, mode: modeCruise, lo: 50, hi: 60, tested: 50, low: 50,
				test: 2 * time.Second, hold: probeHold, next: 10 * time.Second,
				since: 20*time.Second - time.Duration(c.accepted)*20*time.Millisecond, cut: uint64(1000 - c.accepted),
				accepted: c.accepted, cruiseN: c.cruiseN, cruiseK: c.cruiseK, peakAt: longAgo, noiseEnd: longAgo, noiseAt: c.noiseAt}
			l := ks.learning()
			ks.admitted = 1000
			ks.relearn(time.Now(), 20*time.Second, 50, time.Second)
			assert.InDelta(t, 48, float64(ks.lim.Limit()), 1, "cut as a collision's")
			assert.Equal(t, modeCruise, l.mode)
			assert.Equal(t, c.tried, l.tri.adm != 0, "the cut is tried")
		})
	}
}

// satAdd saturates a sum that would pass the longest Duration, and adds a
// negative one as it is (regression: maxRetryDuration-b overflowed for b <
// 0, and a sum came out as the end of time; TestLearnedModel's two
// transports on one bucket drew about a 429 more a job, 29.1 where 28.2
// were, until it was found).
func TestSatAdd(t *testing.T) {
	for _, tt := range []struct{ a, b, want time.Duration }{
		{5, 3, 8},
		{5, -3, 2},
		{maxRetryDuration - 1, 5, maxRetryDuration},
		{time.Hour, maxRetryDuration, maxRetryDuration},
		{-time.Second, time.Second, 0},
	} {
		if got := satAdd(tt.a, tt.b); got != tt.want {
			t.Errorf("satAdd(%v, %v) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}
