package throttle

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

// cruising returns a key cruising at a learned pace of 100 a second whose
// next probe rises by step, the slowest pace refused hi, its time come.
func cruising(hi rate.Limit, step float64) (*keyState, time.Duration) {
	ks := &keyState{pol: &policy{}}
	ks.lim = rate.NewLimiter(100, learnedBurst)
	ks.rarely().learn = learner{on: true, edge: true, mode: modeCruise, step: step,
		lo: 100, hi: hi, tested: 100, low: 100, test: 2 * time.Second, hold: probeHold,
		peakAt: longAgo, noiseEnd: longAgo}
	l := ks.learning()
	at := l.test
	ks.admitted = uint64(100 * l.test.Seconds())
	ks.waiting = 1
	l.lastOK = at - time.Millisecond
	return ks, at
}

// A probe more than a sixteenth below the slowest pace refused goes no more
// than halfway to it (geometrically), whatever its step: the quota lies
// between what held and what was refused (regression: a window of 100 a
// second, cut to 92 by a cycle's count, probed 98, then 110 as the probe
// before had, refused there every 5 s, three 429s and a pause each time).
// Within a sixteenth, the step is the step.
func TestProbesGoHalfwayToTheLastRefusal(t *testing.T) {
	ks, at := cruising(110, 0.125)
	ks.climbLearned(time.Now(), at)
	assert.InDelta(t, math.Sqrt(100*110), float64(ks.lim.Limit()), 0.01, "halfway to 110, not 112.5")

	ks, at = cruising(110, 0.02)
	ks.climbLearned(time.Now(), at)
	assert.InDelta(t, 102, float64(ks.lim.Limit()), 0.01, "a step short of halfway is the step")

	ks, at = cruising(105, 0.04)
	ks.climbLearned(time.Now(), at)
	assert.InDelta(t, 104, float64(ks.lim.Limit()), 0.01, "within a sixteenth: the step")
}

// A probe's step that went only halfway to the slowest pace refused, short
// of its own, falls back, refused, to 0.95 of the step below, as a big step
// does, not to where the probes began: the steps below it held their tests
// (found in review 37: a window's pace probed 75, 92, 101.5, was refused at
// 101.5, went back to 56 and held 16 s).
func TestRefusedHalfwayProbeFallsBackToTheStepBelow(t *testing.T) {
	ks, at := cruising(112, 0.25)
	l := ks.learning()
	ks.lim.SetLimit(92)
	l.lo, l.low = 92, 56
	ks.climbLearned(time.Now(), at)
	p := ks.lim.Limit()
	assert.InDelta(t, math.Sqrt(92*112), float64(p), 0.01, "halfway")
	// Counted since a resume, not a refusal: no rate measured bounds the
	// fallback (see measured).
	l.edge, l.cut, l.accepted = false, ks.admitted-2*minCount, 2*minCount
	ks.relearn(time.Now(), at, p, time.Second)
	assert.InDelta(t, 92*cutShare, float64(ks.lim.Limit()), 0.01, "0.95 of the step below, not 56")
}

// A cut pace holds 200 answers' worth of itself before it probes when the
// refusal was a probe's (the pace had risen since its last cut). A refusal
// of a pace that had not risen cost no probe: the probes wait their 2
// quiet seconds again, but the hold that the last probe's refusal set is
// neither begun again nor cut short. Begun again at each refusal, behind
// random 429s, it rarely ended, and a pace that had sunk sat there
// (TestFiveRandomRefusalsInAHundredAreTried); cut to 2 s before any noise
// was found, the refusals of another client's probes made a transport
// probe again 2 s later (found in review 38: two transports on a bucket
// of 10 a second drew 48-52 429s a run where 37-40 were). A refusal that
// comes once the hold is over still lets the probes go 2 s later: the
// trade is deliberate, those two transports draw 37 where 36 were (review
// 39), and behind random 429s a sunk pace probes again. A count begun at a
// resume (a pause's, or the first guess's) is not a cut's: its refusal
// holds as a probe's (found in review 39: a late joiner on a window of 20
// a second, whose first guess cruises, took 1.21x the ideal, now 1.16x).
func TestOnlyAProbesRefusalHoldsTheProbesLong(t *testing.T) {
	long := holdCount * time.Second / 10 // 200 answers' worth of 10 a second, the pace that held a whole test before the refusal (its peak)
	for _, tt := range []struct {
		name    string
		low     rate.Limit    // the pace at the last cut
		noise   time.Duration // refusals were found noise then (0: never)
		pending time.Duration // the probes' hold ends this long after the refusal (negative: it ended)
		hold    time.Duration // and then this long after it
		resumed bool          // the count began at a resume, not a cut
	}{
		{"not risen, the hold over", 10, 0, -time.Second, probeHold, false},
		{"not risen, a hold pending", 10, 0, 15 * time.Second, 15 * time.Second, false},
		{"not risen, a hold nearly over", 10, 0, time.Second, probeHold, false},
		{"not risen, noise found", 10, time.Second, -time.Second, probeHold, false},
		{"not risen, noise found, a hold pending", 10, time.Second, 15 * time.Second, 15 * time.Second, false},
		{"a probe's", 9.5, time.Second, -time.Second, long, false},
		{"a probe's, a hold pending", 9.5, 0, 15 * time.Second, long, false},
		{"not risen since a resume", 10, 0, -time.Second, long, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ks := &keyState{pol: &policy{}}
			ks.lim = rate.NewLimiter(10, learnedBurst)
			at := time.Minute
			ks.rarely().learn = learner{on: true, edge: !tt.resumed, mode: modeCruise, step: probeFirst,
				lo: 10, hi: 20, tested: 10, low: tt.low, test: 2 * time.Second, hold: probeHold,
				peakAt: longAgo, noiseEnd: longAgo, noiseAt: tt.noise, next: at + tt.pending}
			l := ks.learning()
			// 40 answers accepted since the last cut, over 4 s.
			ks.admitted = 1000
			l.cut, l.since, l.accepted = ks.admitted-40, at-4*time.Second, 40
			ks.relearn(time.Now(), at, 10, time.Second)
			assert.Equal(t, modeCruise, l.mode)
			p := ks.lim.Limit()
			if tt.resumed {
				assert.InDelta(t, 10*cutShare, float64(p), 0.01, "cut to 0.95: counted from a resume, no rate measured")
			} else {
				assert.InDelta(t, 9.7, float64(p), 0.01, "cut to 0.97 of the rate the server took")
			}
			assert.Equal(t, at+tt.hold, l.next, "the probes wait")
		})
	}
}

