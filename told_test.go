package throttle_test

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"net/http"
	"slices"
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
	"github.com/throttlehttp/throttle/throttletest"
	"golang.org/x/time/rate"
)

// latent passes requests to api, each answer delayed by latency.
func latent(api *throttletest.API, latency time.Duration) rtFunc {
	return func(r *http.Request) (*http.Response, error) {
		resp, err := api.RoundTrip(r)
		time.Sleep(latency)
		return resp, err
	}
}

// Not told the quota, the transport paces from the quota headers the
// server sends on every answer, at the quota's full speed and without
// refusals, for every kind of quota (issue 9, points 1 and 2).
func TestPacesFromQuotaHeaders(t *testing.T) {
	window, bucket, log := quotaWindow, quotaBucket, quotaLog
	counter := throttletest.Limit{Algorithm: throttletest.SlidingCounter, N: 200, Per: time.Second}
	tests := []struct {
		name   string
		limit  throttletest.Limit
		ietf   bool
		jitter time.Duration // on the way in, and added to the 1ms latency
		ideal  time.Duration // for 2,000 requests
		slack  float64       // the most over the ideal
	}{
		// A short window is spread over the time to its reset, so that
		// others who share it find some left whenever they come (see
		// TestTwoTransportsShareAQuotaByItsHeaders): the job ends with
		// its last window, a second after it would, sent at once.
		{"fixed-window/x-ratelimit", window, false, 0, 20 * time.Second, 1.02},
		{"fixed-window/ietf", window, true, 0, 20 * time.Second, 1.02},
		// A bucket's headers cannot tell it from a one-second window at
		// first; the key finds out within its first second.
		{"token-bucket/x-ratelimit", bucket, false, 0, 9900 * time.Millisecond, 1.05},
		{"token-bucket/ietf", bucket, true, 0, 9900 * time.Millisecond, 1.05},
		// A log of requests gives back what was sent a second before: the
		// first second, spread while the key cannot yet tell a log from a
		// bucket, echoes on (9 s is the ideal of sending the first 200 at
		// once). Spread over its first half second, it costs half a
		// second (regression: spread to the reset, again and again, over
		// nearly all of the first second, and a token held back, which
		// left one of each window's 200 unused: 10.0 s).
		{"sliding-log/x-ratelimit", log, false, 0, 9 * time.Second, 1.09},
		{"sliding-log/ietf", log, true, 0, 9 * time.Second, 1.09},
		{"hourly-window", throttletest.Limit{Algorithm: throttletest.FixedWindow, N: 5000, Per: time.Hour}, false, 0, 125 * time.Millisecond, 1.05},
		// Requests that reach the server out of order, and answers that
		// overtake one another: up to 5 ms each way.
		// X-RateLimit-Reset cannot tell a fixed window from a log of
		// requests sent all at once: the key holds no more than a log
		// would, which costs a window a round trip or so.
		{"fixed-window/x-ratelimit/jitter", window, false, 5 * time.Millisecond, 20 * time.Second, 1.02},
		{"fixed-window/ietf/jitter", window, true, 5 * time.Millisecond, 20 * time.Second, 1.02},
		{"token-bucket/x-ratelimit/jitter", bucket, false, 5 * time.Millisecond, 9900 * time.Millisecond, 1.05},
		{"token-bucket/ietf/jitter", bucket, true, 5 * time.Millisecond, 9900 * time.Millisecond, 1.05},
		{"sliding-log/x-ratelimit/jitter", log, false, 5 * time.Millisecond, 9 * time.Second, 1.2},
		{"sliding-log/ietf/jitter", log, true, 5 * time.Millisecond, 9 * time.Second, 1.2},
		// A sliding counter (the last window's count, weighted by how much
		// of it the window still covers, plus this one's) looks like a
		// bucket, but its Remaining falls as the key's pace rises: what the
		// key holds back of a bucket it cannot send (regression: a quarter
		// of the depth held back, 1.34x). Steady, it admits N-1 a window.
		{"sliding-counter/x-ratelimit", counter, false, 0, 2000 * time.Second / 199, 1.05},
		{"sliding-counter/x-ratelimit/jitter", counter, false, 5 * time.Millisecond, 2000 * time.Second / 199, 1.05},
		// A job that starts 0.7 s into the server's one-second window:
		// its first reset comes before the whole second its headers say.
		{"fixed-window/x-ratelimit/late-start", window, false, 5 * time.Millisecond, 20 * time.Second, 1.02},
		{"fixed-window/ietf/late-start", window, true, 5 * time.Millisecond, 20 * time.Second, 1.02},
		// The IETF fields as draft 07 writes them (express-rate-limit's
		// 'draft-7'): RateLimit a Dictionary, RateLimit-Policy unnamed.
		{"fixed-window/ietf/draft-07", window, true, 0, 20 * time.Second, 1.02},
		{"token-bucket/ietf/draft-07", bucket, true, 0, 9900 * time.Millisecond, 1.05},
		{"sliding-log/ietf/draft-07", log, true, 0, 9 * time.Second, 1.09},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := throttletest.NewAPI(throttletest.Config{Limits: []throttletest.Limit{tt.limit},
					XRateLimit: !tt.ietf, IETF: tt.ietf, IETFDraft07: strings.HasSuffix(tt.name, "/draft-07"), HeadersOnSuccess: true,
					ArrivalJitter: tt.jitter, Latency: time.Millisecond, LatencyJitter: tt.jitter, Seed: 1})
				if strings.HasSuffix(tt.name, "/late-start") {
					time.Sleep(700 * time.Millisecond)
				}
				rt := throttle.New(api)
				defer rt.Close()
				took := job(t, rt, 2000)
				seen := api.Stats().Total
				t.Logf("took %v (ideal %v), %d refused", took, tt.ideal, seen.Throttled)
				assert.LessOrEqual(t, seen.Throttled, int64(6), "at most 0.3%% refused")
				assert.LessOrEqual(t, took.Seconds(), tt.ideal.Seconds()*tt.slack+0.01, "within %v× the ideal", tt.slack)
			})
		})
	}
}

// A log of recent requests, alone on its quota, is known for one at the
// first answers after its first reset: Remaining there is what a log of
// the key's own requests holds, far short of a window back to whole. A
// log spread over its first second gives back as unevenly, so every part
// of it known late is used late in every window after (regression: told
// by X-RateLimit-*, it was taken for a window half a second after the
// reset, for a log a second later: 1.08-1.11x of 4,000 requests; by
// RateLimit, known 0.15 s after the reset: 1.06x).
func TestALogIsKnownAtItsFirstReset(t *testing.T) {
	log := throttletest.Limit{Algorithm: throttletest.SlidingLog, N: 200, Per: time.Second}
	for _, ietf := range []bool{false, true} {
		t.Run(fmt.Sprint("ietf=", ietf), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := throttletest.NewAPI(nearby(throttletest.Config{Limits: []throttletest.Limit{log},
					XRateLimit: !ietf, IETF: ietf, HeadersOnSuccess: true}, 1))
				start := time.Now()
				var mu sync.Mutex
				var kinds []string
				var at []time.Duration
				rt := throttle.New(api, throttle.WithEvents(func(e throttle.Event) {
					if e.Kind == throttle.EventPace {
						mu.Lock()
						kinds, at = append(kinds, e.Reason), append(at, time.Since(start))
						mu.Unlock()
					}
				}))
				defer rt.Close()
				took := job(t, rt, 600)
				t.Logf("took %v; told %v at %v", took, kinds, at)
				require.NotEmpty(t, kinds)
				assert.Equal(t, "quota headers: log", kinds[0], "the first kind told")
				assert.Less(t, at[0], 1050*time.Millisecond, "at the first reset, a second after the first request")
				assert.Zero(t, api.Stats().Total.Throttled)
			})
		})
	}
}

// Random 503s behind a quota told by headers: the server counted each
// 503'd request, whose answer carries no reading. The mirror counts them
// as accepted, or a log's count (and a window's, until its next reading)
// forgot them as soon as they were answered, and the key sent that many
// too many (regression: a log 50-58 429s of 4,000, a window 17-31).
func TestRandom503sBehindQuotaHeadersDrawNoRefusals(t *testing.T) {
	for _, limit := range []throttletest.Limit{
		{Algorithm: throttletest.FixedWindow, N: 100, Per: time.Second},
		{Algorithm: throttletest.SlidingLog, N: 200, Per: time.Second},
		{Algorithm: throttletest.TokenBucket, Rate: 200, Burst: 20},
	} {
		for _, ietf := range []bool{false, true} {
			t.Run(fmt.Sprint(limit.Algorithm, "/ietf=", ietf), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					api := throttletest.NewAPI(nearby(throttletest.Config{Limits: []throttletest.Limit{limit},
						XRateLimit: !ietf, IETF: ietf, HeadersOnSuccess: true, Unavailable: 0.02}, 1))
					rt := throttle.New(api)
					defer rt.Close()
					took := job(t, rt, 2000)
					seen := api.Stats().Total
					t.Logf("took %v, %d refused, %d 503s", took, seen.Throttled, seen.Unavailable)
					assert.EqualValues(t, 2000, seen.Accepted)
					assert.Positive(t, seen.Unavailable)
					assert.LessOrEqual(t, seen.Throttled, int64(2), "at most 0.1%% refused")
				})
			})
		}
	}
}

// A gateway in front of a server that sends quota headers on every answer
// refuses 3% of the requests at random: 429 with Retry-After: 1 and no
// quota headers (the server never saw them). The count the headers told
// held room for each, so the quota did not refuse it: each delays only its
// own retry, and the key goes on (regression: each paused the key a
// second; a window of 100 a second took 4.1x the ideal, a log of 200 a
// second 7.2x, a bucket of 100 a second 1.4x, in TestLearnedModel's terms
// over 8 seeds; go-retryablehttp + x/time/rate told the quota took
// 1.05-1.08x). Beside that peer, told the quota, in the same conditions.
func TestRandomRefusalsBehindQuotaHeadersDoNotPauseTheKey(t *testing.T) {
	for _, limit := range gatewayQuotas {
		for _, ietf := range []bool{false, true} {
			t.Run(fmt.Sprint(limit.Algorithm, "/ietf=", ietf), func(t *testing.T) {
				randomRefusalsBehindHeaders(t, limit, ietf)
			})
		}
	}
}

// A bucket told by X-RateLimit-* on every answer, behind a gateway that
// refuses every request for 50 ms every 4 s without them (a blip: no
// reading comes while it lasts), goes on at the bucket's rate through each
// blip, as go-retryablehttp + x/time/rate told the quota does, in the same
// bubble: within 3% of it. Regression, found in session 43: the key counted
// its requests sent since the last reading against one bucket's depth
// however long ago they went, stalled a second after each blip, and
// measured the bucket's rate across that second as 5 a second: 43.5 and
// 44.6 s for 3,000 requests, the peer 31.0 and 31.1 s (see fold).
func TestAGatewaysBlipsDoNotStallABucketToldByHeaders(t *testing.T) {
	for seed := range int64(2) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			blipsBesideThePeer(t, throttletest.Limit{Algorithm: throttletest.TokenBucket, Rate: 100, Burst: 5}, 50*time.Millisecond, seed, 1.03, true)
		})
	}
}

// Blips of 100 ms, eight or more refused in a row, dominate the key's
// recent answers and pause it, but for 1/8 s and the peek's round trip,
// not the whole second their whole-second Retry-After may round up to
// (see peekPast): a bucket and a window told by X-RateLimit-* within 5% of
// the peer told the quota. Regression, found in session 44: each blip
// paused the key a second: these seeds took 37.1 and 34.1 s for 3,000
// requests on the bucket, 35.7 and 33.5 s on the window, where the peer
// took 31.1 s; now 32.5, 32.2, 32.2 and 31.1 s.
func TestAGatewaysLongerBlipsPauseAKeyToldByHeadersBriefly(t *testing.T) {
	for _, limit := range []throttletest.Limit{
		{Algorithm: throttletest.TokenBucket, Rate: 100, Burst: 5},
		{Algorithm: throttletest.FixedWindow, N: 100, Per: time.Second},
	} {
		for seed := range int64(2) {
			t.Run(fmt.Sprint(limit.Algorithm, "/seed", seed), func(t *testing.T) {
				blipsBesideThePeer(t, limit, 100*time.Millisecond, seed, 1.05, true)
			})
		}
	}
}

