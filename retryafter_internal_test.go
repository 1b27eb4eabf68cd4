package throttle

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A Retry-After in whole seconds, delay-seconds or an HTTP-date, may mean a
// wait that ends up to a second sooner (learn.go peeks into that second);
// decimal seconds are exact to the millisecond.
func TestRetryAfterSaysWhetherItIsWholeSeconds(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 300e6, time.UTC)
	tests := []struct {
		value string
		wait  time.Duration
		whole bool
	}{
		{"1", time.Second, true},
		{" 120 ", 2 * time.Minute, true},
		{"1.0", time.Second, false},
		{"0.25", 250 * time.Millisecond, false},
		{"Wed, 02 Dec 2026 10:00:01 GMT", 700 * time.Millisecond, true},
		{"Wednesday, 02-Dec-26 10:00:01 GMT", 700 * time.Millisecond, true},
	}
	for _, tt := range tests {
		d, whole, ok := parseRetryAfter(tt.value, now)
		assert.True(t, ok, tt.value)
		assert.Equal(t, tt.wait, d, tt.value)
		assert.Equal(t, tt.whole, whole, tt.value)
		pd, pok := ParseRetryAfter(tt.value, now)
		assert.Equal(t, d, pd, "ParseRetryAfter agrees: %s", tt.value)
		assert.Equal(t, ok, pok, tt.value)
	}
	for _, bad := range []string{"", "-1", "1s", "soon"} {
		d, whole, ok := parseRetryAfter(bad, now)
		assert.False(t, ok || whole, bad)
		assert.Zero(t, d, bad)
	}
}
