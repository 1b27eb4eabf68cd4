package throttle

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

// ruleOneRig is a configured key (Policy 100 a second, Burst 10) with
// 1,000 answers behind it, 31 of them refused at random (3%), 10 s from
// the epoch, and its answers given by hand.
type ruleOneRig struct {
	ks      *keyState
	a       *adaptation
	t0      time.Time
	at, at0 time.Duration
}

func newRuleOneRig() *ruleOneRig {
	ks := &keyState{pol: compile(Policy{Rate: 100, Burst: 10})}
	ks.lim = rate.NewLimiter(100, 10)
	r := &ruleOneRig{ks: ks, a: &ks.troubled().adapt, t0: time.Now(), at: 10 * time.Second, at0: 10 * time.Second}
	ks.ev.answers, ks.ev.refusals = 1000, 31
	r.a.episodeAt = r.at - 2*time.Second // the next refusal is sparse
	return r
}

func (r *ruleOneRig) refuse() {
	r.ks.admitted++
	r.ks.slow(ticket{adm: r.ks.admitted, cost: 1}, r.t0.Add(r.at-r.at0), r.at, time.Second, false, false)
}

func (r *ruleOneRig) accept() {
	ks := r.ks
	ks.admitted++
	ks.ev.spanOK++
	ks.ev.record(false)
	ks.checkDense(ks.admitted, false)
	r.a.trial.answered(ks.admitted, false, ks.atCeil())
	ks.judge(r.at)
}

// ruleOne has the key, 2 s on, send 200 and the server take 90 of them:
// the next refusal proves the ceiling at 40 a second (rule 1).
func (r *ruleOneRig) ruleOne(t *testing.T) {
	r.at += 2 * time.Second
	r.ks.admitted += 200
	r.ks.ev.spanOK += 90
	r.refuse()
	assert.InDelta(t, 40, float64(r.a.ceil), 0.01, "rule 1 proved the ceiling at 40 a second")
}

// noise gives 400 answers at 40 a second, one in 33 refused at random,
// and asserts the ceiling stays where rule 1 proved it.
func (r *ruleOneRig) noise(t *testing.T) {
	prev := r.a.ceil
	for i := 1; i <= 400; i++ {
		r.at += 25 * time.Millisecond
		if i%33 == 0 {
			r.refuse()
		} else {
			r.accept()
		}
		if r.a.ceil != prev {
			t.Logf("answer %d at %v: ceiling %.2f -> %.2f (trial on %v, from %.2f, chain from %.2f)", i, r.at, float64(prev), float64(r.a.ceil), r.a.trial.adm != 0, float64(r.a.trial.from), float64(r.a.trial.chainFrom))
			prev = r.a.ceil
		}
	}
	assert.LessOrEqual(t, float64(r.a.ceil), 40.01, "the ceiling stays where rule 1 proved it")
}

// A sparse trial on when rule 1 proves the ceiling lower, from what the
// server took, does not give back the ceiling it began from when it finds
// noise (found in review: a quota dropped to 40 under a Policy of 100, 3%
// random 429s, and 165 answers after rule 1 proved 40 the trial put 100
// back).
func TestATrialKeepsWhatRule1ProvedSince(t *testing.T) {
	r := newRuleOneRig()
	r.refuse() // a trial of 95 begins
	require.NotZero(t, r.a.trial.adm, "a trial began")
	assert.InDelta(t, 95, float64(r.a.ceil), 0.01)
	r.ruleOne(t)
	r.noise(t)
}

// Nor does a trial in a row with one that helped before rule 1 (a chain)
// give back the chain's start (found in review: the trial from 100 helped,
// rule 1 proved 40, the next sparse refusal tried 38 in a row with the
// first, and "none of the trials in a row helped" put back 100).
func TestAChainOfTrialsKeepsWhatRule1ProvedSince(t *testing.T) {
	r := newRuleOneRig()
	r.refuse()               // a trial of 95 begins
	for r.a.trial.adm != 0 { // it helps: no refusal for 2 s
		r.at += 10 * time.Millisecond
		r.accept()
	}
	assert.InDelta(t, 95, float64(r.a.ceil), 0.01, "the trial helped: 95 holds")
	r.ks.ev.restart(r.at, r.ks.admitted) // the quota falls from here
	r.ruleOne(t)
	r.noise(t)
}