// blipsBesideThePeer runs 3,000 requests through a Transport given opts
// against limit, which tells X-RateLimit-* on every answer if told, behind
// a gateway that refuses every request for blip every 4 s (from 2 s in, a
// seeded shift) without them, and checks that it took within x times what
// go-retryablehttp + x/time/rate told the quota took against the same, in
// its own bubble.
func blipsBesideThePeer(t *testing.T, limit throttletest.Limit, blip time.Duration, seed int64, x float64, told bool, opts ...throttle.Option) {
	run := func(peer bool) (took time.Duration) {
		synctest.Test(t, func(t *testing.T) {
			cfg := nearby(throttletest.Config{Limits: []throttletest.Limit{limit}, XRateLimit: told, HeadersOnSuccess: told}, seed)
			for i := range 8 {
				cfg.Outages = append(cfg.Outages, throttletest.Outage{Start: 2*time.Second + time.Duration(i)*4*time.Second + time.Duration(seed)*37*time.Millisecond,
					Duration: blip, Status: http.StatusTooManyRequests})
			}
			api := throttletest.NewAPI(cfg)
			if peer {
				r, burst := peerRate(limit)
				took = jobOf(t, &modelPeer{base: api, lim: rate.NewLimiter(rate.Limit(r), burst)}, 3000, 16, "")
				return
			}
			rt := throttle.New(api, opts...)
			defer rt.Close()
			took = jobOf(t, rt, 3000, 16, "")
			st := api.Stats().Total
			t.Logf("took %v, %d refused", took, st.Throttled)
			assert.EqualValues(t, 3000, st.Accepted)
			assert.GreaterOrEqual(t, st.Throttled, int64(30), "the first burst drew 16 at most: the blips refused the rest")
		})
		return took
	}
	took, peer := run(false), run(true)
	t.Logf("throttle %v, the peer told the quota %v", took, peer)
	assert.LessOrEqual(t, took.Seconds(), x*peer.Seconds(), "as fast as the peer told the quota, within %vx", x)
}

// gatewayQuotas are the quotas behind the gateway of the tests above and
// below: a window of 100 a second, a log of 200 a second, a bucket of 100
// a second, 5 deep.
var gatewayQuotas = []throttletest.Limit{
	{Algorithm: throttletest.FixedWindow, N: 100, Per: time.Second},
	{Algorithm: throttletest.SlidingLog, N: 200, Per: time.Second},
	{Algorithm: throttletest.TokenBucket, Rate: 100, Burst: 5},
}

// randomRefusalsBehindHeaders runs TestRandomRefusalsBehindQuotaHeaders
// DoNotPauseTheKey's job against limit told by headers (IETF fields or
// X-RateLimit-*), through throttle given opts, and beside the peer told
// the quota (see peerRate).
func randomRefusalsBehindHeaders(t *testing.T, limit throttletest.Limit, ietf bool, opts ...throttle.Option) {
	const n = 2000
	run := func(peer bool) (took time.Duration) {
		synctest.Test(t, func(t *testing.T) {
			api := throttletest.NewAPI(nearby(throttletest.Config{Limits: []throttletest.Limit{limit},
				XRateLimit: !ietf, IETF: ietf, HeadersOnSuccess: true, Refused: 0.03}, 1))
			if peer {
				r, burst := peerRate(limit)
				took = job(t, &modelPeer{base: api, lim: rate.NewLimiter(rate.Limit(r), burst)}, n)
				return
			}
			rt := throttle.New(api, opts...)
			defer rt.Close()
			took = job(t, rt, n)
			seen, st := api.Stats().Total, rt.Stats().Keys["api.test"]
			t.Logf("took %v, %d refused, %d pauses", took, seen.Throttled, st.Pauses)
			assert.EqualValues(t, n, seen.Accepted)
			assert.Greater(t, seen.Throttled, int64(n/100), "the gateway refused")
			assert.LessOrEqual(t, st.Pauses, int64(2), "the key paused for the quota's refusals only")
		})
		return took
	}
	took, peer := run(false), run(true)
	t.Logf("throttle %v, the peer told the quota %v", took, peer)
	// The bucket's first burst still costs the key about a second
	// the peer does not spend, noise or not (4% of this job).
	assert.LessOrEqual(t, took.Seconds(), 1.06*peer.Seconds(), "as fast as the peer told the quota, within 6%")
}

// The same with a Policy at the quota: the refusals the headers do not
// explain cut the configured pace no more than they pause the key
// (regression: trials of cuts, which such refusals took for the pace's,
// left a configured key 1.25-1.28x the ideal on average in the model,
// 8 seeds of 4,000 requests, 2.1x at worst, beside the peer's 1.05-1.08x).
func TestRandomRefusalsBehindQuotaHeadersDoNotCutAConfiguredPace(t *testing.T) {
	for _, limit := range gatewayQuotas {
		t.Run(fmt.Sprint(limit.Algorithm), func(t *testing.T) {
			r, burst := peerRate(limit)
			randomRefusalsBehindHeaders(t, limit, false, throttle.WithPolicy(throttle.Policy{Rate: rate.Limit(r), Burst: burst}))
		})
	}
}

// A server that sends its quota headers on its 429s only (many APIs do)
// behind the same gateway, whose 429s carry none: the key learns its pace
// from the server's refusals, and the gateway's, unlike them, are not the
// quota's. Each delays only its own retry (regression: each cut the pace
// learned, as a refusal of a key told nothing does; here 7.1x the ideal;
// a bucket of 100 a second took 1.95x the ideal on average in
// TestLearnedModel's onref rows, 16 seeds, a window of 100 a second 1.49x,
// where the peer told the quota took 1.05x and 1.06x). Before the first
// refusal with headers the key cannot tell: a window whose first refusal,
// here, is the gateway's, learns a pace from it as a key told nothing
// does, holds a quarter of the window for 26 s, and took 2.19x the ideal
// (2.29x before); the model's window row: 1.49 -> 1.11x on average, 1.40x
// at worst.
func TestRandomRefusalsBesideHeadersOnRefusalsDoNotSinkALearnedPace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := throttletest.NewAPI(nearby(throttletest.Config{Limits: []throttletest.Limit{
			{Algorithm: throttletest.TokenBucket, Rate: 100, Burst: 5}}, XRateLimit: true, Refused: 0.03}, 1))
		rt := throttle.New(api)
		defer rt.Close()
		const n = 2000
		took := job(t, rt, n)
		ideal := float64(n-5) / 100
		st := rt.Stats().Keys["api.test"]
		t.Logf("took %v (%.3fx the ideal), %d refused, pace %.1f from %v", took, took.Seconds()/ideal, api.Stats().Total.Throttled, float64(st.Rate), st.PaceFrom)
		assert.Equal(t, throttle.PaceLearned, st.PaceFrom)
		assert.LessOrEqual(t, took.Seconds(), 1.2*ideal, "within 1.2x the ideal")
	})
}

// Headers that describe another quota (a window of a million an hour),
// while a limit they do not describe refuses (a bucket of 80 a second,
// 5 deep, whose 429s carry no headers): the refusals come to dominate the
// key's answers, and the key learns its pace from them, as from refusals
// whose headers say enough remains (regression: each paused the key a
// second, and no pace was learned: 16.2x the ideal, 951 429s in 2,000
// requests). A Policy over the undescribed limit is proven lower by what
// the server took (1.12x; the trials that took these refusals for the
// pace's cut it sooner, 1.01x, before 1921cc9).
func TestALimitTheHeadersDoNotDescribeIsLearned(t *testing.T) {
	for _, configured := range []bool{false, true} {
		t.Run(fmt.Sprint("configured=", configured), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				limit := throttletest.NewAPI(nearby(throttletest.Config{Limits: []throttletest.Limit{
					{Algorithm: throttletest.TokenBucket, Rate: 80, Burst: 5}}}, 1))
				described := throttletest.NewAPI(throttletest.Config{Limits: []throttletest.Limit{
					{Algorithm: throttletest.FixedWindow, N: 1000000, Per: time.Hour}}, XRateLimit: true, HeadersOnSuccess: true})
				var opts []throttle.Option
				if configured {
					opts = append(opts, throttle.WithPolicy(throttle.Policy{Rate: 100, Burst: 5}))
				}
				rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
					resp, err := limit.RoundTrip(r)
					if err != nil || resp.StatusCode == http.StatusTooManyRequests {
						return resp, err
					}
					resp.Body.Close()
					return described.RoundTrip(r)
				}), opts...)
				defer rt.Close()
				const n = 2000
				took := job(t, rt, n)
				ideal := float64(n-5) / 80
				refused := limit.Stats().Total.Throttled
				t.Logf("took %v (%.3fx the ideal), %d refused", took, took.Seconds()/ideal, refused)
				assert.LessOrEqual(t, took.Seconds(), 1.15*ideal, "within 1.15x the ideal")
				assert.LessOrEqual(t, refused, int64(n/50), "2% of the requests refused at most")
			})
		})
	}
}

// The same gateway refusing everything for two seconds: refusals the
// headers do not explain, but no longer rare. They come to dominate the
// key's recent answers, as failures must to make an outage, and the key
// pauses, one probe at a time, rather than sending its pace into the
// refusals: the probes peek into the last second of each whole-second
// Retry-After, 1/8 s in, then twice as far each time one is refused (see
// peekPast: 15 refused in this run, 12 with one probe per Retry-After).
func TestARunOfRefusalsBehindQuotaHeadersPausesTheKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := throttletest.NewAPI(nearby(throttletest.Config{
			Limits:     []throttletest.Limit{{Algorithm: throttletest.FixedWindow, N: 100, Per: time.Second}},
			XRateLimit: true, HeadersOnSuccess: true,
			Outages: []throttletest.Outage{{Start: 5 * time.Second, Duration: 2 * time.Second, Status: http.StatusTooManyRequests}}}, 1))
		rt := throttle.New(api)
		defer rt.Close()
		took := job(t, rt, 1500)
		seen, st := api.Stats().Total, rt.Stats().Keys["api.test"]
		t.Logf("took %v, %d refused, %d pauses", took, seen.Throttled, st.Pauses)
		assert.EqualValues(t, 1500, seen.Accepted)
		assert.Positive(t, st.Pauses)
		assert.LessOrEqual(t, seen.Throttled, int64(40), "the key paused, where its pace would have sent 200 into the outage")
	})
}

// A server that sends its quota headers on refusals only (throttletest's
// default, and many APIs') says nothing of what it gives back: only that
// nothing remains, which the refusal says too. The key learns its pace
// from the refusals, as one told nothing (regression: the headers' reading
// of 0 remaining took a token bucket of 200/s burst 20 for a window of 20
// a second: 9x the ideal time and 1,150 429s of 4,000; a window of 100 a
// second drew 245).
func TestHeadersOnRefusalsOnlyTeachAsRefusalsDo(t *testing.T) {
	for _, tt := range []struct {
		limit throttletest.Limit
		ietf  bool
		ideal time.Duration // for 4,000 requests
	}{
		{throttletest.Limit{Algorithm: throttletest.TokenBucket, Rate: 200, Burst: 20}, false, 19900 * time.Millisecond},
		{throttletest.Limit{Algorithm: throttletest.TokenBucket, Rate: 200, Burst: 20}, true, 19900 * time.Millisecond},
		{throttletest.Limit{Algorithm: throttletest.FixedWindow, N: 100, Per: time.Second}, false, 39 * time.Second},
		{throttletest.Limit{Algorithm: throttletest.SlidingLog, N: 200, Per: time.Second}, true, 19 * time.Second},
	} {
		t.Run(fmt.Sprint(tt.limit.Algorithm, "/ietf=", tt.ietf), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := throttletest.NewAPI(nearby(throttletest.Config{Limits: []throttletest.Limit{tt.limit},
					XRateLimit: !tt.ietf, IETF: tt.ietf}, 1))
				rt := throttle.New(api)
				defer rt.Close()
				took := job(t, rt, 4000)
				seen := api.Stats().Total
				st := rt.Stats().Keys["api.test"]
				t.Logf("took %v (%.2fx the ideal), %d refused, pace %.1f/s", took, took.Seconds()/tt.ideal.Seconds(),
					seen.Throttled, float64(st.Rate))
				assert.LessOrEqual(t, took.Seconds(), 1.15*tt.ideal.Seconds(), "within 1.15x the ideal")
				assert.LessOrEqual(t, seen.Throttled, int64(25))
				assert.Equal(t, throttle.PaceLearned, st.PaceFrom)
			})
		})
	}
}

// A key that learned its pace from 429s forgets it once the server begins
// to say what remains on the answers it accepts: the mirror of the
// server's count paces it from then on, and a learned pace would only hold
// it back.
func TestHeadersOnAcceptedAnswersReplaceALearnedPace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		n, told := 0, false
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			defer mu.Unlock()
			n++
			switch {
			case told:
				return reply(r, http.StatusOK, "X-RateLimit-Limit", "5000", "X-RateLimit-Remaining", "4000",
					"X-RateLimit-Reset", "3600"), nil
			case n%20 == 0:
				return reply(r, http.StatusTooManyRequests, "Retry-After", "1", "X-RateLimit-Remaining", "0"), nil
			}
			return reply(r, http.StatusOK), nil
		})
		rt := throttle.New(base)
		defer rt.Close()
		for i := range 100 {
			_, err := status(t, rt, http.MethodGet, fmt.Sprint("http://api.test/", i))
			require.NoError(t, err)
		}
		st := rt.Stats().Keys["api.test"]
		require.Equal(t, throttle.PaceLearned, st.PaceFrom, "learned from 429s, whose headers say only that nothing remains")
		assert.Equal(t, -1, st.Remaining)
		mu.Lock()
		told = true
		mu.Unlock()
		time.Sleep(2 * time.Second) // past the last 429's pause
		start := time.Now()
		for i := range 1000 {
			_, err := status(t, rt, http.MethodGet, fmt.Sprint("http://api.test/b", i))
			require.NoError(t, err)
		}
		assert.Zero(t, time.Since(start), "nothing holds it: 4,000 remain")
		st = rt.Stats().Keys["api.test"]
		assert.NotEqual(t, throttle.PaceLearned, st.PaceFrom)
		assert.Positive(t, st.Remaining)
	})
}

