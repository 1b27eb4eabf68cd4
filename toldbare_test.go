package throttle_test

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlehttp/throttle"
	"github.com/throttlehttp/throttle/throttletest"
)

// An answer the server accepted without quota headers, after one that had
// them, stays taken from what remained: the mirror is what remained when
// the server answered a request, less the requests sent after that one,
// answered or not (regression, found in review 47: told Limit 3,
// Remaining 2, Reset 60 on the first answer and nothing on the next, one
// request at a time, all five went within 5 ms, and Stats said 2 remained
// after the two that remained were answered; now two go, and the fourth
// waits for the reset at 60 s).
func TestAnswersWithoutQuotaHeadersAreTakenFromWhatRemained(t *testing.T) {
	for _, kv := range [][]string{
		{"X-RateLimit-Limit", "3", "X-RateLimit-Remaining", "2", "X-RateLimit-Reset", "60"},
		{"RateLimit", `"default";r=2;t=60`, "RateLimit-Policy", `"default";q=3;w=60`},
	} {
		t.Run(kv[0], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var sent []time.Duration
				start := time.Now()
				rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
					time.Sleep(time.Millisecond)
					sent = append(sent, time.Since(start))
					if len(sent) == 1 {
						return reply(r, http.StatusOK, kv...), nil
					}
					return reply(r, http.StatusOK), nil
				}))
				defer rt.Close()
				for range 3 {
					require.NoError(t, do(t, rt, "http://api.test/"))
				}
				st := rt.Stats().Keys["api.test"]
				assert.Equal(t, 0, st.Remaining, "the two that remained were sent")
				assert.Equal(t, start.Add(time.Minute+time.Millisecond), st.Reset)
				for range 2 {
					require.NoError(t, do(t, rt, "http://api.test/"))
				}
				t.Logf("sent at %v", sent)
				require.Len(t, sent, 5)
				assert.Less(t, sent[2], 10*time.Millisecond, "the two that remained go at once")
				assert.Equal(t, time.Minute+2*time.Millisecond, sent[3], "the fourth waits for the reset")
				assert.Equal(t, 1, rt.Stats().Keys["api.test"].Remaining, "the new window's 3, less two")
			})
		})
	}
}

// A cache's stored answer, which its Age field marks, is not taken from
// what remained: the server never saw the request. (Taken so, in review
// 47's model, a window of 100 a second half of whose answers a cache gave
// took 19.6 s for 2,000 requests where 10.9 s was.)
func TestACachesAnswerIsNotTakenFromWhatRemained(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var sent []time.Duration
		start := time.Now()
		rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
			time.Sleep(time.Millisecond)
			sent = append(sent, time.Since(start))
			if len(sent) == 1 {
				return reply(r, http.StatusOK, "X-RateLimit-Limit", "3", "X-RateLimit-Remaining", "2", "X-RateLimit-Reset", "60"), nil
			}
			return reply(r, http.StatusOK, "Age", "30"), nil
		}))
		defer rt.Close()
		for range 5 {
			require.NoError(t, do(t, rt, "http://api.test/"))
		}
		require.Len(t, sent, 5)
		assert.Equal(t, 5*time.Millisecond, sent[4], "none waits")
		assert.Equal(t, 2, rt.Stats().Keys["api.test"].Remaining, "what the server said")
	})
}

