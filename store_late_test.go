package throttle_test

import (
	"context"
	"errors"
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