// A sliding counter told by IETF headers (RateLimit-Policy's w, one
// second) is taken for a log of recent requests at first, which the key
// counts exactly; but the counter counts the window before evenly decayed,
// whatever reached it when, and refuses what a log would take. Refusals
// that keep coming overturn the verdict, as a bucket's do (regression:
// held a log for good, each refusal a whole-second pause: 1.47x the ideal,
// 75 429s of 4,000).
func TestSlidingCounterTakenForALogIsToldAgain(t *testing.T) {
	for seed := range int64(3) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := throttletest.NewAPI(nearby(throttletest.Config{Limits: []throttletest.Limit{
					{Algorithm: throttletest.SlidingCounter, N: 200, Per: time.Second}}, IETF: true, HeadersOnSuccess: true}, seed))
				rt := throttle.New(api)
				defer rt.Close()
				took := job(t, rt, 4000)
				ideal := 4000 * time.Second / 199
				refused := api.Stats().Total.Throttled
				t.Logf("took %v (%.2fx the ideal), %d refused", took, took.Seconds()/ideal.Seconds(), refused)
				assert.LessOrEqual(t, took.Seconds(), 1.3*ideal.Seconds())
				assert.LessOrEqual(t, refused, int64(40), "1% of 4,000")
			})
		})
	}
}

// A 2xx that says the quota is spent (GitHub, when the hour's quota is
// used up) holds the next request until the reset: it draws no refusal.
func TestSpentQuotaOnASuccessHoldsUntilTheReset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var sent []time.Duration
		start := time.Now()
		reset := start.Add(time.Minute).Unix()
		rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
			sent = append(sent, time.Since(start))
			left := "0"
			if len(sent) > 1 {
				left = "4999"
			}
			return reply(r, http.StatusOK, "X-RateLimit-Limit", "5000", "X-RateLimit-Remaining", left,
				"X-RateLimit-Reset", strconv.FormatInt(reset, 10)), nil
		}))
		defer rt.Close()
		require.NoError(t, do(t, rt, "http://api.test/"))
		require.NoError(t, do(t, rt, "http://api.test/"))
		require.NoError(t, do(t, rt, "http://api.test/"))
		assert.Equal(t, []time.Duration{0, time.Minute, time.Minute}, sent)

		// A deadline that the reset passes fails at once, naming the quota.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		rt2 := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
			return reply(r, http.StatusOK, "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "30"), nil
		}))
		defer rt2.Close()
		require.NoError(t, do(t, rt2, "http://api.test/"))
		err := doCtx(t, ctx, rt2, "http://api.test/")
		var we *throttle.WaitError
		require.ErrorAs(t, err, &we)
		assert.Equal(t, throttle.LimitQuota, we.Limit)
		assert.ErrorIs(t, err, throttle.ErrWouldExceedDeadline)
	})
}

// A configured Policy stays a ceiling: headers that say plenty remains
// never pace a key faster than its Rate (issue 9, point 5).
func TestPolicyStaysACeilingOverQuotaHeaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := throttletest.NewAPI(throttletest.Config{Limits: []throttletest.Limit{
			{Algorithm: throttletest.FixedWindow, N: 100000, Per: time.Hour}}, XRateLimit: true, HeadersOnSuccess: true})
		rt := throttle.New(latent(api, time.Millisecond), throttle.WithPolicy(throttle.Policy{Rate: 10, Burst: 1}))
		defer rt.Close()
		took := job(t, rt, 50)
		assert.GreaterOrEqual(t, took, 4900*time.Millisecond, "50 requests at 10/s")
	})
}

// The server's refusals win over its headers: a 429 pauses the key even
// when the headers of the answers say plenty remains.
func TestRefusalsWinOverHeaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var sent []time.Duration
		start := time.Now()
		rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
			sent = append(sent, time.Since(start))
			if len(sent) == 2 {
				return reply(r, http.StatusTooManyRequests, "Retry-After", "5", "X-RateLimit-Remaining", "90", "X-RateLimit-Reset", "60"), nil
			}
			return reply(r, http.StatusOK, "X-RateLimit-Remaining", "99", "X-RateLimit-Reset", "60"), nil
		}))
		defer rt.Close()
		require.NoError(t, do(t, rt, "http://api.test/"))
		require.NoError(t, do(t, rt, "http://api.test/")) // refused, retried after the pause
		assert.Equal(t, []time.Duration{0, 0, 5 * time.Second}, sent)
	})
}

// Headers that describe a quota other than the one that refuses — a day's
// quota, while an undescribed limit of 200 a second refuses; or a Remaining
// that never falls — say plenty remains on the very refusals: the key
// learns its pace from the refusals as one told nothing, and the headers
// still hold back what they count (regression, found in review: a key
// that had seen headers never learned from 429s, and each refusal paused
// it a second: 8-9x the ideal, 22% of the requests refused).
func TestHeadersOfAnotherQuotaDoNotHideTheRefusals(t *testing.T) {
	for _, headers := range []string{"day", "stuck"} {
		t.Run(headers, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := throttletest.NewAPI(nearby(throttletest.Config{Limits: []throttletest.Limit{quotaBucket}}, 1))
				var accepted atomic.Int64
				rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
					resp, err := api.RoundTrip(r)
					if err != nil {
						return nil, err
					}
					limit, remaining := "100", "100"
					if headers == "day" {
						if resp.StatusCode == http.StatusOK {
							accepted.Add(1)
						}
						limit, remaining = "100000", fmt.Sprint(100000-accepted.Load())
					}
					resp.Header.Set("X-RateLimit-Limit", limit)
					resp.Header.Set("X-RateLimit-Remaining", remaining)
					resp.Header.Set("X-RateLimit-Reset", "3600")
					return resp, nil
				}))
				defer rt.Close()
				took := job(t, rt, 4000)
				ideal := 19900 * time.Millisecond // (4,000 - 20) / 200
				seen := api.Stats().Total
				st := rt.Stats().Keys["api.test"]
				t.Logf("took %v (%.3fx the ideal), %d refused, pace %.1f/s", took, took.Seconds()/ideal.Seconds(), seen.Throttled, float64(st.Rate))
				assert.LessOrEqual(t, took.Seconds(), 1.1*ideal.Seconds(), "within 1.1x the ideal")
				assert.LessOrEqual(t, seen.Throttled, int64(40), "1% of the requests refused at most")
				assert.Equal(t, throttle.PaceLearned, st.PaceFrom)
			})
		})
	}
}

// A 429 without Retry-After whose quota headers say plenty remains (4,000
// of 5,000, a reset 50 minutes away) came from a limit they do not describe
// (a secondary or concurrency limit, a gateway): their reset is no wait the
// server asked for. The refused request is retried a second later, as one
// that states no wait, and the key goes on (a pace learned from the
// refusal, the headers still holding back what they count). Regression, found in review:
// the reset was taken for the wait, the key paused 50 minutes, and every
// request after it failed at once (the pause past MaxRetryAfter).
func TestARefusalWithRoomLeftIsNoWaitForTheReset(t *testing.T) {
	for name, kv := range map[string][]string{
		"x-ratelimit": {"X-RateLimit-Limit", "5000", "X-RateLimit-Remaining", "4000", "X-RateLimit-Reset", "3000"},
		"ietf":        {"RateLimit", `"hour";r=4000;t=3000`, "RateLimit-Policy", `"hour";q=5000;w=3600`},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var sent []time.Duration
				start := time.Now()
				rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
					sent = append(sent, time.Since(start))
					if len(sent) == 3 {
						return reply(r, http.StatusTooManyRequests, kv...), nil
					}
					return reply(r, http.StatusOK, kv...), nil
				}))
				defer rt.Close()
				for range 4 {
					require.NoError(t, do(t, rt, "http://api.test/"))
				}
				// The third refused, retried a second later; the fourth
				// soon after (at the pace the key learns from the refusal:
				// two accepted over the second).
				assert.Equal(t, []time.Duration{0, 0, 0, time.Second}, sent[:4])
				assert.Less(t, time.Since(start), 2*time.Second)
			})
		})
	}
}

// A window told by IETF fields, whose policy states its period, holds the
// key after an idle spell: a second job's 16 workers do not all go at once
// (regression, found in review: 30 windows passed unread, the mirror moved
// its reset on by one period per call, each still past, gave the window
// back whole at each, and the whole line went: 6 refused).
func TestAWindowToldByItsPolicyHoldsAfterAnIdleSpell(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := throttletest.NewAPI(throttletest.Config{
			Limits: []throttletest.Limit{{Algorithm: throttletest.FixedWindow, N: 10, Per: time.Second}},
			IETF:   true, HeadersOnSuccess: true, Latency: time.Millisecond})
		rt := throttle.New(api)
		defer rt.Close()
		job(t, rt, 40) // its first burst, before any reading, may be refused
		first := api.Stats().Total.Throttled
		time.Sleep(30 * time.Second) // idle: 30 of the server's windows pass unread
		job(t, rt, 40)
		assert.Zero(t, api.Stats().Total.Throttled-first, "the second job was told the window")
	})
}

// Two IETF policies, 10 a second and 100 a minute: once the minute's is
// spent the key is held to its reset, 60 of the second's windows later,
// and there the second's still holds it to 10 (regression, found in
// review: given back whole at each admission, it let 11-16 go, 1-6
// refused).
func TestTheShorterPolicyHoldsAtTheLongerOnesReset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := throttletest.NewAPI(throttletest.Config{Limits: []throttletest.Limit{
			{Algorithm: throttletest.FixedWindow, N: 10, Per: time.Second, Name: "sec"},
			{Algorithm: throttletest.FixedWindow, N: 100, Per: time.Minute, Name: "min"}},
			IETF: true, HeadersOnSuccess: true, Latency: time.Millisecond})
		rt := throttle.New(api)
		defer rt.Close()
		job(t, rt, 100) // spends the minute's quota within 10 s
		first := api.Stats().Total.Throttled
		job(t, rt, 30) // held to the minute's reset, then 10 a second
		assert.Zero(t, api.Stats().Total.Throttled-first, "at the minute's reset, no more than the second's 10 go")
	})
}

// A quota that halves mid-run: the key follows what the headers show,
// with few refusals (issue 9: a quota that changes).
func TestQuotaThatHalvesMidRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := func(rate float64) throttletest.Config {
			return throttletest.Config{Limits: []throttletest.Limit{{Algorithm: throttletest.TokenBucket, Rate: rate, Burst: 20}},
				XRateLimit: true, HeadersOnSuccess: true}
		}
		before, after := throttletest.NewAPI(cfg(200)), throttletest.NewAPI(cfg(100))
		start := time.Now()
		rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
			api := before
			if time.Since(start) >= 3*time.Second {
				api = after
			}
			resp, err := api.RoundTrip(r)
			time.Sleep(time.Millisecond)
			return resp, err
		}))
		defer rt.Close()
		took := job(t, rt, 1600) // 600 at 200/s, then 1,000 at 100/s: 13 s
		refused := before.Stats().Total.Throttled + after.Stats().Total.Throttled
		t.Logf("took %v, %d refused", took, refused)
		assert.LessOrEqual(t, refused, int64(5))
		assert.LessOrEqual(t, took, 13*time.Second*110/100, "within 1.10× the ideal of the changed quota")
	})
}

// What the key learned from the headers is visible: in Stats (the pace,
// where it comes from, what remains) and in events (issue 9, point 5).
func TestWhatTheHeadersTaughtIsVisible(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := throttletest.NewAPI(throttletest.Config{Limits: []throttletest.Limit{
			{Algorithm: throttletest.TokenBucket, Rate: 200, Burst: 20}}, XRateLimit: true, HeadersOnSuccess: true})
		events, paceEvents := paceLog()
		rt := throttle.New(latent(api, time.Millisecond), events)
		defer rt.Close()
		job(t, rt, 1000)
		st := rt.Stats().Keys["api.test"]
		assert.Equal(t, throttle.PaceHeaders, st.PaceFrom)
		assert.InDelta(t, 200, float64(st.Rate), 20, "the bucket's refill, measured")
		assert.GreaterOrEqual(t, st.Remaining, 0)
		paces := paceEvents()
		require.NotEmpty(t, paces)
		last := paces[len(paces)-1]
		assert.Equal(t, "quota headers: bucket", last.Reason)
		assert.InDelta(t, 200, float64(last.Rate), 20)

		// A window: its count and reset, no pace.
		win := throttletest.NewAPI(throttletest.Config{Limits: []throttletest.Limit{
			{Algorithm: throttletest.FixedWindow, N: 5000, Per: time.Hour}}, XRateLimit: true, HeadersOnSuccess: true})
		rt2 := throttle.New(latent(win, time.Millisecond))
		defer rt2.Close()
		job(t, rt2, 100)
		st = rt2.Stats().Keys["api.test"]
		assert.Equal(t, throttle.PaceNone, st.PaceFrom)
		assert.Equal(t, 4900, st.Remaining)
		assert.WithinDuration(t, time.Now().Truncate(time.Hour).Add(time.Hour), st.Reset, time.Second)

		// No headers: nothing to show.
		rt3 := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) { return reply(r, http.StatusOK), nil }))
		defer rt3.Close()
		require.NoError(t, do(t, rt3, "http://api.test/"))
		assert.Equal(t, -1, rt3.Stats().Keys["api.test"].Remaining)
	})
}

