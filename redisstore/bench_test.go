package redisstore_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/throttlehttp/throttle"
	"github.com/throttlehttp/throttle/redisstore"
)

// BenchmarkReserve measures decisions per second through one Redis (at
// REDIS_ADDR) from 1 and 16 goroutines, all booking one key: the worst
// case, each decision a script that Redis runs alone. Every Reserve is
// booked (maxWait has no bound), so the key's schedule runs far ahead.
//
//	REDIS_ADDR=127.0.0.1:6379 go test -run '^$' -bench . -benchmem ./redisstore
func BenchmarkReserve(b *testing.B) {
	for _, pc := range []struct {
		name string
		p    throttle.Policy
	}{
		{"bucket", throttle.Policy{Rate: 1e6, Burst: 10}},
		{"bucket+window", throttle.Policy{Rate: 1e6, Burst: 10, Windows: []throttle.Window{{N: 100, Per: time.Second}}}},
	} {
		for _, goroutines := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/goroutines=%d", pc.name, goroutines), func(b *testing.B) {
				s, c, pre := newStore(b, redisstore.FailClosed())
				b.Cleanup(func() { // the schedule runs minutes ahead: do not keep it
					if keys := c.Keys(context.Background(), pre+"*").Val(); len(keys) > 0 {
						c.Del(context.Background(), keys...)
					}
				})
				benchReserve(b, s, pc.p, goroutines)
			})
		}
	}
}

// benchReserve runs b.N Reserves of one key from goroutines goroutines and
// reports decisions/s.
func benchReserve(b *testing.B, s *redisstore.Store, p throttle.Policy, goroutines int) {
	ctx := context.Background()
	if _, err := s.Reserve(ctx, "bench", p, 1, time.Hour); err != nil { // loads the script
		b.Fatal(err)
	}
	b.ReportAllocs()
	var (
		left atomic.Int64
		wg   sync.WaitGroup
	)
	left.Store(int64(b.N))
	b.ResetTimer()
	start := time.Now()
	for range goroutines {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				if r, err := s.Reserve(ctx, "bench", p, 1, 1<<62); err != nil || !r.OK {
					b.Errorf("Reserve: %+v, %v", r, err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "decisions/s")
}
