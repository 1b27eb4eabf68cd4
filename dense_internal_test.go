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
// lately: three in twenty are the pace's doing to a key that was refused
// nothing before, and chance to one refused one request in 33 all along,
// where they come at one refusal in nine (found in review: each such
// cluster cut a configured pace by a fifth and proved its ceiling lower;
// one in 33 refused at random took a pace configured at the quota to
// 2-4x the ideal, where go-retryablehttp + x/time/rate took 1.05x).
func TestDenseIsRelativeToTheShareLately(t *testing.T) {
	cluster := func(e *evidence) {
		answers(e, 13, 0)
		for range 3 {
			e.record(true)
			answers(e, 1, 0)
		}
		e.record(true) // the fourth refusal, the one the key reacts to
	}

	// A key that answered 1,000 requests before its first trouble: they
	// count, accepted, in its share lately.
	quiet := &keyState{pol: &policy{}, admitted: 1000}
	quiet.troubled()
	cluster(&quiet.ev)
	_, dense := quiet.ev.dense()
	assert.True(t, dense, "three or more in twenty after none")

	noisy := &evidence{lately: latelyOver}
	answers(noisy, 2000, 33)
	cluster(noisy)
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

// A key refused more than a tenth of its requests is refused for its
// pace, whatever it was refused lately: the share lately counts as a
// twentieth at most (a Policy ten times the quota drew refusals at nine
// requests in ten, and, taken as the server's share, they never were
// dense).
func TestRefusalsOfMostRequestsAreDense(t *testing.T) {
	e := evidence{lately: 5}
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
	e := &evidence{lately: latelyOver}
	answers(e, 100, 1)
	answers(e, 400, 0)
	e.record(true)
	assert.False(t, e.often, "one refusal, 400 answers after the run")
}
