package throttletest_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/throttlehttp/throttle/throttletest"
)

func TestArrivalJitterDelaysWithinItsRangeAndIsSeeded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		delays := func(api *throttletest.API) []time.Duration {
			var ds []time.Duration
			for range 50 {
				start := time.Now()
				assert.Equal(t, http.StatusOK, get(t, api, "k").code)
				d := time.Since(start)
				assert.GreaterOrEqual(t, d, time.Duration(0))
				assert.Less(t, d, time.Second)
				ds = append(ds, d)
			}
			return ds
		}
		cfg := throttletest.Config{ArrivalJitter: time.Second, Seed: 5}
		first := delays(throttletest.NewAPI(cfg))
		assert.NotEqual(t, first[0], first[1], "jittered")
		assert.Equal(t, first, delays(throttletest.NewAPI(cfg)), "same seed, same delays")
	})
}

// Two requests sent 1ms apart with up to 1s of jitter on the way: the quota,
// which has room for one, admits the one that arrives first, whichever was sent
// first.
func TestArrivalJitterReordersRequestsBeforeTheQuota(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := throttletest.NewAPI(throttletest.Config{
			Limits:        []throttletest.Limit{{Algorithm: throttletest.SlidingLog, N: 1, Per: time.Hour}},
			ArrivalJitter: time.Second,
			Seed:          1,
		})
		type arrival struct {
			code int
			at   time.Duration // from when the first of the pair was sent
		}
		overtaken := 0
		for i := range 20 {
			key := string(rune('a' + i)) // a fresh quota for each pair
			start := time.Now()
			var first, second arrival
			var wg sync.WaitGroup
			wg.Go(func() { first = arrival{get(t, api, key).code, time.Since(start)} })
			time.Sleep(time.Millisecond)
			wg.Go(func() { second = arrival{get(t, api, key).code, time.Since(start)} })
			wg.Wait()

			early, late := first, second
			if second.at < first.at {
				early, late = second, first
				overtaken++
			}
			assert.Equal(t, http.StatusOK, early.code, "pair %d: the first to arrive", i)
			assert.Equal(t, http.StatusTooManyRequests, late.code, "pair %d: the second to arrive", i)
		}
		assert.Positive(t, overtaken, "some requests sent second arrive first")
		assert.Less(t, overtaken, 20)
		assert.Equal(t, int64(20), api.Stats().Total.Accepted)
	})
}

func TestArrivalJitterHonoursTheContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := throttletest.NewAPI(throttletest.Config{ArrivalJitter: 1000 * time.Hour})
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
		req.Header.Set("X-API-Key", "k")
		start := time.Now()
		resp, err := api.RoundTrip(req)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Nil(t, resp)
		assert.Equal(t, time.Second, time.Since(start))
		assert.Equal(t, throttletest.Counts{Requests: 1, Canceled: 1}, api.Stats().Total,
			"canceled before any quota saw it: never in flight")
	})
}
