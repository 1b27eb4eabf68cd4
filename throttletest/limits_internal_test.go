package throttletest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestSlidingCounterCountsPastSixtyFourBits: the estimate is decided in
// 128-bit products, which a count of 10^7 over a day (8.64·10^20 ns·requests)
// needs. Halfway into the window after a full one, the estimate is exactly
// half, so half remain, and the next request must wait for the estimate to
// fall by one: per/N later, 8.64 ms.
func TestSlidingCounterCountsPastSixtyFourBits(t *testing.T) {
	const n, per = 10_000_000, 24 * time.Hour
	s := &slidingCounter{n: n, per: per}
	start := time.Date(2000, 1, 2, 0, 0, 0, 0, time.UTC)
	s.roll(start)
	s.prev, s.curr = 0, n
	half := start.Add(per + per/2)
	q, _ := s.quota(half)
	assert.Equal(t, n/2, q.remaining)
	s.curr = n / 2
	ok, wait := s.check(half)
	assert.False(t, ok)
	assert.Equal(t, per/n, wait)
	ok, _ = s.check(half.Add(per / n))
	assert.True(t, ok)
}
