package throttle_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlehttp/throttle"
)

func TestDefaultKey(t *testing.T) {
	rt := throttle.New(newRecorder())
	defer rt.Close()
	for _, u := range []string{
		"http://API.Example.com/a", "http://api.example.com:80/b", "https://api.example.com:443/c",
		"https://api.example.com:80/d", "http://api.example.com:8080/e", "http://[::1]:8080/f", "http://[::1]/g",
	} {
		require.NoError(t, do(t, rt, u))
	}
	keys := rt.Stats().Keys
	assert.EqualValues(t, 3, keys["api.example.com"].Requests)
	assert.EqualValues(t, 1, keys["api.example.com:80"].Requests, "80 is not https's default")
	assert.EqualValues(t, 1, keys["api.example.com:8080"].Requests)
	assert.EqualValues(t, 1, keys["[::1]:8080"].Requests)
	assert.EqualValues(t, 1, keys["[::1]"].Requests)
	assert.Len(t, keys, 5)
}

func TestWithKeyPartitions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		rt := throttle.New(rec,
			throttle.WithPolicy(throttle.Policy{Rate: 1, Burst: 1}),
			throttle.WithKey(func(r *http.Request) string { return r.Header.Get("X-API-Key") }))
		defer rt.Close()
		send := func(key string) {
			req := newReq(t, context.Background(), http.MethodGet, "http://one.test/")
			req.Header.Set("X-API-Key", key)
			resp, err := rt.RoundTrip(req)
			require.NoError(t, err)
			resp.Body.Close()
		}
		send("alice")
		send("bob") // another key: its own bucket, no wait
		send("alice")
		assert.Equal(t, []time.Duration{0, 0, time.Second}, rec.times())
		assert.Len(t, rt.Stats().Keys, 2)
	})
}

func TestHostPolicyPatterns(t *testing.T) {
	tests := []struct {
		url    string
		paced  bool // by the 1/s host policy; else the 1000/s default
		reason string
	}{
		{"http://api.example.com/", true, "exact"},
		{"http://API.EXAMPLE.COM/", true, "case-insensitive"},
		{"http://api.example.com:8443/", true, "a hostname pattern matches any port"},
		{"http://a.b.wild.test/", true, "wildcard: any depth of subdomain"},
		{"http://wild.test/", false, "wildcard: not the domain itself"},
		{"http://example.com/", false, "exact: not the parent"},
		{"http://localhost:9000/", true, "host:port pattern"},
		{"http://localhost:9001/", false, "host:port pattern: that port only"},
		{"https://secure.test/", true, "host:443 pattern, default port left out"},
		{"https://secure.test:443/", true, "host:443 pattern, default port spelled out"},
		{"http://secure.test/", false, "host:443 pattern: not port 80"},
		{"http://[::1]:8080/", true, "an IPv6 address in brackets, on any port"},
		{"http://[::1]/", true, "an IPv6 address in brackets, no port"},
		{"http://[::2]:8080/", true, "an IPv6 address, on any port"},
		{"http://[::3]:8080/", true, "an IPv6 address in brackets with its port"},
		{"http://[::3]:8081/", false, "an IPv6 address in brackets with its port: that port only"},
	}
	for _, tt := range tests {
		t.Run(tt.reason, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec := newRecorder()
				rt := throttle.New(rec,
					throttle.WithPolicy(throttle.Policy{Rate: 1000, Burst: 1}),
					throttle.WithHostPolicy("api.example.com", throttle.Policy{Rate: 1, Burst: 1}),
					throttle.WithHostPolicy("*.wild.test", throttle.Policy{Rate: 1, Burst: 1}),
					throttle.WithHostPolicy("localhost:9000", throttle.Policy{Rate: 1, Burst: 1}),
					throttle.WithHostPolicy("secure.test:443", throttle.Policy{Rate: 1, Burst: 1}),
					throttle.WithHostPolicy("[::1]", throttle.Policy{Rate: 1, Burst: 1}),
					throttle.WithHostPolicy("::2", throttle.Policy{Rate: 1, Burst: 1}),
					throttle.WithHostPolicy("[::3]:8080", throttle.Policy{Rate: 1, Burst: 1}))
				defer rt.Close()
				// Either spelling of an address names the pattern.
				require.NoError(t, rt.SetHostPolicy("::1", throttle.Policy{Rate: 1, Burst: 1}))
				require.NoError(t, rt.SetHostPolicy("[::2]", throttle.Policy{Rate: 1, Burst: 1}))
				require.NoError(t, do(t, rt, tt.url))
				require.NoError(t, do(t, rt, tt.url))
				want := time.Millisecond
				if tt.paced {
					want = time.Second
				}
				assert.Equal(t, want, rec.times()[1])
			})
		})
	}
}

func TestUnpacedByDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		rt := throttle.New(rec, throttle.WithHostPolicy("slow.test", throttle.Policy{Rate: 1, Burst: 1}))
		defer rt.Close()
		launch(t, rt, 50, "http://fast.test/")
		for _, at := range rec.times() {
			require.Zero(t, at)
		}
	})
}

func TestDeadlineFailsAtOnceAndKeepsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		rt := throttle.New(rec, throttle.WithPolicy(throttle.Policy{Rate: 1, Burst: 1}))
		defer rt.Close()
		require.NoError(t, do(t, rt, "http://d.test/")) // next token at 1s

		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := doCtx(t, ctx, rt, "http://d.test/late")
		assert.Zero(t, time.Since(start), "fails at once, without waiting")
		require.ErrorIs(t, err, throttle.ErrWouldExceedDeadline)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		var we *throttle.WaitError
		require.ErrorAs(t, err, &we)
		assert.Equal(t, "d.test", we.Key)
		assert.Equal(t, throttle.LimitRate, we.Limit)
		assert.Equal(t, start.Add(time.Second), we.Until)

		// It kept no token: the next request still goes at 1s.
		require.NoError(t, do(t, rt, "http://d.test/next"))
		assert.Equal(t, []time.Duration{0, time.Second}, rec.times())
		assert.EqualValues(t, 1, rt.Stats().Keys["d.test"].RefusedDeadline)
	})
}

func TestDeadlineBehindOthersInLine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		rt := throttle.New(rec, throttle.WithPolicy(throttle.Policy{Rate: 10, Queue: 10}))
		defer rt.Close()
		var wg sync.WaitGroup
		for range 5 { // t=0, then four in line: 100..400ms
			wg.Add(1)
			go func() { defer wg.Done(); assert.NoError(t, do(t, rt, "http://d.test/")) }()
			synctest.Wait()
		}
		// Sixth in line: its turn is at 500ms, after its 450ms deadline.
		ctx, cancel := context.WithTimeout(context.Background(), 450*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := doCtx(t, ctx, rt, "http://d.test/late")
		require.ErrorIs(t, err, throttle.ErrWouldExceedDeadline)
		assert.Zero(t, time.Since(start))
		assert.Contains(t, err.Error(), `key "d.test": queue until`)
		wg.Wait()
		assert.Len(t, rec.times(), 5)
	})
}

