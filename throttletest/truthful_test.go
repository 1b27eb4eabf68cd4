package throttletest_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlehttp/throttle/throttletest"
)

// burstOf sends n requests of key "k" at one instant and returns their codes.
func burstOf(t *testing.T, api *throttletest.API, n int) []int {
	codes := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { codes[i] = get(t, api, "k").code })
	}
	wg.Wait()
	return codes
}

func count(codes []int, code int) int {
	n := 0
	for _, c := range codes {
		if c == code {
			n++
		}
	}
	return n
}

type ietfItem struct{ r, t int }

func parseRateLimit(t *testing.T, v string) []ietfItem {
	var items []ietfItem
	for _, m := range strings.Split(v, ", ") {
		var it ietfItem
		for _, p := range strings.Split(m, ";")[1:] {
			k, val, _ := strings.Cut(p, "=")
			n, err := strconv.Atoi(val)
			require.NoError(t, err, v)
			switch k {
			case "r":
				it.r = n
			case "t":
				it.t = n
			}
		}
		items = append(items, it)
	}
	return items
}

func atoi(t *testing.T, s string) int {
	n, err := strconv.Atoi(s)
	require.NoError(t, err, s)
	return n
}

func randomLimit(rng *rand.Rand) throttletest.Limit {
	pers := []time.Duration{700 * time.Millisecond, time.Second, 1500 * time.Millisecond, 3 * time.Second, 10 * time.Second}
	rates := []float64{0.3, 0.7, 1, 2.5, 3, 7, 10}
	switch rng.IntN(5) {
	case 0:
		return throttletest.Limit{Algorithm: throttletest.TokenBucket, Rate: rates[rng.IntN(len(rates))], Burst: 1 + rng.IntN(8)}
	case 1:
		return throttletest.Limit{Algorithm: throttletest.LeakyBucket, Rate: rates[rng.IntN(len(rates))], Queue: rng.IntN(6)}
	case 2:
		return throttletest.Limit{Algorithm: throttletest.FixedWindow, N: 1 + rng.IntN(8), Per: pers[rng.IntN(len(pers))]}
	case 3:
		return throttletest.Limit{Algorithm: throttletest.SlidingLog, N: 1 + rng.IntN(8), Per: pers[rng.IntN(len(pers))]}
	}
	return throttletest.Limit{Algorithm: throttletest.SlidingCounter, N: 1 + rng.IntN(8), Per: pers[rng.IntN(len(pers))]}
}

