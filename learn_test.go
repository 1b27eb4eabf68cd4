package throttle_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"

	"github.com/throttlehttp/throttle"
	"github.com/throttlehttp/throttle/throttletest"
)

// Told nothing of the quota (no Policy, no quota headers), the transport
// learns a pace from the 429s and their whole-second Retry-After alone, for
// every kind of quota, and stays there: within 1.15× the ideal time and 0.5%
// of requests refused (issue 9, point 3), with requests reaching the server
// 0–2 ms late and answers 1–3 ms late. A log, whose count a cut pace
// leaves slowly, is held to 1.10×: its pace probes back up after 2 quiet
// seconds, not 4 (1.11–1.12× then).
func TestLearnsTheQuotaFrom429sAlone(t *testing.T) {
	tests := []struct {
		name    string
		limit   throttletest.Limit
		quota   float64       // requests per second
		ideal   time.Duration // for 4,000 requests
		refused int64         // the most 429s
		most    float64       // the longest time, over the ideal (0: 1.15)
		noWait  bool          // 429s without Retry-After
		date    bool          // Retry-After as an HTTP-date
	}{
		{"token-bucket", throttletest.Limit{Algorithm: throttletest.TokenBucket, Rate: 200, Burst: 20},
			200, 19900 * time.Millisecond, 20, 0, false, false},
		// A window refuses all until its reset, whatever the pace over it:
		// each probe above its quota costs a few 429s (0.4-0.6%).
		{"fixed-window", throttletest.Limit{Algorithm: throttletest.FixedWindow, N: 100, Per: time.Second},
			100, 39 * time.Second, 25, 0, false, false},
		{"sliding-log", throttletest.Limit{Algorithm: throttletest.SlidingLog, N: 200, Per: time.Second},
			200, 19 * time.Second, 20, 1.10, false, false},
		// 429s that state no wait are taken to ask for a second: a
		// backoff of a fraction of one finds a window still spent until
		// its reset (regression: 84 429s on average, 125 at worst, the
		// pace doubling off waits of 100 ms). A bucket refuses as with
		// Retry-After.
		{"fixed-window-no-retry-after", throttletest.Limit{Algorithm: throttletest.FixedWindow, N: 100, Per: time.Second},
			100, 39 * time.Second, 25, 0, true, false},
		{"token-bucket-no-retry-after", throttletest.Limit{Algorithm: throttletest.TokenBucket, Rate: 200, Burst: 20},
			200, 19900 * time.Millisecond, 20, 0, true, false},
		// A date rounds up to the server's next whole second, whatever
		// the wait, and is peeked into as whole seconds are: a bucket's
		// next token is due at once (regression: 1.07x, each pause
		// waited out to its date); a window, told by the peeks, is
		// cruised at and probed a whole window's test at a time, however
		// near its reset a refusal came (regression: taken for a bucket,
		// its pace doubled past it again and again, 69 429s; then, told
		// but tested over the wait to its reset, 170).
		{"fixed-window-date", throttletest.Limit{Algorithm: throttletest.FixedWindow, N: 100, Per: time.Second},
			100, 39 * time.Second, 30, 0, false, true},
		{"token-bucket-date", throttletest.Limit{Algorithm: throttletest.TokenBucket, Rate: 200, Burst: 20},
			200, 19900 * time.Millisecond, 30, 1.04, false, true},
		// A slow bucket (regression: 256-271 429s): refusals that come
		// before 20 answers bound the search, or the pace doubled past
		// the quota every second; a cut pace holds 200 answers' worth
		// before it probes, not 2 s, which is 20 answers at 10/s; a
		// refused probe goes back to the pace it rose from, not to 0.95
		// of the refused one, 2% above the quota (46-48 429s: a second
		// collision each cycle).
		{"slow-token-bucket", throttletest.Limit{Algorithm: throttletest.TokenBucket, Rate: 10, Burst: 5},
			10, 399500 * time.Millisecond, 40, 0, false, false},
	}
	for _, tt := range tests {
		for seed := range int64(3) {
			t.Run(fmt.Sprint(tt.name, "/seed", seed), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					cfg := nearby(throttletest.Config{Limits: []throttletest.Limit{tt.limit}}, seed)
					if tt.noWait {
						cfg.RetryAfter = throttletest.RetryAfterNone
					}
					if tt.date {
						cfg.RetryAfter = throttletest.RetryAfterDate
					}
					api := throttletest.NewAPI(cfg)
					rt := throttle.New(api)
					defer rt.Close()
					took := job(t, rt, 4000)
					seen := api.Stats().Total
					st := rt.Stats().Keys["api.test"]
					t.Logf("took %v (%.2fx the ideal), %d refused, pace %.1f/s", took,
						took.Seconds()/tt.ideal.Seconds(), seen.Throttled, float64(st.Rate))
					most := tt.most
					if most == 0 {
						most = 1.15
					}
					assert.LessOrEqual(t, took.Seconds(), most*tt.ideal.Seconds(), "within %.2fx the ideal", most)
					assert.LessOrEqual(t, seen.Throttled, tt.refused)
					assert.Equal(t, throttle.PaceLearned, st.PaceFrom)
					assert.InEpsilon(t, tt.quota, float64(st.Rate), 0.15, "the pace learned is near the quota")
				})
			})
		}
	}
}

// A fast quota (a token bucket of 2,000/s, 50 deep) drawn into a pause in
// the middle of the search for its pace (a refusal of the doubling, then
// another of the pace cut from it, the bucket still empty) searches on
// after the pause, halving the gap each half test, rather than probing up
// from a sixteenth a whole test a step (regression: 1.48x the ideal in
// these two seeds, of 20 seeds' 1.17x on average; now 1.16x and 1.17x).
func TestLearnedSearchGoesOnAfterAPause(t *testing.T) {
	for _, seed := range []int64{7, 8} {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := throttletest.NewAPI(nearby(throttletest.Config{Limits: []throttletest.Limit{
					{Algorithm: throttletest.TokenBucket, Rate: 2000, Burst: 50}}}, seed))
				rt := throttle.New(api)
				defer rt.Close()
				took := job(t, rt, 20000)
				ideal := 9975 * time.Millisecond
				t.Logf("took %v (%.2fx the ideal), %d refused", took, took.Seconds()/ideal.Seconds(), api.Stats().Total.Throttled)
				assert.LessOrEqual(t, took.Seconds(), 1.3*ideal.Seconds())
			})
		})
	}
}

// A quota that halves mid-run (a token bucket from 200/s to 100/s after 3 s)
// is followed within 1.10× the ideal of the changed quota: the refusals that
// follow the change measure the new rate, and the learned pace goes there
// (issue 9, point 3).
func TestLearnedPaceFollowsAQuotaThatHalves(t *testing.T) {
	for seed := range int64(3) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := func(rate float64) throttletest.Config {
					return nearby(throttletest.Config{
						Limits: []throttletest.Limit{{Algorithm: throttletest.TokenBucket, Rate: rate, Burst: 20}}}, seed)
				}
				before, after := throttletest.NewAPI(cfg(200)), throttletest.NewAPI(cfg(100))
				rt := throttle.New(changesAt(3*time.Second, before, after))
				defer rt.Close()
				took := job(t, rt, 4000)
				ideal := 3*time.Second + 3380*time.Second/100 // 620 at 200/s with the burst, then 100/s
				refused := before.Stats().Total.Throttled + after.Stats().Total.Throttled
				st := rt.Stats().Keys["api.test"]
				t.Logf("took %v (%.2fx the ideal), %d refused, pace %.1f/s", took, took.Seconds()/ideal.Seconds(), refused, float64(st.Rate))
				assert.LessOrEqual(t, took.Seconds(), 1.10*ideal.Seconds(), "within 1.10x the ideal of the changed quota")
				assert.LessOrEqual(t, refused, int64(30), "under 0.75%")
				// Within 15%: the job may end while a probe is above it,
				// its steps quickened past the last pace refused.
				assert.InEpsilon(t, 100, float64(st.Rate), 0.15, "the pace follows the quota down")
			})
		})
	}
}

// Two transports (two processes: nothing shared) on one API key, neither
// told of the other nor of the quota, each running half of a job with 8
// workers: together they stay under the quota, with few 429s, use most of
// it, and neither starves (issue 9, point 4). Their shares are not equal:
// each is cut in proportion to its pace, on refusals that fall on it in
// proportion to its pace, and with a refusal every few seconds that evens
// out slowly; the one left alone at the end probes up to the whole quota.
func TestTwoTransportsShareAQuotaUntold(t *testing.T) {
	var refused []int64
	defer func() { assertFewRefusedByTwo(t, refused) }()
	for seed := range int64(3) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := throttletest.NewAPI(nearby(throttletest.Config{
					Limits: []throttletest.Limit{{Algorithm: throttletest.TokenBucket, Rate: 200, Burst: 20}}}, seed))
				rts := []*throttle.Transport{throttle.New(api), throttle.New(api)}
				var took [2]time.Duration
				var mid [2]int64 // attempts sent from 5 s to 10 s
				var wg sync.WaitGroup
				for i, rt := range rts {
					defer rt.Close()
					wg.Go(func() { took[i] = jobOf(t, rt, 2000, 8, fmt.Sprint(i)) })
					wg.Go(func() {
						time.Sleep(5 * time.Second)
						a := rt.Stats().Total.Attempts
						time.Sleep(5 * time.Second)
						mid[i] = rt.Stats().Total.Attempts - a
					})
				}
				wg.Wait()
				total := max(took[0], took[1])
				seen := api.Stats().Total
				ideal := 19900 * time.Millisecond
				t.Logf("took %v and %v (%.2fx the ideal of the whole job), %d refused, %d and %d sent from 5 s to 10 s",
					took[0], took[1], total.Seconds()/ideal.Seconds(), seen.Throttled, mid[0], mid[1])
				assert.EqualValues(t, 4000, seen.Accepted)
				refused = append(refused, seen.Throttled)
				assert.LessOrEqual(t, seen.PeakPerSecond, int64(200+20), "together under the quota")
				assert.GreaterOrEqual(t, mid[0]+mid[1], int64(0.85*5*200), "together they use most of it")
				// Shares split at the first collisions stay uneven: over
				// 180 runs of these seeds (and 90 under -race), the
				// slower took 8-50% of the quota from 5 s to 10 s, and
				// the whole job 1.0-1.8x its ideal (mean 1.21x). A run in
				// a hundred or so goes to 2.0x: the slower process, left
				// with most of its half when the other ends at about
				// 11 s, probes up to the whole quota a step a test (3 of
				// 180 -race runs at a70e1b7, 1 of 180 at 70fc537; a
				// fresh-clone CI run met 2.004x). The bound is set above
				// that mode; starving is what mid checks.
				for i := range mid {
					assert.GreaterOrEqual(t, mid[i], int64(0.05*5*200), "neither starves")
				}
				assert.LessOrEqual(t, total.Seconds(), 2.1*ideal.Seconds())
			})
		})
	}
}

