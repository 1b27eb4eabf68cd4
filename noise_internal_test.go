package throttle

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"
)

// binomNeed is the binomial distribution's count that refusals at random
// reach with a chance of 0.3% at most: exact to 1,000 answers (checked
// against the sums of the binomial's terms), its normal approximation
// over.
func TestBinomNeed(t *testing.T) {
	for _, c := range []struct {
		n    int
		b    float64
		want int
	}{
		{20, 0, 0}, {0, 0.01, 0},
		{20, 0.01, 3}, {100, 0.01, 6}, {20, 0.03, 4}, {100, 0.03, 10}, {1000, 0.03, 47},
	} {
		assert.Equal(t, c.want, binomNeed(c.n, c.b), "%d answers at %.2f", c.n, c.b)
	}
	assert.InDelta(t, 83, binomNeed(2000, 0.03), 2, "the normal approximation")
	mean, sd := 30_000.0, 170.6 // a key's answers over its life: 2.75 standard deviations over the mean
	assert.InDelta(t, mean+2.75*sd, binomNeed(1_000_000, 0.03), 3)
}

// Where trials found the server refusing a share of the requests at random,
// refusals are dense only when more than that share reaches by chance:
// three of the last 20 come in one job of 2,000 in three at one request in
// 33 (found in the synctest model: each such cluster cut a configured pace
// by a fifth and proved its ceiling lower, 2.7x the ideal on average).
func TestDenseIsCountedAboveTheNoiseFound(t *testing.T) {
	refused := func(last ...int) *evidence {
		e := &evidence{}
		for i := range 100 {
			e.record(slices.Contains(last, 99-i))
		}
		return e
	}
	_, dense := refused(0, 5, 10).dense()
	assert.True(t, dense, "3 of the last 20, no noise found: dense")

	e := refused(0, 5, 10)
	e.noiseN, e.noiseK = 1000, 30 // trials found one request in 33 refused at random
	_, dense = e.dense()
	assert.False(t, dense, "3 of the last 20 are what such noise makes")
	e = refused(0, 5, 10, 15)
	e.noiseN, e.noiseK = 1000, 30
	_, dense = e.dense()
	assert.True(t, dense, "4 of the last 20 are more")

	tr := trial{adm: 1, n: 40, k: 3}
	assert.True(t, tr.more(0), "3 of 40 in a trial, no noise found: the pace's")
	assert.False(t, tr.more(0.03), "3 of 40 at one in 33 refused at random")
	tr.k = 6
	assert.True(t, tr.more(0.03), "6 of 40")
}

// A dense cut of a configured pace whose refusals so far are no more than
// noise makes (one in 33, over a hundred answers or more) is tried: its
// ceiling goes back when refusals come as often after it. With refusals
// so far more frequent, it is proven, as before.
func TestDenseCutAtTheShareOfNoiseIsTried(t *testing.T) {
	epoch := time.Unix(1000, 0)
	setup := func(refusals int64) (*keyState, *adaptation, time.Time, time.Duration) {
		tr := &Transport{epoch: epoch}
		ks := tr.newKeyState(compile(Policy{Rate: 100, Burst: 5}), "k")
		a := &ks.troubled().adapt
		for i := range 500 {
			ks.ev.record(i == 490 || i == 495) // two of the last ten refused
		}
		ks.ev.refusals = refusals
		now := epoch.Add(time.Minute)
		at := tr.since(now)
		a.episodeAt = at - time.Second // recurring
		ks.admitted = 600
		return ks, a, now, at
	}

	ks, a, now, at := setup(8)
	ks.slow(ticket{adm: 600}, now, at, time.Second, false)
	require.NotZero(t, a.trial.adm, "tried")
	assert.Equal(t, rate.Limit(80), ks.lim.Limit(), "cut as dense")
	assert.Equal(t, rate.Limit(90), a.ceil, "to the share accepted of the last 20")
	assert.Equal(t, longAgo, a.provenAt, "not proven")
	a.trial.llr, a.trial.n, a.trial.k = -trialOdds-0.1, 300, 3 // as often as before: noise
	ks.slow(ticket{adm: 900}, now.Add(3*time.Second), at+3*time.Second, time.Second, false)
	assert.Equal(t, rate.Limit(100), a.ceil, "the ceiling back")
	assert.Equal(t, 3.0/400, ks.ev.noise(), "the noise found: 3 of 300, and 100 answers more")

	ks, a, now, at = setup(100) // a fifth refused so far
	ks.slow(ticket{adm: 600}, now, at, time.Second, false)
	assert.Zero(t, a.trial.adm, "not tried")
	assert.Equal(t, at, a.provenAt, "proven")
	assert.Equal(t, rate.Limit(90), a.ceil)
}
