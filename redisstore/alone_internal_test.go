package redisstore

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/throttlehttp/throttle"
)

// During a Redis outage, a FailOpen Store notes the keys it books alone;
// it forgets those idle a minute, and all of them once Redis is back
// (regression, found in review: it forgot none, and a job whose keys are
// API tokens, one per customer, kept every token seen during an hour's
// outage in memory, however idle, until the next outage).
func TestKeysBookedAloneAreForgottenIdleOrOnceRedisIsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &flakyRedis{} // refuses until mode 2
		s := New(c)
		ctx := context.Background()
		p := throttle.Policy{Rate: 10, Burst: 2}
		const keys = 20000
		for i := range keys { // one new key every 180 ms: 20,000 in an hour
			r, err := s.Reserve(ctx, fmt.Sprintf("token-%d", i), p, 1, time.Minute)
			if err != nil || r.Fallback == nil {
				t.Fatalf("Reserve %d with Redis gone: %+v, %v; want booked alone", i, r, err)
			}
			time.Sleep(180 * time.Millisecond)
		}
		s.mu.Lock()
		during := len(s.alone)
		s.mu.Unlock()

		c.mode.Store(2)
		time.Sleep(time.Minute)
		for range 10 {
			if r, err := s.Reserve(ctx, "back", p, 1, time.Minute); err != nil || r.Fallback != nil {
				t.Fatalf("Reserve with Redis back: %+v, %v", r, err)
			}
		}
		s.mu.Lock()
		after := len(s.alone)
		s.mu.Unlock()
		if during > 2048 || after > 0 {
			t.Errorf("keys noted alone: %d at the outage's end, %d with Redis back; want a bounded few (every key idle for seconds), none once back", during, after)
		}
	})
}
