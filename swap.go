package throttle

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// This file holds the replacement of a Policy on a live Transport (quotas
// change; a user upgrades a plan): SetPolicy and SetHostPolicy, and what a
// key's state keeps across the change.

// slot is where the Policy of WithPolicy, or of one WithHostPolicy pattern,
// lives: requests read it without a lock, a replacement swaps it.
type slot struct {
	cur atomic.Pointer[policy]
	mu  sync.Mutex // one replacement at a time
}

func newSlot(p *policy) *slot {
	s := &slot{}
	s.cur.Store(p)
	return s
}

// SetPolicy replaces the Policy of every key whose host has no
// WithHostPolicy (as WithPolicy sets it at New), at once and for the
// requests already waiting: none is dropped or refused for the change
// (a leaky bucket's queue may hold more than a smaller Queue while it
// drains), but one whose turn the change puts after its context's
// deadline fails then with ErrWouldExceedDeadline, as it would have at its
// arrival, rather than wait for the deadline. See SetHostPolicy for what
// each key keeps. It returns an error matching ErrInvalidConfig if p does
// not validate, and changes nothing then. It is safe to call while
// requests are under way.
func (t *Transport) SetPolicy(p Policy) error {
	if bad := p.problems("SetPolicy"); len(bad) > 0 {
		return asError(bad)
	}
	t.replace(t.cfg.def, p)
	return nil
}

// SetHostPolicy replaces the Policy of a pattern given to New with
// WithHostPolicy, at once and for the requests already waiting: none is
// dropped or refused for the change (but for a deadline it puts out of
// reach: see SetPolicy). Each live key keeps what it knows:
// its line, its requests on the wire and in-flight slots, its pause, what
// the server's quota headers told it, and the requests its windows count
// (a window new to the key counts those it already logged for another,
// else it counts from the change on; a Store's shared windows count the
// departures booked there alike, once every Transport sharing them has
// the new Policy: see [Store]). Its pacer takes the new Rate and
// Burst with the tokens it holds (at most the new depth; a key that was
// unpaced starts with a full bucket, as a new key would); what 429s had cut
// or taught of its pace starts again under the new Policy. It returns an
// error matching ErrInvalidConfig if p does not validate or if the pattern
// was not given to New (add it there to change it later), and changes
// nothing then. It is safe to call while requests are under way.
func (t *Transport) SetHostPolicy(pattern string, p Policy) error {
	where := fmt.Sprintf("SetHostPolicy(%q)", pattern)
	if bad := p.problems(where); len(bad) > 0 {
		return asError(bad)
	}
	pattern = hostPattern(pattern)
	s, ok := t.cfg.exact[pattern]
	if dom, wild := strings.CutPrefix(pattern, "*."); wild {
		s, ok = t.cfg.wildcard[dom]
	}
	if !ok {
		return asError([]string{where + ": no such pattern was given to New with WithHostPolicy"})
	}
	t.replace(s, p)
	return nil
}

// replace puts p in s, and moves every live key of s's policy to it.
func (t *Transport) replace(s *slot, p Policy) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.cur.Load()
	np := compile(p)
	np.keys, np.gen = old.keys, old.gen+1 // the same keys, under the new Policy
	s.cur.Store(np)
	now := time.Now()
	np.keys.each(func(ks *keyState) bool {
		ks.mu.Lock()
		if !ks.dead && np.gen > ks.pol.gen {
			ks.repolicy(np, now)
		}
		ks.mu.Unlock()
		return false
	})
}

// repolicy moves the key to p, a replacement of its policy, at now: see
// SetHostPolicy for what it keeps. The head of its line recomputes, and
// those behind it whose wait has an end check it against their turn.
func (ks *keyState) repolicy(p *policy, now time.Time) {
	old := ks.pol
	ks.pol = p
	switch {
	case !p.paced() && old.paced():
		ks.lim, ks.reserve = nil, 0
	case !p.paced():
		// Unpaced before and after: a pace learned from 429s starts
		// again (below), as the doc of SetHostPolicy says (found in
		// review: it stayed, and a key that had learned 10 a second
		// held it, under a Policy given for a plan upgraded to 1,000).
	case ks.lim == nil || !old.paced():
		ks.lim, ks.reserve = p.newLimiter(), 0
		if p.Queue == 0 {
			ks.reserve = int32(ks.lat.reserve(float64(p.Rate), p.Burst))
			ks.lim.SetBurstAt(now, max(1, p.Burst-int(ks.reserve)))
		}
	default:
		depth := 1
		if p.Queue == 0 {
			ks.reserve = int32(ks.lat.reserve(float64(p.Rate), p.Burst))
			depth = max(1, p.Burst-int(ks.reserve))
		}
		ks.lim.SetLimitAt(now, p.Rate)
		ks.lim.SetBurstAt(now, depth)
	}
	if tr := ks.tr; tr != nil {
		tr.adapt = newAdaptation(p.Rate)
		if tr.x != nil {
			if !p.paced() && tr.x.learn.on {
				// Unpaced: the pace learned from 429s goes with what
				// learned it, and starts again from the next 429 (found
				// in review 45: with windows alone, its limiter stayed,
				// which nothing moved again, and a key that had learned
				// 10 a second sent at 10 a second for good against a
				// window of 1,000 a second).
				ks.lim, ks.reserve = nil, 0
			}
			tr.x.learn = learner{} // a configured pace or windows: nothing to learn; none: learn again
		}
	}
	ks.wins = rewindow(ks.wins, p)
	ks.wakeHead()
	if ks.head != nil {
		// Those behind the head, which sleep until they become it, check
		// their deadline (or MaxElapsed) against their turn under p: each
		// counts those ahead of it, once per change.
		for w := ks.head.next; w != nil; w = w.next {
			if w.bounded {
				w.recheck = true
				poke(w.wake)
			}
		}
	}
}

// rewindow returns the windows of p for a key, each holding the attempts
// the old windows logged: those of the longest, which keeps the most
// (each lets go of what no longer counts in it).
func rewindow(old []windowLog, p *policy) []windowLog {
	if len(p.Windows) == 0 {
		return nil
	}
	var src *windowLog
	for i := range old {
		if src == nil || old[i].Per > src.Per {
			src = &old[i]
		}
	}
	wins := make([]windowLog, len(p.Windows))
	for i := range p.Windows {
		if src == nil {
			wins[i] = newWindowLog(&p.Windows[i])
		} else {
			wins[i] = src.clone(&p.Windows[i])
		}
	}
	return wins
}
