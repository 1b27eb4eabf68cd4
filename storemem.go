package throttle

import (
	"context"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// This file holds MemoryStore, the Store that shares keys' quotas among the
// Transports of one process.

// MemoryStore is a [Store] in this process's memory: Transports given the
// same MemoryStore share each key's quota as one Transport would, though
// each keeps its own line and learns from its own answers (two clients of
// one API key in one program, say). It is the Store every other Store is
// held to (package storetest). Its zero value is not usable: make one with
// [NewMemoryStore]. Idle keys are dropped, so memory stays bounded.
type MemoryStore struct {
	mu    sync.Mutex
	keys  map[string]*storeKey
	sweep int       // keys at the last sweep
	epoch time.Time // windows log their departures from it
}

// storeKey is a key's shared state.
type storeKey struct {
	tat    time.Time  // GCRA: the theoretical arrival time of the next departure
	last   time.Time  // the latest departure booked
	pause  time.Time  // no departure before this
	cut    rate.Limit // a pace cut by Slow, climbing back from cutAt
	cutAt  time.Time
	cutEnd time.Time     // when it has climbed back to Policy.Rate
	keep   time.Duration // the longest Per of the windows of its latest booking with any
	wins   runLog        // its windows' departures (see Reserve), from the Store's epoch: one run each, of its units
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{keys: map[string]*storeKey{}, sweep: 1024, epoch: time.Now()}
}

var _ Store = (*MemoryStore)(nil)

// Reserve books the key's next departure, of n units; see [Store].
func (s *MemoryStore) Reserve(ctx context.Context, key string, p Policy, n int, maxWait time.Duration) (Reservation, error) {
	if err := ctx.Err(); err != nil {
		return Reservation{}, err
	}
	n = max(n, 1)
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	k := s.key(key, now)
	r := storePace(p, k.cut, k.cutAt, now)
	cut := k.cut // the slowest pace since the cut: a pause's bucket was set at it or faster
	if r >= p.Rate {
		k.cut = 0
	}
	dep := latest(now, k.last, k.pause)
	if r > 0 {
		dep = latest(dep, k.tat.Add(-storeTolerance(p, r, n)))
	}
	for _, w := range p.Windows {
		// Its units must find room among those of the departures kept
		// (all before it): the oldest leave first. Those that no longer
		// count in this window (kept for a longer one) are the oldest:
		// the room they make is behind dep already.
		if excess := k.wins.units() + int64(min(n, w.N)) - int64(w.N); excess > 0 {
			dep = latest(dep, s.epoch.Add(k.wins.ageOut(excess)).Add(w.Per))
		}
	}
	// The pause held the departure if it goes at its end, or within half
	// a turn of it: the time at which the bucket lets the first go after
	// the pause was counted at the pace when Slow came, which may have
	// climbed a little since (see Reservation.Paused).
	held := k.pause
	if r > 0 {
		// A departure of n units waits past the pause's end for the n-1
		// tokens beyond the one Slow left the bucket at its end: held by
		// the pause all the same (found in review t9: a request of Cost(5)
		// after another Transport's 429 asking for an hour went 0.4 s past
		// the pause's end, the Store did not say the pause held it, and it
		// slept the hour where a request of cost 1 failed at once).
		held = held.Add(spanOf(1, r)/2 + storeTolerance(p, r, 1) - storeTolerance(p, r, n))
		if cut > 0 && cut < r {
			// Slow set the bucket's time after the pause at the pace
			// then, as slow as cut: the pace climbed since, and the
			// departure it lets go first comes up to the difference of
			// the bucket's tolerance at both paces after the pause's end
			// (found in review: 3 s after a 429 that cut the pace and
			// paused the key an hour, the first departure came 0.2 s
			// past the pause's end, and the other processes slept the
			// hour).
			held = held.Add(storeTolerance(p, cut, 1) - storeTolerance(p, r, 1))
		}
	}
	res := Reservation{Wait: dep.Sub(now), Paused: k.pause.After(now) && !held.Before(dep)}
	if res.Wait > maxWait {
		return res, nil
	}
	res.OK = true
	k.last = dep
	if r > 0 {
		k.tat = latest(k.tat, dep).Add(spanOf(n, r))
	}
	if len(p.Windows) > 0 {
		// Logged at its booking and the margin of the call that booked
		// it, it counts for Per from then (regression, found in review
		// 46: every departure counted for the margin of the call asking
		// now, and one booked by a Transport whose requests took 1 ms to
		// arrive went Per and 2 ms after another's whose took 190 ms: 11
		// of a window of 10 reached the server within one Per). What
		// counts no longer, the longest Per before it, never counts
		// again: every later departure goes after it.
		per, most := spanOfWindows(p.Windows)
		at := s.since(dep)
		k.wins.prune(at - per)
		k.wins.add(at+min(WindowMargin(ctx), math.MaxInt64-at), int64(min(n, most))) // saturated, as since
		k.keep = per
	}
	return res, nil
}

// Slow shares a pause and a cut pace; see [Store].
func (s *MemoryStore) Slow(ctx context.Context, key string, p Policy, sd Slowdown) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	k := s.key(key, now)
	r := storePace(p, k.cut, k.cutAt, now)
	if sd.Pace > 0 && sd.Pace < r {
		k.cut, k.cutAt, r = sd.Pace, now, sd.Pace
		back := float64(p.Rate-sd.Pace) / float64(p.Rate*climbShare)
		k.cutEnd = now.Add(time.Duration(back * float64(time.Second)))
	}
	if sd.Pause > 0 {
		until := now.Add(sd.Pause)
		k.pause = latest(k.pause, until)
		if r > 0 { // after the pause, one every 1/r: no burst
			k.tat = latest(k.tat, until.Add(storeTolerance(p, r, 1)))
		}
	}
	return nil
}

// key returns the state of key, made if new; it sweeps out idle keys each
// time their number has doubled.
func (s *MemoryStore) key(key string, now time.Time) *storeKey {
	if k, ok := s.keys[key]; ok {
		return k
	}
	if len(s.keys) >= s.sweep {
		for name, k := range s.keys {
			if k.idle(now, s.since(now)) {
				delete(s.keys, name)
			}
		}
		s.sweep = max(1024, 2*len(s.keys))
	}
	k := &storeKey{}
	s.keys[key] = k
	return k
}

// idle reports whether nothing of the key's state still holds a departure
// at now (mono from the Store's epoch): dropping it changes nothing.
func (k *storeKey) idle(now time.Time, mono time.Duration) bool {
	if k.tat.After(now) || k.pause.After(now) || k.last.After(now) || k.cutEnd.After(now) {
		return false
	}
	at, ok := k.wins.last()
	return !ok || at <= mono-k.keep
}

// since is t from the Store's epoch (saturated, as time.Time.Sub).
func (s *MemoryStore) since(t time.Time) time.Duration { return t.Sub(s.epoch) }

func latest(a time.Time, bs ...time.Time) time.Time {
	for _, b := range bs {
		if b.After(a) {
			a = b
		}
	}
	return a
}
