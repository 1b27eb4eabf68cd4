package throttle_test

import (
	"context"
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

// A request waiting in its key's line behind another, whose deadline the
// key's answer puts out of reach while it waits, fails then, with
// ErrWouldExceedDeadline and when its turn comes, as a request arriving at
// that moment does: not at its deadline with the context's error.
// Policy{Rate: 1, Burst: 1}: A takes the token at 0 and is answered at
// 0.1 s; B (no deadline) waits for the token at 1 s, C (deadline 5 s)
// behind it for 2 s. A's answer holds the key until 60.1 s.
func TestWaiterBehindHeadFailsWhenTheKeyIsHeldPastItsDeadline(t *testing.T) {
	for _, tc := range []struct {
		name  string
		first []string // A's answer's header
		code  int
	}{
		{"429 Retry-After 60", []string{"Retry-After", "60"}, http.StatusTooManyRequests},
		{"200 quota spent until 60 s", []string{"X-RateLimit-Limit", "1", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "60"}, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var n atomic.Int32
				base := rtFunc(func(req *http.Request) (*http.Response, error) {
					time.Sleep(100 * time.Millisecond)
					if n.Add(1) == 1 {
						return reply(req, tc.code, tc.first...), nil
					}
					return reply(req, http.StatusOK), nil
				})
				rt := throttle.New(base, throttle.WithPolicy(throttle.Policy{Rate: 1, Burst: 1}))
				defer rt.Close()
				start := time.Now()
				var wg sync.WaitGroup
				send := func(path string) { // A, then B: no deadline
					wg.Add(1)
					go func() {
						defer wg.Done()
						resp, err := rt.RoundTrip(newReq(t, context.Background(), http.MethodGet, "http://api.test/"+path))
						if err == nil {
							resp.Body.Close()
						}
					}()
					synctest.Wait()
				}
				send("a")
				send("b")
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_, err := rt.RoundTrip(newReq(t, ctx, http.MethodGet, "http://api.test/c"))
				took := time.Since(start)
				require.Error(t, err)
				assert.ErrorIs(t, err, throttle.ErrWouldExceedDeadline, "err: %v", err)
				assert.Less(t, took, time.Second, "failed after %v: %v", took, err)
				var we *throttle.WaitError
				if assert.ErrorAs(t, err, &we) {
					assert.False(t, we.Until.Before(start.Add(60100*time.Millisecond)), "err: %v", err)
				}
				wg.Wait()
			})
		})
	}
}