// jobOf uploads n records with workers workers through rt, the records named
// after name, and returns how long it took.
func jobOf(t *testing.T, rt http.RoundTripper, n, workers int, name string) time.Duration {
	t.Helper()
	start := time.Now()
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				url := fmt.Sprint("http://api.test/records/", i)
				if name != "" {
					url = fmt.Sprint("http://api.test/records/", name, "-", i)
				}
				req := newReq(t, t.Context(), http.MethodPut, url)
				req.Header.Set("X-API-Key", "k")
				resp, err := rt.RoundTrip(req)
				if assert.NoError(t, err) {
					assert.Equal(t, http.StatusOK, resp.StatusCode)
					resp.Body.Close()
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return time.Since(start)
}

// What 429s taught the key is visible: its pace and where it comes from in
// Stats, and an EventPace "learned from 429s" when first learned and when it
// moves by a tenth (issue 9, point 5).
func TestWhatThe429sTaughtIsVisible(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := throttletest.NewAPI(throttletest.Config{Limits: []throttletest.Limit{
			{Algorithm: throttletest.TokenBucket, Rate: 200, Burst: 20}}, Latency: time.Millisecond})
		events, paceEvents := paceLog()
		rt := throttle.New(api, events)
		defer rt.Close()
		job(t, rt, 2000)
		st := rt.Stats().Keys["api.test"]
		assert.Equal(t, throttle.PaceLearned, st.PaceFrom)
		assert.Equal(t, "learned from 429s", st.PaceFrom.String())
		assert.InEpsilon(t, 200, float64(st.Rate), 0.15)
		assert.Equal(t, -1, st.Remaining, "no quota headers")
		paces := paceEvents()
		require.NotEmpty(t, paces)
		for _, e := range paces {
			assert.Equal(t, "learned from 429s", e.Reason)
			assert.Positive(t, e.Rate)
		}
		assert.Greater(t, len(paces), 2, "the pace is told as it moves")
		last := paces[len(paces)-1].Rate
		assert.InEpsilon(t, float64(last), float64(st.Rate), 0.1, "the pace is within a tenth of the last told (a move of a tenth is told)")
	})
}

// Once a pace is learned, an isolated 429 is a collision: the key does not
// pause, the refused request alone waits its Retry-After, and the pace is
// cut; a Retry-After longer than 2 s, or refusals that keep coming, pause
// the whole key as before.
func TestLearnedPaceTakesAnIsolated429AsACollision(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		refuse := map[string]string{} // path -> Retry-After of its first attempt
		sent := map[string][]time.Duration{}
		start := time.Now()
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			time.Sleep(time.Millisecond)
			mu.Lock()
			defer mu.Unlock()
			sent[r.URL.Path] = append(sent[r.URL.Path], time.Since(start))
			if ra, ok := refuse[r.URL.Path]; ok && len(sent[r.URL.Path]) == 1 {
				return reply(r, http.StatusTooManyRequests, "Retry-After", ra), nil
			}
			return reply(r, http.StatusOK), nil
		})
		rt := throttle.New(base)
		defer rt.Close()
		get := func(path string) {
			resp, err := rt.RoundTrip(newReq(t, t.Context(), http.MethodGet, "http://c.test"+path))
			if assert.NoError(t, err) {
				assert.Equal(t, http.StatusOK, resp.StatusCode)
				resp.Body.Close()
			}
		}
		// Ten accepted, then a refusal: the key pauses and learns a pace.
		for i := range 10 {
			get(fmt.Sprint("/a", i))
		}
		mu.Lock()
		refuse["/first"] = "1"
		mu.Unlock()
		get("/first")
		st := rt.Stats().Keys["c.test"]
		require.Equal(t, throttle.PaceLearned, st.PaceFrom)
		require.EqualValues(t, 1, st.Pauses)

		// Requests at the learned pace, and one of them refused: no pause.
		mu.Lock()
		refuse["/b5"] = "1"
		mu.Unlock()
		pace := rt.Stats().Keys["c.test"].Rate
		var wg sync.WaitGroup
		for i := range 10 {
			wg.Go(func() { get(fmt.Sprint("/b", i)) })
			time.Sleep(time.Duration(float64(time.Second) / float64(pace)))
		}
		wg.Wait()
		st = rt.Stats().Keys["c.test"]
		assert.EqualValues(t, 1, st.Pauses, "a collision does not pause the key")
		assert.EqualValues(t, 2, st.Throttled)
		mu.Lock()
		b5 := sent["/b5"]
		var others []time.Duration
		for i := 6; i < 10; i++ {
			others = append(others, sent[fmt.Sprint("/b", i)]...)
		}
		mu.Unlock()
		require.Len(t, b5, 2)
		assert.GreaterOrEqual(t, b5[1]-b5[0], time.Second-time.Millisecond, "the refused request waits its Retry-After")
		for _, at := range others {
			assert.Less(t, at, b5[0]+time.Second, "the others went on")
		}

		// A long Retry-After says the quota is spent: the key pauses.
		mu.Lock()
		refuse["/long"] = "5"
		mu.Unlock()
		get("/long")
		assert.EqualValues(t, 2, rt.Stats().Keys["c.test"].Pauses, "a wait over 2 s pauses the key")
	})
}

// The first refusal's Retry-After, in whole seconds, may be rounded up by
// up to a second: the key pauses for what surely remains and peeks into the
// last second, 1/8 s in, then twice as far after each refused peek, one
// request at a time, until the wait asked for has passed. The refused
// request itself waits its whole Retry-After. A server that gives back at
// once (a bucket) costs an eighth of a second, not a second; one that holds
// its count until a reset (a window) costs a refused peek per doubling.
func TestFirstPausePeeksIntoTheLastSecond(t *testing.T) {
	// A date rounds up to the server's next whole second, whatever the
	// wait: here 997 ms, which a bucket may mean as its next token, due at
	// once. A wait stated to the millisecond is exact: nothing to peek into.
	date := func(now time.Time) string {
		return now.Truncate(time.Second).Add(time.Second).UTC().Format(http.TimeFormat)
	}
	seconds := func(time.Time) string { return "1" }
	tests := []struct {
		name  string
		reset time.Duration // after the first refusal, the server accepts again
		ra    func(now time.Time) string
		peeks []time.Duration // the requests sent after the refusal, until one is accepted
	}{
		{"gives-back-at-once", ms(2), seconds, []time.Duration{ms(126)}},
		{"holds-until-a-reset", ms(600), seconds, []time.Duration{ms(126), ms(377), ms(878)}},
		{"holds-the-whole-second", time.Second, seconds, []time.Duration{ms(126), ms(377), ms(878), ms(1001)}},
		{"date-gives-back-at-once", ms(2), date, []time.Duration{ms(126)}},
		{"date-holds-until-its-second", ms(997), date, []time.Duration{ms(126), ms(377), ms(878), ms(998)}},
		{"decimal-is-exact", ms(2), func(time.Time) string { return "1.0" }, []time.Duration{ms(1001)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var mu sync.Mutex
				var refusedAt time.Time // zero until the first refusal
				var after []time.Duration
				var first string // the path refused first
				var retried time.Duration
				n := 0
				base := rtFunc(func(r *http.Request) (*http.Response, error) {
					defer time.Sleep(time.Millisecond)
					mu.Lock()
					defer mu.Unlock()
					now := time.Now()
					n++
					switch {
					case n == 20:
						refusedAt, first = now, r.URL.Path
						return reply(r, http.StatusTooManyRequests, "Retry-After", tt.ra(now)), nil
					case refusedAt.IsZero():
						return reply(r, http.StatusOK), nil
					}
					d := now.Sub(refusedAt)
					if d <= time.Millisecond {
						return reply(r, http.StatusOK), nil // on its way with the refused one
					}
					after = append(after, d) // sent after the refusal came back
					if r.URL.Path == first {
						retried = d
					}
					if d < tt.reset {
						return reply(r, http.StatusTooManyRequests, "Retry-After", tt.ra(now)), nil
					}
					return reply(r, http.StatusOK), nil
				})
				rt := throttle.New(base)
				defer rt.Close()
				jobOf(t, rt, 40, 8, "")
				mu.Lock()
				defer mu.Unlock()
				require.Greater(t, len(after), len(tt.peeks))
				assert.Equal(t, tt.peeks, after[:len(tt.peeks)], "the peeks, one at a time")
				assert.GreaterOrEqual(t, retried, ms(997), "the refused request waits its Retry-After")
				st := rt.Stats().Keys["p.test"]
				assert.LessOrEqual(t, st.Throttled, int64(len(tt.peeks)), "the first refusal, and each refused peek")
			})
		})
	}
}