// Nor is the count a cache's stored answer carries a reading: it is the
// one the server sent when the answer was stored. One stored ten minutes
// ago (Age 600), when the window was spent (Remaining 0, a reset of 50 s),
// holds nothing: the server's window holds 94 of 100 now. An Age of 0 is a
// cache's miss (Varnish and Fastly add one to every answer): the server's
// answer, whose spent count holds the key until its reset. Regression,
// found in review: the stored reading held the key 50 s.
func TestACachesStoredCountIsNoReading(t *testing.T) {
	for _, age := range []string{"600", "0"} {
		t.Run("age-"+age, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				used := 0
				start := time.Now()
				rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
					time.Sleep(time.Millisecond)
					if r.URL.Path == "/cached" {
						return reply(r, http.StatusOK, "Age", age,
							"X-RateLimit-Limit", "100", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "50"), nil
					}
					used++
					reset := 3600 - int(time.Since(start)/time.Second)
					return reply(r, http.StatusOK, "X-RateLimit-Limit", "100", "X-RateLimit-Remaining", strconv.Itoa(100-used),
						"X-RateLimit-Reset", strconv.Itoa(reset)), nil
				}))
				defer rt.Close()
				for range 5 {
					require.NoError(t, do(t, rt, "http://api.test/live"))
				}
				require.NoError(t, do(t, rt, "http://api.test/cached"))
				before := time.Now()
				require.NoError(t, do(t, rt, "http://api.test/live"))
				if age == "0" {
					assert.GreaterOrEqual(t, time.Since(before), 50*time.Second, "the server's spent count holds the key")
					return
				}
				assert.Less(t, time.Since(before), time.Second, "none waits")
				assert.Equal(t, 94, rt.Stats().Keys["api.test"].Remaining, "what the server said last")
			})
		})
	}
}

// endpoints is a host of two endpoints under one key: /login behind a
// fixed window of limit per win, counted from the first request and told
// by X-RateLimit-* (as express-rate-limit mounted on one route sends
// them), and /items with no limiter and no quota headers, answered with
// status. A job of n requests, one in every `every` to /login, 4 at a
// time, 1 ms away. It returns how long the job took, how many the server
// refused, and how many failed.
func endpoints(t *testing.T, limit int, win time.Duration, n, every, status int) (took time.Duration, refused, failed int) {
	t.Helper()
	var mu sync.Mutex
	start := time.Now()
	lw := newLoginWindow(limit, win, status, func(p string) bool { return strings.HasPrefix(p, "/login/") })
	rt := throttle.New(rtFunc(lw.serve))
	defer rt.Close()
	next := make(chan int)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for i := range next {
				path := "/items/"
				if i%every == 0 {
					path = "/login/"
				}
				if err := do(t, rt, fmt.Sprint("http://api.test", path, i)); err != nil {
					mu.Lock()
					if failed++; failed == 1 {
						t.Logf("first failure, %s%d: %v", path, i, err)
					}
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return time.Since(start), lw.refused, failed
}

// loginWindow is a fixed window of limit per win, counted from its making,
// on the paths login picks, told by X-RateLimit-* (as express-rate-limit
// mounted on one route sends them), refusing with 429 and Retry-After; the
// other paths it answers with status, without headers. 1 ms away.
type loginWindow struct {
	mu      sync.Mutex
	limit   int
	win     time.Duration
	status  int
	login   func(path string) bool
	used    int
	winAt   time.Time
	refused int
}

func newLoginWindow(limit int, win time.Duration, status int, login func(string) bool) *loginWindow {
	return &loginWindow{limit: limit, win: win, status: status, login: login, winAt: time.Now()}
}

func (lw *loginWindow) serve(r *http.Request) (*http.Response, error) {
	time.Sleep(time.Millisecond)
	if !lw.login(r.URL.Path) {
		return reply(r, lw.status), nil
	}
	lw.mu.Lock()
	defer lw.mu.Unlock()
	now := time.Now()
	for now.Sub(lw.winAt) >= lw.win {
		lw.winAt, lw.used = lw.winAt.Add(lw.win), 0
	}
	reset := fmt.Sprint(int((lw.winAt.Add(lw.win).Sub(now) + time.Second - 1) / time.Second))
	limit := fmt.Sprint(lw.limit)
	if lw.used >= lw.limit {
		lw.refused++
		return reply(r, http.StatusTooManyRequests, "X-RateLimit-Limit", limit, "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", reset, "Retry-After", reset), nil
	}
	lw.used++
	return reply(r, http.StatusOK, "X-RateLimit-Limit", limit, "X-RateLimit-Remaining", fmt.Sprint(lw.limit-lw.used), "X-RateLimit-Reset", reset), nil
}

// Answers without quota headers from an endpoint the quota does not guard
// spend none of it: the reading that follows shows them not counted, and
// a count only they spent holds the key for no reset, but lets one request
// go, whose answer tells (regression, found in review 48 in a first fix
// for review 47's bug 1, which took every such answer from what remained:
// 60 a minute, 1,000 requests, took 3 min where 250 ms was, the key held
// to each reset; 1,000 an hour, 5,000 requests, 3,872 failed at once,
// held past MaxRetryAfter, though the server refused nothing). The last
// two cases spend all of /login's count on /items before /login is read
// again: without the request that goes to ask, the first took 1 min, and
// in the second 3,994 of 5,000 failed at once.
func TestAnEndpointWithoutQuotaHeadersDoesNotSpendAnothersQuota(t *testing.T) {
	for _, c := range []struct {
		name     string
		limit    int
		win      time.Duration
		n, every int
		status   int
	}{
		{"60 a minute, 1 in 50", 60, time.Minute, 1000, 50, http.StatusOK},
		{"1,000 an hour, 1 in 20", 1000, time.Hour, 5000, 20, http.StatusOK},
		{"60 a minute, 1 in 50, 304s", 60, time.Minute, 1000, 50, http.StatusNotModified},
		{"60 a minute, 1 in 100", 60, time.Minute, 1000, 100, http.StatusOK},
		{"1,000 an hour, 1 in 2,000", 1000, time.Hour, 5000, 2000, http.StatusOK},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				took, refused, failed := endpoints(t, c.limit, c.win, c.n, c.every, c.status)
				t.Logf("took %v, %d refused, %d failed", took, refused, failed)
				assert.Zero(t, failed, "none failed: the server refused nothing")
				assert.Zero(t, refused)
				assert.Less(t, took, 10*time.Second, "none of them near /login's quota, 1 ms away, 4 at a time")
			})
		})
	}
}

