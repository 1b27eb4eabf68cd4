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
