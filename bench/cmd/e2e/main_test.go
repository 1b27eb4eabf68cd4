package main

import (
	"testing"
	"time"

	"github.com/throttlehttp/throttle/throttletest"
)

func TestIdeal(t *testing.T) {
	bucket := quota{algo: throttletest.TokenBucket, rate: 200, burst: 10}
	window := quota{algo: throttletest.SlidingLog, n: 200, per: time.Second}
	tests := []struct {
		name    string
		q       quota
		records int
		want    time.Duration
	}{
		{"bucket", bucket, 2000, 9950 * time.Millisecond},
		{"bucket within the burst", bucket, 5, 0},
		{"window, whole windows", window, 2000, 9 * time.Second},
		{"window, a part window", window, 2001, 10 * time.Second},
		{"window, one window", window, 200, 0},
	}
	for _, tt := range tests {
		if got := tt.q.ideal(tt.records); got != tt.want {
			t.Errorf("%s: ideal(%d) = %s, want %s", tt.name, tt.records, got, tt.want)
		}
	}
}

func TestPolicyScale(t *testing.T) {
	window := quota{algo: throttletest.FixedWindow, n: 200, per: time.Second}
	if got := window.policy(1.25).Windows[0].N; got != 250 {
		t.Errorf("window N ×1.25 = %d, want 250", got)
	}
	bucket := quota{algo: throttletest.TokenBucket, rate: 200, burst: 10}
	if p := bucket.policy(1.25); p.Rate != 250 || p.Burst != 10 {
		t.Errorf("bucket ×1.25 = %v/%d, want 250/10", p.Rate, p.Burst)
	}
	for _, sc := range scenarios() {
		for _, scale := range []float64{1, 1.25} {
			if err := sc.quota.policy(scale).Validate(); err != nil {
				t.Errorf("%s ×%g: %v", sc.name, scale, err)
			}
		}
	}
}

func TestPick(t *testing.T) {
	if got := len(pickScenarios("")); got != 6 {
		t.Errorf("all scenarios: %d, want 6", got)
	}
	if got := len(pickScenarios("bucket,date")); got != 4 {
		t.Errorf("bucket,date: %d scenarios, want 4", got)
	}
	rs, err := pickRows("1, 6")
	if err != nil || len(rs) != 2 || rs[0].id != 1 || rs[1].id != 6 {
		t.Errorf("rows 1,6: %v, %v", rs, err)
	}
	if _, err := pickRows("7"); err == nil {
		t.Error("row 7: no error")
	}
}
