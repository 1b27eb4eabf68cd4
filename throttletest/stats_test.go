package throttletest_test

import (
	"encoding/json"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlehttp/throttle/throttletest"
)

func post(t *testing.T, rt http.RoundTripper, key, payload string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, target, strings.NewReader(payload))
	require.NoError(t, err)
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	return roundTrip(t, rt, req).code
}

func TestStatsCountPerKeyAndInTotal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := throttletest.NewAPI(throttletest.Config{Limits: []throttletest.Limit{
			{Algorithm: throttletest.SlidingLog, N: 3, Per: time.Second},
		}})
		for range 4 {
			post(t, api, "a", "12345") // 3 accepted, 1 throttled
		}
		time.Sleep(500 * time.Millisecond)
		post(t, api, "b", "xy")
		post(t, api, "", "abc") // 401
		time.Sleep(500 * time.Millisecond)
		for range 3 {
			post(t, api, "a", "") // t=1s: the first 3 have expired
		}

		s := api.Stats()
		assert.Equal(t, throttletest.Counts{
			Requests: 7, Accepted: 6, Throttled: 1, BytesReceived: 20, PeakPerSecond: 3, PeakInFlight: 1,
		}, s.Keys["a"])
		assert.Equal(t, throttletest.Counts{
			Requests: 1, Accepted: 1, BytesReceived: 2, PeakPerSecond: 1, PeakInFlight: 1,
		}, s.Keys["b"])
		assert.Equal(t, throttletest.Counts{
			Requests: 9, Accepted: 7, Throttled: 1, Unauthorized: 1, BytesReceived: 25,
			PeakPerSecond: 4, // b at 0.5s and a's three at 1s
			PeakInFlight:  1,
		}, s.Total)
		assert.Len(t, s.Keys, 2)

		api.Reset()
		assert.Equal(t, throttletest.Stats{Keys: map[string]throttletest.Counts{}}, api.Stats())
		assert.Equal(t, http.StatusOK, post(t, api, "a", ""), "Reset makes every quota whole")
	})
}

func TestStatsEndpointOnALoopbackServer(t *testing.T) {
	srv := throttletest.NewServer(throttletest.Config{Limits: []throttletest.Limit{
		{Algorithm: throttletest.SlidingLog, N: 2, Per: time.Hour},
	}})
	defer srv.Close()
	client := srv.Client()

	var codes []int
	for range 3 {
		req, err := http.NewRequest(http.MethodPut, srv.URL+"/upload", strings.NewReader("data"))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer k")
		resp, err := client.Do(req)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		codes = append(codes, resp.StatusCode)
	}
	assert.Equal(t, []int{200, 200, 429}, codes)

	resp, err := client.Get(srv.URL + "/__stats")
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	var got throttletest.Stats
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&got))
	assert.Equal(t, srv.API.Stats(), got, "GET /__stats is not counted")
	assert.Equal(t, throttletest.Counts{
		Requests: 3, Accepted: 2, Throttled: 1, BytesReceived: 12, PeakPerSecond: 2, PeakInFlight: 1,
	}, got.Keys["k"])
}

func TestStatsJSONFieldNames(t *testing.T) {
	b, err := json.Marshal(throttletest.Stats{Keys: map[string]throttletest.Counts{"k": {Requests: 1}}})
	require.NoError(t, err)
	assert.JSONEq(t, `{
		"total": {"requests":0,"accepted":0,"throttled":0,"unavailable":0,"outage":0,"unauthorized":0,
		          "canceled":0,"bytes_received":0,"peak_per_second":0,"in_flight":0,"peak_in_flight":0},
		"keys": {"k": {"requests":1,"accepted":0,"throttled":0,"unavailable":0,"outage":0,"unauthorized":0,
		               "canceled":0,"bytes_received":0,"peak_per_second":0,"in_flight":0,"peak_in_flight":0}}
	}`, string(b))
}

func TestServerCloseCancelsWaitingRequests(t *testing.T) {
	srv := throttletest.NewServer(throttletest.Config{Latency: time.Hour})
	req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	req.Header.Set("X-API-Key", "k")
	var wg sync.WaitGroup
	wg.Go(func() {
		resp, err := srv.Client().Do(req) // waits out its hour until Close
		if err == nil {
			assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
			assert.NoError(t, resp.Body.Close())
		}
	})
	for srv.API.Stats().Total.InFlight == 0 {
		runtime.Gosched()
	}
	srv.Close()
	wg.Wait()
	assert.Equal(t, throttletest.Counts{Requests: 1, Canceled: 1, PeakInFlight: 1}, srv.API.Stats().Total)
}
