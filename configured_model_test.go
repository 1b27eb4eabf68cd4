package throttle_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"

	"github.com/throttlehttp/throttle"
	"github.com/throttlehttp/throttle/throttletest"
)

// TestConfiguredModel is the synctest model of a configured pace under
// noise and under quotas other than the Policy, which the README and the
// notes quote: each scenario runs over seeds 0 to N-1 with throttle and
// with a model of go-retryablehttp + x/time/rate (every attempt waits on a
// limiter told the Policy, a 429 waits its Retry-After and goes again
// through the limiter), and prints, for each, the mean and the worst of
// the job's time over its ideal and of the quota's 429s (those of random
// refusals are not counted). It runs only when asked, for it measures
// rather than checks:
//
//	THROTTLE_CONFIGURED_MODEL=16 go test -count=1 -run TestConfiguredModel -v . | grep ^model
//
// THROTTLE_CONFIGURED_MODEL is the seeds of each scenario, and
// THROTTLE_MODEL_ONLY, if set, keeps the scenarios whose names hold one of
// its comma-separated words. A scenario of 16 seeds takes a second or so.
// The runs of several transports on one quota (share) differ from one
// execution to the next (the goroutines' order); the others do not.
func TestConfiguredModel(t *testing.T) {
	seeds, _ := strconv.Atoi(os.Getenv("THROTTLE_CONFIGURED_MODEL"))
	if seeds <= 0 {
		t.Skip("THROTTLE_CONFIGURED_MODEL=N runs each scenario over N seeds")
	}
	only := os.Getenv("THROTTLE_MODEL_ONLY")
	for _, s := range configuredScenarios() {
		if only != "" && !anyWordIn(only, s.name) {
			continue
		}
		for _, peer := range []bool{false, true} {
			var sx, wx, sq, wq float64
			for seed := range int64(seeds) {
				synctest.Test(t, func(t *testing.T) {
					x, q := s.run(t, seed, func(base http.RoundTripper, r float64, burst int) modelClient {
						if peer {
							return &modelPeer{base: base, lim: rate.NewLimiter(rate.Limit(r), burst)}
						}
						return throttle.New(base, throttle.WithPolicy(throttle.Policy{Rate: rate.Limit(r), Burst: burst}))
					})
					sx, wx, sq, wq = sx+x, max(wx, x), sq+q, max(wq, q)
				})
			}
			printModel(s.name, peer, seeds, sx, wx, sq, wq)
		}
	}
}