// stripping passes requests to api, 1 ms each way, and leaves the quota
// headers out of every answer accepted after the first for which keep,
// given how many came before it, says so.
func stripping(api *throttletest.API, keep func(i int) bool) rtFunc {
	var mu sync.Mutex
	i := 0
	return func(r *http.Request) (*http.Response, error) {
		time.Sleep(time.Millisecond)
		resp, err := api.RoundTrip(r)
		time.Sleep(time.Millisecond)
		mu.Lock()
		defer mu.Unlock()
		if i++; err == nil && resp.StatusCode == http.StatusOK && i > 1 && !keep(i) {
			for k := range resp.Header {
				if k != "Content-Type" {
					resp.Header.Del(k)
				}
			}
		}
		return resp, err
	}
}

// A server that counts every request, told by its first answer and its
// refusals only, to paths that differ from one request to the next:
// answers without a reading from other endpoints than the reading's spend
// the count, one request goes beyond it to ask, is refused, and that says
// they are counted: the key holds to each reset for two windows, then
// asks again, and holds for four, eight... (before, nothing held it:
// refused once in each of the first two windows; held for good, another
// client's spending, which the try cannot tell apart, held it for good
// too: see TestOneRefusalByAnotherClientDoesNotHoldTheKeyForGood).
func TestATryBeyondAnswersFromOtherEndpointsIsRefusedOnce(t *testing.T) {
	for _, c := range []struct {
		n       int
		refused int64
	}{{30, 1}, {150, 3}} { // three windows; fifteen: asked at 1, 3 and 7
		t.Run(fmt.Sprint(c.n), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := throttletest.NewAPI(throttletest.Config{IETF: true, HeadersOnSuccess: true,
					Limits: []throttletest.Limit{{Algorithm: throttletest.FixedWindow, N: 10, Per: time.Minute}}})
				rt := throttle.New(stripping(api, func(int) bool { return false }))
				defer rt.Close()
				took := jobOf(t, rt, c.n, 1, "")
				st := api.Stats().Total
				t.Logf("took %v, %d refused", took, st.Throttled)
				assert.Equal(t, c.refused, st.Throttled, "the requests that asked")
				assert.Less(t, took, time.Duration(c.n/10-1)*time.Minute+time.Second, "a window per 10")
			})
		})
	}
}