// TestHeadersSayWhatTheAPIThenDoes drives random mixes of limits
// and checks every claim of the quota headers against what the API does:
// X-RateLimit-Remaining R → exactly R more accepted at once; RateLimit's
// least r → exactly r more at once; after sending those, one more is
// accepted at the largest t; Retry-After N → accepted at now+N; a single
// limit whole after X-RateLimit-Reset: X-RateLimit-Limit accepted at once.
func TestHeadersSayWhatTheAPIThenDoes(t *testing.T) {
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 1))
		var limits []throttletest.Limit
		nl := 1 + rng.IntN(3)
		for i := range nl {
			l := randomLimit(rng)
			l.Name = fmt.Sprintf("l%d", i)
			limits = append(limits, l)
		}
		format := throttletest.RetryAfterSeconds
		if rng.IntN(2) == 0 {
			format = throttletest.RetryAfterDate
		}
		var failed bool
		leaky := false
		for _, l := range limits {
			leaky = leaky || l.Algorithm == throttletest.LeakyBucket
		}
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := throttletest.NewAPI(throttletest.Config{Limits: limits, XRateLimit: true, IETF: true, HeadersOnSuccess: true, RetryAfter: format})
				sleeps := []time.Duration{0, 0, time.Nanosecond, 137 * time.Millisecond, 500 * time.Millisecond, time.Second, 2300 * time.Millisecond}
				for op := range 150 {
					d := sleeps[rng.IntN(len(sleeps))]
					if rng.IntN(5) == 0 {
						d = time.Duration(rng.Int64N(int64(4 * time.Second)))
					}
					time.Sleep(d)
					r := get(t, api, "k")
					at := fmt.Sprintf("limits %+v, op %d at %v", limits, op, time.Now().Format("15:04:05.000000000"))
					switch rng.IntN(6) {
					case 0: // X-RateLimit-Remaining
						rem := atoi(t, r.header.Get("X-RateLimit-Remaining"))
						codes := burstOf(t, api, rem+1)
						if leaky {
							// said at admission, read after the queue: it may have drained since
							assert.GreaterOrEqual(t, count(codes, http.StatusOK), rem, "X-RateLimit-Remaining %s: %s", r.header.Get("X-RateLimit-Remaining"), at)
						} else {
							assert.Equal(t, rem, count(codes, http.StatusOK), "X-RateLimit-Remaining %s: %s", r.header.Get("X-RateLimit-Remaining"), at)
						}
					case 1: // RateLimit's least r, then the largest t
						items := parseRateLimit(t, r.header.Get("RateLimit"))
						least, wait := items[0].r, 0
						for _, it := range items {
							least, wait = min(least, it.r), max(wait, it.t)
						}
						codes := burstOf(t, api, least)
						assert.Equal(t, least, count(codes, http.StatusOK), "RateLimit %s: %s", r.header.Get("RateLimit"), at)
						time.Sleep(time.Duration(wait) * time.Second)
						assert.Equal(t, http.StatusOK, get(t, api, "k").code, "RateLimit %s, after the largest t: %s", r.header.Get("RateLimit"), at)
					case 2: // Retry-After
						if r.code != http.StatusTooManyRequests {
							break
						}
						ra := r.header.Get("Retry-After")
						if format == throttletest.RetryAfterDate {
							date, err := http.ParseTime(ra)
							require.NoError(t, err)
							time.Sleep(time.Until(date))
						} else {
							time.Sleep(time.Duration(atoi(t, ra)) * time.Second)
						}
						assert.Equal(t, http.StatusOK, get(t, api, "k").code, "Retry-After %s: %s", ra, at)
					case 3: // a single limit is whole after X-RateLimit-Reset
						if len(limits) > 1 {
							break
						}
						lim := atoi(t, r.header.Get("X-RateLimit-Limit"))
						time.Sleep(time.Duration(atoi(t, r.header.Get("X-RateLimit-Reset"))) * time.Second)
						codes := burstOf(t, api, lim+1)
						assert.Equal(t, lim, count(codes, http.StatusOK), "X-RateLimit-Limit %d after Reset %s: %s", lim, r.header.Get("X-RateLimit-Reset"), at)
					default:
						burstOf(t, api, rng.IntN(6))
					}
					if t.Failed() {
						return
					}
				}
			})
		})
		_ = failed
	}
}