// A key refused before any of its answers came back accepted (a bucket of
// ten, sixteen requests at once, the refusals answered first) still peeks
// into the whole-second wait, and guesses its pace from the answers
// accepted during the pause (regression: it learned nothing and waited the
// second out; a 1,000/s bucket of ten took 1.25x the ideal of a 10-s job,
// now 1.16x). A lone request refused, with nothing on its way, teaches
// nothing yet: the key waits the second out. Nor does the first guess hold
// the peek back: one answer accepted before the refusal guesses one
// request a second until the answers on their way are counted at the
// resume (regression: the peek waited a second for the guess's token,
// 1.22x). A refusal on its way then that asks for over 2 s says the quota
// was spent, not overrun: the key learns nothing, and waits it out.
func TestRefusedBeforeAnyAnswerStillPeeks(t *testing.T) {
	for _, tt := range []struct {
		name                     string
		accepted, refused, quick int // the first quick of the accepted are answered at once
		workers                  int
		spent                    bool // the refusals after the first ask for 10 s
	}{
		{"10-accepted", 10, 6, 0, 16, false},
		{"0-accepted", 0, 1, 0, 1, false},
		{"1-accepted-first", 10, 6, 1, 16, false},
		{"spent", 10, 6, 0, 16, true},
	} {
		accepted := tt.accepted
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var mu sync.Mutex
				var refusedAt time.Time
				var after []time.Duration // requests sent after the first refusal came back
				n := 0
				base := rtFunc(func(r *http.Request) (*http.Response, error) {
					mu.Lock()
					n++
					i, now := n, time.Now()
					if !refusedAt.IsZero() && now.After(refusedAt) { // not the first requests, sent together
						after = append(after, now.Sub(refusedAt))
					}
					mu.Unlock()
					switch {
					case i <= tt.quick:
						return reply(r, http.StatusOK), nil
					case i <= accepted:
						time.Sleep(2 * time.Millisecond) // accepted, answered after the refusals
						return reply(r, http.StatusOK), nil
					case i <= accepted+tt.refused:
						mu.Lock()
						if refusedAt.IsZero() {
							refusedAt = now
						}
						mu.Unlock()
						switch {
						case tt.spent && i == accepted+1:
							time.Sleep(time.Millisecond) // all sixteen are on their way
						case tt.spent:
							time.Sleep(1500 * time.Microsecond)
							return reply(r, http.StatusTooManyRequests, "Retry-After", "10"), nil
						}
						return reply(r, http.StatusTooManyRequests, "Retry-After", "1"), nil
					}
					time.Sleep(time.Millisecond)
					return reply(r, http.StatusOK), nil
				})
				events, paces := paceLog()
				rt := throttle.New(base, events)
				defer rt.Close()
				jobOf(t, rt, 40, tt.workers, "")
				mu.Lock()
				defer mu.Unlock()
				require.NotEmpty(t, after)
				for _, e := range paces() {
					assert.Less(t, float64(e.Rate), 1000.0, "no pace shown before a guess")
				}
				st := rt.Stats().Keys["api.test"]
				if tt.spent {
					assert.GreaterOrEqual(t, after[0], 10*time.Second, "the longest wait, whole")
					assert.Equal(t, throttle.PaceNone, st.PaceFrom)
					return
				}
				if accepted == 0 {
					assert.Equal(t, time.Second, after[0], "nothing to learn from: the whole wait")
					assert.Equal(t, throttle.PaceNone, st.PaceFrom)
					return
				}
				assert.Equal(t, ms(125), after[0], "the peek, 1/8 s in")
				assert.Equal(t, throttle.PaceLearned, st.PaceFrom)
			})
		})
	}
}

// A window whose reset falls within the first peek looks, at first, like a
// bucket that gives back gradually, and the guess from it (the window's N
// over an eighth of a second) is far too fast. The refusals that then hold
// the key end in a pause that peeks into its last second like the first,
// and the resume takes the pace down to what the server took from the
// resume before to this one (regression: the pace stayed at 3.2× the
// quota and 3.5% of requests were refused).
func TestWindowResetDuringTheFirstPeek(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		time.Sleep(950 * time.Millisecond) // the job starts late in a window
		api := throttletest.NewAPI(throttletest.Config{
			Limits:  []throttletest.Limit{{Algorithm: throttletest.FixedWindow, N: 100, Per: time.Second}},
			Latency: time.Millisecond})
		rt := throttle.New(api)
		defer rt.Close()
		took := job(t, rt, 2000)
		seen := api.Stats().Total
		st := rt.Stats().Keys["api.test"]
		ideal := 19 * time.Second
		t.Logf("took %v (%.2fx the ideal), %d refused, pace %.1f/s", took, took.Seconds()/ideal.Seconds(), seen.Throttled, float64(st.Rate))
		assert.LessOrEqual(t, took.Seconds(), 1.15*ideal.Seconds())
		assert.LessOrEqual(t, seen.Throttled, int64(35), "1.75%")
		assert.InEpsilon(t, 100, float64(st.Rate), 0.2)
	})
}

// A window that a job meets mid-way (its first refusal 0.3 s or 0.6 s into
// it) gives its count back at a later peek of the first pause, not the
// first: it grows as a bucket's might, and a pause during its search ends
// in probes, not in more search steps, which the window refuses only at its
// reset, with all on their way (regression: 47-54 429s in 4,000, a search
// step refused at each reset; now 21-29, as before the search went on
// through pauses).
func TestWindowMetMidWayIsNotSearchedThroughPauses(t *testing.T) {
	for _, late := range []time.Duration{300 * time.Millisecond, 600 * time.Millisecond} {
		for seed := range int64(2) {
			t.Run(fmt.Sprint(late, "/seed", seed), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					time.Sleep(late) // the server's windows begin on its clock's seconds
					api := throttletest.NewAPI(nearby(throttletest.Config{Limits: []throttletest.Limit{quotaWindow}}, seed))
					rt := throttle.New(api)
					defer rt.Close()
					windowJobWithin(t, rt, api, 1.10, 35)
				})
			})
		}
	}
}

// A window whose first burst is refused whole, every request on its way
// refused and waiting its own Retry-After, leaves no request to take the
// first pause's peeks: the resume, at the end of the wait, says nothing of
// how the server gives back, and a pause in the search that follows ends in
// probes, as for the window met mid-way above, which go no more than
// halfway to the last pace refused (regression: taken for a bucket, it
// searched a Retry-After a step, each step over the window refused at its
// reset with all on their way: 38-64 429s in 4,000 on loopback, 50-56 in
// this test; with the peeks read right but the probes as they were, 54
// when the job starts on the window's second: the probes went 92, 98,
// 110, refused at 110 as the probe before, every 5 s; now 32-41, 25-38
// under -race).
func TestWindowWithNoPeekTakenIsNotSearchedThroughPauses(t *testing.T) {
	for _, late := range []time.Duration{0, 300 * time.Millisecond, 600 * time.Millisecond} {
		t.Run(fmt.Sprint(late), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				time.Sleep(late) // the server's windows begin on its clock's seconds
				api := throttletest.NewAPI(throttletest.Config{Limits: []throttletest.Limit{quotaWindow}})
				// Every answer 2 ms after its request, in the order sent:
				// those accepted come back before the first refusal, and
				// each of the 16 workers sends its next request at once.
				base := rtFunc(func(r *http.Request) (*http.Response, error) {
					time.Sleep(2 * time.Millisecond)
					return api.RoundTrip(r)
				})
				rt := throttle.New(base)
				defer rt.Close()
				windowJobWithin(t, rt, api, 1.15, 45)
			})
		})
	}
}

// A client that sends one request at a time (a loop, one worker) has none
// waiting when an answer comes back, though each of its requests waited for
// the learned pace's turn: its pace still climbs (regression, found in
// review 37: it stayed at its first guess all job, and a bucket of 100 a
// second, 5 deep, took 20x the ideal, 1 deep 100x; now 1.6x, each refusal's
// own Retry-After stalling the one worker, and with it the climb, a second).
// On a bucket of one, the retry of a refused request takes the pacer's
// tokens that filled while it waited, and the next request waits its turn
// (see paced): it went a round trip after the retry, and was refused each
// time, 37x the ideal.
func TestOneAtATimeClientClimbsItsLearnedPace(t *testing.T) {
	for _, tt := range []struct {
		burst int
		most  float64 // the time over the ideal
	}{{5, 2}, {1, 2.5}} {
		t.Run(fmt.Sprint("burst", tt.burst), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := throttletest.NewAPI(throttletest.Config{Limits: []throttletest.Limit{
					{Algorithm: throttletest.TokenBucket, Rate: 100, Burst: tt.burst}}, Latency: time.Millisecond})
				rt := throttle.New(api)
				defer rt.Close()
				took := jobOf(t, rt, 1000, 1, "")
				ideal := float64(1000-tt.burst) / 100
				st := rt.Stats().Keys["api.test"]
				t.Logf("took %v (%.2fx the ideal), %d refused, pace %.1f/s", took, took.Seconds()/ideal, api.Stats().Total.Throttled, float64(st.Rate))
				assert.LessOrEqual(t, took.Seconds(), tt.most*ideal)
				assert.Greater(t, float64(st.Rate), 80.0, "the pace climbed from its first guess")
			})
		})
	}
}

// A client of a few workers on a bucket one deep: the server took one
// request before its first refusal, so the learned pacer holds one token,
// not two, and never sends two requests a round trip apart into a bucket
// that holds one (4.1x the ideal with two workers in review 38's model,
// 3.8x with three; now 1.5x and 1.3x).
func TestFewWorkersOnABucketOfOne(t *testing.T) {
	for _, workers := range []int{2, 3} {
		t.Run(fmt.Sprint("workers", workers), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := throttletest.NewAPI(throttletest.Config{Limits: []throttletest.Limit{
					{Algorithm: throttletest.TokenBucket, Rate: 100, Burst: 1}}, Latency: time.Millisecond})
				rt := throttle.New(api)
				defer rt.Close()
				took := jobOf(t, rt, 1000, workers, "")
				ideal := 999.0 / 100
				refused := api.Stats().Total.Throttled
				t.Logf("took %v (%.2fx the ideal), %d refused", took, took.Seconds()/ideal, refused)
				assert.LessOrEqual(t, took.Seconds(), 1.8*ideal)
				assert.LessOrEqual(t, refused, int64(15))
			})
		})
	}
}

// A server that holds its count past the first peek and gives it back at
// once is a window (or a log): the first guess, the answers accepted over
// the whole wait asked for, is about its rate, and it is probed upward a
// step per test, not doubled into the next refusal.
func TestHeldCountIsProbedNotDoubled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := throttletest.NewAPI(throttletest.Config{
			Limits:  []throttletest.Limit{{Algorithm: throttletest.FixedWindow, N: 100, Per: time.Second}},
			Latency: time.Millisecond})
		rt := throttle.New(api)
		defer rt.Close()
		fastestPace := watchPace(rt, 60, 50*time.Millisecond) // the first 3 s
		job(t, rt, 1000)
		fastest := fastestPace()
		assert.InDelta(t, 100, float64(fastest), 15, "the first guess, probed")
		// The first refusals, three peeks, a probe: 7-9 nearly always.
		// Under -race about one run in 100 draws 14-18, at 22e0068^ as
		// after it (100 runs each: 7-9 but for one 17 or 18).
		assert.LessOrEqual(t, api.Stats().Total.Throttled, int64(20), "the first refusals, three peeks, a probe")
	})
}

// A refusal that asks for a later end than the pause in force extends it,
// even while the key peeks into the last second of the first: the peeks
// begin again in the last second of the longer wait.
func TestLaterRetryAfterExtendsAPeekingPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var refusedAt time.Time
		var after []time.Duration
		n := 0
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			defer time.Sleep(time.Millisecond)
			mu.Lock()
			defer mu.Unlock()
			now := time.Now()
			n++
			switch {
			case n == 20:
				refusedAt = now
				return reply(r, http.StatusTooManyRequests, "Retry-After", "1"), nil
			case n == 21:
				return reply(r, http.StatusTooManyRequests, "Retry-After", "5"), nil
			case !refusedAt.IsZero() && now.Sub(refusedAt) > time.Millisecond:
				after = append(after, now.Sub(refusedAt))
			}
			return reply(r, http.StatusOK), nil
		})
		rt := throttle.New(base)
		defer rt.Close()
		jobOf(t, rt, 40, 8, "")
		mu.Lock()
		defer mu.Unlock()
		require.NotEmpty(t, after)
		assert.Equal(t, 4*time.Second+ms(126), after[0], "the first peek into the last second of the 5 s")
	})
}

