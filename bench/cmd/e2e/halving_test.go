package main

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/throttlehttp/throttle/throttletest"
	"golang.org/x/time/rate"
)

func TestHalvingScenario(t *testing.T) {
	for _, sc := range pickScenarios("untold-halving") {
		q := sc.quotaOf(4000)
		// The unchanged bucket's ideal is 19.9 s: the rate halves at 9.95 s,
		// when 20 + 1,990 have gone; then 1,990 at 100/s.
		if q.halveAfter != 9950*time.Millisecond {
			t.Errorf("%s: halves after %s, want 9.95s", sc.name, q.halveAfter)
		}
		if got := sc.ideal(4000); got != 29850*time.Millisecond {
			t.Errorf("%s: ideal(4000) = %s, want 29.85s", sc.name, got)
		}
		// 1,000 records: halves at 2.45 s, after 510; then 490 at 100/s.
		if got := sc.ideal(1000); got != 7350*time.Millisecond {
			t.Errorf("%s: ideal(1000) = %s, want 7.35s", sc.name, got)
		}
		if told := sc.told(4000); told != q {
			t.Errorf("%s: told %+v, want the quota as it changes, %+v", sc.name, told, q)
		}
		if l := sc.config(4000, 0).Limits[0]; l.Rate != 200 || l.Burst != 20 {
			t.Errorf("%s: starts at %+v, want 200/s burst 20", sc.name, l)
		}
	}
	if sc := pickScenarios("untold-tokens-xrl")[0]; sc.quotaOf(4000).halveAfter != 0 {
		t.Error("untold-tokens-xrl: a quota that changes")
	}
}

// The peer told a quota whose rate halves halves its limiter's rate when the
// server does, counted from its first request; a limiter made later starts
// at the halved rate.
func TestLimiterHalves(t *testing.T) {
	q := quota{algo: throttletest.TokenBucket, rate: 200, burst: 20, halveAfter: 5 * time.Second}
	l := &limited{quota: q, lims: map[string]*rate.Limiter{}}
	t0 := time.Now()
	steps := []struct {
		at   time.Duration
		host string
		want rate.Limit
	}{
		{0, "a", 200},
		{4999 * time.Millisecond, "a", 200},
		{5 * time.Second, "a", 100},
		{6 * time.Second, "a", 100}, // once
		{6 * time.Second, "b", 100},
	}
	for _, s := range steps {
		if got := l.limiter(s.host, t0.Add(s.at)).Limit(); got != s.want {
			t.Errorf("at %s, host %s: %v/s, want %v/s", s.at, s.host, got, s.want)
		}
	}
	if got := l.limiter("a", t0).Burst(); got != 20 {
		t.Errorf("burst %d, want 20", got)
	}
}

// The server of a quota whose rate halves answers from the first API until
// halveAfter has passed since its first request, then from the second, whose
// bucket refills at half the rate.
func TestSwitched(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := quota{algo: throttletest.TokenBucket, rate: 200, burst: 20, halveAfter: 5 * time.Second}
		before, after := halvingAPIs(throttletest.Config{Limits: []throttletest.Limit{q.limit()}, XRateLimit: true, HeadersOnSuccess: true}, q)
		s := &switched{before: before, after: after, halveAfter: q.halveAfter}
		put := func() *httptest.ResponseRecorder {
			w := httptest.NewRecorder()
			r := httptest.NewRequest(http.MethodPut, "/records/1", nil)
			r.Header.Set("X-API-Key", apiKey)
			s.ServeHTTP(w, r)
			return w
		}
		time.Sleep(time.Second) // the clock starts at the first request
		put()
		time.Sleep(4999 * time.Millisecond)
		put()
		if n := before.Stats().Total.Requests; n != 2 || after.Stats().Total.Requests != 0 {
			t.Errorf("before the change: %d and %d requests, want 2 and 0", n, after.Stats().Total.Requests)
		}
		time.Sleep(time.Millisecond)
		w := put()
		if n := after.Stats().Total.Requests; n != 1 || before.Stats().Total.Requests != 2 {
			t.Errorf("after the change: %d and %d requests, want 2 and 1", before.Stats().Total.Requests, n)
		}
		// A full bucket of 20 that takes 200 ms to refill at 100/s, less the one just taken.
		if got := w.Header().Get("X-RateLimit-Remaining"); got != "19" {
			t.Errorf("Remaining %q, want 19", got)
		}
	})
}
