package throttle

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// answers records n answers into e, every nth of them refused (none for
// nth 0).
func answers(e *evidence, n, nth int) {
	for i := 1; i <= n; i++ {
		e.record(nth > 0 && i%nth == 0)
	}
}

// Refusals are dense only when they come more often than the key's share
// lately: three and more in twenty are the pace's doing to a key shown no
// noise, and chance to one whose trials showed one request in 33 refused
// all along, where they come at one refusal in nine (found in review:
// each such cluster cut a configured pace by a fifth and proved its
// ceiling lower; one in 33 refused at random took a pace configured at the
// quota to 2-4x the ideal, where go-retryablehttp + x/time/rate took
// 1.05x).
func TestDenseIsRelativeToTheShareLately(t *testing.T) {
	quiet := &keyState{pol: &policy{}}
	quiet.troubled() // the prior: one refusal in 50
	answers(&quiet.ev, 100, 5)
	_, dense := quiet.ev.dense()
	assert.True(t, dense, "one in five, where one in 50 is the prior")

	noisy := &evidence{}
	noisy.begin()
	noisy.shown(2000, 2000/33)
	answers(noisy, 13, 0)
	for range 3 {
		noisy.record(true)
		answers(noisy, 1, 0)
	}
	noisy.record(true) // the fourth refusal, the one the key reacts to
	_, dense = noisy.dense()
	assert.False(t, dense, "four in twenty, where one in 33 came all along")

	answers(noisy, 150, 8) // a share four times as high, and the last refused
	_, dense = noisy.dense()
	assert.True(t, dense, "refusals four times as often as lately")

	// A cut starts the count again: the same news does not cut twice.
	noisy.cut()
	answers(noisy, 17, 0)
	for range 3 {
		noisy.record(true)
	}
	_, dense = noisy.dense()
	assert.False(t, dense, "three in twenty after the cut, where one in eight came lately")
}

// The share lately counts only answers shown to be noise: a pace's own
// refusals, steady while it is over the quota, are not in the share they
// are judged against (found in review: counted over every answer, they
// were, and a configured pace under a quota stepping down, two clients on
// one quota, or the network's jitter drew up to twice the 429s before a
// cut).
func TestShareLatelyCountsOnlyNoise(t *testing.T) {
	e := &evidence{}
	e.begin()
	answers(e, 1000, 10)
	assert.InDelta(t, latelyPrior, e.noisy(), 1e-9, "a thousand answers, none shown to be noise")
	_, dense := e.dense()
	assert.True(t, dense, "one in ten, steady")

	e.shown(latelyOver, latelyOver/10)
	assert.InDelta(t, 0.1, e.noisy(), 0.001, "latelyOver answers shown replace what was counted")
	e.shown(latelyOver/2, 0)
	assert.InDelta(t, 0.05, e.noisy(), 0.001, "half as many at none: the older weigh half")
}

// A key refused more than a tenth of its requests is refused for its
// pace, whatever it was shown refused lately: the share lately counts as
// a twentieth at most (a Policy ten times the quota drew refusals at nine
// requests in ten, and, taken as the server's share, they never were
// dense).
func TestRefusalsOfMostRequestsAreDense(t *testing.T) {
	e := evidence{}
	e.begin()
	e.shown(latelyOver, latelyOver/5)
	answers(&e, 200, 2)
	_, dense := e.dense()
	assert.True(t, dense)
}

// The CUSUM test weighs what came a moment ago, not ever: a long run of
// refusals (a pause's worth, an outage of 429s) leaves it at most twice
// its bound, and the answers accepted after it bring it back (a review
// found it unbounded: a hundred refusals in a row, where no cut reset
// it, kept every refusal for thousands of answers dense).
func TestDenseForgetsALongRunOfRefusals(t *testing.T) {
	e := &evidence{}
	e.begin()
	answers(e, 100, 1)
	answers(e, 400, 0)
	e.record(true)
	assert.False(t, e.often, "one refusal, 400 answers after the run")
}

// Refusals with no answer accepted between them are one run, across the
// two words of the recent answers too.
func TestRunsCountRefusalsTogetherAsOne(t *testing.T) {
	e := &evidence{}
	e.begin()
	for range 3 {
		e.record(true) // answers 66 to 64 back: bits 65, 64 and 63
	}
	answers(e, 62, 0)
	e.record(true) // the newest
	assert.Equal(t, 2, e.runs(128))
	assert.Equal(t, 2, e.runs(64), "bit 63 begins a run within 64")
	assert.Equal(t, 1, e.runs(63))
	answers(e, 1, 0)
	e.record(true)
	e.record(true)
	assert.Equal(t, 3, e.runs(128), "two more in a row are one run more")
}
