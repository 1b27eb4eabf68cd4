package throttle

import (
	"strconv"
	"sync"
	"testing"
)

// The table finds what was added and not removed, through growth, removal
// and shrinking, while other goroutines add and remove their own keys.
func TestTableAddFindRemove(t *testing.T) {
	tb := newTable()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			states := make([]*keyState, 2000)
			for i := range states {
				key := strconv.Itoa(g) + "/" + strconv.Itoa(i)
				ks, made := tb.loadOrStore(key, func() *keyState { return &keyState{key: key} })
				if !made {
					t.Errorf("%s: made twice", key)
				}
				if again, made := tb.loadOrStore(key, nil); made || again != ks {
					t.Errorf("%s: not found when added again", key)
				}
				states[i] = ks
			}
			for i, ks := range states {
				if i%4 != 0 {
					tb.remove(ks.key, ks)
				}
			}
			for i, ks := range states {
				if got, want := tb.load(ks.key), map[bool]*keyState{true: ks}[i%4 == 0]; got != want {
					t.Errorf("%s: load = %p, want %p", ks.key, got, want)
				}
			}
		})
	}
	wg.Wait()
	n := 0
	tb.each(func(*keyState) bool { n++; return true })
	if n != 4*500 {
		t.Errorf("each saw %d states, want %d", n, 4*500)
	}
	for i := range tb.shards {
		s := &tb.shards[i]
		if s.live != 0 || len(*s.slots.Load()) > minSlots {
			t.Errorf("shard %d: %d live in %d slots after each dropped all", i, s.live, len(*s.slots.Load()))
		}
	}
}