// A bucket whose first peek happens to be refused (on a loaded machine the
// tokens it gave back may go to requests already on their way) is not
// taken for a window: the guess made over the whole wait is far below its
// refill, and it grows from there, not a percent a test.
func TestBucketWithARefusedFirstPeekStillGrows(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := throttletest.NewAPI(throttletest.Config{
			Limits:  []throttletest.Limit{{Algorithm: throttletest.TokenBucket, Rate: 200, Burst: 20}},
			Latency: time.Millisecond})
		var mu sync.Mutex
		var refusedAt time.Time
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			busy := !refusedAt.IsZero() && time.Since(refusedAt) < 200*time.Millisecond
			mu.Unlock()
			if busy {
				return reply(r, http.StatusTooManyRequests, "Retry-After", "1"), nil
			}
			resp, err := api.RoundTrip(r)
			if err == nil && resp.StatusCode == http.StatusTooManyRequests {
				mu.Lock()
				if refusedAt.IsZero() {
					refusedAt = time.Now()
				}
				mu.Unlock()
			}
			return resp, err
		})
		rt := throttle.New(base)
		defer rt.Close()
		took := job(t, rt, 2000)
		ideal := 9900 * time.Millisecond
		t.Logf("took %v (%.2fx the ideal)", took, took.Seconds()/ideal.Seconds())
		assert.LessOrEqual(t, took.Seconds(), 1.2*ideal.Seconds())
	})
}

// A pace the key does not reach proves nothing: when its round trips, not
// its pace, limit what it sends (16 workers, 50 ms answers: at most 320/s),
// the pace stops growing one step past what the key sends, and the refusal
// that comes when the workers bunch up does not find it several times the
// quota (regression: it doubled to 2,000/s and beyond).
func TestLearnedPaceGrowsOnlyWhenReached(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := throttletest.NewAPI(throttletest.Config{
			Limits:  []throttletest.Limit{{Algorithm: throttletest.SlidingLog, N: 200, Per: time.Second}},
			Latency: 45 * time.Millisecond, LatencyJitter: 10 * time.Millisecond})
		rt := throttle.New(api)
		defer rt.Close()
		fastestPace := watchPace(rt, 100, 100*time.Millisecond) // the first 10 s
		job(t, rt, 2000)
		fastest := fastestPace()
		t.Logf("fastest pace %.0f/s", float64(fastest))
		assert.Less(t, float64(fastest), 800.0)
	})
}

// A learned pace holds two tokens, as a configured one keeps two usable: a
// request that comes to its turn late (a waiter woken late on a busy
// machine, a worker back late from its round trip) leaves its time to the
// next, which goes at once, so the pace is kept on average (regression: a
// sliding log of 200/s went at 170/s on a loaded machine, 1.2× its ideal).
func TestLearnedPaceCarriesOverALateTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		var n atomic.Int64 // (the last two requests go together)
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			if n.Add(1) == 20 {
				return reply(r, http.StatusTooManyRequests, "Retry-After", "1"), nil
			}
			return rec.RoundTrip(r)
		})
		rt := throttle.New(base)
		defer rt.Close()
		for i := range 20 {
			require.NoError(t, do(t, rt, fmt.Sprint("http://c.test/a", i)))
		}
		require.Equal(t, throttle.PaceLearned, rt.Stats().Keys["c.test"].PaceFrom)
		time.Sleep(time.Second) // a quiet spell: the turns it left are not lost
		var wg sync.WaitGroup
		for i := range 2 {
			wg.Go(func() { assert.NoError(t, do(t, rt, fmt.Sprint("http://c.test/b", i))) })
		}
		wg.Wait()
		ts := rec.times()
		require.GreaterOrEqual(t, len(ts), 2)
		assert.Equal(t, ts[len(ts)-2], ts[len(ts)-1], "the second goes with the first")
	})
}

// watchPace samples the pace of rt's key "api.test" n times, every d, from
// a goroutine, and returns a function that waits for the samples to end
// and returns the fastest.
func watchPace(rt *throttle.Transport, n int, d time.Duration) func() rate.Limit {
	var fastest rate.Limit
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range n {
			time.Sleep(d)
			fastest = max(fastest, rt.Stats().Keys["api.test"].Rate)
		}
	}()
	return func() rate.Limit {
		<-done
		return fastest
	}
}

// A cruising pace whose probes pass the last pace refused by a sixteenth
// grows again as it did at first, doubling every 150 ms, from that step on:
// the quota grew, or another client of it left (regression: it waited a
// whole test, 2 s, before the first doubling).
func TestLearnedPaceRegrowsAtOncePastTheLastRefusal(t *testing.T) {
	past, doubled := paceAfterTheQuotaGrew(t, 125, 250)
	assert.LessOrEqual(t, doubled-past, 500*time.Millisecond, "doubling from there")
}

// A probe that passed the last pace refused, unrefused, holds a quarter
// test, not a whole one, before the next step: the quota grew or another
// client left, and the pace grows again about a second later, not tests
// later (regression: two processes on one key, the one left alone took 4 to
// 11 s to grow from its share to the whole quota).
func TestLearnedPaceQuickensPastTheLastRefusal(t *testing.T) {
	past, grown := paceAfterTheQuotaGrew(t, 103, 125)
	assert.LessOrEqual(t, grown-past, 1500*time.Millisecond, "quarter tests past the last refusal")
}

// A transport that joins another's job on one bucket 5 s in, neither told
// the quota nor sent quota headers, is refused at once (the other spends
// the bucket) and learns a share of it; once the other ends, it finds the
// rest within seconds. No probe of its has cost a 429 yet, so it probes
// two quiet seconds after its cut, not 200 answers' worth of its pace
// later (regression: a share of 7.5 a second held 27 s, 17 s past the
// other's end, and the whole job took 2.3x its ideal; seeds 2, 3 and 7
// took 2.34x, 1.50x and 1.65x). Checked over 24 seeds, on average and at
// worst: a joiner whose first peek is refused takes the bucket for a
// window of 1 a second, whose probes climb from 1% a whole test a step
// (2.26x; one seed in 24 here, a quarter of the runs over 1.4x over 200
// seeds, 1.35x on average: see the README). Each seed's time moves with
// any change to the rules; the seven this checked one by one until commit
// d012106 were among the fast.
func TestALateJoinerFindsTheQuotaUntold(t *testing.T) {
	var sum, worst float64
	const seeds = 24
	for seed := range int64(seeds) {
		q := sharedQuota{limit: quotaBucket, none: true, records: 2000, workers: 8, join: 5 * time.Second}
		r := runSharedQuota(t, q, seed)
		ideal := 19900 * time.Millisecond // 4,000 at 200/s, after 20 at once
		x := r.took.Seconds() / ideal.Seconds()
		t.Logf("seed %d: took %v (%.2fx the ideal), %d refused", seed, r.took, x, r.refused)
		assert.Zero(t, r.failed)
		sum, worst = sum+x, max(worst, x)
	}
	t.Logf("%.2fx on average, %.2fx at worst", sum/seeds, worst)
	assert.LessOrEqual(t, sum/seeds, 1.4, "on average")
	assert.LessOrEqual(t, worst, 2.5, "at worst")
}

// A slow pace probes within a minute of its last cut, however slow: 200
// answers' worth of a pace of 1/s is 200 s, and a quota that grows in the
// meantime must not wait that long to be found (regression: a bucket of 1/s
// that became one of 10/s 30 s in, 400 records, took 243 s, now 109 s,
// the ideal 67 s).
func TestSlowPaceProbesWithinAMinute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := func(rate float64) throttletest.Config {
			return nearby(throttletest.Config{
				Limits: []throttletest.Limit{{Algorithm: throttletest.TokenBucket, Rate: rate, Burst: 1}}}, 1)
		}
		rt := throttle.New(changesAt(30*time.Second, throttletest.NewAPI(cfg(1)), throttletest.NewAPI(cfg(10))))
		defer rt.Close()
		took := job(t, rt, 400)
		ideal := 67 * time.Second // 31 records in the first 30 s, 369 at 10/s
		t.Logf("took %v (%.2fx the ideal)", took, took.Seconds()/ideal.Seconds())
		// The quota grew after the last cut (4 s in): the first probe
		// comes a minute after it, and the pace grows from there.
		assert.Less(t, took, 2*ideal)
	})
}

// paceAfterTheQuotaGrew runs a job of 8,000 records against a token bucket
// of 100/s (burst 10) that becomes one of 400/s 10 s in, and returns when,
// after the change, the learned pace first went over past (requests a
// second), and when it first reached grown. Both must come.
func paceAfterTheQuotaGrew(t *testing.T, past, grown float64) (pastAt, grownAt time.Duration) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		cfg := func(rate float64) throttletest.Config {
			return throttletest.Config{
				Limits:  []throttletest.Limit{{Algorithm: throttletest.TokenBucket, Rate: rate, Burst: 10}},
				Latency: time.Millisecond, LatencyJitter: 2 * time.Millisecond}
		}
		before, after := throttletest.NewAPI(cfg(100)), throttletest.NewAPI(cfg(400))
		start := time.Now()
		rt := throttle.New(changesAt(10*time.Second, before, after))
		defer rt.Close()
		done := make(chan struct{})
		go func() {
			defer close(done)
			for time.Since(start) < 40*time.Second {
				time.Sleep(10 * time.Millisecond)
				since, p := time.Since(start), float64(rt.Stats().Keys["api.test"].Rate)
				if since < 10*time.Second {
					continue
				}
				if pastAt == 0 && p > past {
					pastAt = since
				}
				if grownAt == 0 && p >= grown {
					grownAt = since
				}
			}
		}()
		job(t, rt, 8000)
		<-done
		t.Logf("past %g/s at %v, %g/s at %v", past, pastAt, grown, grownAt)
	})
	require.NotZero(t, pastAt, "the pace grew past the old quota")
	require.NotZero(t, grownAt, "the pace grew on from there")
	return pastAt, grownAt
}

// changesAt sends each request to before until d has passed, then to after:
// a quota that changes mid-run.
func changesAt(d time.Duration, before, after http.RoundTripper) http.RoundTripper {
	start := time.Now()
	return rtFunc(func(r *http.Request) (*http.Response, error) {
		if time.Since(start) >= d {
			return after.RoundTrip(r)
		}
		return before.RoundTrip(r)
	})
}

