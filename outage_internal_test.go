package throttle

import (
	"math/bits"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A request counts one failure at a time in its key's record, unless
// others fail too and none is served (health.fail).
func TestHealthCountsARequestsFailuresOnce(t *testing.T) {
	at := time.Duration(0)
	tick := func() time.Duration { at += time.Millisecond; return at }
	failures := func(h *health) int { return bits.OnesCount32(h.failed) }

	// One request failing 8 times among good answers: one failure.
	var h health
	var a failMark
	for i := range 8 {
		h.record(tick(), true, false, &a)
		if i%2 == 0 {
			h.push(tick())
		}
	}
	assert.Equal(t, 1, failures(&h))
	assert.False(t, h.record(tick(), true, false, &a), "one broken item is no outage")

	// Alone, it still counts one, its replaced failures aging the record.
	h, a = health{}, failMark{}
	for range 8 {
		assert.False(t, h.record(tick(), true, false, &a))
	}
	assert.Equal(t, 1, failures(&h))

	// Two requests failing in turn, none served: each failure counts.
	h = health{}
	var b failMark
	var outage bool
	for i := range 5 {
		m := &a
		if i%2 == 1 {
			m = &b
		}
		outage = h.record(tick(), true, false, m)
	}
	assert.True(t, outage, "5 of 5 failed, two requests in turn")

	// Two failing in turn with answers served between: one each.
	h, a, b = health{}, failMark{}, failMark{}
	for i := range 10 {
		m := &a
		if i%2 == 1 {
			m = &b
		}
		h.record(tick(), true, false, m)
		h.push(tick())
	}
	assert.Equal(t, 2, failures(&h))

	// A failure forgotten (the record began afresh) is not replaced.
	h, a = health{}, failMark{}
	h.record(tick(), true, false, &a)
	h.recovered()
	h.record(tick(), true, false, &a)
	assert.Equal(t, 1, failures(&h))
	assert.Zero(t, h.gone)
}

// The outage's own backoff holds only once none of the last 20 answers was
// served: InitialDelay, doubled at each failed probe since, up to the most,
// with full jitter. Before that (a server failing half its answers at
// random) the failed request's backoff alone spaces the probes.
func TestOutageFloorWaitsUntilNothingIsServed(t *testing.T) {
	const initial, most = 250 * time.Millisecond, 30 * time.Second
	at := time.Duration(0)
	tick := func() time.Duration { at += time.Millisecond; return at }
	var h health
	for i := range 40 {
		var own failMark // a new request each time: every failure counts
		h.record(tick(), i%2 == 0, false, &own)
	}
	h.outage = true
	for range 10 {
		assert.Zero(t, h.outageFloor(true, initial, most), "half served")
	}
	for range outageAnswers - 1 {
		var own failMark
		h.record(tick(), true, false, &own)
		assert.Zero(t, h.outageFloor(true, initial, most), "one of the last 20 served")
	}
	assert.Zero(t, h.grown)
	var own failMark
	h.record(tick(), true, false, &own)
	for k := 1; k <= 10; k++ {
		var longest time.Duration
		for range 200 {
			g := h.grown
			longest = max(longest, h.outageFloor(false, initial, most))
			assert.Equal(t, g, h.grown, "only a failed probe grows it")
		}
		want := min(initial<<(k-1), most)
		assert.LessOrEqual(t, longest, want)
		assert.Greater(t, longest, want/2)
		h.outageFloor(true, initial, most)
	}
	h.recovered()
	assert.Zero(t, h.grown)
}
