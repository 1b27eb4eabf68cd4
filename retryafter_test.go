package throttle_test

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlehttp/throttle"
)

// retryAfterNow is the time the responses of retryAfterCases arrive: 37 seconds
// before the date of RFC 9110's examples.
var retryAfterNow = time.Date(1994, time.November, 6, 8, 49, 0, 0, time.UTC)

const longestDuration = time.Duration(math.MaxInt64)

var retryAfterCases = []struct {
	name  string
	value string
	want  time.Duration
	ok    bool
}{
	{"delta-seconds", "120", 120 * time.Second, true},
	{"zero", "0", 0, true},
	{"leading-zeros", "007", 7 * time.Second, true},
	{"decimal-2.0", "2.0", 2 * time.Second, true},
	{"decimal-1.5", "1.5", 1500 * time.Millisecond, true},
	{"decimal-millis", "0.25", 250 * time.Millisecond, true},
	{"decimal-three-digits", "1.234", 1234 * time.Millisecond, true},
	{"decimal-sub-millisecond-rounds-up", "0.0001", time.Millisecond, true},
	{"decimal-many-digits-round-up", "1.2341000", 1235 * time.Millisecond, true},
	{"decimal-trailing-zeros-exact", "1.2340000000", 1234 * time.Millisecond, true},
	{"decimal-carries-to-next-second", "0.9999", time.Second, true},
	{"imf-fixdate", "Sun, 06 Nov 1994 08:49:37 GMT", 37 * time.Second, true},
	{"rfc850", "Sunday, 06-Nov-94 08:49:37 GMT", 37 * time.Second, true},
	{"asctime", "Sun Nov  6 08:49:37 1994", 37 * time.Second, true},
	{"past-date", "Sun, 06 Nov 1994 08:48:00 GMT", 0, true},
	{"equal-date", "Sun, 06 Nov 1994 08:49:00 GMT", 0, true},
	{"far-future-date-saturates", "Fri, 31 Dec 9999 23:59:59 GMT", longestDuration, true},
	{"whitespace", " \t120\t ", 120 * time.Second, true},
	{"whitespace-date", "  Sun, 06 Nov 1994 08:49:37 GMT\t", 37 * time.Second, true},
	{"largest-exact", "9223372036", 9223372036 * time.Second, true},
	{"largest-exact-decimal", "9223372036.854", 9223372036854 * time.Millisecond, true},
	{"saturates-decimal", "9223372036.855", longestDuration, true},
	{"saturates-huge", "9223372037", longestDuration, true},
	{"longer-than-int64", "99999999999999999999999999999999", longestDuration, true},
	{"longer-than-int64-decimal", "99999999999999999999.5", longestDuration, true},
	// Merged by an intermediary from several field lines: the longest.
	{"merged-same", "120, 120", 120 * time.Second, true},
	{"merged-longest-last", "60, 120", 120 * time.Second, true},
	{"merged-longest-first", "120, 60", 120 * time.Second, true},
	{"merged-no-space", "60,120", 120 * time.Second, true},
	{"merged-tabs", "60\t,\t120", 120 * time.Second, true},
	{"merged-three", "1, 120, 60", 120 * time.Second, true},
	{"merged-decimal", "1.5, 1", 1500 * time.Millisecond, true},
	{"merged-imf-fixdates", "Sun, 06 Nov 1994 08:49:37 GMT, Sun, 06 Nov 1994 08:49:37 GMT", 37 * time.Second, true},
	{"merged-imf-fixdates-longest-last", "Sun, 06 Nov 1994 08:49:10 GMT, Sun, 06 Nov 1994 08:49:37 GMT", 37 * time.Second, true},
	{"merged-imf-fixdates-no-space", "Sun, 06 Nov 1994 08:49:37 GMT,Sun, 06 Nov 1994 08:49:10 GMT", 37 * time.Second, true},
	{"merged-rfc850s", "Sunday, 06-Nov-94 08:49:37 GMT, Sunday, 06-Nov-94 08:49:20 GMT", 37 * time.Second, true},
	{"merged-rfc850-and-asctime", "Sunday, 06-Nov-94 08:49:20 GMT, Sun Nov  6 08:49:37 1994", 37 * time.Second, true},
	{"merged-asctime-and-imf-fixdate", "Sun Nov  6 08:49:37 1994, Sun, 06 Nov 1994 08:49:20 GMT", 37 * time.Second, true},
	{"merged-date-and-seconds", "Sun, 06 Nov 1994 08:49:37 GMT, 60", 60 * time.Second, true},
	{"merged-seconds-and-date", "10, Sun, 06 Nov 1994 08:49:37 GMT", 37 * time.Second, true},
	{"merged-past-date-and-seconds", "Sun, 06 Nov 1994 08:48:00 GMT, 5", 5 * time.Second, true},
	{"merged-past-dates", "Sun, 06 Nov 1994 08:48:00 GMT, Sun, 06 Nov 1994 08:47:00 GMT", 0, true},
	{"merged-saturates", "99999999999999999999, 120", longestDuration, true},
	{"merged-empty-line-last", "120, ", 120 * time.Second, true},
	{"merged-empty-line-first", ", 120", 120 * time.Second, true},
	{"merged-empty-lines-between", "60, , ,120", 120 * time.Second, true},
	{"merged-malformed-last", "120, soon", 0, false},
	{"merged-malformed-first", "soon, 120", 0, false},
	{"merged-negative", "120, -5", 0, false},
	{"merged-bad-date", "Sun, 06 Nov 1994 08:49:37, 120", 0, false},
	{"merged-day-name-alone", "120, Sun", 0, false},
	{"merged-day-name-and-seconds", "Sun, 120", 0, false},
	{"merged-not-a-day", "Foo, 06 Nov 1994 08:49:37 GMT", 0, false},
	{"merged-semicolon", "120; 60", 0, false},
	{"commas-only", " , ,", 0, false},
	{"empty", "", 0, false},
	{"blank", " \t ", 0, false},
	{"negative", "-5", 0, false},
	{"plus-sign", "+5", 0, false},
	{"unit-suffix", "5s", 0, false},
	{"garbage", "soon", 0, false},
	{"exponent", "1e3", 0, false},
	{"hex", "0x10", 0, false},
	{"inf", "Inf", 0, false},
	{"nan", "NaN", 0, false},
	{"inner-space", "1 2", 0, false},
	{"inner-space-decimal", "1. 5", 0, false},
	{"multiple-dots", "1.2.3", 0, false},
	{"trailing-dot", "2.", 0, false},
	{"leading-dot", ".5", 0, false},
	{"decimal-comma-is-two-waits", "1,5", 5 * time.Second, true},
	{"trailing-newline", "12\n", 0, false},
	{"iso-8601", "1994-11-06T08:49:37Z", 0, false},
	{"bad-date-format", "Sun, 06 Nov 1994 08:49:37", 0, false},
	{"non-ascii-digits", "١٢", 0, false},
	{"invalid-utf8", "\xff\xfe1", 0, false},
}

