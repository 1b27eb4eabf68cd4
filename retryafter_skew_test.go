package throttle_test

import (
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/throttlehttp/throttle"
)

// A server whose clock is 30 s behind the client's answers a slow first
// request (4 s between its sending and the server reading its clock: an
// upload, a queue, a long computation) with a 429 whose Retry-After is an
// HTTP-date 5 s on by the server's clock; its Date says the skew. The retry
// must not reach the server before that date.
func TestARetryReachesASkewedSlowServerNoSoonerThanItsDate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const skew = 30 * time.Second // the server's clock is behind by this
		var mu sync.Mutex
		var notBefore time.Time // by the server's clock
		var early []time.Duration
		attempts := 0
		rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			attempts++
			first := attempts == 1
			mu.Unlock()
			if first {
				time.Sleep(4 * time.Second) // the slow part, before the server answers
			}
			srv := time.Now().Add(-skew)
			mu.Lock()
			defer mu.Unlock()
			if !notBefore.IsZero() && srv.Before(notBefore) {
				early = append(early, notBefore.Sub(srv))
			}
			if first {
				notBefore = srv.Add(5 * time.Second)
				return reply(r, http.StatusTooManyRequests,
					"Date", srv.UTC().Format(http.TimeFormat),
					"Retry-After", notBefore.UTC().Format(http.TimeFormat)), nil
			}
			return reply(r, http.StatusOK, "Date", srv.UTC().Format(http.TimeFormat)), nil
		}))
		defer rt.Close()
		require.NoError(t, do(t, rt, "http://api.example/a"))
		mu.Lock()
		defer mu.Unlock()
		require.GreaterOrEqual(t, attempts, 2)
		require.Empty(t, early, "attempts reached the server this long before its Retry-After date")
	})
}