// A key whose first burst was all refused, and whose requests then all wait
// out their own Retry-After, sends nothing for a second: when the next
// refusal comes, right after it resumed, its first guess counts the answers
// from the resume, not from the refusal a second before, when it had
// nothing to send (regression: one answer over that second and the wait
// guessed 0.5 a second, then 0.9 at the resume, against a quota of 100 a
// second, and 300 requests took 8.0 s; now 1 a second, then 7.9, and
// 5.3 s).
func TestFirstGuessCountsFromTheResume(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		n := 0
		bucket := rate.NewLimiter(100, 1)
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			n++
			i := n
			ok := bucket.Allow()
			mu.Unlock()
			time.Sleep(time.Millisecond)
			switch {
			case i <= 8: // the first burst, all refused: another client spent the quota
			case i == 9: // the first retry, a second later
				return reply(r, http.StatusOK), nil
			case i == 10: // the second, refused: it begins the first guess
			case ok:
				return reply(r, http.StatusOK), nil
			}
			return reply(r, http.StatusTooManyRequests, "Retry-After", "1"), nil
		})
		events, paces := paceLog()
		rt := throttle.New(base, events)
		defer rt.Close()
		took := jobOf(t, rt, 300, 8, "")
		var slowest rate.Limit
		for _, e := range paces() {
			if slowest == 0 || e.Rate < slowest {
				slowest = e.Rate
			}
		}
		t.Logf("took %v, slowest pace shown %.2f/s", took, float64(slowest))
		assert.GreaterOrEqual(t, float64(slowest), 0.9, "one answer over the wait, from the resume")
		assert.Less(t, took, 6500*time.Millisecond, "1 s refused, 3 s at 100/s, and the climb")
	})
}

// A shallow, fast bucket (1,000 a second, 5 deep), told nothing, is
// searched a step per the time a pace a sixteenth over it takes to spend
// its depth, not a second a step: it refuses a pace over it at once
// (regression: 1.51-1.57x the ideal, now 1.19-1.24x, in the model).
func TestShallowBucketIsSearchedQuickly(t *testing.T) {
	for seed := range int64(3) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := throttletest.NewAPI(nearby(throttletest.Config{
					Limits: []throttletest.Limit{{Algorithm: throttletest.TokenBucket, Rate: 1000, Burst: 5}}}, seed))
				rt := throttle.New(api)
				defer rt.Close()
				took := job(t, rt, 4000)
				ideal := 4 * time.Second
				t.Logf("took %v (%.2fx the ideal), %d refused", took, took.Seconds()/ideal.Seconds(), api.Stats().Total.Throttled)
				assert.Less(t, took.Seconds(), 1.35*ideal.Seconds())
				assert.LessOrEqual(t, api.Stats().Total.Throttled, int64(20), "0.5% of requests")
			})
		})
	}
}

// A key cut far below a pace it held for a whole test (another client took
// most of the quota) counts its probes' cost against that pace, not the cut
// one: a quota that served it that fast serves at least as many, its own
// and others'. It probes a few seconds after its cut, and finds the quota
// again soon after the other leaves, not 200 answers' worth of its share
// later (regression: back to half the quota 22 s after it came back, at
// 42 s; now at 26 s).
func TestCutPaceProbesAtThePaceItHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bucket := func(r float64) http.RoundTripper {
			return throttletest.NewAPI(nearby(throttletest.Config{
				Limits: []throttletest.Limit{{Algorithm: throttletest.TokenBucket, Rate: r, Burst: 10}}}, 1))
		}
		// 100 a second, then a tenth of it from 10 s to 20 s: another
		// client takes the rest.
		rt := throttle.New(changesAt(10*time.Second, bucket(100), changesAt(20*time.Second, bucket(10), bucket(100))))
		defer rt.Close()
		var back time.Duration // when the pace was first back to half the quota, after 20 s
		done := make(chan struct{})
		go func() {
			defer close(done)
			start := time.Now()
			for time.Since(start) < 50*time.Second {
				time.Sleep(10 * time.Millisecond)
				if since := time.Since(start); back == 0 && since > 20*time.Second && rt.Stats().Keys["api.test"].Rate >= 50 {
					back = since
				}
			}
		}()
		job(t, rt, 2500)
		<-done
		t.Logf("back to 50/s at %v", back)
		require.NotZero(t, back, "the pace found the quota again")
		assert.Less(t, back, 30*time.Second)
	})
}

// A window refuses until its reset: a key that took its quota for a window
// takes a refusal within half a test of its last cut (about the wait to the
// reset) for the same news, though answers came back accepted between
// them (requests that reached the server before its count was spent, late
// on their way, or another client's share given back). It cuts its pace
// once, not again for each (regression: the second cut it to what was
// accepted between the two, three answers over 40 ms; in the synctest model
// two transports on a sliding counter told nothing took 1.07-1.10x the ideal
// of both jobs on average, now 1.05-1.06x, and two on a log with 20 ms of
// arrival jitter 1.61-1.81x, now 1.58-1.73x).
func TestWindowRefusalsNearACutAreTheSameNews(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := throttletest.NewAPI(nearby(throttletest.Config{
			Limits: []throttletest.Limit{{Algorithm: throttletest.FixedWindow, N: 100, Per: time.Second}}}, 0))
		start := time.Now()
		var mu sync.Mutex
		injected, passed := 0, 0
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			time.Sleep(time.Millisecond)
			mu.Lock()
			refuse := false
			if time.Since(start) >= 6500*time.Millisecond && injected < 2 {
				// Two refusals 3 accepted answers apart, half a window
				// in: the server's count is spent, and 3 requests that
				// reached it before came back in between.
				if injected == 0 || passed == 3 {
					refuse = true
					injected++
				} else {
					passed++
				}
			}
			mu.Unlock()
			if refuse {
				return reply(r, http.StatusTooManyRequests, "Retry-After", "1"), nil
			}
			return api.RoundTrip(r)
		})
		rt := throttle.New(base)
		defer rt.Close()
		var before, after rate.Limit
		sampled := make(chan struct{})
		go func() {
			defer close(sampled)
			time.Sleep(6400 * time.Millisecond)
			before = rt.Stats().Keys["api.test"].Rate
			time.Sleep(400 * time.Millisecond)
			after = rt.Stats().Keys["api.test"].Rate
		}()
		job(t, rt, 1000)
		<-sampled
		t.Logf("pace %.1f before the refusals, %.1f after", float64(before), float64(after))
		require.NotZero(t, before, "a learned pace")
		assert.GreaterOrEqual(t, float64(after), 0.9*float64(before), "one cut for both")
	})
}

// A key whose requests all wait out their own Retry-After sends nothing
// meanwhile: what the server accepted from it since the refusal is what it
// offered, not a bound of the quota, and its next refusal cuts the pace as
// a collision does, not down to that rate (regression: in the model of two
// transports on one bucket, one whose eight workers all waited out refusals
// that the other's overshoot drew measured 25 a second, cut its pace to it,
// and held it 17 s, 8 s past the other's end).
func TestLearnedPaceIsNotCutToWhatAWaitingKeyOffered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		start := time.Now()
		first, second := time.Second, 6400*time.Millisecond // one refusal at each
		burst := 5 * time.Second                            // every answer refused for 79 ms: the eight on their way
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			time.Sleep(80 * time.Millisecond)
			mu.Lock()
			defer mu.Unlock()
			at := time.Since(start)
			refuse := at >= burst && at < burst+79*time.Millisecond
			for _, once := range []*time.Duration{&first, &second} {
				if *once > 0 && at >= *once {
					*once, refuse = 0, true
				}
			}
			if refuse {
				return reply(r, http.StatusTooManyRequests, "Retry-After", "1"), nil
			}
			return reply(r, http.StatusOK), nil
		})
		rt := throttle.New(base)
		defer rt.Close()
		var before, after rate.Limit
		go func() {
			time.Sleep(second - 100*time.Millisecond) // after the burst
			before = rt.Stats().Keys["api.test"].Rate
			time.Sleep(time.Second) // past the second refusal
			after = rt.Stats().Keys["api.test"].Rate
		}()
		jobOf(t, rt, 900, 8, "")
		t.Logf("pace %.1f/s after the burst, %.1f/s after the refusal that followed it", float64(before), float64(after))
		require.Greater(t, float64(before), 50.0, "a pace learned near what eight workers 80 ms away send")
		assert.GreaterOrEqual(t, float64(after), 0.8*float64(before), "cut as a collision")
	})
}

// A server that takes all it is sent but refuses every fiftieth request
// with a 429, whatever the pace, does not drive the learned pace down: the
// cuts that did not make the refusals rarer are undone, and the refusals
// cut nothing for a while (rule 6). Regression, found in review: 16 workers
// against a server that could take 1,600 a second did 63, 16, 10, 7, 5 and
// 4 requests a second in minutes 1 to 6.
func TestRefusalsThePaceDoesNotMakeDoNotCollapseIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int64
		rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
			time.Sleep(10 * time.Millisecond)
			if n.Add(1)%50 == 0 {
				return reply(r, http.StatusTooManyRequests, "Retry-After", "1"), nil
			}
			return reply(r, http.StatusOK), nil
		}))
		defer rt.Close()
		ctx, cancel := context.WithCancel(context.Background())
		var done atomic.Int64
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				for ctx.Err() == nil {
					if doCtx(t, ctx, rt, "http://noisy.test/") == nil {
						done.Add(1)
					}
				}
			})
		}
		var per []int64 // requests done a second, minute by minute
		for last := int64(0); len(per) < 4; {
			time.Sleep(time.Minute)
			d := done.Load()
			per, last = append(per, (d-last)/60), d
		}
		cancel()
		wg.Wait()
		t.Logf("requests done a second, minute by minute: %v", per)
		assert.GreaterOrEqual(t, per[len(per)-1], per[0]/2, "no collapse")
		assert.GreaterOrEqual(t, per[len(per)-1], int64(200))
	})
}

// "Retry-After: 0", or a date already past, on a refusal says nothing of
// when the quota gives back: a pace learned from refusals takes it as a
// refusal that states no wait, not each refused request's random backoff
// for the server's wait (regression, found in review: a window of 100 a
// second took 1.1-1.3x its ideal, 140-214 of its 4,000 requests refused).
func TestZeroRetryAfterTeachesAsNone(t *testing.T) {
	for _, form := range []string{"0", "past"} {
		t.Run(form, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := throttletest.NewAPI(nearby(throttletest.Config{Limits: []throttletest.Limit{quotaWindow}}, 1))
				rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
					resp, err := api.RoundTrip(r)
					if err == nil && resp.Header.Get("Retry-After") != "" {
						ra := "0"
						if form == "past" {
							ra = time.Now().Add(-time.Second).UTC().Format(http.TimeFormat)
						}
						resp.Header.Set("Retry-After", ra)
					}
					return resp, err
				}))
				defer rt.Close()
				windowJobHolds(t, rt, api)
			})
		})
	}
}

