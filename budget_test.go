package throttle

import (
	"testing"
	"time"
)

// The retry budget slides over a minute in buckets of ten seconds: counts
// older than six buckets are forgotten, whatever the gap between calls.
func TestBudgetSlidesOverAMinute(t *testing.T) {
	t0 := 100 * budgetSpan // from the epoch, at the start of a bucket
	steps := []struct {
		name  string
		at    time.Duration // from t0
		first int           // first attempts counted at at, before spending
		want  bool          // spend(ratio 0.5, floor 1)
	}{
		{"floor", 0, 0, true},
		{"floor spent", time.Second, 0, false},
		{"two firsts buy one", 2 * time.Second, 2, true},
		{"and no more", 3 * time.Second, 0, false},
		{"all still counted at 59s", 59 * time.Second, 0, false},
		{"the first bucket forgotten at 60s", 60 * time.Second, 0, true},
		{"a long gap forgets everything", time.Hour, 0, true},
		{"an earlier time (never: the clock is monotonic) counts in the latest", time.Hour - time.Minute, 0, false},
	}
	var b budget
	for _, s := range steps {
		now := t0 + s.at
		for range s.first {
			b.first(now)
		}
		if got := b.spend(now, 0.5, 1); got != s.want {
			t.Errorf("%s: spend = %v, want %v", s.name, got, s.want)
		}
	}
}