// Behind a retry that waits out a pause at the head of the line, a
// request's turn comes after the pause and what the pace or the window
// needs of those ahead from its end on: one whose deadline comes first
// fails at once with ErrWouldExceedDeadline; one whose deadline comes
// after goes; where the window has room for both at the pause's end, the
// pause alone is the bound (regression, found in review 46: the pace of
// those ahead was counted from now, not from the pause's end, and a
// request with a deadline at 3.5 s behind a pause until 3 s and a pace of
// a request a second failed only at 3 s).
func TestADeadlineCountsThePaceAfterThePause(t *testing.T) {
	for _, tc := range []struct {
		name  string
		pol   throttle.Policy
		limit throttle.Limit // what holds a deadline at 3.5 s; LimitNone: nothing, it goes
	}{
		{"queue", throttle.Policy{Rate: 1, Queue: 5}, throttle.LimitQueue},
		{"bucket", throttle.Policy{Rate: 1, Burst: 1}, throttle.LimitRate},
		{"window", throttle.Policy{Windows: []throttle.Window{{N: 1, Per: time.Second}}}, throttle.LimitWindow},
		{"wide window", throttle.Policy{Windows: []throttle.Window{{N: 10, Per: time.Second}}}, throttle.LimitNone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var mu sync.Mutex
				calls := 0
				base := rtFunc(func(req *http.Request) (*http.Response, error) {
					mu.Lock()
					defer mu.Unlock()
					if calls++; calls == 1 {
						return reply(req, http.StatusTooManyRequests, "Retry-After", "3"), nil
					}
					return reply(req, http.StatusOK), nil
				})
				rt := throttle.New(base, throttle.WithPolicy(tc.pol))
				defer rt.Close()
				start := time.Now()
				var wg sync.WaitGroup
				wg.Go(func() { assert.NoError(t, do(t, rt, "http://api.test/first")) }) // its retry waits until 3 s
				synctest.Wait()

				ctx, cancel := context.WithDeadline(context.Background(), start.Add(3500*time.Millisecond))
				defer cancel()
				err := doCtx(t, ctx, rt, "http://api.test/late")
				if tc.limit == throttle.LimitNone {
					assert.NoError(t, err)
					assert.Equal(t, 3*time.Second, time.Since(start), "it went at the pause's end")
					wg.Wait()
					return
				}
				assert.ErrorIs(t, err, throttle.ErrWouldExceedDeadline)
				assert.Zero(t, time.Since(start), "failed at once")
				if we := (*throttle.WaitError)(nil); assert.ErrorAs(t, err, &we) {
					assert.Equal(t, tc.limit, we.Limit)
					assert.True(t, we.Until.After(start.Add(3500*time.Millisecond)), "until %v", we.Until)
				}

				ctx, cancel = context.WithDeadline(context.Background(), start.Add(4500*time.Millisecond))
				defer cancel()
				assert.NoError(t, doCtx(t, ctx, rt, "http://api.test/in-time"))
				wg.Wait()
				assert.EqualValues(t, 1, rt.Stats().Keys["api.test"].RefusedDeadline)
			})
		})
	}
}

func TestCancelReturnsPromptly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := throttle.New(newRecorder(), throttle.WithPolicy(throttle.Policy{Rate: 0.01, Burst: 1}))
		defer rt.Close()
		first := time.Now()
		require.NoError(t, do(t, rt, "http://c.test/"))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- doCtx(t, ctx, rt, "http://c.test/") }()
		time.Sleep(time.Second)
		start := time.Now()
		cancel()
		err := <-done
		assert.Zero(t, time.Since(start))
		require.ErrorIs(t, err, context.Canceled)
		assert.Contains(t, err.Error(), `key "c.test": rate until `, "says which limit held it")
		assert.Contains(t, err.Error(), `: context canceled`)
		var we *throttle.WaitError
		require.ErrorAs(t, err, &we)
		assert.Equal(t, first.Add(100*time.Second), we.Until, "and when it would have ended (found in review: zero)")
	})
}

func TestCloseFailsWaitersAndLaterRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		block := make(chan struct{})
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			if r.URL.Path == "/slow" {
				<-block
			}
			return reply(r, http.StatusOK), nil
		})
		rt := throttle.New(base, throttle.WithPolicy(throttle.Policy{Rate: 1, Burst: 1}))
		onWire := make(chan error)
		go func() { onWire <- do(t, rt, "http://x.test/slow") }()
		synctest.Wait()
		waiting := make(chan error)
		for range 3 {
			go func() { waiting <- do(t, rt, "http://x.test/") }()
		}
		synctest.Wait()
		require.NoError(t, rt.Close())
		for range 3 {
			err := <-waiting
			require.ErrorIs(t, err, throttle.ErrClosed)
		}
		require.ErrorIs(t, do(t, rt, "http://y.test/"), throttle.ErrClosed)
		close(block)
		require.NoError(t, <-onWire, "a request on the wire is not cut")
		require.NoError(t, rt.Close(), "Close twice is fine")
		assert.EqualValues(t, 4, rt.Stats().Total.RefusedClosed)
	})
}

type idleCloser struct {
	rtFunc
	closed int
}

func (c *idleCloser) CloseIdleConnections() { c.closed++ }