// One refusal from a bucket the key paces by its headers is a collision,
// not an order to stop: the refused request waits out its Retry-After, the
// others go on, and the key does not pause (issue 9; DESIGN: in proportion).
func TestBucketCollisionDoesNotPauseTheKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := throttletest.NewAPI(throttletest.Config{Limits: []throttletest.Limit{
			{Algorithm: throttletest.TokenBucket, Rate: 200, Burst: 20}}, XRateLimit: true, HeadersOnSuccess: true})
		start := time.Now()
		var mu sync.Mutex
		var refusedURL string
		var tries []time.Duration
		n := 0
		rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			n++
			collide := n == 1000
			if collide {
				refusedURL = r.URL.String()
			}
			if r.URL.String() == refusedURL {
				tries = append(tries, time.Since(start))
			}
			mu.Unlock()
			resp, err := api.RoundTrip(r)
			time.Sleep(time.Millisecond)
			if collide {
				resp.Body.Close()
				return reply(r, http.StatusTooManyRequests, "Retry-After", "1",
					"X-RateLimit-Limit", "20", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1"), nil
			}
			return resp, err
		}))
		defer rt.Close()
		took := job(t, rt, 2000)
		st := rt.Stats().Keys["api.test"]
		assert.Equal(t, int64(1), st.Throttled)
		assert.Zero(t, st.Pauses, "a collision pauses no one")
		require.Len(t, tries, 2)
		assert.GreaterOrEqual(t, tries[1]-tries[0], time.Second, "the refused request waited its Retry-After")
		assert.LessOrEqual(t, took, 9900*time.Millisecond*105/100, "the others went on")

		// Refusals that keep coming are not collisions: the key pauses.
		rt2 := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			n++
			refuse := n%2 == 0
			mu.Unlock()
			resp, err := api.RoundTrip(r)
			if refuse {
				resp.Body.Close()
				return reply(r, http.StatusTooManyRequests, "Retry-After", "1",
					"X-RateLimit-Limit", "20", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1"), nil
			}
			return resp, err
		}))
		defer rt2.Close()
		time.Sleep(time.Second) // the bucket refills
		job(t, rt2, 200)
		assert.NotZero(t, rt2.Stats().Keys["api.test"].Pauses)
	})
}

// A bucket one request deep says Remaining 0 and Reset 1 on every answer
// it accepts: its headers cannot show its refill. The key must not take it
// for a window spent until each reset (one request a second): the request
// that tries beyond the mirror and is accepted shows a bucket, one found
// full at the key's pace shows that it refills faster, and the key probes
// up to its rate. What it holds back never exceeds what the bucket holds.
func TestBucketOfOneIsFoundOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := throttletest.NewAPI(throttletest.Config{Limits: []throttletest.Limit{
			{Algorithm: throttletest.TokenBucket, Rate: 50, Burst: 1}}, XRateLimit: true, HeadersOnSuccess: true})
		rt := throttle.New(latent(api, time.Millisecond))
		defer rt.Close()
		took := job(t, rt, 1000)
		refused := api.Stats().Total.Throttled
		t.Logf("took %v (ideal 20s), %d refused", took, refused)
		assert.LessOrEqual(t, took, 20*time.Second*130/100, "1,000 at 50/s: the first seconds find the rate")
		assert.LessOrEqual(t, refused, int64(30), "3%: a bucket of one is refused whenever two arrive close")
	})
}

// Two transports on one API key (two processes, neither told of the
// other) stay under the shared quota together, paced by its headers: each
// reading shows what the other spent (issue 9, point 4).
func TestTwoTransportsShareAQuotaByItsHeaders(t *testing.T) {
	bucket, log, window := quotaBucket, quotaLog, quotaWindow
	tests := []sharedQuota{
		// The first 32 requests go before either knows anything: a
		// bucket of 20 refuses about 12 of them, and their whole-second
		// Retry-After costs about a second; after that, none.
		{name: "token-bucket/x-ratelimit", limit: bucket, ideal: 9900 * time.Millisecond, slack: 1.25, refused: 16},
		{name: "token-bucket/ietf", limit: bucket, ietf: true, ideal: 9900 * time.Millisecond, slack: 1.25, refused: 16},
		// A log of recent requests: each counts what the other holds of
		// the log at its last reading, until a window's length after it
		// (regression: counted for ever, they held a key with nothing on
		// its way, so no reading to come, for ever once the other
		// stopped). Each seen to spend it, a key counts the other's
		// requests on their way as many as its own, and a reading that
		// an earlier one overtook does not lower what it counts of the
		// other's (regression: two keys that woke together each sent
		// what the log held, and drew 47-83 429s of 2,000). Others once
		// seen, a key sends no faster than the log's limit per window's
		// length, evenly, and takes half of what the latest reading says
		// remains, then reads again: keys that spent what the log freed
		// at once spent it in bursts at every wake, and collided at each
		// (regression: told by IETF fields, 20-25 429s, 5-6 now; by
		// X-RateLimit-*, whose log is first taken for a window, 34-47,
		// 16-31 now). Not yet within the slack: see the README.
		{name: "sliding-log/ietf", limit: log, ietf: true, ideal: 9 * time.Second, refused: 15},
		{name: "sliding-log/x-ratelimit", limit: log, ideal: 9 * time.Second, refused: 40},
		// A fixed window told in whole seconds: each spreads its count
		// over the time to the reset (regression: the one refused later
		// woke, by its whole-second waits, at the same point of every
		// window, after the other had spent it at its reset; refused at
		// every wake, it gave up). A window's last request, near its
		// reset, is left to the other (regression: both sent it, and the
		// one refused paused past the next window: 8-9 429s of 2,000).
		// The 3 left are the first requests of the first window.
		{name: "fixed-window/x-ratelimit", limit: window, ideal: 19 * time.Second, slack: 1.10, refused: 6, fair: true},
		{name: "fixed-window/ietf", limit: window, ietf: true, ideal: 19 * time.Second, slack: 1.10, refused: 6, fair: true},
	}
	for _, tt := range tests {
		for seed := range int64(4) {
			t.Run(fmt.Sprint(tt.name, "/seed", seed), func(t *testing.T) {
				twoTransportsShareAQuota(t, tt, seed)
			})
		}
	}
}

// A token bucket told by RateLimit-Policy as its rate (q per w: 200 per
// second, burst 20) holds only its depth, a tenth of its limit. Two
// transports spending it, each sees it climb slowly, about as much as its
// own requests of a second before: a log would give back as much. Taken for
// a log of 200 whose others hold all but what it reads, a key was held to
// about its depth a second (regression: 1 run in 8, 1.5-3.7x the ideal).
func TestASharedBucketIsNotTakenForALog(t *testing.T) {
	bucket := throttletest.Limit{Algorithm: throttletest.TokenBucket, Rate: 200, Burst: 20}
	for seed := range int64(8) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			var mu sync.Mutex
			var kinds []string
			q := sharedQuota{name: "token-bucket/ietf", limit: bucket, ietf: true, ideal: 9900 * time.Millisecond,
				opts: []throttle.Option{throttle.WithEvents(func(e throttle.Event) {
					if e.Kind == throttle.EventPace && strings.HasPrefix(e.Reason, "quota headers: ") {
						mu.Lock()
						kinds = append(kinds, strings.TrimPrefix(e.Reason, "quota headers: "))
						mu.Unlock()
					}
				})}}
			r := runSharedQuota(t, q, seed)
			assert.Zero(t, r.failed)
			assert.NotContains(t, kinds, "log")
			assert.Contains(t, kinds, "bucket")
			// Under -race one run in a few hundred takes 1.2-1.3x (a refusal
			// episode in the first collisions: 23-29 429s, not 12), at
			// e9e6c68 as now; the regression took 1.5-3.7x.
			assert.LessOrEqual(t, r.took.Seconds(), q.ideal.Seconds()*1.4)
		})
	}
}

// Two transports on one fixed window that began before their jobs did, as
// servers' windows follow the clock: its resets, stated in whole seconds,
// come up to a second before the time stated. A window that comes back
// early within that second, to half of what it held or more, is taken for
// the reset, though the other spent some of it already (regression: taken
// for a bucket of twice the quota, or rolled over up to a second late,
// which gave back a whole window the other had spent: a median of 20-22
// refusals of 2,000, up to 73). One that comes back while a key is paused
// past its reset is not seen to, and a key may still roll over late: a few
// runs in a hundred draw 20-45, so the rule is on the median of 8 runs
// (over 160 sets of 8 runs, the median was 12 at most). So is the time:
// the goroutines' order varies from run to run, and on a loaded machine
// (the full suite under -race) a run in a few hundred took 1.11-1.16x the
// ideal, a key rolled over a window late; 384 runs on a quieter one took
// 1.07x at most, and half of them 1.04x.
func TestTwoTransportsShareAWindowThatBeganBefore(t *testing.T) {
	window := throttletest.Limit{Algorithm: throttletest.FixedWindow, N: 100, Per: time.Second}
	for _, late := range []time.Duration{300 * time.Millisecond, 700 * time.Millisecond} {
		for _, ietf := range []bool{false, true} {
			t.Run(fmt.Sprint(late, "/ietf=", ietf), func(t *testing.T) {
				q := sharedQuota{name: "fixed-window", limit: window, ietf: ietf, ideal: 19 * time.Second, late: late}
				var refused []int64
				var took []float64 // over the ideal of both jobs
				fair := 0
				for seed := range int64(8) {
					t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
						r := runSharedQuota(t, q, seed)
						assert.Zero(t, r.failed, "every request ends in a 200 within two minutes")
						assert.LessOrEqual(t, r.refused, int64(100), "5%% at worst")
						assert.LessOrEqual(t, r.took.Seconds(), q.ideal.Seconds()*1.20, "within 1.20x the ideal of both jobs")
						refused = append(refused, r.refused)
						took = append(took, r.took.Seconds()/q.ideal.Seconds())
						if r.fair() {
							fair++
						}
					})
				}
				slices.Sort(refused)
				slices.Sort(took)
				t.Logf("refused %v, %d of 8 fair, took %.3f", refused, fair, took)
				assert.LessOrEqual(t, refused[len(refused)/2], int64(16), "a median of 0.8%% refused")
				assert.LessOrEqual(t, took[len(took)/2], 1.10, "a median within 1.10x the ideal of both jobs")
				assert.GreaterOrEqual(t, fair, 6, "a fair share each, in most runs")
			})
		}
	}
}

// Two transports (two processes, no Store) on a small quota, a window, a
// log or a sliding counter of 10 or 5 a second told by quota headers on
// every answer: neither starves the other. The one refused wakes at the
// same point of every window (its Retry-After is whole seconds) and sees
// nothing it could come sooner by; the other sees nothing of it while it is
// refused, and a quota of 10 never showed the 16 of others' requests that
// showed others before. Each now takes others for spending it from fewer
// (a quarter of its limit), or from a refusal while its count held room,
// and leaves them the quota's last one while they were seen lately and its
// own requests within a window's length hold all the rest (see holdsLast).
// Regression, found in review 47 (8 workers, 300 requests each, 150 at 5 a
// second, 48 seeds): on the window of 10 told by X-RateLimit-* a request
// gave up after 8 attempts in 18 runs of 48, and 76.9 429s came a run on
// average, where the same jobs told nothing drew 19.7 and lost none; now
// none and 27.5. By IETF fields 33.5 429s, now 28.8; the log of 10 lost
// one in 1 and 5 runs of 48 (130.3 and 89.1 429s), now none (23.8, 27.7);
// the counter of 10 by IETF fields in 2 (29.0), now none (11.5); the window
// of 5 in 18 (66.1), now none (38.1; told nothing, 22.1); the log of 5 in 1
// (120.0), now none (44.4; told nothing, 22.7).
func TestTwoTransportsOnASmallQuotaNeitherStarves(t *testing.T) {
	type row struct {
		alg  throttletest.Algorithm
		n    int
		ietf bool
		most float64 // the most 429s a run, on average over the seeds (at 10 a second, twice what a window or a log draws told nothing)
	}
	rows := []row{
		{throttletest.FixedWindow, 10, false, 40}, {throttletest.FixedWindow, 10, true, 40},
		{throttletest.SlidingLog, 10, false, 40}, {throttletest.SlidingLog, 10, true, 40},
		{throttletest.SlidingCounter, 10, false, 40}, {throttletest.SlidingCounter, 10, true, 40},
		// Not yet within twice what the jobs draw told nothing (22.1 and
		// 22.7 a run): 38.1 and 44.4 on average over 48 seeds.
		{throttletest.FixedWindow, 5, false, 55}, {throttletest.SlidingLog, 5, false, 70},
	}
	for _, r := range rows {
		t.Run(fmt.Sprint(r.alg, "/", r.n, "/ietf=", r.ietf), func(t *testing.T) {
			l := throttletest.Limit{Algorithm: r.alg, N: r.n, Per: time.Second}
			var refused int64
			const seeds = 8
			for seed := range int64(seeds) {
				t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
					run := runSharedQuota(t, sharedQuota{limit: l, ietf: r.ietf, records: 30 * r.n, workers: 8, ideal: time.Minute}, seed)
					assert.Zero(t, run.failed, "no request gives up")
					refused += run.refused
				})
			}
			t.Logf("%.1f 429s a run", float64(refused)/seeds)
			assert.LessOrEqual(t, float64(refused)/seeds, r.most)
		})
	}
}

