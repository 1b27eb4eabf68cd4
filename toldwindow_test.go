package throttle_test

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlehttp/throttle"
)

// windowServer is a fixed window of n requests per per, aligned at the time it
// is made, answering each request lat after it is counted (and counting it
// lat after it is sent), with the quota fields form writes on every
// answer, and a whole-second Retry-After on its 429s. It records how many
// requests reached each window.
type windowServer struct {
	mu      sync.Mutex
	n       int
	per     time.Duration
	lat     time.Duration
	epoch   time.Time
	reached map[int]int // window index -> requests that reached it
	refused int
	form    func(limit, remaining int, resetAt, now time.Time) []string
}

func newWindowServer(n int, per, lat time.Duration, form func(limit, remaining int, resetAt, now time.Time) []string) *windowServer {
	return &windowServer{n: n, per: per, lat: lat, epoch: time.Now(), reached: map[int]int{}, form: form}
}

func (w *windowServer) RoundTrip(r *http.Request) (*http.Response, error) {
	time.Sleep(w.lat)
	w.mu.Lock()
	now := time.Now()
	i := int(now.Sub(w.epoch) / w.per)
	w.reached[i]++
	resetAt := w.epoch.Add(time.Duration(i+1) * w.per)
	remaining, status := max(w.n-w.reached[i], 0), http.StatusOK
	if w.reached[i] > w.n {
		status = http.StatusTooManyRequests
		w.refused++
	}
	kv := w.form(w.n, remaining, resetAt, now)
	if status != http.StatusOK {
		kv = append(kv, "Retry-After", strconv.Itoa(int((resetAt.Sub(now)+time.Second-1)/time.Second)))
	}
	w.mu.Unlock()
	time.Sleep(w.lat)
	return reply(r, status, kv...), nil
}

// toldThenJob sends one request through a Transport alone on w, which
// tells it the quota, then a job of n with 16 workers, and checks that no
// window was sent more than it allows, and none refused.
func (w *windowServer) toldThenJob(t *testing.T, n int) {
	t.Helper()
	rt := throttle.New(w)
	defer rt.Close()
	resp, err := rt.RoundTrip(newReq(t, t.Context(), http.MethodGet, "http://api.test/first"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	took := job(t, rt, n)
	w.mu.Lock()
	defer w.mu.Unlock()
	t.Logf("took %v; requests that reached each window: %v; %d refused", took, w.reached, w.refused)
	for i, k := range w.reached {
		assert.LessOrEqual(t, k, w.n, "requests that reached window %d, which allows %d", i, w.n)
	}
	assert.Zero(t, w.refused, "requests refused")
}

// A window longer than 10 s whose length its fields do not state
// (X-RateLimit-*, draft 07's RateLimit without RateLimit-Policy) gives
// back its limit at its reset, and no more: the requests waiting beyond
// that limit wait for the answers of the new window, not go at once.
// Regression, found in review: with the next reset unknown and what the
// reset gave back spent, nothing held the key, and at each reset the
// whole line went: 12 requests into a window of 3, 9 refused.
func TestAWindowsResetLetsGoOnlyItsLimit(t *testing.T) {
	forms := []struct {
		name string
		form func(limit, remaining int, resetAt, now time.Time) []string
	}{
		{"x-ratelimit/delta-seconds", func(l, r int, at, now time.Time) []string {
			return []string{"X-RateLimit-Limit", strconv.Itoa(l), "X-RateLimit-Remaining", strconv.Itoa(r),
				"X-RateLimit-Reset", strconv.Itoa(int((at.Sub(now) + time.Second - 1) / time.Second))}
		}},
		{"github/epoch", func(l, r int, at, now time.Time) []string {
			return []string{"X-RateLimit-Limit", strconv.Itoa(l), "X-RateLimit-Remaining", strconv.Itoa(r),
				"X-RateLimit-Used", strconv.Itoa(l - r), "X-RateLimit-Reset", strconv.FormatInt(at.Unix(), 10),
				"Date", now.UTC().Format(http.TimeFormat)}
		}},
		{"ietf/draft-07", func(l, r int, at, now time.Time) []string {
			return []string{"RateLimit", fmt.Sprintf("limit=%d, remaining=%d, reset=%d", l, r, int((at.Sub(now)+time.Second-1)/time.Second))}
		}},
	}
	for _, f := range forms {
		t.Run(f.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const limit, per = 3, time.Minute
				srv := newWindowServer(limit, per, 5*time.Millisecond, f.form)
				// One request tells the quota: 2 of 3 remain this minute.
				// Then a job of 14 with 16 workers: 2 this minute, 3 in
				// each of the next four.
				srv.toldThenJob(t, 14)
			})
		})
	}
}

// Requests sent together reach the server in any order: the answer to the
// one admitted last may carry the highest Remaining of the new window. It
// is no early reset: the count it shows was read before those of the
// others sent with it. A window of 10 a minute, 16 workers. Regression,
// found in review: taken for a reset placed late, up to 18 requests were
// sent into a window of 10.
func TestReorderedAnswersAreNoEarlyReset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const limit, per = 10, time.Minute
		srv := newWindowServer(limit, per, time.Millisecond, func(l, r int, at, now time.Time) []string {
			return []string{"X-RateLimit-Limit", strconv.Itoa(l), "X-RateLimit-Remaining", strconv.Itoa(r),
				"X-RateLimit-Reset", strconv.Itoa(int((at.Sub(now) + time.Second - 1) / time.Second))}
		})
		srv.toldThenJob(t, 49) // 9 this minute, 10 in each of the next four
	})
}