// A quota that gives back before its reset, taken for a window (a log of
// recent requests, told by X-RateLimit-*, whose reset says when the
// newest leaves), half its answers without headers: a reading of a
// request sent after those answered without one, above what remained
// less them, gives them back, and the key goes on as the quota gives
// back. Taken from what remained until the reset, they held the key a
// minute where the log gave back in milliseconds: 500 requests took 8 min
// where 4 min was.
func TestAQuotaThatGivesBackIsNotHeldByAnswersWithoutHeaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := throttletest.NewAPI(throttletest.Config{XRateLimit: true, HeadersOnSuccess: true,
			Limits: []throttletest.Limit{{Algorithm: throttletest.SlidingLog, N: 100, Per: time.Minute}}})
		rt := throttle.New(stripping(api, func(i int) bool { return i%2 == 1 }))
		defer rt.Close()
		took := jobOf(t, rt, 500, 1, "")
		st := api.Stats().Total
		t.Logf("took %v, %d refused", took, st.Throttled)
		assert.Less(t, took, 4*time.Minute+5*time.Second, "five of the log's minutes, the last begun at 4 min")
	})
}

// A window told in whole seconds, half its answers without headers, 16
// at a time: an answer without headers to a request sent within a second
// of the reset the key knows (late by up to one) may be counted in the
// server's next window, and is not taken from this one. Taken, the key
// held each window's last one or two to the reset it knew, a few ms after
// the server's, and was sent 98.4-98.9 a second in 4 seeds, where 99.6
// was.
func TestAnswersWithoutHeadersNearAResetAreNotTakenFromTheWindowBefore(t *testing.T) {
	for seed := range 4 {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := throttletest.NewAPI(throttletest.Config{XRateLimit: true, HeadersOnSuccess: true,
					Limits: []throttletest.Limit{quotaWindow}})
				var mu sync.Mutex
				per := map[time.Duration]int{}
				start := time.Now()
				base := stripping(api, func(i int) bool { return (i+seed)%2 == 1 })
				rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
					resp, err := base(r)
					if err == nil && resp.StatusCode == http.StatusOK {
						mu.Lock()
						per[time.Since(start).Truncate(time.Second)]++
						mu.Unlock()
					}
					return resp, err
				}))
				defer rt.Close()
				took := job(t, rt, 2000)
				sum := 0
				for s := 2 * time.Second; s < 19*time.Second; s += time.Second {
					sum += per[s]
				}
				t.Logf("seed %d: took %v, %d refused, %.1f accepted a second from 2 s to 19 s", seed, took, api.Stats().Total.Throttled, float64(sum)/17)
				assert.GreaterOrEqual(t, sum, 17*99, "all but one of each window")
			})
		})
	}
}

// A window of 50 per 10 s, a third of its answers without headers, 16 at
// a time: an answer without headers to a request sent before the answer
// that set what remained came may have reached the server first, and be
// counted in it: it is not taken. Taken, those sent together at a
// window's start were taken twice, and the job of 2,000 took 6m40s in 4
// seeds of 4, a window more than the 6m30s it takes.
func TestAnswersWithoutHeadersSentWithAReadingAreNotTakenTwice(t *testing.T) {
	for seed := range 4 {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := throttletest.NewAPI(throttletest.Config{XRateLimit: true, HeadersOnSuccess: true,
					Limits: []throttletest.Limit{{Algorithm: throttletest.FixedWindow, N: 50, Per: 10 * time.Second}}})
				rt := throttle.New(stripping(api, func(i int) bool { return (i+seed)%3 != 0 }))
				defer rt.Close()
				took := job(t, rt, 2000)
				t.Logf("seed %d: took %v, %d refused", seed, took, api.Stats().Total.Throttled)
				assert.Less(t, took, 6*time.Minute+35*time.Second, "40 windows, the last begun at 6m30s")
			})
		})
	}
}

