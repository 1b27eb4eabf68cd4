package throttletest

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRetryAfterRoundsUp(t *testing.T) {
	now := time.Date(2000, 1, 1, 0, 0, 0, 300e6, time.UTC) // 0.3s past a second
	tests := []struct {
		name   string
		format RetryAfterFormat
		wait   time.Duration
		want   string
	}{
		{"5ms-is-1s", RetryAfterSeconds, 5 * time.Millisecond, "1"},
		{"1ns-is-1s", RetryAfterSeconds, time.Nanosecond, "1"},
		{"zero-is-still-1s", RetryAfterSeconds, 0, "1"},
		{"whole-second", RetryAfterSeconds, time.Second, "1"},
		{"just-over", RetryAfterSeconds, time.Second + time.Nanosecond, "2"},
		{"59.5s", RetryAfterSeconds, 59500 * time.Millisecond, "60"},
		{"date-rounds-up", RetryAfterDate, 10 * time.Second, "Sat, 01 Jan 2000 00:00:11 GMT"},
		{"date-exact", RetryAfterDate, 9700 * time.Millisecond, "Sat, 01 Jan 2000 00:00:10 GMT"},
		{"date-5ms", RetryAfterDate, 5 * time.Millisecond, "Sat, 01 Jan 2000 00:00:01 GMT"},
		{"none", RetryAfterNone, time.Second, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := retryAfter(tt.format, now, tt.wait)
			assert.Equal(t, tt.want, got)
			if tt.format == RetryAfterDate {
				date, err := http.ParseTime(got)
				require.NoError(t, err)
				assert.GreaterOrEqual(t, date.Sub(now), tt.wait, "a date is never early")
				assert.Less(t, date.Sub(now), tt.wait+time.Second)
			}
		})
	}
}

func TestCeilSeconds(t *testing.T) {
	for d, want := range map[time.Duration]int64{
		-time.Second: 0, 0: 0, 1: 1, 999 * time.Millisecond: 1, time.Second: 1,
		1001 * time.Millisecond: 2, time.Hour: 3600,
	} {
		assert.Equal(t, want, ceilSeconds(d), "%v", d)
	}
}

func TestAPIKey(t *testing.T) {
	tests := []struct {
		name   string
		header http.Header
		want   string
	}{
		{"key-header", http.Header{"X-Api-Key": {"k1"}}, "k1"},
		{"trimmed", http.Header{"X-Api-Key": {"  k1 "}}, "k1"},
		{"bearer", http.Header{"Authorization": {"Bearer k2"}}, "k2"},
		{"github-token", http.Header{"Authorization": {"token k3"}}, "k3"},
		{"basic-is-not-a-key", http.Header{"Authorization": {"Basic dTpw"}}, ""},
		{"bearer-any-case", http.Header{"Authorization": {"bearer  k2"}}, "k2"},
		{"key-header-first", http.Header{"X-Api-Key": {"k1"}, "Authorization": {"Bearer k2"}}, "k1"},
		{"blank-key-header-falls-back", http.Header{"X-Api-Key": {" "}, "Authorization": {"Bearer k2"}}, "k2"},
		{"basic-is-no-key", http.Header{"Authorization": {"Basic dXNlcjpwdw=="}}, ""},
		{"bearer-without-token", http.Header{"Authorization": {"Bearer"}}, ""},
		{"none", http.Header{}, ""},
		{"nil", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, apiKey(tt.header, "X-API-Key"))
		})
	}
}

func FuzzAPIKey(f *testing.F) {
	f.Add("k1", "Bearer k2")
	f.Add("", "bearer \t k2 ")
	f.Add(" ", "Basic x")
	f.Fuzz(func(t *testing.T, key, auth string) {
		h := http.Header{"X-Api-Key": {key}, "Authorization": {auth}}
		got := apiKey(h, "X-API-Key")
		assert.Equal(t, strings.TrimSpace(got), got)
		if k := strings.TrimSpace(key); k != "" {
			assert.Equal(t, k, got)
		} else if got != "" {
			assert.Contains(t, auth, got)
		}
	})
}

func TestPeakPerSecond(t *testing.T) {
	t0 := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms ...int) []time.Time {
		ts := make([]time.Time, len(ms))
		for i, m := range ms {
			ts[i] = t0.Add(time.Duration(m) * time.Millisecond)
		}
		return ts
	}
	tests := []struct {
		name string
		ts   []time.Time
		want int
	}{
		{"none", nil, 0},
		{"one", at(0), 1},
		{"within-a-second", at(0, 500, 999), 3},
		{"one-second-apart-is-two-seconds", at(0, 1000), 1},
		{"window-slides", at(0, 500, 1000, 1400), 3},
		{"unsorted", at(1400, 0, 1000, 500), 3},
		{"same-instant", at(7, 7, 7, 7), 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, peakPerSecond(tt.ts))
		})
	}
}

