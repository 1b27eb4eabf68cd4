package throttle

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"golang.org/x/time/rate"
)

// A trial's test ends at its first bound: answers after it that the next
// refusal has not acted on yet change nothing (found in review: a trial
// told noise by three refusals read "helped" 939 accepted answers later,
// and its lower ceiling was proven).
func TestTrialVerdictIsFinal(t *testing.T) {
	tr := trial{adm: 1, base: 0.01}
	adm := uint64(2)
	for range 3 {
		tr.answered(adm, true, false)
		adm++
	}
	if tr.llr > -trialOdds {
		t.Fatalf("llr %.2f after 3 refusals: not noise", tr.llr)
	}
	told := tr.llr
	for range 5000 {
		tr.answered(adm, false, false)
		adm++
	}
	if tr.llr != told || tr.n != 3 {
		t.Errorf("after the verdict, 5,000 accepted answers moved the test: llr %.2f -> %.2f, %d answers counted", told, tr.llr, tr.n)
	}
}

// A ceiling rule 1 proved, from what the server took, is not given back
// by the check of a dense cut (rule 3) made before it (found in review, in
// TestConfiguredModel's jitter1 row: a cut from 90.25 a second, then rule
// 1 proving 41.3 and 36.0 a second, and the check, 200 answers on, put the
// ceiling back at 90.25).
func TestACheckOfADenseCutKeepsWhatRule1ProvedSince(t *testing.T) {
	ks := &keyState{pol: compile(Policy{Rate: 100, Burst: 10})}
	ks.lim = rate.NewLimiter(100, 10)
	a := &ks.troubled().adapt
	now, at := time.Now(), 10*time.Second
	// What rule 3 leaves at 10 s: the pace cut to 80, its ceiling to 95,
	// the cut checked from 100, refusals dense at 15%.
	ks.admitted = 1000
	ks.setPace(now, at, 80, 95)
	a.check = denseCheck{on: true, adm: ks.admitted, from: 100, share: 0.15}
	a.episodeAt, a.cutAdm = at, ks.admitted
	// 2 s on, the key sent 160 at its pace and the server took 90 of
	// them: 40 a second, less the Burst. The next refusal is rule 1's.
	at += 2 * time.Second
	ks.admitted += 160
	ks.ev.spanOK = 90
	ks.slow(ticket{adm: ks.admitted, cost: 1}, now.Add(2*time.Second), at, time.Second, false, false)
	assert.InDelta(t, 40, float64(a.ceil), 0.01, "rule 1 proved the ceiling at 40 a second")
	// The next 199 answers, one in ten refused: at or over the quota
	// the server proved, refusals come.
	for i := range 199 {
		ks.admitted++
		ks.checkDense(ks.admitted, i%10 == 0)
	}
	assert.False(t, a.check.on, "the check ended")
	assert.LessOrEqual(t, float64(a.ceil), 40.01, "the ceiling stays where rule 1 proved it")
}