// One transport alone on a small quota told by quota headers on every
// answer never takes its own requests for others', and never leaves the
// quota's last one to them: a window or a log of 50 per 10 s, 16 or 4
// workers, a job of 1,000 ends in the window it takes, begun at 3m10s.
// Regression, found in review of review 47's fix (holdsLast): the burst
// of 16 at each window's start, sent at one instant, was counted in any
// order and showed 1-3 of its own as others' (or 17 in the first burst),
// so did a log's count of ours it holds, read from the answer's arrival,
// and a refusal read with those sent with its reading; each left one
// request a window to others that do not exist: 3m20s in 4 seeds of 4 in
// each row, where 3m10s was.
func TestOneTransportAloneNeverLeavesTheLastOneToOthers(t *testing.T) {
	type row struct {
		alg     throttletest.Algorithm
		ietf    bool
		workers int
		noise   bool // nearby's jitter; without it, every request of a burst leaves at one instant
	}
	rows := []row{
		{throttletest.FixedWindow, false, 16, false}, {throttletest.FixedWindow, true, 16, false},
		{throttletest.FixedWindow, false, 4, false}, {throttletest.FixedWindow, true, 4, false},
		{throttletest.SlidingLog, false, 16, true}, {throttletest.SlidingLog, false, 4, true},
		{throttletest.SlidingLog, true, 4, true},
	}
	for _, r := range rows {
		t.Run(fmt.Sprint(r.alg, "/ietf=", r.ietf, "/workers=", r.workers, "/noise=", r.noise), func(t *testing.T) {
			for seed := range int64(4) {
				synctest.Test(t, func(t *testing.T) {
					cfg := throttletest.Config{Limits: []throttletest.Limit{{Algorithm: r.alg, N: 50, Per: 10 * time.Second}},
						XRateLimit: !r.ietf, IETF: r.ietf, HeadersOnSuccess: true}
					var base http.RoundTripper
					if r.noise {
						base = throttletest.NewAPI(nearby(cfg, seed))
					} else {
						base = stripping(throttletest.NewAPI(cfg), func(int) bool { return true })
					}
					rt := throttle.New(base)
					defer rt.Close()
					took := jobOf(t, rt, 1000, r.workers, "")
					t.Logf("seed %d: took %v", seed, took)
					assert.Less(t, took, 3*time.Minute+15*time.Second, "20 windows, the last begun at 3m10s")
				})
			}
		})
	}
}

// A sharedQuota is a quota two transports share, told by its headers, and
// what they must achieve.
type sharedQuota struct {
	name     string
	limit    throttletest.Limit
	ietf     bool          // told by IETF headers, not X-RateLimit-*
	none     bool          // told by no quota headers: 429s and their Retry-After alone
	ideal    time.Duration // of the two jobs together
	slack    float64       // the most over the ideal; 0: any
	refused  int64         // the most 429s
	fair     bool          // each gets a fair share: neither ends its job before the other has done most of its
	late     time.Duration // how far into the server's window the jobs start
	join     time.Duration // how long after the first job the second starts
	records  int           // each job's; 0: 1,000
	workers  int           // each job's; 0: 16
	procs    int           // transports, each with its job; 0: 2
	opts     []throttle.Option
	realTime bool // run in real time, outside a synctest bubble (see TestModel)
}

// twoTransportsShareAQuota runs two jobs of 1,000 requests at once, each
// through its own transport, on one key of the quota q.limit, told by its
// headers, and checks that both end within two minutes, and all that q
// asks.
func twoTransportsShareAQuota(t *testing.T, q sharedQuota, seed int64) {
	r := runSharedQuota(t, q, seed)
	assert.Zero(t, r.failed, "every request ends in a 200 within two minutes")
	assert.LessOrEqual(t, r.refused, q.refused)
	if q.slack > 0 {
		assert.LessOrEqual(t, r.took.Seconds(), q.ideal.Seconds()*q.slack, "within %v× the ideal of both jobs", q.slack)
	}
	if q.fair {
		assert.True(t, r.fair(), "a fair share each")
	}
}

// A sharedRun is what two jobs on one quota did.
type sharedRun struct {
	took    time.Duration   // both
	ended   []time.Duration // each
	refused int64           // 429s
	failed  int64           // requests that did not end in a 200
}

// fair reports whether neither job ended before the other had done most of
// its: the first to end took 0.7 of the whole or more.
func (r sharedRun) fair() bool {
	return slices.Min(r.ended).Seconds() >= 0.7*r.took.Seconds()
}

// runSharedQuota runs two jobs of q.records requests (1,000) at once, each
// through its own transport with q.workers workers (16), on one key of the
// quota q.limit, told by its headers (unless q.none), q.late into the
// server's window, for two minutes at most.
func runSharedQuota(t *testing.T, q sharedQuota, seed int64) (r sharedRun) {
	records, workers := cmp.Or(q.records, 1000), cmp.Or(q.workers, 16)
	run := synctest.Test
	if q.realTime {
		run = func(t *testing.T, f func(*testing.T)) { f(t) }
	}
	run(t, func(t *testing.T) {
		api := throttletest.NewAPI(nearby(throttletest.Config{Limits: []throttletest.Limit{q.limit},
			XRateLimit: !q.ietf && !q.none, IETF: q.ietf && !q.none, HeadersOnSuccess: !q.none}, seed))
		time.Sleep(q.late)
		rts := make([]*throttle.Transport, cmp.Or(q.procs, 2))
		for i := range rts {
			rts[i] = throttle.New(api, q.opts...)
			defer rts[i].Close()
		}
		r.ended = make([]time.Duration, len(rts))
		start := time.Now()
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		var wg sync.WaitGroup
		var failed atomic.Int64
		for i, rt := range rts {
			next := make(chan int)
			var jobs sync.WaitGroup
			for range workers {
				jobs.Go(func() {
					for n := range next {
						req := newReq(t, ctx, http.MethodPut, fmt.Sprint("http://api.test/", i, "/", n))
						req.Header.Set("X-API-Key", "k")
						resp, err := rt.RoundTrip(req)
						if err != nil || resp.StatusCode != http.StatusOK {
							failed.Add(1)
						}
						if err == nil {
							resp.Body.Close()
						}
					}
				})
			}
			wg.Go(func() {
				if i > 0 {
					time.Sleep(q.join)
				}
				for n := range records {
					next <- n
				}
				close(next)
				jobs.Wait()
				r.ended[i] = time.Since(start)
			})
		}
		wg.Wait()
		r.took, r.refused, r.failed = time.Since(start), api.Stats().Total.Throttled, failed.Load()
		t.Logf("together took %v (ideal %v; each %v), %d refused", r.took, q.ideal, r.ended, r.refused)
	})
	return r
}

// toldJob runs job's n requests (called inside a synctest bubble) through
// a transport told nothing, against limit with quota headers on every answer (the IETF
// fields, or X-RateLimit-*) and seed's noise nearby: it returns the time
// taken over ideal, and the requests the server refused.
func toldJob(t *testing.T, limit throttletest.Limit, ietf bool, seed int64, n int, ideal time.Duration) (x float64, refused int64) {
	t.Helper()
	return toldJobAway(t, limit, ietf, seed, n, ideal, 0)
}

// toldJobAway is toldJob with answers latency to latency·1.5 after the
// request (0: nearby's).
func toldJobAway(t *testing.T, limit throttletest.Limit, ietf bool, seed int64, n int, ideal, latency time.Duration) (x float64, refused int64) {
	t.Helper()
	cfg := nearby(throttletest.Config{Limits: []throttletest.Limit{limit},
		XRateLimit: !ietf, IETF: ietf, HeadersOnSuccess: true}, seed)
	if latency > 0 {
		cfg.Latency, cfg.LatencyJitter = latency, latency/2
	}
	api := throttletest.NewAPI(cfg)
	rt := throttle.New(api)
	defer rt.Close()
	took := job(t, rt, n)
	refused = api.Stats().Total.Throttled
	x = took.Seconds() / ideal.Seconds()
	t.Logf("took %v (%.3fx the ideal), %d refused", took, x, refused)
	return x, refused
}

// A slow bucket (5 a second, 5 deep) told by either form of headers is
// told from a window: a job that spends it in each second after a pause
// sees Remaining fall slower than its requests, within the second a reset
// in whole seconds was known to, and took that for a window's early reset
// every time (regression: with X-RateLimit-*, 45-53 429s in 300 requests
// and 1.10-1.13x the ideal; now the first burst's 11 and 1.01x).
func TestSlowBucketIsToldFromAWindow(t *testing.T) {
	for _, ietf := range []bool{false, true} {
		for seed := range int64(2) {
			t.Run(fmt.Sprint("ietf=", ietf, "/seed", seed), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					x, refused := toldJob(t, throttletest.Limit{Algorithm: throttletest.TokenBucket, Rate: 5, Burst: 5},
						ietf, seed, 300, 59*time.Second) // (300 - 5) / 5
					assert.LessOrEqual(t, refused, int64(16), "the first burst's, and few more")
					assert.LessOrEqual(t, x, 1.05)
				})
			})
		}
	}
}

// A small window (5 a second) or log (5 a second), told by either form of
// headers, is not taken for a bucket: 16 workers at its end send
// together, the refused one may be answered first (Remaining 0) and the
// accepted one, counted before it, after it (Remaining 0 as well). Only a
// request sent after an answer read can show what that answer said given
// back. Regression: the window was taken for a bucket of 511/s right after
// its first refusal and drew 39-42 refusals in 200 (these seeds), 1.25x
// the ideal; the log 1.16x on average.
func TestSmallQuotaIsNotTakenForABucket(t *testing.T) {
	for _, limit := range []throttletest.Limit{
		{Algorithm: throttletest.FixedWindow, N: 5, Per: time.Second},
		{Algorithm: throttletest.SlidingLog, N: 5, Per: time.Second},
	} {
		for _, ietf := range []bool{false, true} {
			for _, seed := range []int64{0, 4} {
				t.Run(fmt.Sprint(limit.Algorithm, "/ietf=", ietf, "/seed", seed), func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) {
						x, refused := toldJob(t, limit, ietf, seed, 200, 39*time.Second) // (200 - 5) / 5
						assert.LessOrEqual(t, refused, int64(25), "the first burst's, and few more")
						assert.LessOrEqual(t, x, 1.15)
					})
				})
			}
		}
	}
}

// A key alone on a fast log (1,000 per 5 s, the first 1,000 sent in about
// 0.2 s), told by either form of headers, is not taken for one that others
// spend: its requests sent together are counted in any order, so two
// readings a few milliseconds apart may differ by more of its own than it
// admitted between them. Regression: taken as shared within 10 ms, it was
// sent to evenly, at 200 a second, from the first reset on: 1.22x the
// ideal in these seeds, not 1.01x.
func TestFastLogAloneIsNotTakenAsShared(t *testing.T) {
	limit := throttletest.Limit{Algorithm: throttletest.SlidingLog, N: 1000, Per: 5 * time.Second}
	for _, ietf := range []bool{false, true} {
		for _, seed := range []int64{2, 4} {
			t.Run(fmt.Sprint("ietf=", ietf, "/seed", seed), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					x, refused := toldJob(t, limit, ietf, seed, 5000, 20*time.Second) // a window's length for each 1,000 after the first
					assert.Zero(t, refused)
					assert.LessOrEqual(t, x, 1.05)
				})
			})
		}
	}
}

// Two transports on one log of 200 a second, told by either form of
// headers, refused when both send into it at once, pause only until the
// oldest of their requests the log holds has left it, not for the whole
// second the server's wait says (rounded up from 0.1 s to 0.9 s). The log
// gives back from then on, and each key's mirror holds it as usual.
// Regression: each refusal paused both a whole second, in which the log
// gave back most of it unused: a median of 1.14x the ideal of the two jobs
// in these seeds, 1.09x now.
func TestTwoTransportsOnALogPauseUntilItGivesBack(t *testing.T) {
	log := throttletest.Limit{Algorithm: throttletest.SlidingLog, N: 200, Per: time.Second}
	for _, ietf := range []bool{false, true} {
		t.Run(fmt.Sprint("ietf=", ietf), func(t *testing.T) {
			var took []float64
			for seed := range int64(8) {
				q := sharedQuota{limit: log, ietf: ietf, ideal: 1999 * time.Second / 200}
				r := runSharedQuota(t, q, seed)
				assert.Zero(t, r.failed, "every request ends in a 200 within two minutes")
				assert.LessOrEqual(t, r.refused, int64(12), "0.6%% at worst")
				took = append(took, r.took.Seconds()/q.ideal.Seconds())
			}
			slices.Sort(took)
			t.Logf("took %.3f", took)
			assert.LessOrEqual(t, took[len(took)/2], 1.11, "a median within 1.11x the ideal of both jobs")
		})
	}
}