// TestLearnedModel is the same model for a pace learned from 429s: each
// scenario runs a job through a Transport told nothing (no Policy, no
// quota headers) and through the model of go-retryablehttp + x/time/rate
// told the quota, over seeds 0 to N-1, and prints the mean and worst of
// the time over the ideal and of the quota's 429s (random ones not
// counted), as TestConfiguredModel does:
//
//	THROTTLE_LEARNED_MODEL=48 go test -count=1 -run TestLearnedModel -v . | grep ^model
//
// THROTTLE_MODEL_ONLY filters as there. The scenarios: a bucket of 100 a
// second (burst 5) behind 1%, 3% and 5% of requests answered 429 at random,
// a window of 100 a second and a log of 200 a second behind 3%, each with
// 4,000 records; the three quotas of issue 9's rows without noise; two
// transports (two processes) on one bucket, half the job each, without
// noise and behind 1%; and the bucket behind 3% answered at once after
// its arrival jitter, as the loopback rows are (fast-n3). There, as on
// loopback, the first burst's accepted answers may come back before its
// refusals: their workers send again and are refused too, all 16 wait
// out their own Retry-After, and no request is left to take the first
// pause's peek. The guess is then the 5 answers over the whole second,
// and a random 429 while the pace grows from there holds it low for a
// minute or more (found in session 40: on loopback the row of 3% random
// 429s took 3.2-4.0x the ideal in the runs whose first burst drew 16
// refusals, 1.5-2.5x in the others; in nearby's model, whose refusals
// come back before the answers accepted, never 16). A window's runs
// start at their seed's point of the server's second (seed·379 ms into
// it, as in TestModel), its ideal that much shorter: up to commit
// f8f1261 they all began with a window, whose first refusal asks for the
// whole second and whose first pause, held to its end, shows a window,
// and the model met none of the paths by which a job meets a real
// server's window mid-way. The xrl- rows are the bucket, the window and
// the log behind 3% random 429s, told by X-RateLimit-* on every answer
// the server gives (the gateway's 429s carry none): no Policy, but a
// count to pace by. The onref- rows, the bucket and the window behind
// them, send X-RateLimit-* on the server's own 429s only: a pace learned
// from refusals, where the gateway's carry none.
func TestLearnedModel(t *testing.T) {
	seeds, _ := strconv.Atoi(os.Getenv("THROTTLE_LEARNED_MODEL"))
	if seeds <= 0 {
		t.Skip("THROTTLE_LEARNED_MODEL=N runs each scenario over N seeds")
	}
	only := os.Getenv("THROTTLE_MODEL_ONLY")
	b100 := throttletest.Limit{Algorithm: throttletest.TokenBucket, Rate: 100, Burst: 5}
	for _, s := range []struct {
		name    string
		l       throttletest.Limit
		share   float64
		ideal   float64 // seconds, for 4,000 records
		clients int
		fast    bool // answered at once, as on loopback (bench/cmd/e2e), not 1-3 ms after arrival
		headers int  // 1: the server tells its count by X-RateLimit-* on every answer it gives, 2: on its 429s only (the random 429s carry none)
	}{
		{"bucket-n1", b100, 0.01, 39.95, 1, false, 0}, {"bucket-n3", b100, 0.03, 39.95, 1, false, 0}, {"bucket-n5", b100, 0.05, 39.95, 1, false, 0},
		{"window-n3", quotaWindow, 0.03, 40, 1, false, 0}, {"log-n3", quotaLog, 0.03, 20, 1, false, 0},
		{"bucket200", quotaBucket, 0, 19.9, 1, false, 0}, {"window", quotaWindow, 0, 40, 1, false, 0}, {"log", quotaLog, 0, 20, 1, false, 0},
		{"two", quotaBucket, 0, 19.9, 2, false, 0}, {"two-n1", b100, 0.01, 39.95, 2, false, 0},
		{"fast-n3", b100, 0.03, 39.95, 1, true, 0},
		{"xrl-bucket-n3", b100, 0.03, 39.95, 1, false, 1}, {"xrl-window-n3", quotaWindow, 0.03, 40, 1, false, 1},
		{"xrl-log-n3", quotaLog, 0.03, 20, 1, false, 1},
		{"onref-bucket-n3", b100, 0.03, 39.95, 1, false, 2}, {"onref-window-n3", quotaWindow, 0.03, 40, 1, false, 2},
	} {
		if only != "" && !anyWordIn(only, s.name) {
			continue
		}
		for _, peer := range []bool{false, true} {
			var sx, wx, sq, wq float64
			for seed := range int64(seeds) {
				ideal := s.ideal
				synctest.Test(t, func(t *testing.T) {
					if s.l.Algorithm == throttletest.FixedWindow {
						late := time.Duration(seed*379%1000) * time.Millisecond
						time.Sleep(late) // the server's windows begin on its clock's seconds
						ideal -= late.Seconds()
					}
					cfg := nearby(throttletest.Config{Limits: []throttletest.Limit{s.l}}, seed)
					if s.fast {
						cfg.Latency, cfg.LatencyJitter = 0, 0
					}
					cfg.XRateLimit, cfg.HeadersOnSuccess = s.headers > 0, s.headers == 1
					api := throttletest.NewAPI(cfg)
					base := modelNoise(api, s.share, seed)
					var wg sync.WaitGroup
					var mu sync.Mutex
					var took time.Duration
					for i := range s.clients {
						wg.Go(func() {
							var rt modelClient = throttle.New(base)
							if peer {
								r, burst := peerRate(s.l)
								rt = &modelPeer{base: base, lim: rate.NewLimiter(rate.Limit(r/float64(s.clients)), max(1, burst/s.clients))}
							}
							defer rt.Close()
							d := jobOf(t, rt, 4000/s.clients, 16/s.clients, fmt.Sprint("c", i))
							mu.Lock()
							took = max(took, d)
							mu.Unlock()
						})
					}
					wg.Wait()
					x, q := took.Seconds()/ideal, throttled(api)
					sx, wx, sq, wq = sx+x, max(wx, x), sq+q, max(wq, q)
				})
			}
			printModel(s.name, peer, seeds, sx, wx, sq, wq)
		}
	}
}

