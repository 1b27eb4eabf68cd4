package throttle

import (
	"net/http"
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
		// Merged: the longest wait's, and of equal ones the exact.
		{"2, 1.0", 2 * time.Second, true},
		{"1.5, 1", 1500 * time.Millisecond, false},
		{"1, 1.0", time.Second, false},
		{"0.5, Wed, 02 Dec 2026 10:00:01 GMT", 700 * time.Millisecond, true},
	}
	for _, tt := range tests {
		d, whole, ok := parseRetryAfter(tt.value, &instant{now: now})
		assert.True(t, ok, tt.value)
		assert.Equal(t, tt.wait, d, tt.value)
		assert.Equal(t, tt.whole, whole, tt.value)
		pd, pok := ParseRetryAfter(tt.value, now)
		assert.Equal(t, d, pd, "ParseRetryAfter agrees: %s", tt.value)
		assert.Equal(t, ok, pok, tt.value)
	}
	for _, bad := range []string{"", "-1", "1s", "soon"} {
		d, whole, ok := parseRetryAfter(bad, &instant{now: now})
		assert.False(t, ok || whole, bad)
		assert.Zero(t, d, bad)
	}
}

// The server's clock is read from an answer's Date only when it differs
// from the client's by more than the second Date truncates and the way
// back; never from a cached answer's (Age) nor from a Date over an hour off.
func TestServerClockFromDate(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 300e6, time.UTC)
	rtt := 200 * time.Millisecond
	tests := []struct {
		name string
		date time.Time // zero: none
		age  bool
		want time.Time
	}{
		{"none", time.Time{}, false, now},
		{"same second", now.Truncate(time.Second), false, now},
		{"the second before, a slow way back", now.Add(-1200 * time.Millisecond).Truncate(time.Second), false, now},
		{"3 s behind", now.Add(-3 * time.Second).Truncate(time.Second), false, now.Add(-3 * time.Second).Truncate(time.Second)},
		{"3 s ahead", now.Add(3 * time.Second).Truncate(time.Second), false, now.Add(3 * time.Second).Truncate(time.Second)},
		{"3 s ahead, cached", now.Add(3 * time.Second).Truncate(time.Second), true, now},
		{"two days behind", now.Add(-48 * time.Hour).Truncate(time.Second), false, now},
	}
	for _, tt := range tests {
		h := http.Header{}
		if !tt.date.IsZero() {
			h.Set("Date", tt.date.Format(http.TimeFormat))
		}
		if tt.age {
			h.Set("Age", "30")
		}
		c := &instant{now: now, h: h, rtt: rtt}
		assert.True(t, tt.want.Equal(c.server()), "%s: %v", tt.name, c.server())
		assert.True(t, tt.want.Equal(c.server()), "%s: read once, the same", tt.name)
	}
	h := http.Header{"Date": {now.Add(-3 * time.Second).Format(http.TimeFormat)}}
	d, whole, ok := parseRetryAfter(now.Add(2*time.Second).Format(http.TimeFormat), &instant{now: now, h: h})
	assert.True(t, ok && whole)
	assert.Equal(t, 5*time.Second, d, "5 s by the server's clock, whose Date says 3 s behind (its fraction left out)")
}