// A sliding counter (100 a second), told by the IETF fields, whose reset
// (t) says a second away, is taken for neither a window nor a log for
// long: it gives back evenly as its count of the window before decays, so
// a reading some way past a reset shows half the limit or more back, as a
// window would, but not all of it, and a log's count of the key's own
// requests does not hold it. Regression: taken for a window, the key sent
// what remained at each reset and nothing until the next (seed 4: 2.0x
// the ideal); taken for a log, it was refused and paused a second at every
// reset until the third refusal told it again (seed 0: 1.36x, 75
// refusals).
func TestSlidingCounterIsToldFromAWindowAndALog(t *testing.T) {
	for _, seed := range []int64{0, 4} {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// 100 at once, then 99 a second (see throttletest's doc).
				x, refused := toldJob(t, throttletest.Limit{Algorithm: throttletest.SlidingCounter, N: 100, Per: time.Second},
					true, seed, 2000, 1900*time.Second/99)
				assert.LessOrEqual(t, x, 1.2)
				assert.LessOrEqual(t, refused, int64(20))
			})
		})
	}
}

// Two transports on one sliding counter (100 a second), told by the IETF
// fields, which state its window's length (w) and say its reset is a second
// away: neither takes it for a window for long. Each sees the other spend
// it, and a window that others share may be back to less than whole at the
// first reading after its reset; but back to less than half, it gives back
// as a counter does, as the window before decays. Regression: both took
// it for a window, sent what remained at each reset and nothing until the
// next (every other second), and took 1.9x the ideal of both jobs, one run
// in eight; or 1.4-1.6x, with a hundred refusals or more. Nor does a key
// that takes it for a log, others seen, send what the log frees at once:
// the counter still weighs a burst sent more than a window's length
// before, and the log's count took that for others' (regression: the key
// left alone sent 55 a second for good, 1.24-1.27x and 60-77 refusals).
func TestTwoTransportsShareASlidingCounter(t *testing.T) {
	counter := throttletest.Limit{Algorithm: throttletest.SlidingCounter, N: 100, Per: time.Second}
	var sum float64
	const seeds = 8
	for seed := range int64(seeds) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			// 100 at once, then 99 a second (see throttletest's doc).
			r := runSharedQuota(t, sharedQuota{limit: counter, ietf: true, records: 2000, workers: 8}, seed)
			x := r.took.Seconds() / (3900 * time.Second / 99).Seconds()
			t.Logf("took %v (%.3fx the ideal), %d refused", r.took, x, r.refused)
			assert.Zero(t, r.failed)
			// 1.06-1.15x nearly always (1.19x at worst in 144 runs
			// under -race, six executions at once); fresh-clone CI
			// runs under -race, on a machine busy with more, met
			// 1.22x with 11 refused and 1.31x with 19. The refusals
			// tell the log's bursts (60-77 at 5b3d37f, at 1.24-1.27x),
			// and the mean the windows' (1.9x one run in eight).
			assert.LessOrEqual(t, x, 1.4)
			assert.LessOrEqual(t, r.refused, int64(30))
			sum += x
		})
	}
	assert.LessOrEqual(t, sum/seeds, 1.15, "the mean over the ideal")
}

// A leaky bucket of 200 a second with one place to wait (Queue 1),
// told by X-RateLimit-*, which say 2 remain at most, reset in a second, is
// not taken for a window of 2 a second for good: the request that tries
// whether it gives back before the reset goes an eighth of the way there
// from the request that spent it, not with it (served and queued at once,
// the two showed nothing). Regression: these seeds took 100x the ideal
// (2 requests a second, to the end) and 7.3x.
func TestLeakyBucketIsNotTakenForASmallWindow(t *testing.T) {
	for _, seed := range []int64{7, 10} {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// 2 at once (one served, one waiting), then 200 a second.
				x, refused := toldJob(t, throttletest.Limit{Algorithm: throttletest.LeakyBucket, Rate: 200, Queue: 1},
					false, seed, 2000, 1998*time.Second/200)
				assert.LessOrEqual(t, x, 2.0)
				assert.LessOrEqual(t, refused, int64(20))
			})
		})
	}
}

// A leaky bucket of 50 a second with three places to wait, told by
// X-RateLimit-* (4 at most, reset in a second), is not taken for a window
// of 4 a second: its readings are made when a request joins the queue and
// arrive when it is served, up to 60 ms later, so the first burst's
// answers, all read at once, only looked like a span that gave nothing
// back. A span shows nothing given back only from a reading of a request
// sent after the answer it is measured from. Regression: these seeds took
// 12.5x the ideal (4 requests a second, to the end).
func TestLeakyBucketQueueIsNotTakenForAStillWindow(t *testing.T) {
	for _, seed := range []int64{5, 7} {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// 4 at once (one served, three waiting), then 50 a second.
				x, refused := toldJob(t, throttletest.Limit{Algorithm: throttletest.LeakyBucket, Rate: 50, Queue: 3},
					false, seed, 1000, 1000*time.Second/50)
				assert.LessOrEqual(t, x, 1.15)
				assert.LessOrEqual(t, refused, int64(16), "the first burst's")
			})
		})
	}
}

// A bucket that holds fewer than 4 (a leaky bucket of 200 a second with one
// place to wait, whose headers say 2 remain at most) holds back a quarter
// of its depth, not a whole token: with one of its two held back, the key
// sent one request at a time, the next only once the mirror was full
// again, slower than the bucket drains (regression: 1.34x the ideal on
// average over 16 seeds in the model, 1.47x at worst; these seeds took
// 1.28-1.47x, two of them over 1.45x).
func TestTinyBucketHoldsBackLessThanAToken(t *testing.T) {
	for seed := range int64(8) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// 2 at once (one served, one waiting), then 200 a second.
				x, refused := toldJob(t, throttletest.Limit{Algorithm: throttletest.LeakyBucket, Rate: 200, Queue: 1},
					false, seed, 4000, 3998*time.Second/200)
				assert.LessOrEqual(t, x, 1.42) // 1.23-1.36x
				assert.LessOrEqual(t, refused, int64(20))
			})
		})
	}
}

// A bucket far away (50 a second, 5 deep, answers 40-60 ms after the
// request), told by either form of headers, is read as it is now: the
// server read its count before it answered, and refilled meanwhile. Read
// as of the answer, the level was a token or more low, the key waited for
// what the bucket already held, the bucket sat full and lost its refill
// (regression: 1.12x the ideal on average over 16 seeds in the model;
// these seeds took 1.13x, now 1.03x).
func TestFarBucketIsCreditedItsRefillOnTheWayBack(t *testing.T) {
	for _, ietf := range []bool{false, true} {
		for seed := range int64(2) {
			t.Run(fmt.Sprint("ietf=", ietf, "/seed", seed), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					x, refused := toldJobAway(t, throttletest.Limit{Algorithm: throttletest.TokenBucket, Rate: 50, Burst: 5},
						ietf, seed, 1000, 995*time.Second/50, 40*time.Millisecond)
					assert.LessOrEqual(t, x, 1.06)
					assert.LessOrEqual(t, refused, int64(16), "the first burst's, and few more")
				})
			})
		}
	}
}

// A small bucket far away (100 a second, 5 deep, answers 40-60 ms after
// the request), told by X-RateLimit-*: a request sent now reaches the
// server a trip later, and the bucket refills meanwhile, as it did while
// the reading came back. Credited only the trip back, the key held about
// a trip's refill, more than the bucket holds, below what it could send,
// and never drained it (regression: 1.23x and 1.30x the ideal in these
// seeds, 1.25x on average over 16 in the model; now 1.05x on average).
func TestFarBucketIsCreditedItsRefillOnTheWayThere(t *testing.T) {
	for seed := range int64(2) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				x, refused := toldJobAway(t, throttletest.Limit{Algorithm: throttletest.TokenBucket, Rate: 100, Burst: 5},
					false, seed, 2000, 1995*time.Second/100, 40*time.Millisecond)
				assert.LessOrEqual(t, x, 1.15)
				assert.LessOrEqual(t, refused, int64(16), "the first burst's, and few more")
			})
		})
	}
}

// A bucket far away (200 a second, 20 deep, answers 100-200 ms after the
// request) met by 32 workers, told by X-RateLimit-*: a span whose climb
// is below nothing, by fewer than the requests on its ends' way, shows no
// more than one that climbed as little, and goes on to later answers, up
// to a second. Regression: the key took such a span for others spending
// all the bucket adds and set its rate to 0, up to 7 times a run, sending
// one request at a time until the next reading.
func TestFarBucketAloneIsNotTakenAsSpentByOthers(t *testing.T) {
	for _, seed := range []int64{2, 3} {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := throttletest.Config{
					Limits:     []throttletest.Limit{quotaBucket},
					XRateLimit: true, HeadersOnSuccess: true, ArrivalJitter: 2 * time.Millisecond,
					Latency: 100 * time.Millisecond, LatencyJitter: 100 * time.Millisecond, Seed: seed}
				api := throttletest.NewAPI(cfg)
				opt, paces := paceLog()
				rt := throttle.New(api, opt)
				defer rt.Close()
				took := jobOf(t, rt, 2000, 32, "")
				t.Logf("took %v, %d refused", took, api.Stats().Total.Throttled)
				for _, e := range paces() {
					assert.False(t, e.Reason == "quota headers: bucket" && e.Rate == 0, "at %v: a rate of 0, as if others spent it all", e)
				}
			})
		})
	}
}

// A bucket far away (200 a second, 20 deep, answers 40-60 ms after the
// request) told by RateLimit-Policy as its rate, "200 per second", never
// shows more than its depth remaining. Taken for a window of 200 until
// told apart, the key spread what remained over half a second after each
// reading, so it never drained the bucket and never saw it climb faster
// than a window's reset. What it took within a second, more than twice
// the 20 it ever held, tells a bucket (regression: these seeds took
// 1.35-1.48x the ideal, never told; X-RateLimit-*, whose Limit is the
// depth, 1.02x).
func TestFarBucketToldByItsRateIsTold(t *testing.T) {
	for _, seed := range []int64{1, 6, 8} {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := nearby(throttletest.Config{
					Limits: []throttletest.Limit{quotaBucket}, IETF: true, HeadersOnSuccess: true}, seed)
				cfg.Latency, cfg.LatencyJitter = 40*time.Millisecond, 20*time.Millisecond
				api := throttletest.NewAPI(cfg)
				opt, paces := paceLog()
				rt := throttle.New(api, opt)
				defer rt.Close()
				took := job(t, rt, 4000)
				x := took.Seconds() / (3980 * time.Second / 200).Seconds()
				t.Logf("took %v (%.3fx the ideal), %d refused", took, x, api.Stats().Total.Throttled)
				assert.LessOrEqual(t, x, 1.06)
				assert.Zero(t, api.Stats().Total.Throttled)
				var told bool
				for _, e := range paces() {
					told = told || e.Reason == "quota headers: bucket"
				}
				assert.True(t, told, "told a bucket")
			})
		})
	}
}

// A window whose quota halves mid-job (100 a second, then 50), told by
// X-RateLimit-*, is known by its new Limit: the most Remaining seen before
// no longer bounds it (regression: a reset of the halved window, back to
// 49, was half the old 100, too little to show a window's early reset,
// and was taken for a bucket's climb at 300 a second; 1.10x the ideal on
// average over 16 seeds in the model, 1.15x and 29 429s at worst; these
// seeds took 1.04-1.10x with 4-29 429s, now 1.01-1.02x with none).
func TestWindowThatHalvesIsKnownByItsNewLimit(t *testing.T) {
	window := func(n int, seed int64) *throttletest.API {
		return throttletest.NewAPI(nearby(throttletest.Config{
			Limits:     []throttletest.Limit{{Algorithm: throttletest.FixedWindow, N: n, Per: time.Second}},
			XRateLimit: true, HeadersOnSuccess: true}, seed))
	}
	for seed := range int64(4) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				before, after := window(100, seed), window(50, seed)
				rt := throttle.New(changesAt(19500*time.Millisecond, before, after))
				defer rt.Close()
				took := job(t, rt, 4000)
				// 1,950 in the first 19.5 s, 2,050 at 50 a second after.
				x := took.Seconds() / 60.5
				refused := before.Stats().Total.Throttled + after.Stats().Total.Throttled
				t.Logf("took %v (%.3fx the ideal), %d refused", took, x, refused)
				assert.LessOrEqual(t, x, 1.07)
				assert.LessOrEqual(t, refused, int64(3))
			})
		})
	}
}