// TestQuietModel runs the two scenarios of the quiet after noise that
// TestQuietEndsWhenAPaceFarPastItPauses and
// TestQuietEndsWhenAProbePausesTheKey check on 96 seeds over seeds 0 to
// N-1, and prints, for each, the mean and the worst of the quota's 429s
// after the change and how many seeds drew more than 20. It runs only when
// asked, for it measures rather than checks:
//
//	THROTTLE_QUIET_MODEL=96 go test -count=1 -run TestQuietModel -v . | grep ^quiet
//
// The scenarios: a bucket of 100 a second (burst 5) behind 5% random 429s
// that stop at 8 s ("stop"); the bucket behind 2% throughout, its rate
// falling to 92 at 20 s ("fall"). Both weigh a change that lets a learned
// pace hold through more of its refusals against the cost of holding a
// pace over a quota that noise hides: at commit 4faddb5, 96 seeds, "stop"
// drew 9.9 429s after the noise stopped on average, 72 at worst, 6 seeds
// over 20 (none of seeds 0-7, which its test checked one by one until
// then), and "fall" 12.7 after the fall, 67 at worst, 10 over 20. 96 seeds
// take about 15 s.
func TestQuietModel(t *testing.T) {
	seeds, _ := strconv.Atoi(os.Getenv("THROTTLE_QUIET_MODEL"))
	if seeds <= 0 {
		t.Skip("THROTTLE_QUIET_MODEL=N runs each scenario over N seeds")
	}
	bucket := throttletest.Limit{Algorithm: throttletest.TokenBucket, Rate: 100, Burst: 5}
	lower := throttletest.Limit{Algorithm: throttletest.TokenBucket, Rate: 92, Burst: 5}
	for _, s := range []struct {
		name    string
		share   float64
		at      time.Duration
		changed *throttletest.Limit
	}{
		{"stop", 0.05, 8 * time.Second, nil},
		{"fall", 0.02, 20 * time.Second, &lower},
	} {
		var sum, worst int64
		over := 0
		for seed := range int64(seeds) {
			synctest.Test(t, func(t *testing.T) {
				q := noiseThen(t, seed, s.share, s.at, &bucket, s.changed, 4000)
				sum, worst = sum+q, max(worst, q)
				if q > 20 {
					over++
				}
			})
		}
		fmt.Printf("quiet %-4s 429s after the change mean %.1f worst %d | seeds over 20: %d of %d\n", s.name, float64(sum)/float64(seeds), worst, over, seeds)
	}
}

// printModel prints a scenario's line for a client over seeds runs: the
// mean and worst of the time over the ideal (sums sx, worst wx) and of the
// quota's 429s (sq, wq).
func printModel(name string, peer bool, seeds int, sx, wx, sq, wq float64) {
	client := "throttle"
	if peer {
		client = "peer"
	}
	n := float64(seeds)
	fmt.Printf("model %-10s %-8s x mean %.3f worst %.3f | quota 429s mean %.1f worst %.0f\n", name, client, sx/n, wx, sq/n, wq)
}

// anyWordIn reports whether one of the comma-separated words of words is
// in name.
func anyWordIn(words, name string) bool {
	for w := range strings.SplitSeq(words, ",") {
		if w != "" && strings.Contains(name, w) {
			return true
		}
	}
	return false
}

// modelClient is what a scenario runs its job through: a Transport, or
// the model of the peer.
type modelClient interface {
	http.RoundTripper
	Close() error
}

// modelPeer is go-retryablehttp + x/time/rate in the model: every attempt
// waits on the limiter, a 429 waits its Retry-After (a second here) and
// goes again.
type modelPeer struct {
	base http.RoundTripper
	lim  *rate.Limiter
}

func (p *modelPeer) RoundTrip(r *http.Request) (*http.Response, error) {
	for {
		if err := p.lim.Wait(r.Context()); err != nil {
			return nil, err
		}
		resp, err := p.base.RoundTrip(r)
		if err != nil || resp.StatusCode != http.StatusTooManyRequests {
			return resp, err
		}
		resp.Body.Close()
		time.Sleep(time.Second)
	}
}

func (p *modelPeer) Close() error { return nil }