// A key whose server said, in its quota headers, that only 2 requests
// remain in its hourly window is not forgotten while that window runs: a
// sweep that drops it lets the next requests go as if the quota were
// whole, and the server refuses them (regression, found in review: 3 of 5
// refused).
func TestAServersCountOutlivesASweep(t *testing.T) {
	for _, sweep := range []bool{false, true} {
		t.Run(fmt.Sprint("sweep=", sweep), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				var mu sync.Mutex
				used := 0
				var refused atomic.Int64
				base := rtFunc(func(r *http.Request) (*http.Response, error) {
					if r.URL.Host != "q.test" {
						return reply(r, http.StatusOK), nil
					}
					time.Sleep(50 * time.Millisecond) // on the wire: the five go together
					mu.Lock()
					defer mu.Unlock()
					reset := strconv.Itoa(int((time.Hour - time.Since(start)).Seconds()))
					if used >= 5 {
						refused.Add(1)
						return reply(r, http.StatusTooManyRequests, "Retry-After", reset,
							"X-RateLimit-Limit", "5", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", reset), nil
					}
					used++
					return reply(r, http.StatusOK, "X-RateLimit-Limit", "5",
						"X-RateLimit-Remaining", strconv.Itoa(5-used), "X-RateLimit-Reset", reset), nil
				})
				rt := throttle.New(base)
				defer rt.Close()
				for range 3 {
					require.NoError(t, do(t, rt, "http://q.test/"))
				}
				time.Sleep(time.Second)
				if sweep {
					for i := range 2100 { // two sweeps: the second drops what the first spared
						require.NoError(t, do(t, rt, fmt.Sprintf("http://k%d.test/", i)))
					}
				}
				_, live := rt.Stats().Keys["q.test"]
				t.Logf("q.test live after the other keys: %v", live)
				var wg sync.WaitGroup
				for range 5 {
					wg.Go(func() { _ = do(t, rt, "http://q.test/") })
				}
				wg.Wait()
				assert.Zero(t, refused.Load(), "requests the server refused: its headers said 2 remain until the reset")
			})
		})
	}
}

// getKeyed sends a GET with an API key and closes the response; it returns the status.
func getKeyed(t *testing.T, rt http.RoundTripper, url string) int {
	t.Helper()
	req := newReq(t, t.Context(), http.MethodGet, url)
	req.Header.Set("X-API-Key", "k1")
	resp, err := rt.RoundTrip(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// A key whose server's token bucket, as its quota headers tell, is far from
// full is not forgotten by a sweep: a fresh state sends the line as if the
// bucket were whole. Regression, found in review: a bucket 40 deep at 10 a
// second holding about 13, the key swept among 2,100 others, the next 60
// requests went at once, 49 refused (1 without the sweep). Once the bucket
// is whole again the key goes at the next sweeps.
func TestAServersBucketOutlivesASweep(t *testing.T) {
	for _, sweep := range []bool{false, true} {
		t.Run(fmt.Sprint("sweep=", sweep), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var mu sync.Mutex
				tokens, at := 40.0, time.Now()
				var refused atomic.Int64
				base := rtFunc(func(r *http.Request) (*http.Response, error) {
					if r.URL.Host != "q.test" {
						return reply(r, http.StatusOK), nil
					}
					time.Sleep(20 * time.Millisecond)
					mu.Lock()
					defer mu.Unlock()
					tokens = min(40, tokens+time.Since(at).Seconds()*10)
					at = time.Now()
					if tokens < 1 {
						refused.Add(1)
						return reply(r, http.StatusTooManyRequests, "Retry-After", "1",
							"X-RateLimit-Limit", "40", "X-RateLimit-Remaining", "0"), nil
					}
					tokens--
					return reply(r, http.StatusOK, "X-RateLimit-Limit", "40",
						"X-RateLimit-Remaining", strconv.Itoa(int(tokens))), nil
				})
				rt := throttle.New(base)
				defer rt.Close()
				// A first job: the key learns the server's bucket from its headers.
				var wg sync.WaitGroup
				for range 4 {
					wg.Go(func() {
						for range 25 {
							getKeyed(t, rt, "http://q.test/")
						}
					})
				}
				wg.Wait()
				before := refused.Load()
				t.Logf("first job: %d refused; key %+v", refused.Load(), rt.Stats().Keys["q.test"])
				time.Sleep(time.Second) // the bucket holds about 13 of 40
				if sweep {
					for i := range 2100 { // two sweeps: the second drops what the first spared
						require.NoError(t, do(t, rt, fmt.Sprintf("http://k%d.test/", i)))
					}
				}
				_, live := rt.Stats().Keys["q.test"]
				t.Logf("q.test live after the other keys: %v", live)
				for range 60 {
					wg.Go(func() { getKeyed(t, rt, "http://q.test/") })
				}
				wg.Wait()
				// Kept, the key sends what the bucket holds and paces the rest
				// (one 429 at most: its rate is measured a little high).
				assert.LessOrEqual(t, refused.Load()-before, int64(2),
					"429s in the second job: the headers said the bucket held about 13 of 40")
				// Once the bucket is whole again, the key goes at the next sweeps.
				time.Sleep(10 * time.Second)
				for i := range 4200 {
					require.NoError(t, do(t, rt, fmt.Sprintf("http://j%d.test/", i)))
				}
				_, live = rt.Stats().Keys["q.test"]
				assert.False(t, live, "q.test kept after its bucket refilled whole")
			})
		})
	}
}