// Three transports on a window of 100 a second, told by X-RateLimit-*,
// a third of the job each, lose no request and draw few refusals: one
// refused near a window's end was paused by its whole-second Retry-After
// to the same point of the next window, spent by the others by then, and
// so on, window after window (regression: 45-51 429s a run in the model,
// 1.15x the ideal, and a request given up after 8 refusals in 1 or 2 runs
// of 16; these seeds took 1.06-1.20x with 28-63 429s, now 1.03x with
// 24-28, most of them the processes racing for a window's last requests).
// The goroutines' order varies from run to run: one run of seed 3 in about
// 40 takes 1.052x with 36 429s, the last request a window late.
func TestThreeTransportsShareAWindow(t *testing.T) {
	window := throttletest.Limit{Algorithm: throttletest.FixedWindow, N: 100, Per: time.Second}
	for seed := range int64(4) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			r := runSharedQuota(t, sharedQuota{limit: window, records: 1333, workers: 6, procs: 3}, seed)
			x := r.took.Seconds() / 39
			t.Logf("took %v (%.3fx the ideal), %d refused", r.took, x, r.refused)
			assert.Zero(t, r.failed)
			assert.LessOrEqual(t, x, 1.055)
			assert.LessOrEqual(t, r.refused, int64(40))
		})
	}
}

// Two transports on a bucket nearby, told by its headers, share it fairly
// in most runs: neither ends its job before the other has done 0.7 of the
// whole. The refill a key credits a reading on its next request's way
// there, a sliver of the depth this near, tilted them toward the one that
// measured the faster rate (regression: 99 runs of 200 fair in the model,
// 182 before the credit). The runs' order of goroutines varies, so the
// rule is on 48 runs, 24 told by each form of headers: fair 21-27 times
// before the credit, 44-46 after (6 executions, 2 under -race). Since a
// count that comes back is taken for a reset placed late only from a
// request sent after the reading it exceeds (000b73b: answers read out of
// order sent 18 requests into a window of 10), a key sees a bucket's
// refill that way a round trip later, and the runs are fair 38-44 times,
// 33-43 under -race (10 executions); 30 still tells the 21-27 apart.
func TestTwoTransportsShareANearBucketFairly(t *testing.T) {
	fair := 0
	for _, ietf := range []bool{false, true} {
		q := sharedQuota{limit: quotaBucket, ietf: ietf, records: 2000, workers: 8}
		for seed := range int64(24) {
			r := runSharedQuota(t, q, seed)
			assert.Zero(t, r.failed)
			if r.fair() {
				fair++
			}
		}
	}
	t.Logf("%d of 48 fair", fair)
	assert.GreaterOrEqual(t, fair, 30, "a fair share each, in most runs")
}

// Two transports on a bucket of 100 a second, 5 deep, told by
// X-RateLimit-* (Limit 5, no window's length): the one starved while the
// other drained it may take it for a window, be refused after a reset, and
// so count it as a log of 5 a second. Once unrefused and alone for a while,
// that key spreads its log evenly, and a bucket that shows more than a log
// could hold at every reading for a window's length is told again
// (regression, found in review 46: the log was never revisited; the
// starved key sent 5 a second from the other's end at 11 s, and 400-426
// of its requests failed at the two-minute deadline, in 4 runs of 6 of
// this seed; now 20.3-26.8 s, none failed). The goroutines' order varies
// from run to run, so the seed runs four times. The IETF fields, with this
// seed, were never taken for a log.
func TestAStarvedKeyTellsTheBucketAgainOnceAlone(t *testing.T) {
	bucket := throttletest.Limit{Algorithm: throttletest.TokenBucket, Rate: 100, Burst: 5}
	for run := range 4 {
		t.Run(fmt.Sprint("run", run), func(t *testing.T) {
			q := sharedQuota{limit: bucket, ideal: 20 * time.Second, slack: 1.5, refused: 50}
			twoTransportsShareAQuota(t, q, 15)
		})
	}
}

// Two transports on a leaky bucket of 200 a second with one place to wait,
// told by X-RateLimit-* (2 remain at most), end together within about
// twice the ideal of both jobs: one that starved while the other took the
// bucket measures a rate of a few a second, and, unrefused for seconds,
// full at both ends of each span, probes quickly again (regression: it
// climbed a twentieth per quiet second, 20 s after the other's end; 5.8x
// the ideal, 1 run in 5). Not yet at the peer's 1.05x: the first to
// measure a high rate takes most of the bucket (see the README).
func TestTwoTransportsShareALeakyBucket(t *testing.T) {
	leaky := throttletest.Limit{Algorithm: throttletest.LeakyBucket, Rate: 200, Queue: 1}
	for seed := range int64(16) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			r := runSharedQuota(t, sharedQuota{limit: leaky, records: 2000, workers: 8}, seed)
			ideal := 3998 * time.Second / 200 // 2 at once (one served, one waiting), then 200 a second
			x := r.took.Seconds() / ideal.Seconds()
			t.Logf("took %v (%.2fx the ideal), %d refused", r.took, x, r.refused)
			assert.Zero(t, r.failed)
			assert.LessOrEqual(t, x, 2.5)
		})
	}
}

// A second transport that joins a job on the same bucket 5 s in, told by
// either form of headers, shares it without starving the first: the two
// end within 1.05x the ideal of both jobs (regression: the joiner's first
// burst and its climb took over the bucket, the first measured what was
// left for it falling to 0.6/s and, holding two tokens back at that rate,
// sent nothing for 4 s after the joiner was done: 1.07x on average, 1.23x
// at worst; these seeds took 1.19-1.23x).
func TestLateJoinerDoesNotStarveTheFirst(t *testing.T) {
	for _, ietf := range []bool{false, true} {
		for _, seed := range []int64{10, 16} {
			t.Run(fmt.Sprint("ietf=", ietf, "/seed", seed), func(t *testing.T) {
				q := sharedQuota{limit: quotaBucket, ietf: ietf, records: 2000, workers: 8, join: 5 * time.Second,
					ideal: 19900 * time.Millisecond, slack: 1.05, refused: 10}
				twoTransportsShareAQuota(t, q, seed)
			})
		}
	}
}

// A log of recent requests forgets each one a window's length after it
// reached the server. When the way there stalls (here every request sent in
// a fifth of a second waits 300 ms more), requests reach it late and are
// forgotten late: the key counts each until a window's length after its
// answer, which the server sent after counting it, so a stall draws no
// refusal.
func TestLogCountsFromAnswersThroughAStall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := throttletest.NewAPI(nearby(throttletest.Config{Limits: []throttletest.Limit{
			{Algorithm: throttletest.SlidingLog, N: 200, Per: time.Second}}, IETF: true, HeadersOnSuccess: true}, 1))
		start := time.Now()
		rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
			if d := time.Since(start); d >= 5*time.Second && d < 5200*time.Millisecond {
				time.Sleep(300 * time.Millisecond)
			}
			return api.RoundTrip(r)
		}))
		defer rt.Close()
		took := job(t, rt, 2000)
		refused := api.Stats().Total.Throttled
		t.Logf("took %v (ideal 9s), %d refused", took, refused)
		assert.Zero(t, refused)
		assert.LessOrEqual(t, took, 9*time.Second*120/100, "a refusal costs a whole second of Retry-After")
	})
}

// Small quotas that 16 workers spend within their first round trips: their
// headers show neither a log nor a window plainly, and the first verdict
// may be wrong (a log taken for a window or a bucket). Refusals that keep
// coming overturn it: refused after a reset, a "window" is counted as a
// log; refused in episode after episode, a "bucket" is told again.
func TestWrongKindIsOverturnedByRefusals(t *testing.T) {
	smallLog := throttletest.Limit{Algorithm: throttletest.SlidingLog, N: 30, Per: time.Second}
	smallWindow := throttletest.Limit{Algorithm: throttletest.FixedWindow, N: 50, Per: 2 * time.Second}
	tests := []struct {
		name  string
		limit throttletest.Limit
		ietf  bool
		seed  int64 // one whose first verdict is wrong
		ideal time.Duration
	}{
		{"sliding-log-30/x-ratelimit", smallLog, false, 2, 19 * time.Second},
		{"sliding-log-30/ietf", smallLog, true, 1, 19 * time.Second},
		{"fixed-window-50-per-2s/ietf", smallWindow, true, 3, 22 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := throttletest.NewAPI(nearby(throttletest.Config{Limits: []throttletest.Limit{tt.limit},
					XRateLimit: !tt.ietf, IETF: tt.ietf, HeadersOnSuccess: true}, tt.seed))
				rt := throttle.New(api)
				defer rt.Close()
				took := job(t, rt, 600)
				refused := api.Stats().Total.Throttled
				t.Logf("took %v (ideal %v), %d refused", took, tt.ideal, refused)
				assert.LessOrEqual(t, refused, int64(30), "at most 5%% refused (it was 50 to 289)")
				assert.LessOrEqual(t, took.Seconds(), tt.ideal.Seconds()*1.3)
			})
		})
	}
}

// A bucket that others spend as fast as it refills shows no refill in the
// key's readings: nothing is known to refill it, so the key reads it again
// with one request at a time, not with every request waiting. (They all
// went at once, each drew a 429, which a bucket takes for a collision, not
// a pause, and they went again: 52-118 429s in a burst when a log of
// recent requests was taken for a bucket.)
func TestBucketSpentByOthersIsReadOneAtATime(t *testing.T) {
	for _, latency := range []time.Duration{time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond, 5 * time.Millisecond} {
		t.Run(fmt.Sprint(latency), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// A bucket of 20 that refills at 100/s for 2 s, then not at all
				// (others take all it adds).
				start := time.Now()
				var mu sync.Mutex
				level, at := 20.0, start
				var flying, most, refused int
				rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
					time.Sleep(latency)
					mu.Lock()
					defer mu.Unlock()
					now := time.Now()
					if now.Sub(start) < 2*time.Second {
						level = min(20, level+100*now.Sub(at).Seconds())
					}
					at = now
					late := now.Sub(start) >= 2*time.Second
					flying++
					if late {
						most = max(most, flying)
					}
					status := http.StatusOK
					if level >= 1 {
						level--
					} else {
						status = http.StatusTooManyRequests
						if late {
							refused++
						}
					}
					resp := reply(r, status, "X-RateLimit-Limit", "20", "X-RateLimit-Remaining", fmt.Sprint(int(level)),
						"X-RateLimit-Reset", "1", "Retry-After", "1")
					mu.Unlock()
					time.Sleep(latency)
					mu.Lock()
					flying--
					return resp, nil
				}))
				defer rt.Close()
				ctx, cancel := context.WithTimeout(t.Context(), 6*time.Second)
				defer cancel()
				var wg sync.WaitGroup
				for i := range 16 {
					wg.Go(func() {
						for j := 0; ctx.Err() == nil; j++ {
							req := newReq(t, ctx, http.MethodPut, fmt.Sprint("http://api.test/records/", i, "-", j))
							resp, err := rt.RoundTrip(req)
							if err != nil {
								return // the deadline is near: its wait would end after it
							}
							resp.Body.Close()
						}
					})
				}
				wg.Wait()
				t.Logf("from 2 s to 6 s: %d refused, at most %d on the wire", refused, most)
				assert.LessOrEqual(t, most, 1, "one request at a time reads the bucket")
				assert.LessOrEqual(t, refused, 8)
			})
		})
	}
}

// A bucket far away (answers 100-200 ms after the request) whose
// X-RateLimit-* headers say it holds 20: 16 workers cannot drain it, so
// Remaining stays near full and the requests on their way are as many as it
// holds, hiding its climb between two answers. The key tells it a bucket by
// what the server took within a reset's length, more than a 20-a-second
// window or log could, and lets the workers go as fast as they can, as fast
// as without the transport (regression: held as a window or a log of 20 a
// second, 2-4x slower; once taken for a log, for ever).
func TestFarBucketIsToldByWhatItTook(t *testing.T) {
	for seed := range int64(3) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := throttletest.Config{
					Limits:     []throttletest.Limit{{Algorithm: throttletest.TokenBucket, Rate: 200, Burst: 20}},
					XRateLimit: true, HeadersOnSuccess: true, ArrivalJitter: 2 * time.Millisecond,
					Latency: 100 * time.Millisecond, LatencyJitter: 100 * time.Millisecond, Seed: seed}
				bare := job(t, throttletest.NewAPI(cfg), 1000) // the workers alone, never refused
				api := throttletest.NewAPI(cfg)
				opt, paces := paceLog()
				rt := throttle.New(api, opt)
				defer rt.Close()
				took := job(t, rt, 1000)
				t.Logf("took %v, the workers alone %v", took, bare)
				assert.Zero(t, api.Stats().Total.Throttled)
				assert.LessOrEqual(t, took.Seconds(), 1.2*bare.Seconds(), "as fast as the workers go, but for the first second")
				var told bool
				for _, e := range paces() {
					told = told || e.Reason == "quota headers: bucket"
				}
				assert.True(t, told, "told a bucket")
			})
		})
	}
}