func TestCloseIdleConnectionsPassedOn(t *testing.T) {
	base := &idleCloser{}
	client := &http.Client{Transport: throttle.New(base)}
	client.CloseIdleConnections()
	assert.Equal(t, 1, base.closed)
	throttle.New(rtFunc(nil)).CloseIdleConnections() // a base without it: no panic
}

func TestMemoryStaysBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("touches a million hosts")
	}
	synctest.Test(t, func(t *testing.T) {
		rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
			return reply(r, http.StatusOK), nil
		}), throttle.WithPolicy(throttle.Policy{Rate: 1000, Burst: 5, Windows: []throttle.Window{{N: 100, Per: ms(10)}}}))
		defer rt.Close()
		var ms0 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms0)
		peakKeys := 0
		const hosts = 1_000_000
		for i := range hosts {
			require.NoError(t, do(t, rt, "http://h"+strconv.Itoa(i)+".test/"))
			if i%1000 == 999 {
				time.Sleep(10 * time.Millisecond) // the buckets refill, the windows expire
				if i%100_000 == 99_999 {
					peakKeys = max(peakKeys, len(rt.Stats().Keys))
				}
			}
		}
		var ms1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms1)
		assert.Less(t, peakKeys, 10_000, "live keys")
		assert.Less(t, int64(ms1.HeapAlloc)-int64(ms0.HeapAlloc), int64(16<<20), "heap growth")
		assert.EqualValues(t, hosts, rt.Stats().Total.Requests, "dropped keys' counts stay in Total")
	})
}

// Requests to many hosts from many goroutines at once keep few keys
// live, however many hosts they have seen: a sweep sets the next when the
// keys it kept have doubled, not the keys live at its end, which count
// those made by other goroutines meanwhile (regression, found in review:
// 8 workers, one unpaced request to each of 100,000 hosts, left 17,000 to
// 33,000 keys live; 400,000 hosts, 121,000 to 160,000).
func TestKeysStayFewUnderConcurrentSweeps(t *testing.T) {
	if testing.Short() {
		t.Skip("touches 200,000 hosts")
	}
	rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) { return reply(r, http.StatusOK), nil }))
	defer rt.Close()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := next.Add(1); i <= 200_000; i = next.Add(1) {
				if err := do(t, rt, "http://h"+strconv.FormatInt(i, 10)+".test/"); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	st := rt.Stats()
	assert.Less(t, len(st.Keys), 10_000, "live keys")
	assert.EqualValues(t, 200_000, st.Total.Requests, "dropped keys' counts stay in Total")
}

func TestErrorsSayKeyAndLimit(t *testing.T) {
	until := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		we   throttle.WaitError
		want string
	}{
		{throttle.WaitError{Key: "k", Attempt: 1, Limit: throttle.LimitWindow, Window: throttle.Window{N: 5, Per: time.Second}, Until: until, Err: throttle.ErrWouldExceedDeadline},
			`throttle: key "k": window 5/1s until 2026-01-02T03:04:05Z: wait would exceed the context deadline`},
		{throttle.WaitError{Key: "k", Attempt: 2, Limit: throttle.LimitPause, Err: context.Canceled},
			`throttle: key "k": attempt 2: pause: context canceled`},
		{throttle.WaitError{Key: "k", Attempt: 1, Err: throttle.ErrClosed},
			`throttle: key "k": transport closed`},
		{throttle.WaitError{Key: "k", Attempt: 3, Limit: throttle.LimitInFlight, Err: context.DeadlineExceeded},
			`throttle: key "k": attempt 3: in-flight: context deadline exceeded`},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, tt.we.Error())
	}
	assert.True(t, errors.Is(&tests[0].we, context.DeadlineExceeded))
	for l := throttle.LimitNone; l <= throttle.LimitBackoff; l++ {
		assert.NotContains(t, l.String(), "Limit(", "every Limit has a name")
	}
	// A value with no name says so, alike for each enum (found in review:
	// PaceFrom(99) printed "none", EventKind(99) "unknown").
	assert.Equal(t, "Limit(99)", throttle.Limit(99).String())
	assert.Equal(t, "PaceFrom(99)", throttle.PaceFrom(99).String())
	assert.Equal(t, "EventKind(99)", throttle.EventKind(99).String())
	assert.Equal(t, "none", throttle.PaceNone.String())
}

