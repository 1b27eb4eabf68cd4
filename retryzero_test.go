package throttle_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlehttp/throttle"
)

// "Retry-After: 0" asks for no wait: the key pauses for no longer than a
// refusal that states none (a second), whatever the refused request's own
// backoff. A request refused twelve times so, on a configured pace, paused
// its key for its backoff instead, up to MaxDelay (30 s), each pause shown
// with Source "Retry-After"; the other requests waited it out.
func TestRetryAfterZeroDoesNotPauseTheKeyForTheRequestsBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := rtFunc(func(req *http.Request) (*http.Response, error) {
			time.Sleep(20 * time.Millisecond)
			if req.URL.Path == "/a" {
				return reply(req, http.StatusTooManyRequests, "Retry-After", "0"), nil
			}
			return reply(req, http.StatusOK), nil
		})
		var mu sync.Mutex
		var longest time.Duration
		rt := throttle.New(base, throttle.WithPolicy(throttle.Policy{Rate: 10, Burst: 5}),
			throttle.WithRetry(throttle.Retry{MaxAttempts: 12}),
			throttle.WithEvents(func(e throttle.Event) {
				if e.Kind == throttle.EventPaused {
					mu.Lock()
					longest = max(longest, time.Until(e.Until))
					mu.Unlock()
				}
			}))
		defer rt.Close()
		resp, err := rt.RoundTrip(newReq(t, context.Background(), http.MethodGet, "http://api.test/a"))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
		assert.LessOrEqual(t, longest, time.Second, "the key paused %v for a Retry-After of 0", longest)

		// The other requests of the key are not held by it: B goes at once.
		start := time.Now()
		resp, err = rt.RoundTrip(newReq(t, context.Background(), http.MethodGet, "http://api.test/b"))
		require.NoError(t, err)
		resp.Body.Close()
		assert.LessOrEqual(t, time.Since(start), time.Second+20*time.Millisecond, "B waited %v", time.Since(start))
	})
}

// downStore books the first departure, then is out of reach (redisstore's
// FailClosed with Redis down).
type downStore struct{ n atomic.Int32 }

func (s *downStore) Reserve(context.Context, string, throttle.Policy, int, time.Duration) (throttle.Reservation, error) {
	if s.n.Add(1) > 1 {
		return throttle.Reservation{}, fmt.Errorf("%w: connection refused", throttle.ErrStoreUnavailable)
	}
	return throttle.Reservation{OK: true}, nil
}

func (s *downStore) Slow(context.Context, string, throttle.Policy, throttle.Slowdown) error {
	return nil
}

// A retry the Store refuses at once (unreachable, FailClosed) ends
// retrying as a retry refused at once at the key does: the caller gets the
// 503 it obtained, err == nil, as Transport's doc promises, not the Store's
// error with the response lost.
func TestARetryTheStoreRefusesGivesTheLastResponse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := rtFunc(func(req *http.Request) (*http.Response, error) {
			return reply(req, http.StatusServiceUnavailable), nil
		})
		rt := throttle.New(base, throttle.WithPolicy(throttle.Policy{Rate: 10, Burst: 5}), throttle.WithStore(&downStore{}))
		defer rt.Close()
		resp, err := rt.RoundTrip(newReq(t, context.Background(), http.MethodGet, "http://api.test/a"))
		require.NoError(t, err)
		defer resp.Body.Close()
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	})
}
