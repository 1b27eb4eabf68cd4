package throttle

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
)

// table maps one policy's partition keys to their states. It is a hash
// table of pointers with open addressing, in shards: a lookup takes no lock
// (it loads the slots atomically, as sync.Map's does), and an entry costs
// a pointer over the load factor, some 16 bytes, where sync.Map's hash trie
// spends about 125. Adding and removing take the shard's lock.
//
// A lookup may find a state that is being removed, or miss one that is
// being added: the caller locks the state, checks dead, and adds under the
// lock when it finds none (see acquire).
type table struct {
	seed   maphash.Seed
	shards [tableShards]shard
}

const tableShards = 16

// tombstone marks a removed entry: probes go on past it.
var tombstone = new(keyState)

type shard struct {
	mu    sync.Mutex // guards live and used, and every store into slots
	slots atomic.Pointer[[]atomic.Pointer[keyState]]
	live  int // entries
	used  int // entries and tombstones
}

func newTable() *table { return &table{seed: maphash.MakeSeed()} }

// locate returns key's shard and its hash.
func (t *table) locate(key string) (*shard, uint64) {
	h := maphash.String(t.seed, key)
	return &t.shards[h>>(64-4)], h // the top bits pick the shard, the low ones the slot
}

// load returns the state of key, or nil.
func (t *table) load(key string) *keyState {
	s, h := t.locate(key)
	slots := s.slots.Load()
	if slots == nil {
		return nil
	}
	mask := uint64(len(*slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		switch ks := (*slots)[i].Load(); {
		case ks == nil:
			return nil
		case ks != tombstone && ks.key == key:
			return ks
		}
	}
}

// loadOrStore returns the state of key, made with mk if there is none, and
// whether it was made.
func (t *table) loadOrStore(key string, mk func() *keyState) (*keyState, bool) {
	s, h := t.locate(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if ks := t.load(key); ks != nil {
		return ks, false
	}
	if slots := s.slots.Load(); slots == nil || 4*(s.used+1) > 3*len(*slots) {
		t.resize(s, s.live+1)
	}
	ks := mk()
	slots := *s.slots.Load()
	mask := uint64(len(slots) - 1)
	i := h & mask
	for p := slots[i].Load(); p != nil && p != tombstone; p = slots[i].Load() {
		i = (i + 1) & mask
	}
	if slots[i].Load() == nil {
		s.used++
	}
	slots[i].Store(ks)
	s.live++
	return ks, true
}

// remove deletes key's entry if it is ks.
func (t *table) remove(key string, ks *keyState) {
	s, h := t.locate(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	slots := s.slots.Load()
	if slots == nil {
		return
	}
	mask := uint64(len(*slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		switch p := (*slots)[i].Load(); p {
		case nil:
			return
		case ks:
			(*slots)[i].Store(tombstone)
			s.live--
			if len(*slots) > minSlots && 8*s.live < len(*slots) {
				t.resize(s, s.live) // a table that emptied gives its memory back
			}
			return
		}
	}
}

const minSlots = 8

// resize moves the live entries to new slots sized for n entries, at most
// half full, without tombstones. Lookups on the old slots stay correct.
func (t *table) resize(s *shard, n int) {
	size := minSlots
	for size < 2*n {
		size *= 2
	}
	slots := make([]atomic.Pointer[keyState], size)
	if old := s.slots.Load(); old != nil {
		for i := range *old {
			ks := (*old)[i].Load()
			if ks == nil || ks == tombstone {
				continue
			}
			j := maphash.String(t.seed, ks.key) & uint64(size-1)
			for slots[j].Load() != nil {
				j = (j + 1) & uint64(size-1)
			}
			slots[j].Store(ks)
		}
	}
	s.slots.Store(&slots)
	s.used = s.live
}

// each calls f for every state, and then removes those for which f
// returned true (f must have marked them dead). States added meanwhile may
// be missed, as with sync.Map's Range.
func (t *table) each(f func(*keyState) (drop bool)) {
	for i := range t.shards {
		slots := t.shards[i].slots.Load()
		if slots == nil {
			continue
		}
		for j := range *slots {
			if ks := (*slots)[j].Load(); ks != nil && ks != tombstone && f(ks) {
				t.remove(ks.key, ks)
			}
		}
	}
}