func TestParseRetryAfter(t *testing.T) {
	for _, tc := range retryAfterCases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := throttle.ParseRetryAfter(tc.value, retryAfterNow)
			assert.Equal(t, tc.ok, ok, "ok")
			assert.Equal(t, tc.want, got)
		})
	}
}

// TestParseRetryAfterNowInAnotherZone guards that a date is compared as an
// instant, whatever the location of now.
func TestParseRetryAfterNowInAnotherZone(t *testing.T) {
	now := retryAfterNow.In(time.FixedZone("UTC-8", -8*3600))
	got, ok := throttle.ParseRetryAfter("Sun, 06 Nov 1994 08:49:37 GMT", now)
	require.True(t, ok)
	assert.Equal(t, 37*time.Second, got)
}

func TestParseRetryAfterDoesNotAllocate(t *testing.T) {
	for _, v := range []string{"120", " 2.0 ", "99999999999999999999999999", "120, 60, 2.0"} {
		allocs := testing.AllocsPerRun(100, func() { throttle.ParseRetryAfter(v, retryAfterNow) })
		assert.Zero(t, allocs, "%q", v)
	}
}

func TestParseRetryAfterLongValue(t *testing.T) {
	got, ok := throttle.ParseRetryAfter(strings.Repeat("9", 1<<20), retryAfterNow)
	assert.True(t, ok)
	assert.Equal(t, longestDuration, got)
	_, ok = throttle.ParseRetryAfter("1."+strings.Repeat("0", 1<<20)+"x", retryAfterNow)
	assert.False(t, ok)
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, tc := range retryAfterCases {
		f.Add(tc.value, int64(0))
	}
	f.Add("Sun, 06 Nov 1994 08:49:37 GMT", int64(math.MinInt64))
	f.Add("Sun Nov  6 08:49:37 1994", int64(math.MaxInt64))
	f.Add("Sunday, 06-Nov-94 08:49:37 GMT, Sun Nov  6 08:49:37 1994, 120", int64(0))
	f.Add("Sun, 06 Nov 1994 08:49:37 GMT, Sun, 06 Nov 1994 08:49:37 GMT", int64(time.Minute))
	f.Add("Sun,, 06 Nov 1994 08:49:37 GMT", int64(0))
	f.Fuzz(func(t *testing.T, value string, offset int64) {
		now := retryAfterNow.Add(time.Duration(offset))
		got, ok := throttle.ParseRetryAfter(value, now)
		if got < 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v, negative", value, got)
		}
		if !ok && got != 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v, false; want 0 when not ok", value, got)
		}
		// Merged by an intermediary with itself, or with another value,
		// the value reads as before, or gives the longer wait.
		if merged, mok := throttle.ParseRetryAfter(value+", "+value, now); mok != ok || merged != got {
			t.Fatalf("ParseRetryAfter(%q) = %v, %v; merged with itself %v, %v", value, got, ok, merged, mok)
		}
		for _, other := range []string{"60", "Sun, 06 Nov 1994 08:50:00 GMT"} {
			want, _ := throttle.ParseRetryAfter(other, now)
			if ok {
				want = max(want, got)
			}
			for _, merged := range []string{value + ", " + other, other + "," + value} {
				if d, mok := throttle.ParseRetryAfter(merged, now); mok != ok && strings.Trim(value, " \t,") != "" || mok && d != want {
					t.Fatalf("ParseRetryAfter(%q) = %v, %v; ParseRetryAfter(%q) = %v, %v, want %v", value, got, ok, merged, d, mok, want)
				}
			}
		}
	})
}

func BenchmarkParseRetryAfter(b *testing.B) {
	for _, bc := range []struct{ name, value string }{
		{"delta", "120"},
		{"decimal", "2.0"},
		{"date", "Sun, 06 Nov 1994 08:49:37 GMT"},
		{"merged", "120, 120"},
		{"merged-dates", "Sun, 06 Nov 1994 08:49:37 GMT, Sun, 06 Nov 1994 08:49:37 GMT"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				throttle.ParseRetryAfter(bc.value, retryAfterNow)
			}
		})
	}
}

func ExampleParseRetryAfter() {
	now := time.Date(2024, time.March, 1, 12, 0, 0, 0, time.UTC) // when the response arrived
	for _, v := range []string{"120", "2.0", "Fri, 01 Mar 2024 12:01:30 GMT", "in a minute"} {
		wait, ok := throttle.ParseRetryAfter(v, now)
		fmt.Printf("%q: %v %v\n", v, wait, ok)
	}
	// Output:
	// "120": 2m0s true
	// "2.0": 2s true
	// "Fri, 01 Mar 2024 12:01:30 GMT": 1m30s true
	// "in a minute": 0s false
}