// Once a request that went beyond answers without headers from another
// endpoint (GET /b, which the quota does not count) showed them uncounted,
// the answers without headers from the endpoint whose answers carry them
// (GET /a, which the quota counts) are still taken from what remained:
// the verdict is about the other endpoint's answers. Not taken, they let
// 12 requests to /a go at once into a window that had 8 left, 4 refused
// (regression, found in review).
func TestAnotherEndpointsVerdictDoesNotFreeTheReadingsOwn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n, per = 10, time.Minute
		start := time.Now()
		var mu sync.Mutex
		var used, sentA, headersOnA, refused int
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			time.Sleep(5 * time.Millisecond)
			if r.URL.Path != "/a" {
				return reply(r, http.StatusOK), nil // not counted, no headers
			}
			mu.Lock()
			defer mu.Unlock()
			reset := time.Until(start.Add(per))
			if time.Since(start) >= per {
				return reply(r, http.StatusOK), nil // the test looks at the first window only
			}
			sentA++
			if used >= n {
				refused++
				return reply(r, http.StatusTooManyRequests, "Retry-After", strconv.Itoa(int(reset.Seconds())+1)), nil
			}
			used++
			if headersOnA > 0 {
				// This server's headers come on some answers, not all.
				headersOnA--
				return reply(r, http.StatusOK, "X-RateLimit-Limit", strconv.Itoa(n),
					"X-RateLimit-Remaining", strconv.Itoa(n-used), "X-RateLimit-Reset", strconv.Itoa(int(reset.Seconds())+1)), nil
			}
			return reply(r, http.StatusOK), nil
		})
		rt := throttle.New(base, throttle.WithRetry(throttle.Retry{MaxAttempts: 1}))
		defer rt.Close()
		headersOnA = 2
		require.NoError(t, do(t, rt, "http://api.test/a")) // Remaining 9
		for range 9 {
			require.NoError(t, do(t, rt, "http://api.test/b")) // uncounted: taken from the 9
		}
		// The try beyond them: Remaining 8 shows them uncounted.
		require.NoError(t, do(t, rt, "http://api.test/a"))
		mu.Lock()
		require.Equal(t, 0, headersOnA, "both readings were sent")
		sentA = 0
		mu.Unlock()
		var wg sync.WaitGroup
		for range 12 { // 12 workers at once
			wg.Go(func() { assert.NoError(t, do(t, rt, "http://api.test/a")) })
		}
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		t.Logf("sent %d to /a in the window, %d refused", sentA, refused)
		assert.Zero(t, refused, "the window had 8 left: the key sent %d to /a before its reset", sentA)
	})
}

// A host whose /login has a limiter (5 a minute, X-RateLimit-* on its
// answers) that another client of the same address spends too, and whose
// /items has none and sends no headers. The key's try beyond an /items
// answer, a /login request, is refused once because the other client took
// the window's last one: the verdict that /items' answers count holds for
// two windows, not for good. Regression, found in review: held for good,
// every window's few /login readings, spent by /items answers the server
// never counts, held the key to each reset: after the other client had
// gone, 200 requests, one in 50 to /login, took 4 min where 200 ms was.
func TestOneRefusalByAnotherClientDoesNotHoldTheKeyForGood(t *testing.T) {
	for _, other := range []bool{false, true} {
		t.Run(fmt.Sprintf("other-%v", other), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const limit, win = 5, time.Minute
				lw := newLoginWindow(limit, win, http.StatusOK, func(p string) bool { return p == "/login" })
				rt := throttle.New(rtFunc(lw.serve), throttle.WithRetry(throttle.Retry{MaxAttempts: 1}))
				defer rt.Close()
				for range 4 {
					require.NoError(t, do(t, rt, "http://api.test/login")) // Remaining 1
				}
				require.NoError(t, do(t, rt, "http://api.test/items")) // taken: 0
				if other {
					lw.mu.Lock()
					lw.used = limit // the other client takes the last one
					lw.mu.Unlock()
				}
				require.NoError(t, do(t, rt, "http://api.test/login")) // the try
				time.Sleep(2 * win)                                    // the other client is gone
				lw.mu.Lock()
				refusedBefore := lw.refused
				lw.mu.Unlock()
				begin := time.Now()
				for i := range 200 {
					path := "/items"
					if i%50 == 0 {
						path = "/login"
					}
					require.NoError(t, do(t, rt, "http://api.test"+path))
				}
				took := time.Since(begin)
				lw.mu.Lock()
				defer lw.mu.Unlock()
				t.Logf("200 requests took %v, %d refused (%d before)", took, lw.refused-refusedBefore, refusedBefore)
				assert.Less(t, took, 10*time.Second, "4 of them to /login, a window holds 5")
			})
		})
	}
}
