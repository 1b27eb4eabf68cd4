package throttle

// Stress tests of the key table and the trouble split, from a review.

import (
	"context"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// OK: a lock-free load never misses a key that stays in the table while
// other goroutines add and remove keys of the same shards (growing,
// shrinking and tombstoning them) and a sweep removes what it is given;
// loadOrStore of one key from many goroutines makes one state.
func TestTableLoadNeverMissesAPinnedKey(t *testing.T) {
	tb := newTable()
	const pinned = 64
	pins := make([]*keyState, pinned)
	for i := range pins {
		key := "pin/" + strconv.Itoa(i)
		pins[i], _ = tb.loadOrStore(key, func() *keyState { return &keyState{key: key} })
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for g := range 4 { // churn: add and remove many keys, growing and shrinking shards
		wg.Go(func() {
			for round := 0; !stop.Load(); round++ {
				var made []*keyState
				for i := range 2000 {
					key := "churn/" + strconv.Itoa(g) + "/" + strconv.Itoa(round) + "/" + strconv.Itoa(i)
					ks, _ := tb.loadOrStore(key, func() *keyState { return &keyState{key: key} })
					made = append(made, ks)
				}
				for _, ks := range made {
					tb.remove(ks.key, ks)
				}
			}
		})
	}
	wg.Go(func() { // a sweep that drops every other churned state it sees
		for !stop.Load() {
			tb.each(func(ks *keyState) bool {
				return ks.key[0] == 'c' && rand.IntN(2) == 0
			})
		}
	})
	var same sync.Map
	for range 4 { // readers of the pinned keys, and racing adds of one key
		wg.Go(func() {
			defer stop.Store(true) // the churners stop with the readers
			for n := 0; n < 300_000 && !stop.Load(); n++ {
				i := rand.IntN(pinned)
				if got := tb.load(pins[i].key); got != pins[i] {
					t.Errorf("load(%q) = %p, want %p", pins[i].key, got, pins[i])
					stop.Store(true)
				}
				key := "shared/" + strconv.Itoa(rand.IntN(8))
				ks, _ := tb.loadOrStore(key, func() *keyState { return &keyState{key: key} })
				if prev, loaded := same.LoadOrStore(key, ks); loaded && prev != ks {
					t.Errorf("two states for %q", key)
					stop.Store(true)
				}
			}
		})
	}
	wg.Wait()
	for i := range tb.shards { // tombstones and size stay bounded
		s := &tb.shards[i]
		s.mu.Lock()
		if n := len(*s.slots.Load()); 4*s.used > 3*n || (n > minSlots && 8*s.live < n) {
			t.Errorf("shard %d: %d live, %d used, %d slots", i, s.live, s.used, n)
		}
		s.mu.Unlock()
	}
}

// OK: a key that is only ever answered 2xx never makes its trouble, whatever
// its policy, even when its requests wait in the line for the pacer, a
// window or an in-flight slot (with deadlines that allow the wait).
func TestQuietKeysMakeNoTrouble(t *testing.T) {
	for name, p := range map[string]Policy{
		"unpaced":  {},
		"bucket":   {Rate: 10, Burst: 2},
		"queue":    {Rate: 10, Queue: 100},
		"window":   {Rate: 100, Burst: 5, Windows: []Window{{N: 3, Per: time.Second}}},
		"inflight": {MaxInFlight: 1},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
					time.Sleep(10 * time.Millisecond)
					return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
				})
				rt := New(base, WithPolicy(p))
				defer rt.Close()
				var wg sync.WaitGroup
				for i := range 20 {
					wg.Go(func() {
						ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
						defer cancel()
						req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://q"+strconv.Itoa(i%2)+".test/", nil)
						resp, err := rt.RoundTrip(req)
						if err != nil {
							t.Error(err)
							return
						}
						resp.Body.Close()
					})
				}
				wg.Wait()
				rt.keys.maps.Range(func(_, m any) bool {
					m.(*table).each(func(ks *keyState) bool {
						if ks.tr != nil {
							t.Errorf("%s: a quiet key made its trouble: %+v", ks.key, *ks.tr)
						}
						return false
					})
					return true
				})
				if s := rt.Stats(); s.Total.Waited == 0 && name != "unpaced" {
					t.Errorf("nothing waited: the test proves little")
				}
			})
		})
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