// configuredScenario runs a job through a client made by mk (a base, the
// Policy's Rate and Burst) and returns its time over the ideal and the
// quota's 429s.
type configuredScenario struct {
	name string
	run  func(t *testing.T, seed int64, mk func(base http.RoundTripper, r float64, burst int) modelClient) (x, q float64)
}

// modelNoise is base behind a gateway that answers the share of requests
// 429 with Retry-After: 1, at random, seeded, before the quota sees them.
func modelNoise(base http.RoundTripper, share float64, seed int64) http.RoundTripper {
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(uint64(seed), 99))
	return rtFunc(func(r *http.Request) (*http.Response, error) {
		mu.Lock()
		refused := share > 0 && rng.Float64() < share
		mu.Unlock()
		if refused {
			time.Sleep(ms(2))
			return reply(r, http.StatusTooManyRequests, "Retry-After", "1"), nil
		}
		return base.RoundTrip(r)
	})
}

// modelSteps is the quota of apis[i] from the ith minute on.
func modelSteps(apis []*throttletest.API) http.RoundTripper {
	start := time.Now()
	return rtFunc(func(r *http.Request) (*http.Response, error) {
		return apis[min(int(time.Since(start)/time.Minute), len(apis)-1)].RoundTrip(r)
	})
}

// modelBucket is a token bucket of rate a second, nearby.
func modelBucket(rate float64, burst int, seed int64) *throttletest.API {
	return throttletest.NewAPI(nearby(throttletest.Config{Limits: []throttletest.Limit{
		{Algorithm: throttletest.TokenBucket, Rate: rate, Burst: burst}}}, seed))
}

// throttled is the 429s the quotas of apis answered.
func throttled(apis ...*throttletest.API) float64 {
	var n int64
	for _, a := range apis {
		n += a.Stats().Total.Throttled
	}
	return float64(n)
}

