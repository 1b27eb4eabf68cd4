package throttletest_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlehttp/throttle/throttletest"
)

func TestRequestWithoutKeyGets401(t *testing.T) {
	synctest.Test(t, testRequestWithoutKeyGets401)
}

func testRequestWithoutKeyGets401(t *testing.T) {
	api := throttletest.NewAPI(throttletest.Config{KeyHeader: "X-Token"})
	r := get(t, api, "k") // sends X-API-Key, which this API does not read
	assert.Equal(t, http.StatusUnauthorized, r.code)
	assert.JSONEq(t, `{"ok":false,"error":"missing API key"}`, r.body)

	req, _ := http.NewRequest(http.MethodGet, target, nil)
	req.Header.Set("X-Token", "k")
	assert.Equal(t, http.StatusOK, roundTrip(t, api, req).code)
	req.Header = http.Header{"Authorization": {"Bearer k"}}
	assert.Equal(t, http.StatusOK, roundTrip(t, api, req).code)

	s := api.Stats()
	assert.Equal(t, int64(1), s.Total.Unauthorized)
	assert.Equal(t, throttletest.Counts{Requests: 2, Accepted: 2, PeakPerSecond: 2, PeakInFlight: 1}, s.Keys["k"])
}

func TestAcceptedRequestGets200WithJSON(t *testing.T) {
	api := throttletest.NewAPI(throttletest.Config{})
	for _, method := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete} {
		req, _ := http.NewRequest(method, target, strings.NewReader("x"))
		req.Header.Set("X-API-Key", "k")
		r := roundTrip(t, api, req)
		assert.Equal(t, http.StatusOK, r.code, method)
		assert.Equal(t, "application/json", r.header.Get("Content-Type"))
		assert.JSONEq(t, `{"ok":true}`, r.body)
	}
	req, _ := http.NewRequest(http.MethodHead, target, nil)
	req.Header.Set("X-API-Key", "k")
	r := roundTrip(t, api, req)
	assert.Equal(t, http.StatusOK, r.code)
	assert.Empty(t, r.body)
}

func TestUnavailableShareIsSeeded(t *testing.T) {
	codes := func(api *throttletest.API) []int {
		var cs []int
		for range 400 {
			cs = append(cs, get(t, api, "k").code)
		}
		return cs
	}
	cfg := throttletest.Config{Unavailable: 0.25, Seed: 7, UnavailableRetryAfter: 3 * time.Second}
	api := throttletest.NewAPI(cfg)
	first := codes(api)
	s := api.Stats().Total
	assert.InDelta(t, 100, s.Unavailable, 30, "about a quarter")
	assert.Equal(t, int64(400), s.Unavailable+s.Accepted)

	assert.Equal(t, first, codes(throttletest.NewAPI(cfg)), "same seed, same answers")
	api.Reset()
	assert.Equal(t, first, codes(api), "Reset restarts the draws")
	cfg.Seed = 8
	assert.NotEqual(t, first, codes(throttletest.NewAPI(cfg)))

	cfg.Unavailable = 1
	r := get(t, throttletest.NewAPI(cfg), "k")
	assert.Equal(t, http.StatusServiceUnavailable, r.code)
	assert.Equal(t, "3", r.header.Get("Retry-After"))
}

// Refused answers a share of requests 429 at random, seeded, with a
// Retry-After of a second and no quota headers, before the quotas see them:
// they spend none.
func TestRefusedShareIsSeededAndSpendsNoQuota(t *testing.T) {
	cfg := throttletest.Config{Refused: 0.25, Seed: 7, XRateLimit: true, HeadersOnSuccess: true,
		Limits: []throttletest.Limit{{Algorithm: throttletest.FixedWindow, N: 1000, Per: time.Hour}}}
	api := throttletest.NewAPI(cfg)
	var codes []int
	remaining := ""
	for range 400 {
		r := get(t, api, "k")
		codes = append(codes, r.code)
		switch r.code {
		case http.StatusTooManyRequests:
			assert.Equal(t, "1", r.header.Get("Retry-After"))
			assert.False(t, has(r.header, "X-Ratelimit-Remaining"), "a gateway's 429 knows no quota")
		case http.StatusOK:
			remaining = r.header.Get("X-RateLimit-Remaining")
		}
	}
	s := api.Stats().Total
	assert.InDelta(t, 100, s.Throttled, 30, "about a quarter")
	assert.Equal(t, int64(400), s.Throttled+s.Accepted)
	assert.Equal(t, fmt.Sprint(1000-s.Accepted), remaining, "the quota counted the accepted alone")
	var again []int
	other := throttletest.NewAPI(cfg)
	for range 400 {
		again = append(again, get(t, other, "k").code)
	}
	assert.Equal(t, codes, again, "same seed, same answers")
}

func TestLatencyDelaysWithinItsRange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := throttletest.NewAPI(throttletest.Config{Latency: 2 * time.Second, LatencyJitter: time.Second, Seed: 1})
		var delays []time.Duration
		for range 50 {
			start := time.Now()
			assert.Equal(t, http.StatusOK, get(t, api, "k").code)
			d := time.Since(start)
			assert.GreaterOrEqual(t, d, 2*time.Second)
			assert.Less(t, d, 3*time.Second)
			delays = append(delays, d)
		}
		assert.NotEqual(t, delays[0], delays[1], "jittered")
	})
}

func TestLatencyHonoursTheContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := throttletest.NewAPI(throttletest.Config{Latency: time.Minute})
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
		req.Header.Set("X-API-Key", "k")
		start := time.Now()
		resp, err := api.RoundTrip(req)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Nil(t, resp)
		assert.Equal(t, time.Second, time.Since(start))
		assert.Equal(t, int64(1), api.Stats().Total.Canceled)
	})
}

func TestQueueWaitHonoursTheContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := throttletest.NewAPI(throttletest.Config{Limits: []throttletest.Limit{
			{Algorithm: throttletest.LeakyBucket, Rate: 0.01, Queue: 1}, // one every 100s
		}})
		assert.Equal(t, http.StatusOK, get(t, api, "k").code)
		ctx, cancel := context.WithCancel(t.Context())
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
		req.Header.Set("X-API-Key", "k")
		var wg sync.WaitGroup
		wg.Go(func() {
			_, err := api.RoundTrip(req)
			assert.ErrorIs(t, err, context.Canceled)
		})
		time.Sleep(time.Second)
		cancel()
		wg.Wait()
		assert.Equal(t, throttletest.Counts{
			Requests: 2, Accepted: 1, Canceled: 1, PeakPerSecond: 1, PeakInFlight: 1,
		}, api.Stats().Total)
	})
}

// body records whether it was closed and how much was read.
type body struct {
	io.Reader
	mu     sync.Mutex
	closed bool
}

func (b *body) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	return nil
}

func (b *body) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

func TestRoundTripKeepsTheTransportContract(t *testing.T) {
	api := throttletest.NewAPI(throttletest.Config{})
	t.Run("reads-and-closes-the-body", func(t *testing.T) {
		b := &body{Reader: strings.NewReader("hello")}
		req, _ := http.NewRequest(http.MethodPost, target, b)
		req.Header.Set("X-API-Key", "k")
		orig := req.Clone(req.Context())
		r := roundTrip(t, api, req)
		assert.Equal(t, http.StatusOK, r.code)
		assert.True(t, b.isClosed())
		assert.Equal(t, orig.Header, req.Header, "the request is not modified")
		assert.Equal(t, orig.URL, req.URL)
	})
	t.Run("closes-the-body-on-errors", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		b := &body{Reader: strings.NewReader("hello")}
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, target, b)
		_, err := api.RoundTrip(req)
		assert.ErrorIs(t, err, context.Canceled)
		assert.True(t, b.isClosed())
	})
	t.Run("body-read-error", func(t *testing.T) {
		b := &body{Reader: io.MultiReader(strings.NewReader("abc"), errReader{})}
		req, _ := http.NewRequest(http.MethodPost, target, b)
		req.Header.Set("X-API-Key", "k")
		_, err := api.RoundTrip(req)
		assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
		assert.True(t, b.isClosed())
	})
	t.Run("response-is-complete", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, target, nil)
		req.Header.Set("X-API-Key", "k")
		resp, err := api.RoundTrip(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		assert.Equal(t, "200 OK", resp.Status)
		assert.Equal(t, 1, resp.ProtoMajor)
		assert.Same(t, req, resp.Request)
		assert.Equal(t, int64(len(`{"ok":true}`+"\n")), resp.ContentLength)
	})
	t.Run("works-as-client-transport", func(t *testing.T) {
		client := &http.Client{Transport: api}
		resp, err := client.Get(target)
		require.NoError(t, err)
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
		assert.NoError(t, resp.Body.Close())
	})
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }

func TestNewAPIPanicsOnConfigsThatCannotWork(t *testing.T) {
	tests := map[string]throttletest.Config{
		"bucket-without-rate":   {Limits: []throttletest.Limit{{Algorithm: throttletest.TokenBucket}}},
		"rate-too-small":        {Limits: []throttletest.Limit{{Algorithm: throttletest.TokenBucket, Rate: 1e-12}}},
		"negative-queue":        {Limits: []throttletest.Limit{{Algorithm: throttletest.LeakyBucket, Rate: 1, Queue: -1}}},
		"window-without-per":    {Limits: []throttletest.Limit{{Algorithm: throttletest.FixedWindow, N: 1}}},
		"log-without-n":         {Limits: []throttletest.Limit{{Algorithm: throttletest.SlidingLog, Per: time.Second}}},
		"concurrency-without-n": {Limits: []throttletest.Limit{{Algorithm: throttletest.Concurrency}}},
		"unknown-algorithm":     {Limits: []throttletest.Limit{{Algorithm: 99, N: 1}}},
		"name-not-ascii":        {Limits: []throttletest.Limit{{Algorithm: throttletest.Concurrency, N: 1, Name: "é"}}},
		"unavailable-over-1":    {Unavailable: 1.5},
		"negative-latency":      {Latency: -time.Second},
		"negative-arrival":      {ArrivalJitter: -time.Second},
		"outage-before-start":   {Outages: []throttletest.Outage{{Start: -time.Second, Duration: time.Second}}},
		"outage-without-length": {Outages: []throttletest.Outage{{Start: time.Second}}},
		"outage-negative-wait":  {Outages: []throttletest.Outage{{Duration: time.Second, RetryAfter: -time.Second}}},
		"outage-overflows":      {Outages: []throttletest.Outage{{Start: time.Duration(1 << 62), Duration: time.Duration(1 << 62)}}},
		"outage-status":         {Outages: []throttletest.Outage{{Duration: time.Second, Status: http.StatusOK}}},
	}
	for name, cfg := range tests {
		t.Run(name, func(t *testing.T) {
			assert.Panics(t, func() { throttletest.NewAPI(cfg) })
		})
	}
}
