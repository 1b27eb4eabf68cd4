package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/throttlehttp/throttle/throttletest"
)

// TestBestPeerIsAPeer: the quiet targets compare row 1 with the
// best of the peers, rows 4-6 (README, "Targets"). Run with -rows 8,9,1,6
// (as the README suggests for rows 8 and 9), row 8 is throttle itself at
// ten times the quota; it must not stand as the "best peer" (found in
// review: it did, and row 1 was marked FAIL against it).
func TestBestPeerIsAPeer(t *testing.T) {
	ideal := 10 * time.Second
	rs := []result{
		{Row: 1, Records: 2000, Sent: 2000, Wall: 10050 * time.Millisecond, Ideal: ideal},
		{Row: 6, Records: 2000, Sent: 2002, Throttled: 2, Wall: 10100 * time.Millisecond, Ideal: ideal},
		{Row: 8, Records: 2000, Sent: 2000, Throttled: 0, Wall: 9 * time.Second, Ideal: ideal},
	}
	var b bytes.Buffer
	printTargets(&b, map[string][]result{"bucket-seconds": rs}, []scenario{{name: "bucket-seconds"}})
	line := b.String()[strings.Index(b.String(), "| bucket-seconds"):]
	if !strings.Contains(line, "pass 10.050s vs 10.100s (row 6)") {
		t.Errorf("row 1's wall was compared with a throttle row, not a peer:\n%s", line)
	}
}

// TestCounterShare: two processes told their share of a sliding
// counter of N per Per (which admits N-1 per Per for ever) are together
// told what it admits, as with every other quota: N-1 per Per between them
// (found in review: each was told N/2-1, 98 a second together for 99).
func TestCounterShare(t *testing.T) {
	counter := quota{algo: throttletest.SlidingCounter, n: 100, per: time.Second}
	one := counter.share(2).limiter().Limit()
	if got, want := 2*float64(one), float64(counter.limiter().Limit()); got != want {
		t.Errorf("two processes' limiters together: %g/s, want the counter's %g/s", got, want)
	}
}