func configuredScenarios() []configuredScenario {
	type mkFunc = func(base http.RoundTripper, r float64, burst int) modelClient
	// noise: a bucket of 100/s, burst 5, the Policy at it, 2,000 records.
	noise := func(share float64) func(*testing.T, int64, mkFunc) (float64, float64) {
		return func(t *testing.T, seed int64, mk mkFunc) (float64, float64) {
			api := modelBucket(100, 5, seed)
			rt := mk(modelNoise(api, share, seed), 100, 5)
			defer rt.Close()
			return job(t, rt, 2000).Seconds() / 19.95, throttled(api)
		}
	}
	// told: a bucket of 100/s, burst 5, or a window of 100 a second (the
	// Policy at it, one at a time), that tells its count by X-RateLimit-*
	// on every answer it gives, behind a gateway that refuses the share
	// of the requests at random without them, 2,000 records.
	told := func(l throttletest.Limit, share float64) func(*testing.T, int64, mkFunc) (float64, float64) {
		return func(t *testing.T, seed int64, mk mkFunc) (float64, float64) {
			api := throttletest.NewAPI(nearby(throttletest.Config{Limits: []throttletest.Limit{l}, XRateLimit: true, HeadersOnSuccess: true}, seed))
			r, burst := peerRate(l)
			ideal := float64(2000-l.Burst) / r
			rt := mk(modelNoise(api, share, seed), r, burst)
			defer rt.Close()
			return job(t, rt, 2000).Seconds() / ideal, throttled(api)
		}
	}
	// drop: the quota drops from 100 to 90 after a minute, under a Policy
	// of 100, amid the share of random refusals.
	drop := func(share float64) func(*testing.T, int64, mkFunc) (float64, float64) {
		return func(t *testing.T, seed int64, mk mkFunc) (float64, float64) {
			a, b := modelBucket(100, 5, seed), modelBucket(90, 5, seed+100)
			rt := mk(modelNoise(modelSteps([]*throttletest.API{a, b}), share, seed), 100, 5)
			defer rt.Close()
			return job(t, rt, 6000+90*120).Seconds() / 180, throttled(b)
		}
	}
	// over: a Policy f times a bucket of q (burst 10), amid the share of
	// random refusals, a minute's worth of records at the quota.
	over := func(f, q, share float64) func(*testing.T, int64, mkFunc) (float64, float64) {
		return func(t *testing.T, seed int64, mk mkFunc) (float64, float64) {
			api := modelBucket(q, 10, seed)
			rt := mk(modelNoise(api, share, seed), f*q, 10)
			defer rt.Close()
			n := int(q) * 60
			return job(t, rt, n).Seconds() / (float64(n-10) / q), throttled(api)
		}
	}
	// share: k clients, each with a Policy of p, on one bucket of 100/s.
	share := func(k int, p float64) func(*testing.T, int64, mkFunc) (float64, float64) {
		return func(t *testing.T, seed int64, mk mkFunc) (float64, float64) {
			api := modelBucket(100, 10, seed)
			var wg sync.WaitGroup
			var mu sync.Mutex
			var last time.Duration
			for i := range k {
				wg.Go(func() {
					rt := mk(api, p, 5)
					defer rt.Close()
					took := jobOf(t, rt, 6000/k, 16, fmt.Sprint("c", i))
					mu.Lock()
					last = max(last, took)
					mu.Unlock()
				})
			}
			wg.Wait()
			return last.Seconds() / 60, throttled(api)
		}
	}
	// jitter: 25 ms of arrival jitter, more than a bucket of 100/s with
	// this burst absorbs, the Policy at it.
	jitter := func(burst int) func(*testing.T, int64, mkFunc) (float64, float64) {
		return func(t *testing.T, seed int64, mk mkFunc) (float64, float64) {
			cfg := nearby(throttletest.Config{Limits: []throttletest.Limit{
				{Algorithm: throttletest.TokenBucket, Rate: 100, Burst: burst}}}, seed)
			cfg.ArrivalJitter = 25 * time.Millisecond
			api := throttletest.NewAPI(cfg)
			rt := mk(api, 100, burst)
			defer rt.Close()
			return job(t, rt, 6000).Seconds() / 60, throttled(api)
		}
	}
	// step: the quota steps down from 100 to 90, 70 and 50, a minute each.
	step := func(t *testing.T, seed int64, mk mkFunc) (float64, float64) {
		apis := []*throttletest.API{modelBucket(100, 5, seed), modelBucket(90, 5, seed+1), modelBucket(70, 5, seed+2), modelBucket(50, 5, seed+3)}
		rt := mk(modelSteps(apis), 100, 5)
		defer rt.Close()
		return job(t, rt, 6000+5400+4200+3000).Seconds() / 240, throttled(apis...)
	}
	// bursts: five requests in a row answered 429 at the start of every
	// 10 s, the Policy at a bucket of 100/s, three minutes of records.
	bursts := func(t *testing.T, seed int64, mk mkFunc) (float64, float64) {
		api := modelBucket(100, 5, seed)
		start := time.Now()
		var mu sync.Mutex
		period, nth := 0, 0
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			if p := int(time.Since(start) / (10 * time.Second)); p != period {
				period, nth = p, 0
			}
			nth++
			refused := period > 0 && nth <= 5
			mu.Unlock()
			if refused {
				time.Sleep(ms(2))
				return reply(r, http.StatusTooManyRequests, "Retry-After", "1"), nil
			}
			return api.RoundTrip(r)
		})
		rt := mk(base, 100, 5)
		defer rt.Close()
		return job(t, rt, 18000).Seconds() / 179.95, throttled(api)
	}
	return []configuredScenario{
		{"noise1", noise(0.01)}, {"noise3", noise(0.03)}, {"noise5", noise(0.05)},
		{"xrl-noise3", told(throttletest.Limit{Algorithm: throttletest.TokenBucket, Rate: 100, Burst: 5}, 0.03)},
		{"xrl-window-noise3", told(quotaWindow, 0.03)},
		{"drop0", drop(0)}, {"drop1", drop(0.01)}, {"drop3", drop(0.03)},
		{"over1.07", over(100.0/93, 93, 0)}, {"over1.07n3", over(100.0/93, 93, 0.03)},
		{"over1.25", over(1.25, 100, 0)}, {"over1.25n1", over(1.25, 100, 0.01)},
		{"over3.3", over(500.0/150, 150, 0)}, {"over10", over(10, 100, 0)}, {"over10n1", over(10, 100, 0.01)},
		{"share2x60", share(2, 60)}, {"share3x50", share(3, 50)},
		{"jitter1", jitter(1)}, {"jitter2", jitter(2)}, {"step", step}, {"bursts5", bursts},
	}
}