// An error says each thing once: the key, the attempt, the limit, the cause
// (issue 8, point 9: "throttle: key "h": waiting for attempt 2: throttle:
// key "h": pause: context canceled").
func TestRetryWaitErrorSaysEachThingOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
			return reply(r, http.StatusTooManyRequests, "Retry-After", "10"), nil
		}))
		defer rt.Close()
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(5*time.Second, cancel)
		err := doCtx(t, ctx, rt, "http://h.test/")
		require.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, `throttle: key "h.test": attempt 2: pause until 2000-01-01T00:00:10Z: context canceled`, err.Error())
		var we *throttle.WaitError
		require.ErrorAs(t, err, &we)
		assert.Equal(t, throttle.LimitPause, we.Limit)
		assert.Equal(t, 2, we.Attempt)
	})
}

// The error of a request that gave up says each thing once: how many
// attempts, why it gave up unless that was the attempts, the cause
// (regression, found in review 46: `throttle: key "m.test": gave up after
// 3 attempts (3 attempts): unexpected EOF`).
func TestGaveUpErrorSaysEachThingOnce(t *testing.T) {
	for _, tt := range []struct {
		name  string
		retry throttle.Retry
		want  string
	}{
		{"MaxAttempts", throttle.Retry{MaxAttempts: 3},
			`throttle: key "m.test": gave up after 3 attempts: unexpected EOF`},
		{"MaxElapsed", throttle.Retry{MaxElapsed: 500 * time.Millisecond,
			NewBackOff: func() backoff.BackOff { return backoff.NewConstantBackOff(time.Second) }},
			`throttle: key "m.test": gave up after 1 attempt (a retry in 1s would pass MaxElapsed 500ms): unexpected EOF`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
					return nil, io.ErrUnexpectedEOF
				}), throttle.WithRetry(tt.retry))
				defer rt.Close()
				err := do(t, rt, "http://m.test/")
				require.ErrorIs(t, err, io.ErrUnexpectedEOF)
				assert.Equal(t, tt.want, err.Error())
			})
		})
	}
}

// A slow WithKey function (a cold cache of tenants) is not the request's
// round trip: the first attempt is admitted, and timed, from its end
// (found in review: timed from the request's arrival, two lookups of 9 s
// counted as round trips of 9 s, and the reserve held back against the
// network's jitter took a bucket of 50 to 2 sent at once).
func TestASlowKeyLookupIsNoRoundTrip(t *testing.T) {
	for _, slow := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			base := rtFunc(func(req *http.Request) (*http.Response, error) {
				time.Sleep(20 * time.Millisecond)
				return reply(req, http.StatusOK), nil
			})
			rec := newRecorder()
			rt := throttle.New(rtFunc(func(req *http.Request) (*http.Response, error) {
				rec.RoundTrip(req)
				return base(req)
			}),
				throttle.WithPolicy(throttle.Policy{Rate: 10, Burst: 50}),
				throttle.WithKey(func(req *http.Request) string {
					if slow && strings.HasSuffix(req.URL.Path, "/slowkey") {
						time.Sleep(9 * time.Second) // a cold cache of tenants
					}
					return "api"
				}))
			defer rt.Close()
			var wg sync.WaitGroup
			for range 16 { // warm up: round trips of 20 ms
				sendAt(t, &wg, rt, "http://api.test/w", 0)
				wg.Wait()
				time.Sleep(100 * time.Millisecond)
			}
			for range 2 {
				sendAt(t, &wg, rt, "http://api.test/slowkey", 0)
				wg.Wait()
				time.Sleep(100 * time.Millisecond)
			}
			time.Sleep(10 * time.Second) // the bucket full again
			start := time.Since(rec.start)
			for range 40 {
				sendAt(t, &wg, rt, "http://api.test/b", 0)
			}
			wg.Wait()
			n := 0
			for _, at := range rec.times() {
				if at >= start && at < start+100*time.Millisecond {
					n++
				}
			}
			assert.GreaterOrEqual(t, n, 30, "slow=%v", slow)
		})
	}
}