// TestStatsAreExact sends requests at random instants, from many
// goroutines, against random limits with a fixed Latency, random 503s,
// random refusals and an outage, and recounts what Stats says from what the
// clients saw: with a fixed Latency L and no jitter, an accepted request was
// served L before its answer, and an admitted one was in flight from its
// arrival to its answer.
func TestStatsAreExact(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 2))
		var limits []throttletest.Limit
		for i := range 1 + rng.IntN(2) {
			l := randomLimit(rng)
			l.Name = fmt.Sprintf("l%d", i)
			limits = append(limits, l)
		}
		lat := time.Duration(rng.IntN(4)) * 100 * time.Millisecond
		cfg := throttletest.Config{
			Limits: limits, Latency: lat, Seed: int64(seed),
			Unavailable: []float64{0, 0.1}[rng.IntN(2)], Refused: []float64{0, 0.05}[rng.IntN(2)],
			Outages: []throttletest.Outage{{Start: 5 * time.Second, Duration: 2 * time.Second}},
		}
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := throttletest.NewAPI(cfg)
				type seen struct {
					sent, got time.Time
					code      int
				}
				var mu sync.Mutex
				var all []seen
				var wg sync.WaitGroup
				for g := range 8 {
					grng := rand.New(rand.NewPCG(seed, uint64(g)+100))
					wg.Go(func() {
						for range 40 {
							time.Sleep(time.Duration(grng.Int64N(int64(400 * time.Millisecond))))
							sent := time.Now()
							code := get(t, api, "k").code
							mu.Lock()
							all = append(all, seen{sent, time.Now(), code})
							mu.Unlock()
						}
					})
				}
				wg.Wait()
				s := api.Stats().Total
				if seed < 5 {
					t.Logf("%+v lat %v limits %+v", s, lat, limits)
				}
				var c throttletest.Counts
				var served []time.Time
				type ev struct {
					at time.Time
					d  int
				}
				var evs []ev
				for _, x := range all {
					c.Requests++
					admitted := false
					switch x.code {
					case http.StatusOK:
						c.Accepted++
						served = append(served, x.got.Add(-lat))
						admitted = true
					case http.StatusTooManyRequests:
						c.Throttled++
					case http.StatusServiceUnavailable:
						if x.got.Equal(x.sent) && lat > 0 || lat == 0 && !x.sent.Before(time.Time{}) && false {
							c.Outage++
						} else {
							c.Unavailable++
							admitted = true
						}
					}
					if admitted {
						evs = append(evs, ev{x.sent, +1}, ev{x.got, -1})
					}
				}
				assert.Equal(t, c.Requests, s.Requests)
				assert.Equal(t, c.Accepted, s.Accepted)
				assert.Equal(t, c.Throttled, s.Throttled)
				assert.Equal(t, c.Unavailable+c.Outage, s.Unavailable+s.Outage)
				if lat > 0 {
					assert.Equal(t, c.Outage, s.Outage, "outages")
				}
				// peak per second of the served instants
				slicesSort(served)
				peak := 0
				for i := range served {
					n := 0
					for j := i; j < len(served) && served[j].Sub(served[i]) < time.Second; j++ {
						n++
					}
					peak = max(peak, n)
				}
				assert.Equal(t, int64(peak), s.PeakPerSecond, "PeakPerSecond; limits %+v latency %v", limits, lat)
				// peak in flight: answers before arrivals at one instant
				sortEvents := func() {
					for i := 1; i < len(evs); i++ {
						for j := i; j > 0 && (evs[j].at.Before(evs[j-1].at) || evs[j].at.Equal(evs[j-1].at) && evs[j].d < evs[j-1].d); j-- {
							evs[j], evs[j-1] = evs[j-1], evs[j]
						}
					}
				}
				sortEvents()
				in, peakIn := 0, 0
				for _, e := range evs {
					in += e.d
					peakIn = max(peakIn, in)
				}
				if lat > 0 {
					assert.Equal(t, int64(peakIn), s.PeakInFlight, "PeakInFlight; limits %+v latency %v", limits, lat)
				}
			})
		})
	}
}

func slicesSort(ts []time.Time) {
	for i := 1; i < len(ts); i++ {
		for j := i; j > 0 && ts[j].Before(ts[j-1]); j-- {
			ts[j], ts[j-1] = ts[j-1], ts[j]
		}
	}
}

// TestUnavailableNaNIsRefused: Unavailable must be within [0, 1]
// (NewAPI panics on 1.5 and on -0.1, and on a NaN Refused); a NaN, say
// from 0/0 in a test's table, is taken silently as 0: the test that meant
// some random 503s runs without any.
func TestUnavailableNaNIsRefused(t *testing.T) {
	nan := math.NaN()
	assert.Panics(t, func() { throttletest.NewAPI(throttletest.Config{Refused: nan}) }, "Refused: NaN")
	assert.Panics(t, func() { throttletest.NewAPI(throttletest.Config{Unavailable: nan}) }, "Unavailable: NaN")
}