func TestBucketPolicy(t *testing.T) {
	tests := []struct {
		name  string
		rate  float64
		burst int
		q     int
		w     int64
	}{
		{"refills-in-whole-seconds", 1, 5, 5, 5},
		{"slow", 0.1, 1, 1, 10},
		{"fill-time-rounded-down-is-closer", 1.3, 50, 49, 38}, // 1.289/s; 50 per 39s is 1.282/s
		{"fill-time-rounded-up-is-closer", 0.6, 1, 1, 2},      // 0.5/s; 0 per 1s says nothing
		{"tie-keeps-the-burst", 2.5, 2, 2, 1},                 // floor(2.5) per second is 2 per second too
		{"under-a-second-keeps-the-rate", 10, 5, 10, 1},
		{"default-burst", 200, 1, 200, 1},
		{"github-like", 5000.0 / 3600, 5000, 5000, 3600},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fill := time.Duration(tt.burst) * interval(tt.rate)
			q, w := bucketPolicy(tt.burst, fill)
			assert.Equal(t, tt.q, q, "q")
			assert.Equal(t, tt.w, w, "w")
			assert.LessOrEqual(t, float64(q)/float64(w), tt.rate*(1+1e-9), "never faster than the bucket")
			if tt.rate <= float64(tt.burst) {
				assert.LessOrEqual(t, q, tt.burst, "q at once fits the bucket")
			}
		})
	}
}

func TestAnnounce(t *testing.T) {
	// A token bucket of Rate 10, Burst 5, with 3 whole tokens and 2.5 missing.
	bucket := quota{algorithm: TokenBucket, limit: 5, remaining: 2,
		reset: 250 * time.Millisecond, next: 50 * time.Millisecond, window: 500 * time.Millisecond}
	// One of Rate 2, Burst 20, full.
	deep := quota{algorithm: TokenBucket, limit: 20, remaining: 20, next: 500 * time.Millisecond, window: 10 * time.Second}
	leaky := quota{algorithm: LeakyBucket, limit: 3, remaining: 1,
		reset: 1200 * time.Millisecond, next: 200 * time.Millisecond, window: 1500 * time.Millisecond}
	window := quota{algorithm: FixedWindow, limit: 3, remaining: 0,
		reset: 700 * time.Millisecond, next: 700 * time.Millisecond, window: 1500 * time.Millisecond}
	counter := quota{algorithm: SlidingCounter, limit: 5, remaining: 1,
		reset: 15 * time.Second, next: 2500 * time.Millisecond, window: 10 * time.Second}
	counterOfOne := quota{algorithm: SlidingCounter, limit: 1, remaining: 0,
		reset: 15 * time.Second, next: 15 * time.Second, window: 10 * time.Second}
	tests := []struct {
		name string
		form TokenBucketHeaders
		q    quota
		want announcement
	}{
		{"bucket", TruthfulBucket, bucket, announcement{limit: 5, remaining: 2, reset: 1, t: 1, q: 10, w: 1, burst: 5}},
		{"deep-bucket", TruthfulBucket, deep, announcement{limit: 20, remaining: 20, reset: 0, t: 1, q: 20, w: 10}},
		{"bucket-burst-per-second", BurstPerSecond, bucket, announcement{limit: 5, remaining: 2, reset: 1, t: 1, q: 5, w: 1}},
		{"deep-burst-per-second", BurstPerSecond, deep, announcement{limit: 20, remaining: 20, reset: 1, t: 1, q: 20, w: 1}},
		{"bucket-rate-per-second", RatePerSecond, bucket, announcement{limit: 10, remaining: 2, reset: 1, t: 1, q: 10, w: 1}},
		{"deep-rate-per-second", RatePerSecond, deep, announcement{limit: 2, remaining: 2, reset: 1, t: 1, q: 2, w: 1}},
		{"leaky", TruthfulBucket, leaky, announcement{limit: 3, remaining: 1, reset: 2, t: 1, q: 2, w: 1, burst: 3}},
		{"leaky-unchanged-by-form", BurstPerSecond, leaky, announcement{limit: 3, remaining: 1, reset: 2, t: 1, q: 2, w: 1, burst: 3}},
		{"window-per-rounded-up", TruthfulBucket, window, announcement{limit: 3, remaining: 0, reset: 1, t: 1, q: 3, w: 2}},
		{"window-unchanged-by-form", RatePerSecond, window, announcement{limit: 3, remaining: 0, reset: 1, t: 1, q: 3, w: 2}},
		{"sliding-counter-sustains-one-less", TruthfulBucket, counter, announcement{limit: 5, remaining: 1, reset: 15, t: 3, q: 4, w: 10}},
		{"sliding-counter-of-one", TruthfulBucket, counterOfOne, announcement{limit: 1, remaining: 0, reset: 15, t: 15, q: 1, w: 20}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.form.announce(tt.q))
		})
	}
}
