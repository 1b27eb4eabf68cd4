package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The summary splits the time waited by what was waited for, from the
// transport's own EventWaited: the parts add up to the total its Stats
// count.
func TestSummarySaysWhatWasWaitedFor(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		waits []string // the limits waited for
		maybe string   // and one that may be
	}{
		{"within the quota: the rate alone", []string{"-n", "200"}, []string{"rate"}, ""},
		// The first 429s are collisions, which cut the pace; the key
		// pauses only once they dominate its recent answers.
		{"above it: 429s cut the pace, and may pause the key", []string{"-n", "200", "-rate", "200", "-burst", "20"}, []string{"rate"}, "pause"},
		{"a queue", []string{"-n", "200", "-queue", "50"}, []string{"queue"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, s, _ := runApp(t, "", tc.args...)
			require.Equal(t, 0, code)
			var limits []string
			sum := 0.0
			for l, secs := range s.WaitByLimit {
				sum += secs
				if l == tc.maybe {
					continue
				}
				assert.Positive(t, secs, l)
				limits = append(limits, l)
			}
			assert.ElementsMatch(t, tc.waits, limits)
			assert.InDelta(t, s.WaitSecs, sum, 1e-6, "the parts add up to the whole")
		})
	}
}

func TestNothingWaitedSaysNothing(t *testing.T) {
	code, s, _ := runApp(t, "", "-n", "5")
	require.Equal(t, 0, code)
	assert.Nil(t, s.WaitByLimit, "a burst of 10 sends 5 at once")
	var out bytes.Buffer
	s.print(&out, false)
	assert.NotContains(t, out.String(), "waited")
}

func TestWaitedLine(t *testing.T) {
	tests := []struct {
		secs map[string]float64
		want string
	}{
		{map[string]float64{"rate": 12.3}, "12.30s for the rate"},
		{map[string]float64{"pause": 4, "rate": 12.3, "window": 0.5}, "12.30s for the rate, 4.00s for the pause, 0.50s for the window"},
		{map[string]float64{"queue": 1, "line": 1}, "1.00s for the line, 1.00s for the queue"},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, byLimit(tc.secs))
		var out bytes.Buffer
		(&summary{WaitByLimit: tc.secs}).print(&out, false)
		assert.Contains(t, out.String(), "  waited          "+tc.want+"\n")
	}
}

// A run that uploaded nothing claims neither a ratio to the ideal nor that
// nothing was wasted (found in review: -n 0 said both).
func TestNothingUploadedClaimsNothing(t *testing.T) {
	code, s, _ := runApp(t, "", "-n", "0")
	require.Equal(t, 0, code)
	var out bytes.Buffer
	s.print(&out, false)
	assert.NotContains(t, out.String(), "nothing wasted")
	assert.NotContains(t, out.String(), "ideal for the quota")
	assert.Contains(t, out.String(), "0 uploaded")
}
