package throttle_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/throttlehttp/throttle"
)

// A request of Cost(5) to another Transport sharing the key through a
// MemoryStore, after one met a 429 asking for an hour (Policy{Rate: 10,
// Burst: 10}), fails at once with ErrPaused, as a request of cost 1 does
// (TestAStoresLongPauseFailsEveryRequestAtOnce), and as the Transport that
// met the 429 fails its own: it must not sleep the hour.
func TestACostlyRequestAfterALongSharedPauseFailsAtOnce(t *testing.T) {
	for _, tc := range []struct {
		cost  int
		after time.Duration
	}{{1, 0}, {2, 0}, {5, 0}, {9, 0}, {5, 3 * time.Second}, {9, 3 * time.Second}} {
		cost := tc.cost
		t.Run(fmt.Sprint("cost ", cost, " after ", tc.after), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := meetAnHoursPause(t)
				b := h.other()
				time.Sleep(tc.after)
				start := time.Now()
				err := doCtx(t, throttle.With(context.Background(), throttle.Cost(cost)), b, "http://api.example/x")
				assert.ErrorIs(t, err, throttle.ErrPaused, "cost %d", cost)
				assert.Less(t, time.Since(start), time.Second, "cost %d: at once, not the hour", cost)
				assert.Zero(t, *h.sent)
			})
		})
	}
}
