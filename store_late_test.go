package throttle_test

import (
	"context"
	"errors"
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

// farBookingStore books every departure a minute out (another process spent the
// shared quota), answering after 100 ms.
type farBookingStore struct{}

func (farBookingStore) Reserve(ctx context.Context, _ string, _ throttle.Policy, _ int, maxWait time.Duration) (throttle.Reservation, error) {
	time.Sleep(100 * time.Millisecond)
	res := throttle.Reservation{Wait: time.Minute}
	res.OK = res.Wait <= maxWait
	return res, nil
}

func (farBookingStore) Slow(context.Context, string, throttle.Policy, throttle.Slowdown) error {
	return nil
}

// A request that joined the line behind a head whose departure the Store
// then booked a minute out cannot go before that minute: once the booking
// is known, its wait ends after its 5 s deadline, and it fails then with
// ErrWouldExceedDeadline (README, Deadlines), as one arriving a moment
// later does (regression, found in review: it waited out its deadline and
// failed with the context's error).
func TestAWaiterBehindAHeadTheStoreBooksLateFailsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		rt := throttle.New(rec, throttle.WithPolicy(throttle.Policy{Rate: 1, Burst: 1}), throttle.WithStore(farBookingStore{}))
		defer rt.Close()
		start := time.Now()
		var wg sync.WaitGroup
		wg.Go(func() { // the head: no deadline, booked at 0.1 s for 60.1 s
			assert.NoError(t, do(t, rt, "http://api.example.com/head"))
		})
		time.Sleep(50 * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := doCtx(t, ctx, rt, "http://api.example.com/behind") // joins at 50 ms, before the booking is known
		took := time.Since(start)
		wg.Wait()
		require.Error(t, err)
		assert.ErrorIs(t, err, throttle.ErrWouldExceedDeadline, "failed at %v: %v", took, err)
		assert.LessOrEqual(t, took, 200*time.Millisecond, "failed at %v: %v", took, err)
		var we *throttle.WaitError
		if assert.True(t, errors.As(err, &we), "%v", err) {
			assert.Equal(t, throttle.LimitStore, we.Limit, "%v", err)
		}
	})
}

// A Transport that learns from the Store another's pause, too long to wait
// out, through a request of Cost(9), pauses its key to the pause's end,
// not to that request's departure (regression, found in review: 8 turns,
// 100 s at the pace A's 429 cut, past the pause's end, since the Store
// says the pause holds a departure of n units through those n-1 turns;
// a request of cost 1 after it, which the Store lets go at 620 s, was held
// until 700 s, or, its deadline at 650 s, failed at once).
func TestACostlyRequestRefusedForAnotherProcesssPauseDoesNotPauseTheKeyPastIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := throttle.NewMemoryStore()
		p := throttle.Policy{Rate: 0.1, Burst: 10}
		a := throttle.New(rtFunc(func(req *http.Request) (*http.Response, error) {
			return reply(req, http.StatusTooManyRequests, "Retry-After", "600"), nil
		}), throttle.WithStore(store), throttle.WithPolicy(p))
		defer a.Close()
		rec := newRecorder()
		b := throttle.New(rec, throttle.WithStore(store), throttle.WithPolicy(p))
		defer b.Close()
		start := time.Now()
		// A meets a 429 asking for 10 minutes, and shares the pause.
		_ = doCtx(t, throttle.With(context.Background(), throttle.NoRetry()), a, "http://api.example.com/a")
		// B's request of Cost(9): the pause is too long to wait out.
		time.Sleep(time.Second)
		err := doCtx(t, throttle.With(context.Background(), throttle.Cost(9), throttle.NoRetry()), b, "http://api.example.com/batch")
		require.ErrorIs(t, err, throttle.ErrPaused)
		// 400 s: a request of cost 1 with a deadline 50 s past the pause's end.
		time.Sleep(399 * time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), 250*time.Second)
		defer cancel()
		err = doCtx(t, ctx, b, "http://api.example.com/one")
		assert.NoError(t, err, "at %v", time.Since(start))
		if got := rec.times(); assert.Len(t, got, 1) {
			// (The Store lets it go at 620 s: the pace A's 429 cut climbed
			// back since, and the bucket's tolerance with it.)
			assert.LessOrEqual(t, got[0], 620*time.Second, "the request of cost 1 went at %v; the pause ended at 600 s", got[0])
		}
	})
}

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