// A bucket told by headers whose answers then stop carrying them (a cache
// in front, an endpoint that sends none) does not hold the key for ever:
// the requests sent since the last reading, counted against a bucket that
// as counted never refills, are taken to have spent it, and it refills
// from there (regression, found in review: every request waited, nothing
// on the wire, for minutes).
func TestBucketWhoseHeadersStopDoesNotHoldTheKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int64
		rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
			time.Sleep(time.Millisecond)
			i := n.Add(1)
			if i <= 40 { // a bucket of 20, 100 a second, told while it is drawn down
				return reply(r, http.StatusOK, "X-RateLimit-Limit", "20",
					"X-RateLimit-Remaining", fmt.Sprint(max(0, 20-i/2)), "X-RateLimit-Reset", "1"), nil
			}
			return reply(r, http.StatusOK), nil // no headers from here on
		}))
		defer rt.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		start := time.Now()
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				for i := range 50 {
					if !assert.NoError(t, doCtx(t, ctx, rt, fmt.Sprint("http://h.test/", w, "/", i))) {
						return
					}
				}
			})
		}
		wg.Wait()
		t.Logf("400 requests took %v", time.Since(start))
	})
}

// A server whose clock is off by a few seconds writes its absolute times
// (an HTTP-date Retry-After, a Unix-time reset) by its own clock; its Date
// field shows which, and they are counted from it (regression, found in
// review: 3 s ahead, a window of 100 a second took 2.3-3.9x the ideal,
// every wait 3 s too long; 3 s behind, 1.1-1.5x with 3-6% of the requests
// refused, each retry sent before the reset).
func TestServerClockIsReadFromItsDate(t *testing.T) {
	for _, tt := range []struct {
		name string
		skew time.Duration // the server's clock is behind the client's by this
		told bool          // the reset is a Unix time in X-RateLimit-Reset on every answer; else Retry-After is a date
	}{
		{"reset/ahead", -3 * time.Second, true},
		{"reset/behind", 3 * time.Second, true},
		{"retry-after/ahead", -3 * time.Second, false},
		{"retry-after/behind", 3 * time.Second, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := throttletest.Config{Limits: []throttletest.Limit{quotaWindow},
					XRateLimit: tt.told, HeadersOnSuccess: tt.told, RetryAfter: throttletest.RetryAfterDate}
				api := throttletest.NewAPI(nearby(cfg, 1))
				rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
					resp, err := api.RoundTrip(r)
					if err != nil {
						return nil, err
					}
					// The same answer, its times written by the server's clock.
					srv := time.Now().Add(-tt.skew)
					resp.Header.Set("Date", srv.UTC().Format(http.TimeFormat))
					if d, err := strconv.Atoi(resp.Header.Get("X-RateLimit-Reset")); err == nil {
						resp.Header.Set("X-RateLimit-Reset", fmt.Sprint(srv.Add(time.Duration(d)*time.Second).Unix()))
					}
					if d, err := http.ParseTime(resp.Header.Get("Retry-After")); err == nil {
						resp.Header.Set("Retry-After", d.Add(-tt.skew).Format(http.TimeFormat))
					}
					return resp, nil
				}))
				defer rt.Close()
				windowJobHolds(t, rt, api)
			})
		})
	}
}

// Shopify's call limit ("X-Shopify-Shop-Api-Call-Limit: 32/40") says how
// full a leaky bucket is and never when it empties: spent, the key waits
// for the answers on their way to read it again, rather than letting every
// waiting request go (regression, found in review: one 429 per worker, 8 of
// 308 requests, where a transport told the quota drew none).
func TestShopifyCallLimitHoldsTheKeyWhenFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const depth, leak = 40, 2.0 // Shopify's standard plan
		var mu sync.Mutex
		var level float64
		var last time.Time
		var refused int
		rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
			time.Sleep(25 * time.Millisecond)
			mu.Lock()
			now := time.Now()
			if !last.IsZero() {
				level = max(0, level-now.Sub(last).Seconds()*leak)
			}
			last = now
			status := http.StatusOK
			if level+1 > depth {
				status = http.StatusTooManyRequests
				refused++
			} else {
				level++
			}
			used := fmt.Sprintf("%d/%d", int(math.Ceil(level)), depth)
			mu.Unlock()
			time.Sleep(25 * time.Millisecond)
			if status != http.StatusOK {
				return reply(r, status, "Retry-After", "2.0", "X-Shopify-Shop-Api-Call-Limit", used), nil
			}
			return reply(r, status, "X-Shopify-Shop-Api-Call-Limit", used), nil
		}))
		defer rt.Close()
		took := job(t, rt, 300)
		ideal := 130 * time.Second // (300 - 40) / 2
		t.Logf("took %v (%.3fx the ideal), %d refused", took, took.Seconds()/ideal.Seconds(), refused)
		assert.LessOrEqual(t, refused, 2, "0.5% at most")
		assert.LessOrEqual(t, took.Seconds(), 1.05*ideal.Seconds())
	})
}

// Huge figures in quota headers (a Remaining of 4,102,444,800 read two
// answers before a Limit of 3, 5xx answers around them) do not make a
// waiting request spin: the mirror measured a bucket refilling 6.6e9 a
// second, 3 deep, 2 of ours sent since its last reading, and told the
// head to wake a nanosecond later at every turn, for a second of the
// bubble's time (regression, found in review: see
// TestBucketShortOfTheHeadWakesItOnlyWhenSomethingChanges). The guard is
// real time, as the old code never lets the bubble's clock reach any
// bound in it: it failed after 10 s; the job now takes milliseconds.
func TestHugeQuotaFiguresDoNotSpinAWait(t *testing.T) {
	answers := []struct {
		status int
		kv     []string
	}{
		{200, []string{"X-RateLimit-Remaining", "3"}},
		{500, []string{"X-Rate-Limit-Remaining", "9223372036854"}},
		{502, nil},
		{200, []string{"X-RateLimit-Remaining", "3"}},
		{500, nil},
		{503, nil},
		{504, nil},
		{200, []string{"RateLimit-Remaining", "4102444800"}},
		{503, nil},
		{503, []string{"X-RateLimit-Limit", "3", "X-RateLimit-Remaining", "2"}},
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		synctest.Test(t, func(t *testing.T) {
			var n atomic.Int64
			rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
				if k := int(n.Add(1)) - 1; k < len(answers) {
					return reply(r, answers[k].status, answers[k].kv...), nil
				}
				return reply(r, http.StatusOK), nil
			}), throttle.WithPolicy(throttle.Policy{Rate: 10, Burst: 5}),
				throttle.WithRetry(throttle.Retry{MaxAttempts: 4, NewBackOff: func() backoff.BackOff {
					return backoff.NewConstantBackOff(250 * time.Millisecond)
				}}))
			defer rt.Close()
			start := time.Now()
			for range 12 {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				_ = doCtx(t, ctx, rt, "http://h.test/")
				cancel()
			}
			t.Logf("12 requests took %v", time.Since(start))
		})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a request's wait spins: 10 s of real time did not see 12 requests through")
	}
}

// A key that others starve on a short window told in whole seconds is
// tried at another point of the window once it has been refused in three
// windows in a row: its whole-second Retry-After woke it at the same
// point of every window, after another client had spent each (here from
// x.15 to x.55 of each second), and its request gave up after 8 attempts
// (regression: the two transports of
// TestTwoTransportsOnASmallQuotaNeitherStarves, about one run in a
// hundred of 8 jobs on the window of 5 a second).
func TestAKeyStarvedAtOnePointOfAWindowTriesAnother(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var attempts int
		_, status := starvedKey(t, func(e throttle.Event) {
			if e.Kind == throttle.EventAnswered {
				attempts++
			}
		})
		took := time.Since(start)
		t.Logf("%d attempts, done at %v", attempts, took)
		assert.Equal(t, []int{http.StatusOK, http.StatusOK}, status, "the second request, refused at x.60 of each second, where the other client has spent it, still goes through")
		assert.Less(t, took, 4500*time.Millisecond, "refused in three windows, then tried half a window later (4.1 s)")
	})
}

// A starved key's shift is not counted against MaxRetryAfter, the longest
// wait asked by the server that is honoured: the server asked for a
// second, and the key's own half window more fails no request (found in
// review: with MaxRetryAfter of a second, the shifted pause of 1.5 s
// failed every request at once with ErrPaused, and the starved one gave up
// with its 429).
func TestAStarvedKeysShiftIsNotCountedAgainstMaxRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var refused []error
		pauses, status := starvedKey(t, func(e throttle.Event) {
			if e.Kind == throttle.EventRefused {
				refused = append(refused, e.Err)
			}
		}, throttle.WithRetry(throttle.Retry{MaxRetryAfter: time.Second}))
		t.Logf("statuses %v, EventPaused pauses %v", status, pauses)
		assert.Equal(t, []int{http.StatusOK, http.StatusOK}, status)
		assert.Empty(t, refused)
		assert.Contains(t, pauses, 1500*time.Millisecond, "the shifted pause")
	})
}

// starvedKey runs TestAKeyStarvedAtOnePointOfAWindowTriesAnother's
// scenario (another client spends each second's window of 5 from x.15 on;
// ours asks at x.60, refused there window after window) through rt's
// options; it returns the pauses of EventPaused, from the refused answer
// to Until, and the statuses.
func starvedKey(t *testing.T, onEvent func(throttle.Event), opts ...throttle.Option) (pauses []time.Duration, status []int) {
	start := time.Now()
	api := throttletest.NewAPI(throttletest.Config{Limits: []throttletest.Limit{{Algorithm: throttletest.FixedWindow, N: 5, Per: time.Second}},
		XRateLimit: true, HeadersOnSuccess: true})
	ctx, cancel := context.WithCancel(t.Context())
	var other sync.WaitGroup
	other.Go(func() {
		for w := time.Duration(0); ; w += time.Second {
			for i := range time.Duration(5) {
				time.Sleep(time.Until(start.Add(w + 150*time.Millisecond + i*100*time.Millisecond)))
				if ctx.Err() != nil {
					return
				}
				req := newReq(t, ctx, http.MethodGet, "http://api.test/other")
				req.Header.Set("X-API-Key", "k")
				if resp, err := api.RoundTrip(req); err == nil {
					resp.Body.Close()
				}
			}
		}
	})
	var mu sync.Mutex
	opts = append(opts, throttle.WithEvents(func(e throttle.Event) {
		if onEvent != nil {
			onEvent(e)
		}
		if e.Kind == throttle.EventPaused {
			mu.Lock()
			pauses = append(pauses, time.Until(e.Until))
			mu.Unlock()
		}
	}))
	rt := throttle.New(api, opts...)
	defer rt.Close()
	for _, at := range []time.Duration{50 * time.Millisecond, 600 * time.Millisecond} {
		time.Sleep(time.Until(start.Add(at)))
		req := newReq(t, ctx, http.MethodGet, "http://api.test/ours")
		req.Header.Set("X-API-Key", "k")
		resp, err := rt.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
		status = append(status, resp.StatusCode)
	}
	cancel()
	other.Wait()
	return pauses, status
}

// slowLog is a Store that records what it is told through Slow.
type slowLog struct {
	*throttle.MemoryStore
	mu    sync.Mutex
	slows []throttle.Slowdown
}

func (s *slowLog) Slow(ctx context.Context, key string, p throttle.Policy, d throttle.Slowdown) error {
	s.mu.Lock()
	s.slows = append(s.slows, d)
	s.mu.Unlock()
	return s.MemoryStore.Slow(ctx, key, p, d)
}

// The half window a starved key waits beyond its Retry-After is its own
// try at another point of the window (see told.shifted): the Store is told
// the Retry-After alone, and another Transport of the key, never refused,
// asks and goes once it has passed. (Regression, found in review: told the
// shifted end, every Transport of the key paused half a window past the
// server's reset, and the phase the starved key was to change moved with
// all.)
func TestAStarvedKeysShiftIsNotSharedThroughTheStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		st := &slowLog{MemoryStore: throttle.NewMemoryStore()}
		pol := throttle.WithPolicy(throttle.Policy{Windows: []throttle.Window{{N: 5, Per: time.Second}}})
		// Another Transport of the key, through the same Store, asks at
		// 3.62 s: after the Retry-After of ours refused at 2.6 s.
		var bSent atomic.Int64
		b := throttle.New(rtFunc(func(req *http.Request) (*http.Response, error) {
			bSent.CompareAndSwap(0, int64(time.Since(start)))
			return reply(req, http.StatusOK), nil
		}), throttle.WithStore(st), pol)
		defer b.Close()
		var wg sync.WaitGroup
		wg.Go(func() {
			time.Sleep(3620 * time.Millisecond)
			req := newReq(t, t.Context(), http.MethodGet, "http://api.test/b")
			req.Header.Set("X-API-Key", "k")
			resp, err := b.RoundTrip(req)
			if assert.NoError(t, err) {
				resp.Body.Close()
			}
		})
		pauses, status := starvedKey(t, nil, throttle.WithStore(st), pol)
		wg.Wait()
		t.Logf("statuses %v, EventPaused pauses %v, Store told %+v; the other Transport's request, asked at 3.62 s, sent at %v",
			status, pauses, st.slows, time.Duration(bSent.Load()))
		assert.Equal(t, []int{http.StatusOK, http.StatusOK}, status)
		require.NotEmpty(t, st.slows)
		for _, s := range st.slows {
			assert.LessOrEqual(t, s.Pause, time.Second, "the Store was told a pause longer than the server's Retry-After: 1")
		}
		assert.Less(t, time.Duration(bSent.Load()), 3700*time.Millisecond,
			"the other Transport, never refused, was held past the Retry-After (3.6 s) to ours's shifted end")
	})
}