// A learned pace climbs again after the key sat idle: what the key sends
// is measured from when it is busy again, not from before the idle spell
// (regression, found in review: a pace learned at 50 a second, the key idle
// for 30 s while the quota grew to 100, stayed at 50 for the whole next
// job, 2x its ideal: a key idle for I had to send at its pace for 4·I
// before a probe).
func TestLearnedPaceClimbsAfterIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		before := throttletest.NewAPI(nearby(throttletest.Config{Limits: []throttletest.Limit{
			{Algorithm: throttletest.TokenBucket, Rate: 50, Burst: 50}}}, 1))
		after := throttletest.NewAPI(nearby(throttletest.Config{Limits: []throttletest.Limit{
			{Algorithm: throttletest.TokenBucket, Rate: 100, Burst: 50}}}, 2))
		var grown atomic.Bool
		rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
			if grown.Load() {
				return after.RoundTrip(r)
			}
			return before.RoundTrip(r)
		}))
		defer rt.Close()
		job(t, rt, 500)
		learned := rt.Stats().Keys["api.test"]
		require.Equal(t, throttle.PaceLearned, learned.PaceFrom)
		grown.Store(true)
		time.Sleep(30 * time.Second)
		took := job(t, rt, 3000)
		ideal := 29500 * time.Millisecond // (3,000 - 50) / 100
		t.Logf("learned %.1f/s; after 30 s idle, 3,000 took %v (%.2fx the ideal), pace %.1f/s", float64(learned.Rate),
			took, took.Seconds()/ideal.Seconds(), float64(rt.Stats().Keys["api.test"].Rate))
		assert.LessOrEqual(t, took.Seconds(), 1.2*ideal.Seconds(), "the pace found the grown quota")
	})
}

// Refusals that no pace causes, one request in a hundred at random (a
// gateway's), to a key told nothing: each cut a learned pace 3-5% and the
// probes, a test a step, could not climb back between them (1.23-2.49x
// the ideal over these seeds, 2.05x on average, the pace ending at 20-95
// of the bucket's 100, 54 on average). Once three came among many
// answers, a cut is tried: as often after it as before, they are noise,
// the pace goes back, and for 30 s they cut nothing unless they come
// three times as often (1.13-2.35x, 1.62x on average, the pace ending at
// 59-210, 100 on average: one seed ends growing past the quota). A quick
// refusal cut by the share refused, a trial that goes on while the
// answers say neither "as often" nor "twice as often", and a pause in
// the quiet that cuts nothing: 1.51x.
func TestRandomRefusalsDoNotSinkALearnedPace(t *testing.T) {
	bucket := throttletest.Limit{Algorithm: throttletest.TokenBucket, Rate: 100, Burst: 5}
	var paces float64
	mean := randomlyRefused(t, 0.01, bucket, 2000, func(t *testing.T, seed int64, x, pace float64) {
		paces += pace
	})
	assert.LessOrEqual(t, mean, 1.6, "on average")
	assert.GreaterOrEqual(t, paces/8, 70.0, "the pace at the end, on average, did not sink")
}

// The same at a slow pace, 20 a second, two requests in a hundred
// refused at random: a trial that told nothing in 4 s left its cut, and
// 4 s are 80 answers here, too few to tell noise (1.97x the ideal on
// average over these seeds, 2.15x before trials). A trial runs as long
// as the probes' own hold after a cut, 200 answers' worth of the pace,
// when that is longer (1.63x; 1.74x while no cut was tried past a share
// of 2%, which two requests in a hundred at random cross now and then;
// 1.66x since that share is 5%; 1.48x since a quick refusal cuts by the
// share refused, not by the rate accepted over the few answers before it).
func TestRandomRefusalsDoNotSinkASlowLearnedPace(t *testing.T) {
	bucket := throttletest.Limit{Algorithm: throttletest.TokenBucket, Rate: 20, Burst: 2}
	assert.LessOrEqual(t, randomlyRefused(t, 0.02, bucket, 1000, nil), 1.6, "on average")
}

// Three requests in a hundred refused at random: a cut is tried while the
// refusals came at 5% of the answers or fewer, over the key's cruise and
// over its last gaps between them (noiseMost, recent). Regression: tried
// only at 2% or fewer, each of these refusals cut the pace, and a pace
// learned at a bucket of 100 a second sank to a few a second (16.8x the
// ideal on average over these seeds; 4.05x with the gate at 5%, 4.2x
// since refusals that pause the key past where the noise was found end
// the quiet; 3.1x since a quick refusal cuts by the share refused, 4.1x
// without that alone; 2.70x by session 46, 2.09x since a quick refusal of
// a pace the server bore, refused as often as before, counts only the
// refusals since the last cut: rule 3).
func TestThreeRandomRefusalsInAHundredDoNotSinkALearnedPace(t *testing.T) {
	bucket := throttletest.Limit{Algorithm: throttletest.TokenBucket, Rate: 100, Burst: 5}
	assert.LessOrEqual(t, randomlyRefused(t, 0.03, bucket, 2000, nil), 2.4, "on average")
}

// A window of 100 a second and a log of 200 a second, told nothing,
// behind a gateway that refuses three requests in a hundred at random:
// once refusals were found to be noise, a cut goes no lower than 0.8 of
// the median second the server served in the last 30 (rule 8), and cuts
// are tried while refusals come at 7% or less (rule 7). Regression: each
// trial that found noise restored only the pace its own cut began from,
// and between trials each refusal cut the pace again, down from where the
// server had served: 2.23x the ideal on the window, 3.01x on the log, on
// average over these seeds (1.66x and 2.55x with rule 8; 1.51x and 2.18x
// since rule 7 tries cuts after 50 cruising answers, not 100; the window
// 1.595x at cf91dc1, 1.605x since a lone pause of a pace that had not
// risen keeps the probes' hold, where TestLearnedModel's window behind 3%,
// 48 seeds, went 1.530x -> 1.522x: eight seeds of a chaotic job).
func TestRandomRefusalsDoNotSinkALearnedWindowOrLog(t *testing.T) {
	t.Run("window", func(t *testing.T) {
		// 1.605x by session 45; 1.652x since rule 9, a window taken for a
		// bucket having a run of its own undone now and then (over 48
		// seeds in TestLearnedModel: 1.52x, now 1.50x); 1.585x since a
		// quick refusal of a pace the server bore, refused as often as
		// before, counts only the refusals since the last cut (rule 3;
		// 48 seeds: 1.50x, now 1.40x); 1.472x since three refusals in a
		// trial are no longer dense by their count (rule 7; 48 seeds:
		// 1.40x, now 1.29x).
		assert.LessOrEqual(t, randomlyRefused(t, 0.03, quotaWindow, 4000, nil), 1.53, "on average")
	})
	t.Run("log", func(t *testing.T) {
		assert.LessOrEqual(t, randomlyRefused(t, 0.03, quotaLog, 4000, nil), 2.4, "on average")
	})
}

// Five requests in a hundred refused at random, a bucket of 100 a second
// told nothing: their share runs over 5% as often as under, and a cut was
// tried only under (noiseMost, then 5%): the pace sank untried, 20x the
// ideal on average over these seeds; tried up to 7%, 7.7x; tried after 50
// cruising answers, not 100, and, once noise was found, when a refusal
// came within 20 answers of the one before, 5.3x; since a refusal of a
// pace that had not risen, once noise was found, holds the probes 2 s,
// not 200 answers' worth (see holdFor), 4.9x, 5.08x by session 45 (still
// far from a client told the quota: see TestLearnedModel). Three random
// refusals in a row are taken for a gateway's blip now and then (rule 9),
// and the chaos of the pace moves a seed or two: 5.12x over these 8 seeds,
// where TestLearnedModel's 48 at 5% stay 4.71x; 4.67x since a quick
// refusal of a pace the server bore, refused as often as before, counts
// only the refusals since the last cut (rule 3); 3.00x since a trial is
// ended by refusals twice as often as before, not by a count of three
// (rule 7: at 5%, the third comes within 60 answers in more than one
// trial in two by chance; 48 seeds: 3.11x, now 2.36x).
func TestFiveRandomRefusalsInAHundredAreTried(t *testing.T) {
	bucket := throttletest.Limit{Algorithm: throttletest.TokenBucket, Rate: 100, Burst: 5}
	assert.LessOrEqual(t, randomlyRefused(t, 0.05, bucket, 2000, nil), 3.6, "on average")
}

// Behind five random refusals in a hundred, a slow pace's probes wait 200
// answers' worth of it after a probe's refusal, but a refusal of a pace
// that had not risen since its last cut does not begin that wait again: at
// 20 a second, each random 429 began 10 s again, and the pace, once sunk,
// rarely probed (2.60x the ideal over these 8 seeds; then 2.20x, 2.00x by
// session 47; 1.58x since three refusals in a trial, a twentieth of its
// answers, no longer end it as dense: rule 7).
func TestRandomRefusalsDoNotHoldASlowPaceDown(t *testing.T) {
	bucket := throttletest.Limit{Algorithm: throttletest.TokenBucket, Rate: 20, Burst: 5}
	assert.LessOrEqual(t, randomlyRefused(t, 0.05, bucket, 1200, nil), 1.8, "on average")
}

// noiseThen runs a job of n records, 16 workers, through a Transport told
// nothing, against a gateway that refuses the share of requests at random
// (429, Retry-After: 1, counted by no quota) before the time at, and
// after it none, or, with changed set, the share still; behind it the
// quota first, from at on changed if set. It returns the quota's own 429s
// from at on.
func noiseThen(t *testing.T, seed int64, share float64, at time.Duration, first, changed *throttletest.Limit, n int) int64 {
	t.Helper()
	before := throttletest.NewAPI(nearby(throttletest.Config{Limits: []throttletest.Limit{*first}}, seed))
	after := before
	if changed != nil {
		after = throttletest.NewAPI(nearby(throttletest.Config{Limits: []throttletest.Limit{*changed}}, seed+100))
	}
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(uint64(seed), 7))
	start := time.Now()
	var from int64 // the quota's 429s before at
	var fromOnce sync.Once
	rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
		late := time.Since(start) >= at
		if late {
			fromOnce.Do(func() { from = before.Stats().Total.Throttled })
		}
		mu.Lock()
		x := rng.Float64()
		mu.Unlock()
		if x < share && (!late || changed != nil) {
			time.Sleep(2 * time.Millisecond)
			return reply(r, http.StatusTooManyRequests, "Retry-After", "1"), nil
		}
		if late {
			return after.RoundTrip(r)
		}
		return before.RoundTrip(r)
	}))
	defer rt.Close()
	jobOf(t, rt, n, 16, "")
	if changed != nil {
		return after.Stats().Total.Throttled
	}
	return before.Stats().Total.Throttled - from
}

