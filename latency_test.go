package throttle

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLatencyReserve(t *testing.T) {
	steady := latency{}
	for range 10 {
		steady.observe(20 * time.Millisecond)
	}
	jittery := latency{}
	for i := range 40 {
		jittery.observe(time.Duration(i%5) * 5 * time.Millisecond) // 0-20ms
	}
	tests := []struct {
		name  string
		l     latency
		rate  float64
		burst int
		want  int
	}{
		{"unknown yet: one token", latency{}, 100, 5, 1},
		{"steady round trips: one token", steady, 100, 5, 1},
		{"jitter adds what the rate admits within it", jittery, 100, 10, 1 + 3},
		{"at most burst-2: depth 2 carries late wake-ups over", jittery, 1000, 10, 8},
		{"burst 2: one", jittery, 1000, 2, 1},
		{"burst 1: none", jittery, 1000, 1, 0},
		{"a huge rate saturates", jittery, 1e308, 10, 8},
	}
	for _, tt := range tests {
		if got := tt.l.reserve(tt.rate, tt.burst); got != tt.want {
			t.Errorf("%s: reserve(%v, %d) = %d, want %d (jitter %v)", tt.name, tt.rate, tt.burst, got, tt.want, tt.l.jitter())
		}
	}
}

func TestLatencyProbeWait(t *testing.T) {
	fast, slow, varied := latency{}, latency{}, latency{}
	for range 20 {
		fast.observe(time.Millisecond)
		slow.observe(time.Minute)
	}
	for i := range 40 {
		varied.observe(time.Duration(1+i%2*2) * time.Second) // 1s, 3s
	}
	tests := []struct {
		name string
		l    latency
		want func(time.Duration) bool
	}{
		{"unknown: 1s", latency{}, func(d time.Duration) bool { return d == time.Second }},
		{"fast: at least 1s", fast, func(d time.Duration) bool { return d == time.Second }},
		{"slow: at most 10s", slow, func(d time.Duration) bool { return d == 10*time.Second }},
		{"varied: srtt+4rttvar", varied, func(d time.Duration) bool { return d > 3*time.Second && d < 10*time.Second }},
	}
	for _, tt := range tests {
		if got := tt.l.probeWait(); !tt.want(got) {
			t.Errorf("%s: probeWait() = %v", tt.name, got)
		}
	}
}

// The reserve fits the int32 the key keeps it in, whatever the Burst and
// the jitter (regression, found in review: a Burst past 2^31 and a jitter
// worth as many tokens wrapped it negative).
func TestReserveFitsItsKeep(t *testing.T) {
	var l latency
	for _, rtt := range []time.Duration{time.Millisecond, time.Second, time.Millisecond} {
		l.observe(rtt)
	}
	require.Positive(t, l.jitter())
	got := l.reserve(1e15, 1<<40)
	assert.Equal(t, math.MaxInt32, got)
	assert.Positive(t, int32(got))
}

// One round trip far longer than the rest (the server's work, not the
// way there) moves the jitter by a round trip at most; round trips that
// stay long are followed within a few dozen answers.
func TestLatencyOutlierIsClippedButALastingChangeFollowed(t *testing.T) {
	l := latency{}
	for range 10 {
		l.observe(20 * time.Millisecond)
	}
	l.observe(10 * time.Second)
	if j := l.jitter(); j > 20*time.Millisecond {
		t.Errorf("one answer of 10 s among 20 ms ones: jitter %v, want 20ms at most", j)
	}
	for range 40 {
		l.observe(200 * time.Millisecond)
	}
	if l.srtt < 180*time.Millisecond || l.srtt > 220*time.Millisecond {
		t.Errorf("40 answers of 200 ms: srtt %v, want about 200ms", l.srtt)
	}
}
