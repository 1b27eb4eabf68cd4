package throttle

import (
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

// A key that sends faster than one request a millisecond times the answer
// to one a millisecond, after its first minSamples, not every answer (the
// clock read was about a sixth of what throttle added to a paced request).
// Its round trips are learned as well: each sample is one. A key with windows
// times every answer: they count each request until its answer.
func TestRoundTripsAreSampledEveryMillisecond(t *testing.T) {
	const rtt = 100 * time.Microsecond
	tests := []struct {
		name string
		opts []Option
		all  bool // every answer timed
	}{
		{"unpaced", nil, false},
		{"paced", []Option{WithPolicy(Policy{Rate: 1e6, Burst: 1 << 20})}, false},
		{"window", []Option{WithPolicy(Policy{Rate: 1e6, Burst: 1 << 20, Windows: []Window{{N: 1 << 20, Per: time.Hour}}})}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rt := New(roundTripFunc(func(*http.Request) (*http.Response, error) {
					time.Sleep(rtt)
					return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody}, nil
				}), tt.opts...)
				defer rt.Close()
				req, err := http.NewRequest(http.MethodGet, "http://a.test/", nil)
				require.NoError(t, err)
				const n = 1000 // one every rtt: 10 a millisecond
				for range n {
					resp, err := rt.RoundTrip(req)
					require.NoError(t, err)
					resp.Body.Close()
				}
				ks := rt.cfg.def.cur.Load().keys.load("a.test")
				ks.mu.Lock()
				lat := ks.lat
				ks.mu.Unlock()
				if tt.all {
					require.Equal(t, n, lat.samples)
				} else {
					// One a millisecond at least, a tenth of them (and
					// those whose quota headers are read: see wantsQuota).
					require.GreaterOrEqual(t, lat.samples, n/10)
					require.Less(t, lat.samples, n/5)
				}
				require.Equal(t, rtt, lat.srtt, "every sample is a round trip")
				require.Zero(t, lat.rttvar)
			})
		})
	}
}

// An answer not timed at its admission is timed all the same when the key
// met trouble while it was on its way: a key in trouble learns from when
// each answer came (here, its round trip: 50 ms, not none).
func TestAnswerIsTimedWhenTroubleCameMeanwhile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := New(roundTripFunc(func(req *http.Request) (*http.Response, error) {
			switch req.URL.Path {
			case "/slow":
				time.Sleep(50 * time.Millisecond)
			case "/refused":
				return &http.Response{StatusCode: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"1"}}, Body: http.NoBody}, nil
			}
			return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody}, nil
		}), WithRetry(Retry{MaxAttempts: 1}))
		defer rt.Close()
		send := func(path string) {
			req, err := http.NewRequest(http.MethodGet, "http://a.test"+path, nil)
			require.NoError(t, err)
			resp, err := rt.RoundTrip(req)
			require.NoError(t, err)
			resp.Body.Close()
		}
		for range max(minSamples, hdrTries) + 1 { // timed, and read for quota headers
			send("/")
		}
		ks := rt.cfg.def.cur.Load().keys.load("a.test")
		ks.mu.Lock()
		before := ks.lat.samples
		ks.mu.Unlock()
		done := make(chan struct{})
		go func() {
			defer close(done)
			send("/slow") // within the millisecond: not timed
		}()
		synctest.Wait() // on its way
		send("/refused")
		<-done
		ks.mu.Lock()
		defer ks.mu.Unlock()
		require.NotNil(t, ks.tr, "the 429 is trouble")
		require.Equal(t, before+2, ks.lat.samples, "the 429's round trip, and the slow one's")
		require.Greater(t, ks.lat.srtt, time.Duration(0))
	})
}