// A quiet after refusals found noise is for the pace it was found at:
// refusals that pause the key after the probes took it more than a
// sixteenth past that pace end it. Found in review: 5% of requests refused
// at random for 8 s, then none; the quiet went on, the probes climbed past
// the last pace refused and the pace doubled to 1.8 times the quota, each
// refusal swallowed (the pauses they made cut the CUSUM short): 159 429s
// of the quota in one run (seed 4; 6-9 in the others), at commit 2563042,
// which tried noise up to 5%. The test held each of seeds 0-7 to 20 until
// session 50, which found (TestQuietModel) that 6 seeds of 96 drew more at
// commit 4faddb5 (the worst 72: a trial that takes a pace over the quota
// for noise, the pace and its cut refused alike), none of those 8, and
// that any change to the learned pace moved one of them over by chance.
// It holds
// the 96 now: 9.9 on average and 6 over 20 at commit 4faddb5; the bug
// above, one seed in eight at 159, would show about 25 and 12.
func TestQuietEndsWhenAPaceFarPastItPauses(t *testing.T) {
	bucket := throttletest.Limit{Algorithm: throttletest.TokenBucket, Rate: 100, Burst: 5}
	const seeds = 96
	var sum int64
	over := 0
	for seed := range int64(seeds) {
		synctest.Test(t, func(t *testing.T) {
			refused := noiseThen(t, seed, 0.05, 8*time.Second, &bucket, nil, 4000)
			t.Logf("seed %d: %d refused by the quota after the noise stopped", seed, refused)
			sum += refused
			if refused > 20 {
				over++
			}
		})
	}
	t.Logf("%.1f on average, %d seeds over 20", float64(sum)/seeds, over)
	assert.LessOrEqual(t, float64(sum)/seeds, 12.0, "on average")
	assert.LessOrEqual(t, over, 10, "seeds over 20")
}

// Nor does the quiet cover a probe's pace over a quota that fell under
// it. Found in review: 2% of requests refused at random throughout, the
// quota falling from 100 a second to 92 at 20 s under a probe's 98.5:
// about 6 429s a second for 20 s, each swallowed. Over these 32 seeds, 16
// after the fall on average at commit 2563042, the worst 50; 11 at commit
// d012106; 10.7 then (a trial is tried against the share of refusals
// lately if higher than so far, and is not noise until its answers say
// "as often" is likelier than "twice as often": 16 without); 11.8 at
// commit dec8b62, 12.1 since rule 7 tries more cuts (after 50 answers,
// and quick ones once noise was found); 11.8 by session 47, 12.6 since
// three refusals in a trial no longer end it as dense (rule 7): a trial
// of a cut over the fallen quota tells by its odds alone. Since session
// 50 it runs 96 seeds (TestQuietModel): the mean of 32 moved by a seed or
// two's chance with any change to the learned pace (12.0-13.8 for changes
// whose 96 seeds gave 12.6-12.8); 12.7 at commit 4faddb5, 67 the worst.
func TestQuietEndsWhenAProbePausesTheKey(t *testing.T) {
	bucket := throttletest.Limit{Algorithm: throttletest.TokenBucket, Rate: 100, Burst: 5}
	lower := throttletest.Limit{Algorithm: throttletest.TokenBucket, Rate: 92, Burst: 5}
	const seeds = 96
	var sum int64
	for seed := range int64(seeds) {
		synctest.Test(t, func(t *testing.T) {
			refused := noiseThen(t, seed, 0.02, 20*time.Second, &bucket, &lower, 4000)
			t.Logf("seed %d: %d refused by the quota after it fell", seed, refused)
			sum += refused
		})
	}
	t.Logf("%.1f on average", float64(sum)/seeds)
	assert.LessOrEqual(t, float64(sum)/seeds, 14.0, "on average")
}

// A pace that noise sank climbs back through it in the quiet after a noise
// verdict: it grows again (rule 2), the noise's refusals swallowed, up to
// the quota. Found in review: a quiet that ended at the first refusal of a
// growing pace, nearly always noise's, halved it each time; a bucket of
// 1,000 a second behind 2% random 429s took 9.2x the ideal on average over
// these seeds, 7.4x at commit d012106, 3.9x since a pause in the quiet
// cuts nothing (6.7x without that alone) and a quick refusal cuts by the
// share refused.
func TestASunkPaceClimbsBackThroughNoise(t *testing.T) {
	bucket := throttletest.Limit{Algorithm: throttletest.TokenBucket, Rate: 1000, Burst: 20}
	assert.LessOrEqual(t, randomlyRefused(t, 0.02, bucket, 20000, nil), 4.5, "on average")
}

// Two transports on one quota, told nothing, take each other's refusals:
// a cut of one makes room the other fills, and its refusals come as often
// after the cut as before, as noise's would. Taken for noise at a share
// of 3%, they were let through for 30 s unless three times as frequent
// (69 refusals in one of these runs, where 40 at most came before rule
// 7; 4 runs over 40 in 200 seeds, none before). A cut is tried only
// while refusals came at 2% of the answers or fewer (2 runs of 200 at
// 41 and 42 now). At 5%, which lets a gateway's three in a hundred be
// tried, only while they came at 5% or fewer since the third to last
// too: the other client growing into the room a cut left brings them
// close together (seed 170 drew 72 in four runs of six without it; 1,000
// seeds: 9 runs over 40, the worst 55, where the 2% alone had 10, 59).
// Seeds 15, 130 and 170 are the ones that drew most; 1 to 9 are any:
// the mean of the three alone flaked under CI's load (32, 38 and 36 at
// c7141e2, over 35, where twelve runs of it under -race gave 26.7-34.7 at
// that commit and 26.7-33.0 at cf91dc1), and so did the median of six
// with 1, 2 and 3 beside them (37 in a fresh-clone CI run at a75075c;
// 38 in one of 30 runs under -race there, where seeds 15 and 130 drew
// over 35 in a third of the runs each), for two seeds that draw most
// are a third of six. Nine of any seeds make the median theirs: 26-31 in
// ten runs under -race at a75075c. (Six runs gave 26-30 with no
// share gating trials at all, noiseMost 1: the rules since rule 7's gate
// hold this case without it; the test guards the outcome.)
func TestTwoTransportsDoNotTakeEachOthersRefusalsForNoise(t *testing.T) {
	var refused []int64
	for _, seed := range []int64{15, 130, 170, 1, 2, 3, 4, 5, 6, 7, 8, 9} {
		synctest.Test(t, func(t *testing.T) {
			api := throttletest.NewAPI(nearby(throttletest.Config{
				Limits: []throttletest.Limit{{Algorithm: throttletest.TokenBucket, Rate: 200, Burst: 20}}}, seed))
			rts := []*throttle.Transport{throttle.New(api), throttle.New(api)}
			var wg sync.WaitGroup
			for i, rt := range rts {
				defer rt.Close()
				wg.Go(func() { jobOf(t, rt, 2000, 8, fmt.Sprint(i)) })
			}
			wg.Wait()
			seen := api.Stats().Total
			t.Logf("seed %d: %d refused", seed, seen.Throttled)
			refused = append(refused, seen.Throttled)
		})
	}
	assertFewRefusedByTwo(t, refused)
}

// assertFewRefusedByTwo checks the 429s that two transports on one bucket
// of 200 a second, 20 deep, drew in runs of 4,000 requests: 35 in the
// median run at most (under 1%), and 80 in none. Two transports in one
// bubble do not run the same way twice (their goroutines interleave at
// will, under -race the more), and a run's count has a tail: over 1,000
// seeds (200 under -race) the mean was 26, about one run in a hundred drew
// more than 40, the most 59; one over 40 among these seeds failed CI now
// and then. Code that changes nothing on their path moves the tail: at
// commit e94706e (no quota headers here, so none of its changes runs:
// checked), 180 runs of TestTwoTransportsShareAQuotaUntold under -race had
// a median of 28 and four over 60 (62, 62, 62, 74; a fresh-clone CI run
// met the first), where 144 at f140124 had 40 at most. So the bound is on
// the median, which one run in the tail does not move, and a run is held
// only to not running away.
func assertFewRefusedByTwo(t *testing.T, refused []int64) {
	t.Helper()
	for _, n := range refused {
		assert.LessOrEqual(t, n, int64(80), "refused in a run")
	}
	sorted := slices.Clone(refused)
	slices.Sort(sorted)
	assert.LessOrEqual(t, sorted[len(sorted)/2], int64(35), "refused in the median run: %v", refused)
}

// A random 429 while the pace grows from a first pause that told nothing
// does not stop the growth. A bucket of 100 a second, 5 deep, answering
// at once after 0-2 ms of arrival jitter (as on loopback): the first
// burst's accepted answers come back first, their workers send again,
// and all 16 requests are refused and wait out their own Retry-After, so
// no request takes the first pause's peek and the first guess is 5 a
// second. A gateway then refuses one request at random
// while the pace grows through 10 a second. Taken for the quota, it held
// the pace under 10 for a minute (found in session 40, on loopback: the
// row of 3% random 429s took 3.2-4.0x the ideal in such runs); held until
// 16 answers clear it, the growth goes on and finds the bucket's rate
// (1.87x the ideal without it, 1.49x with it: the first second is a pause).
func TestALoneRefusalDoesNotStopAGrowthFromAnUntoldPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := throttletest.NewAPI(throttletest.Config{Limits: []throttletest.Limit{
			{Algorithm: throttletest.TokenBucket, Rate: 100, Burst: 5}}, ArrivalJitter: 2 * time.Millisecond, Seed: 5})
		start := time.Now()
		var mu sync.Mutex
		var gateway, first int
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			refuse := gateway == 0 && time.Since(start) > 1200*time.Millisecond
			if refuse {
				gateway++
			}
			mu.Unlock()
			if refuse {
				return reply(r, http.StatusTooManyRequests, "Retry-After", "1"), nil
			}
			resp, err := api.RoundTrip(r)
			if err == nil && resp.StatusCode == http.StatusTooManyRequests && time.Since(start) < 50*time.Millisecond {
				mu.Lock()
				first++
				mu.Unlock()
			}
			return resp, err
		})
		rt := throttle.New(base)
		defer rt.Close()
		took := jobOf(t, rt, 1000, 16, "a")
		require.Equal(t, 16, first, "every worker's request of the first burst refused: no peek taken")
		require.Equal(t, 1, gateway, "the gateway refused once")
		ideal := (1000 - 5) / 100.0
		t.Logf("took %v, %.2fx the ideal", took, took.Seconds()/ideal)
		assert.Less(t, took.Seconds()/ideal, 1.65, "the growth went on past the lone refusal")
		st := rt.Stats().Keys["api.test"]
		assert.Greater(t, float64(st.Rate), 80.0, "the pace found the bucket's rate")
	})
}

