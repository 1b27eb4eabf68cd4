package throttle

import (
	"math"
	"testing"
	"time"
)

// The mirror's own count of a log of recent requests holds what the
// server's figures say our requests cost, not what they were charged.
func TestMirrorRecountsByTheFigure(t *testing.T) {
	m := told{limit: 100, period: time.Second}
	m.took(time.Second, 0, 5)
	m.took(2*time.Second, 5, 2)
	m.recount(time.Second, 5, 1)   // charged 5, cost 1
	m.recount(2*time.Second, 2, 4) // charged 2, cost 4
	m.recount(3*time.Second, 1, 3) // never kept: nothing to correct
	for _, c := range []struct {
		from, to time.Duration
		want     int
	}{{0, time.Second, 1}, {time.Second, 2 * time.Second, 4}, {2 * time.Second, 3 * time.Second, 0}} {
		if got := m.sentBetween(c.from, c.to); got != c.want {
			t.Errorf("sent in (%v, %v]: %d, want %d", c.from, c.to, got, c.want)
		}
	}
}

// Regression: the mirror's wait for a bucket saturates. Two attempts of a
// billion units on their way, at a measured refill of one unit per 20 s,
// once made a wait past time.Duration's range: negative, and the next
// request went at once.
func TestMirrorWaitSaturates(t *testing.T) {
	m := told{on: true, kind: kindBucket, rate: 0.05, limit: 10, depth: 10, level: 10, levelAt: time.Second}
	now := 2 * time.Second
	m.took(now, 0, maxCost)
	m.took(now, maxCost, maxCost)
	got := m.lowerBound(now, 2*maxCost, 2*maxCost, 0, 1)
	if got == holdsForAnswer || got < now+200*365*24*time.Hour {
		t.Errorf("lowerBound = %v, want a wait of centuries (saturated), not %v", got, time.Duration(math.MaxInt64))
	}
}
