package throttle_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlehttp/throttle"
)

// lateStore is a Store a round trip away: each call reaches the Store
// behind it after 200 ms. It logs the Reserve calls it forwards.
type lateStore struct {
	throttle.Store
	mu    sync.Mutex
	calls []string
}

func (s *lateStore) Reserve(ctx context.Context, key string, p throttle.Policy, n int, maxWait time.Duration) (throttle.Reservation, error) {
	time.Sleep(200 * time.Millisecond)
	res, err := s.Store.Reserve(ctx, key, p, n, maxWait)
	s.mu.Lock()
	s.calls = append(s.calls, fmt.Sprintf("%s n=%d ok=%v paused=%v wait=%v", time.Now().Format("05.000"), n, res.OK, res.Paused, res.Wait))
	s.mu.Unlock()
	return res, err
}

// Another process's 10 s pause ends while a Transport a round trip from
// the Store asks about a request of Cost(9) (at 0.01 a second, its
// departure 800 s past the pause's end, too far: ErrPaused). The one-unit
// departure it then asks about, to learn the pause's end, finds the pause
// over: the key is not paused here, and a request of cost 1 a second later
// goes (regression, found in review: the key was paused to the costly
// request's departure, 16m40s, and that request failed at once with
// ErrPaused, though no pause held the key anywhere).
func TestAPauseEndingWhileACostlyRequestAsksHoldsTheKeyNoLonger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := throttle.NewMemoryStore()
		p := throttle.Policy{Rate: 0.01, Burst: 10}
		a := throttle.New(rtFunc(func(req *http.Request) (*http.Response, error) {
			return reply(req, http.StatusTooManyRequests, "Retry-After", "10"), nil
		}), throttle.WithStore(mem), throttle.WithPolicy(p))
		defer a.Close()
		store := &lateStore{Store: mem}
		rec := newRecorder()
		b := throttle.New(rec, throttle.WithStore(store), throttle.WithPolicy(p))
		defer b.Close()
		start := time.Now()
		_ = doCtx(t, throttle.With(context.Background(), throttle.NoRetry()), a, "http://api.example.com/a")
		time.Sleep(9700 * time.Millisecond) // B's first call reaches the Store at 9.9 s, its second at 10.1 s
		err := doCtx(t, throttle.With(context.Background(), throttle.Cost(9), throttle.NoRetry()), b, "http://api.example.com/batch")
		require.ErrorIs(t, err, throttle.ErrPaused)
		t.Logf("store calls: %v", store.calls)
		time.Sleep(time.Second)
		err = doCtx(t, throttle.With(context.Background(), throttle.NoRetry()), b, "http://api.example.com/one")
		assert.NoError(t, err, "at %v: the pause ended at 10 s", time.Since(start))
	})
}

// hourPausedStore says another's pause of an hour holds every departure; a call
// about one unit is answered after a second.
type hourPausedStore struct{}

func (hourPausedStore) Reserve(ctx context.Context, _ string, _ throttle.Policy, n int, maxWait time.Duration) (throttle.Reservation, error) {
	if n == 1 {
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
			return throttle.Reservation{}, ctx.Err()
		}
	}
	return throttle.Reservation{Paused: true, Wait: time.Hour}, nil
}

func (hourPausedStore) Slow(context.Context, string, throttle.Policy, throttle.Slowdown) error {
	return nil
}

// Close while a request of Cost(9) asks the Store the end of another's
// pause: the request fails with ErrClosed, as every request waiting for
// its turn does at Close (regression, found in review: ErrPaused, and the
// key paused an hour).
func TestCloseWhileACostlyRequestAsksThePausesEndIsErrClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := throttle.New(newRecorder(), throttle.WithPolicy(throttle.Policy{Rate: 1, Burst: 10}), throttle.WithStore(hourPausedStore{}))
		go func() {
			time.Sleep(500 * time.Millisecond)
			rt.Close()
		}()
		err := doCtx(t, throttle.With(context.Background(), throttle.Cost(9), throttle.NoRetry()), rt, "http://api.example.com/batch")
		assert.ErrorIs(t, err, throttle.ErrClosed, "%v", err)
	})
}