// A learned pace does not depend on how long its Transport had lived before
// the key met its first 429: the same job on a window of 100 a second, told
// nothing, takes the same time and draws the same 429s on a Transport made
// ten minutes before as on one made at once (regression, found in the
// reread of commit 428da61: the probes' hold doubled at a pause within two
// holds of the last, and "the last" of a key's first pause was the
// Transport's start; a key that began with it doubled at its first pauses,
// one that began later did not: seed 13 drew 39 429s where it draws 31).
func TestLearnedPaceDoesNotDependOnTheTransportsAge(t *testing.T) {
	type result struct {
		took    time.Duration
		refused int64
	}
	run := func(seed int64, age time.Duration) (r result) {
		synctest.Test(t, func(t *testing.T) {
			var api *throttletest.API
			rt := throttle.New(rtFunc(func(req *http.Request) (*http.Response, error) { return api.RoundTrip(req) }))
			defer rt.Close()
			time.Sleep(age)
			time.Sleep(time.Duration(seed*379%1000) * time.Millisecond) // the job meets the window's second there
			api = throttletest.NewAPI(nearby(throttletest.Config{Limits: []throttletest.Limit{quotaWindow}}, seed))
			r = result{jobOf(t, rt, 4000, 16, "c"), api.Stats().Total.Throttled}
		})
		return r
	}
	for _, seed := range []int64{5, 13, 0} {
		young, old := run(seed, 0), run(seed, 10*time.Minute)
		assert.Equal(t, young, old, "seed %d: made at once, then ten minutes before", seed)
	}
}

// A pace learned from 429s alone on a bucket, behind a gateway that refuses
// every request for 50 or 100 ms every 4 s (a blip: three refusals or more
// in a row, none accepted among them), goes on at the bucket's rate through
// each, within 6% of go-retryablehttp + x/time/rate told the quota, in the
// same bubble (rule 9). Regression, found in session 45: each blip's first
// refusal cut the pace and took it for the slowest refused, its pause cut it
// to the first guess, and the search began again below the quota: 3,000
// requests took 45.8-49.4 s behind 50 ms blips, 51.4-53.3 s behind 100 ms
// ones, where the peer took 31.0-31.2 s; now 31.6-32.8 s.
func TestAGatewaysBlipsDoNotCutALearnedBucket(t *testing.T) {
	for _, blip := range []time.Duration{50 * time.Millisecond, 100 * time.Millisecond} {
		for seed := range int64(3) {
			t.Run(fmt.Sprint(blip, "/seed", seed), func(t *testing.T) {
				blipsBesideThePeer(t, throttletest.Limit{Algorithm: throttletest.TokenBucket, Rate: 100, Burst: 5}, blip, seed, 1.06, false)
			})
		}
	}
}

// A lone refusal of a bucket's first guess, before the growth's first step,
// does not stop the growth either: the guess is what the bucket's depth let
// through over the first pause, a lower bound. Here the first burst
// overruns a bucket of 100 a second, 5 deep, the first peek is taken (a
// bucket), and a gateway refuses the first request after it, as a random
// 429 would: held until 16 answers clear it, the pace grows and finds the
// bucket's rate (regression: it cruised at 0.95 of the guess, 37 a second,
// for 7 s, and a job of 1,000 took 1.47x the ideal; 1.07x now).
func TestALoneRefusalDoesNotStopABucketsFirstGuess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := throttletest.NewAPI(nearby(throttletest.Config{Limits: []throttletest.Limit{
			{Algorithm: throttletest.TokenBucket, Rate: 100, Burst: 5}}}, 3))
		start := time.Now()
		var mu sync.Mutex
		var after, gateway int
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			if time.Since(start) > 100*time.Millisecond {
				after++ // the first is the first pause's peek, 1/8 s after the first refusal
			}
			refuse := after == 2 // the first at the guess
			if refuse {
				gateway++
			}
			mu.Unlock()
			if refuse {
				return reply(r, http.StatusTooManyRequests, "Retry-After", "1"), nil
			}
			return api.RoundTrip(r)
		})
		rt := throttle.New(base)
		defer rt.Close()
		took := jobOf(t, rt, 1000, 16, "a")
		require.Equal(t, 1, gateway, "the gateway refused once")
		ideal := (1000 - 5) / 100.0
		t.Logf("took %v, %.2fx the ideal", took, took.Seconds()/ideal)
		assert.Less(t, took.Seconds()/ideal, 1.25, "the growth went on past the lone refusal")
		st := rt.Stats().Keys["api.test"]
		assert.Greater(t, float64(st.Rate), 80.0, "the pace found the bucket's rate")
	})
}

// A key used by an hourly job (100 requests, 4 workers, each request with
// a 5 s timeout) against a server that takes all it is sent: the 4th job
// draws one 429 (Retry-After: 1). Its first guess (rule 1) must be what the
// server took while the key was sending, not the answers of the last three
// hours spread over those hours: fresh, the same job learns 259 a second
// and loses nothing. Regression, found in review: the guess was 0.1 a
// second, and 86 of the job's 100 requests, then 98 of every later job's,
// failed for their deadlines.
func TestFirstGuessCountsNoIdleHours(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n, refuseAt atomic.Int64
		refuseAt.Store(-1)
		rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
			time.Sleep(20 * time.Millisecond)
			if n.Add(1) == refuseAt.Load() {
				return reply(r, http.StatusTooManyRequests, "Retry-After", "1"), nil
			}
			return reply(r, http.StatusOK), nil
		}))
		defer rt.Close()
		hourly := func() (failed int64) {
			var wg sync.WaitGroup
			var f atomic.Int64
			for w := range 4 {
				wg.Go(func() {
					for i := range 25 {
						ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
						if doCtx(t, ctx, rt, fmt.Sprint("http://api.test/", w, "-", i)) != nil {
							f.Add(1)
						}
						cancel()
					}
				})
			}
			wg.Wait()
			return f.Load()
		}
		for range 3 {
			require.Zero(t, hourly())
			time.Sleep(time.Hour)
		}
		refuseAt.Store(n.Load() + 10) // one 429 in the 4th job
		failed := hourly()
		st := rt.Stats().Keys["api.test"]
		t.Logf("the job with one 429: %d of 100 failed, pace %.2f/s (%v)", failed, float64(st.Rate), st.PaceFrom)
		assert.Zero(t, failed, "one 429 with Retry-After: 1 fails none")
		assert.Greater(t, float64(st.Rate), 1.0, "the pace learned is no crawl")
		for h := range 3 {
			time.Sleep(time.Hour)
			failed := hourly()
			t.Logf("%d h later: %d of 100 failed, pace %.2f/s", h+1, failed, float64(rt.Stats().Keys["api.test"].Rate))
			assert.Zero(t, failed, "%d h later", h+1)
		}
	})
}

// pacedEvent is an event of the pace or a pause, and when it came.
type pacedEvent struct {
	at time.Duration
	e  throttle.Event
}

// paceAndPauses records the EventPace and EventPaused events of a
// Transport, from start.
func paceAndPauses(start time.Time) (throttle.Option, func() []pacedEvent) {
	var mu sync.Mutex
	var evs []pacedEvent
	return throttle.WithEvents(func(e throttle.Event) {
			if e.Kind == throttle.EventPace || e.Kind == throttle.EventPaused {
				mu.Lock()
				evs = append(evs, pacedEvent{time.Since(start), e})
				mu.Unlock()
			}
		}), func() []pacedEvent {
			mu.Lock()
			defer mu.Unlock()
			return append([]pacedEvent(nil), evs...)
		}
}

// A learned pace that grows past a window's or a log's quota in the quiet
// after refusals were found to be noise (rule 7), and whose refusals pause
// the key, was refused: after the pause it probes up to that pace (rule 4),
// it does not double back to it at once and pause the key again.
func TestAGrowthThatPausedTheKeyDoesNotDoubleBackAtOnce(t *testing.T) {
	for _, c := range []struct {
		limit throttletest.Limit
		seed  int64
	}{
		{throttletest.Limit{Algorithm: throttletest.FixedWindow, N: 50, Per: time.Second}, 1},
		{throttletest.Limit{Algorithm: throttletest.SlidingLog, N: 50, Per: time.Second}, 2},
		{throttletest.Limit{Algorithm: throttletest.FixedWindow, N: 100, Per: time.Second}, 1},
	} {
		t.Run(fmt.Sprint(c.limit.Algorithm, c.limit.N, "/seed", c.seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := throttletest.NewAPI(nearby(throttletest.Config{Refused: 0.03, Limits: []throttletest.Limit{c.limit}}, c.seed))
				start := time.Now()
				events, evs := paceAndPauses(start)
				rt := throttle.New(api, events)
				defer rt.Close()
				took := job(t, rt, 3000)
				t.Logf("took %v, %d refused", took, api.Stats().Total.Throttled)
				quota := float64(c.limit.N)
				all := evs()
				for i, e := range all {
					if e.e.Kind != throttle.EventPaused || e.at < 3*time.Second ||
						i > 0 && all[i-1].e.Kind == throttle.EventPaused && e.at-all[i-1].at < time.Second {
						continue // the first pause, or a peek of the pause before
					}
					var p float64 // the pace that paused the key
					for j := i - 1; j >= 0 && e.at-all[j].at <= 300*time.Millisecond; j-- {
						if all[j].e.Kind == throttle.EventPace {
							p = max(p, float64(all[j].e.Rate))
						}
					}
					if p < 2*quota {
						continue
					}
					for j := i + 1; j < len(all) && all[j].at-e.at <= 2*time.Second; j++ {
						if all[j].e.Kind == throttle.EventPace {
							assert.Less(t, float64(all[j].e.Rate), p, "paused at %v by a pace of %.1f/s (%.1fx the quota), back at %.1f/s %v later",
								e.at.Round(time.Millisecond), p, p/quota, float64(all[j].e.Rate), (all[j].at - e.at).Round(time.Millisecond))
						}
					}
				}
			})
		})
	}
}