// The first resume of a learned key gives its pacer one token when the
// server took one request before its first refusal (a bucket one deep, as
// far as the key can tell: a second token sends two requests a round trip
// apart, and the second is refused), and two otherwise (a waiter woken late
// keeps the time it lost; TestFewWorkersOnABucketOfOne shows the first).
func TestAServerThatTookOneGivesOneToken(t *testing.T) {
	for _, tt := range []struct {
		took, tokens int
	}{{1, 1}, {2, learnedBurst}, {5, learnedBurst}} {
		t.Run(fmt.Sprint("took", tt.took), func(t *testing.T) {
			ks := &keyState{pol: &policy{}}
			ks.lim = rate.NewLimiter(10, learnedBurst)
			at := time.Second
			ks.rarely().learn = learner{on: true, first: true, mode: modeGrow, lo: 10, hi: fastestRate,
				tested: 10, low: 10, test: 2 * time.Second, hold: probeHold, from: 0, firstN: tt.took,
				peakAt: longAgo, noiseEnd: longAgo}
			ks.resumeLearned(time.Now(), at)
			assert.Equal(t, tt.tokens, ks.lim.Burst())
		})
	}
}

// A learned pace that grows (rule 2) in the quiet after a trial found
// noise (rule 7), past a window's quota: its first refusal is swallowed by
// the quiet, those after it are the same news (nothing accepted since), and
// they pause the key. The pause ends the quiet (the pace rose past where
// the noise was found) and takes the pace back to what held, but the pace
// that paused the key is nowhere recorded as refused: the growth goes on
// from there, doubling every 150 ms back to the pace that paused the key
// (regression, found in review: 1548 a second within 3 s of the resume,
// where 200 paused it).
func TestAGrowthThatPausedTheKeyIsRefused(t *testing.T) {
	now := time.Now()
	at := 100 * time.Second
	ks := &keyState{pol: &policy{}}
	ks.lim = rate.NewLimiter(200, learnedBurst)
	ks.rarely().learn = learner{on: true, edge: true, mode: modeGrow, lo: 100, hi: fastestRate, tested: 50, low: 50,
		test: 2 * time.Second, hold: probeHold, step: probeFirst, peakAt: longAgo, next: at,
		reachAt: at - time.Second, lastOK: at - time.Millisecond, runFrom: at - 30*time.Second, run: 1500,
		bg: 0.03, bgPace: 50, noiseAt: at - 10*time.Second, noiseEnd: at + 20*time.Second}
	l := ks.learning()
	ks.admitted, ks.refs = 1000, 16

	ks.relearn(now, at, 200, time.Second) // swallowed by the quiet
	require.Equal(t, rate.Limit(200), ks.lim.Limit())
	ks.relearn(now, at+time.Millisecond, 200, time.Second) // nothing accepted since: the same news
	require.True(t, l.held)
	ks.heldLearned(now, at+2*time.Millisecond) // refusals that keep coming pause the key (rule 4)
	require.Zero(t, l.bg, "the quiet is over: the refusals are the pace's")
	require.Equal(t, rate.Limit(50), ks.lim.Limit(), "back to the fastest that held a whole test")

	// The key resumes a second later, and sends at its pace.
	ks.resumeLearned(now, at+time.Second)
	fastest := ks.lim.Limit()
	for i := range 20 {
		ks.waiting = 8
		ks.admitted += 100
		ks.climbLearned(now, at+time.Second+time.Duration(i+1)*growEvery)
		fastest = max(fastest, ks.lim.Limit())
	}
	t.Logf("mode %d, slowest refused %.1f, fastest pace in the 3 s after the resume %.1f", l.mode, float64(l.hi), float64(fastest))
	assert.Less(t, float64(fastest), 200.0, "the pace that paused the key is not reached again within 3 s")
	assert.LessOrEqual(t, float64(l.hi), 200.0, "the pace that paused the key was refused")
}
