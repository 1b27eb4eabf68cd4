package throttle

import (
	"fmt"
	"time"

	"golang.org/x/time/rate"
)

// Stats is a snapshot of what a Transport has done, per key and in total.
type Stats struct {
	// Keys holds the keys that have live state now. A key dropped while idle
	// (see New) is no longer listed; its counts stay in Total. A key under
	// two policies (WithKey across hosts with policies of their own) is one
	// entry: its counts and gauges add up, its Rate is the slower of the
	// paces (0 only if neither paces), with that pace's PaceFrom, and its
	// Remaining the lower of the counts told (-1 only if neither is told),
	// with that count's Reset.
	Keys map[string]KeyStats
	// Total sums every key since New, dropped ones included.
	Total KeyStats
}

// KeyStats counts one key's requests. Queued, InFlight, Slots and Rate are
// gauges (now); the rest are counters since the key's state was created.
type KeyStats struct {
	Requests int64         // RoundTrip calls
	Attempts int64         // attempts sent to the base RoundTripper
	Units    int64         // units charged against the key's limits: each attempt's Cost (1 without one), corrected by WithCost's figures
	Waited   int64         // requests that had to wait for their turn (behind others, or for a limit), whether they got it or not
	WaitTime time.Duration // time those requests waited, summed
	Queued   int           // attempts waiting for their turn now
	InFlight int           // attempts sent whose response is not yet in
	Slots    int           // MaxInFlight slots held now: attempts on the wire and response bodies not yet closed
	Rate     rate.Limit    // the key's pace now (below Policy.Rate after 429s; a key paced by Windows alone, once 429s cut one, its cut N per Per); 0: unpaced. Not summed in Stats.Total
	PaceFrom PaceFrom      // where Rate comes from. Not in Stats.Total

	// What the server's quota headers say now (see ParseQuota), as the key
	// mirrors them: Remaining is what the server's count leaves the key,
	// its requests on their way taken off; Reset the end of the window,
	// if the quota is one and its reset is known; of several IETF
	// policies, those of the one that leaves the least. Remaining is -1
	// for a key whose server sends no quota headers. Not in Stats.Total.
	Remaining int
	Reset     time.Time

	Throttled   int64 // quota signals: 429 responses, and 403s with Retry-After or that say the quota is spent
	Unavailable int64 // 503 responses
	Retries     int64 // retries scheduled
	Pauses      int64 // pauses of the key begun by a server's answer (quota signals and outages)
	Outages     int64 // outages begun: failures came to dominate the key's recent answers (each may pause the key several times, one probe per Retry-After: Pauses counts those)
	GaveUp      int64 // requests whose retrying was cut short while their last answer still called for a retry (attempts, time, MaxRetryAfter or budget used up; a retry refused at once, the last response returned, included); not one whose last answer is not retried (a POST's network error)

	// Refusals, by reason: a request that failed without being sent. A
	// retry refused at once while the last response is in hand is not
	// one: the caller gets that response, and GaveUp counts it.
	RefusedQueueFull int64 // ErrQueueFull
	RefusedDeadline  int64 // ErrWouldExceedDeadline, or ErrMaxElapsed for a retry
	RefusedPaused    int64 // ErrPaused
	RefusedClosed    int64 // ErrClosed
	RefusedStore     int64 // ErrStoreUnavailable, or another error of the Store
	RefusedCost      int64 // ErrCostTooLarge
	Canceled         int64 // the context ended while it waited
}

func (s *KeyStats) add(o *KeyStats) {
	s.Requests += o.Requests
	s.Attempts += o.Attempts
	s.Units += o.Units
	s.Waited += o.Waited
	s.WaitTime += o.WaitTime
	s.Queued += o.Queued
	s.InFlight += o.InFlight
	s.Slots += o.Slots
	s.Throttled += o.Throttled
	s.Unavailable += o.Unavailable
	s.Retries += o.Retries
	s.Pauses += o.Pauses
	s.Outages += o.Outages
	s.GaveUp += o.GaveUp
	s.RefusedQueueFull += o.RefusedQueueFull
	s.RefusedDeadline += o.RefusedDeadline
	s.RefusedPaused += o.RefusedPaused
	s.RefusedClosed += o.RefusedClosed
	s.RefusedStore += o.RefusedStore
	s.RefusedCost += o.RefusedCost
	s.Canceled += o.Canceled
}

// merge takes into s, one key's KeyStats under one policy, o, the same
// key's under another (WithKey across hosts of their own policies): the
// counts and gauges add up; Rate is the slower of those that pace, with
// its PaceFrom, and Remaining the lower of those told, with its Reset. 0
// and -1 say none paces, none is told: taken as the lowest, they said so
// of a key paced at 10 a second and told 50 remain by one of its hosts,
// beside that host's Reset and PaceFrom "policy" (found in review 46).
// Ties go to the configured pace, and to the later reset, so that the
// merge is the same whatever order the states come in.
func (s *KeyStats) merge(o *KeyStats) {
	s.add(o)
	if o.Rate > 0 && (s.Rate == 0 || o.Rate < s.Rate || o.Rate == s.Rate && o.PaceFrom < s.PaceFrom) {
		s.Rate, s.PaceFrom = o.Rate, o.PaceFrom
	}
	if o.Remaining >= 0 && (s.Remaining < 0 || o.Remaining < s.Remaining || o.Remaining == s.Remaining && o.Reset.After(s.Reset)) {
		s.Remaining, s.Reset = o.Remaining, o.Reset
	}
}

// PaceFrom says where a key's pace comes from.
type PaceFrom uint8

const (
	PaceNone    PaceFrom = iota // unpaced
	PacePolicy                  // the configured Policy.Rate (cut below it by 429s, see Policy.Rate)
	PaceLearned                 // learned from 429s: no Policy.Rate, no quota headers
	PaceHeaders                 // the refill of the server's bucket, measured from its quota headers
)

func (p PaceFrom) String() string {
	switch p {
	case PacePolicy:
		return "policy"
	case PaceLearned:
		return "learned from 429s"
	case PaceHeaders:
		return "quota headers"
	case PaceNone:
		return "none"
	}
	return fmt.Sprintf("PaceFrom(%d)", uint8(p)) // (found in review: "none", which it is not)
}

// A key keeps only the counters that every request moves; the gauges are
// read off its state, Units is its count of admissions (less what the
// server's figures gave back), and the rest, which a quiet key never
// moves, wait in its trouble.
type counts struct {
	Requests, Attempts, Waited int64
	WaitTime                   time.Duration
}

// rareCounts are the counters of KeyStats that only trouble moves.
type rareCounts struct {
	Throttled, Unavailable, Retries, Pauses, Outages, GaveUp int64

	RefusedQueueFull, RefusedDeadline, RefusedPaused, RefusedClosed, RefusedStore, RefusedCost, Canceled int64

	refunded int64 // units given back by WithCost's figures
}

// snapshot returns the key's KeyStats now.
func (ks *keyState) snapshot(t *Transport, now time.Time) KeyStats {
	s := KeyStats{
		Requests: ks.stats.Requests, Attempts: ks.stats.Attempts, Units: int64(ks.admitted),
		Waited: ks.stats.Waited, WaitTime: ks.stats.WaitTime,
		Queued: int(ks.waiting), InFlight: int(ks.sending), Slots: int(ks.slots),
	}
	s.Remaining = -1
	if l := ks.learning(); ks.lim != nil && (l == nil || !l.guessing()) {
		s.Rate, s.PaceFrom = ks.lim.Limit(), PacePolicy
		if ks.learned() {
			s.PaceFrom = PaceLearned
		}
	} else if r := ks.windowPace(); r > 0 {
		s.Rate, s.PaceFrom = r, PacePolicy
	}
	mono := t.since(now)
	for m := range ks.mirrors() {
		// Of several policies, the one that leaves the least.
		m.rollover(mono, ks.admitted)
		if left := int(max(0, m.tokens(mono, ks.outUnits))); s.Remaining < 0 || left < s.Remaining {
			s.Remaining, s.Reset = left, time.Time{}
			if m.kind != kindBucket && m.kind != kindLog && m.resetAt > mono {
				s.Reset = now.Add(m.resetAt - mono)
			}
		}
		if r := rate.Limit(m.rate); m.kind == kindBucket && r > 0 && (s.Rate == 0 || r < s.Rate) {
			s.Rate, s.PaceFrom = r, PaceHeaders
		}
	}
	if tr := ks.tr; tr != nil {
		r := &tr.stats
		s.Throttled, s.Unavailable, s.Retries = r.Throttled, r.Unavailable, r.Retries
		s.Pauses, s.Outages, s.GaveUp = r.Pauses, r.Outages, r.GaveUp
		s.RefusedQueueFull, s.RefusedDeadline, s.RefusedPaused = r.RefusedQueueFull, r.RefusedDeadline, r.RefusedPaused
		s.RefusedClosed, s.RefusedStore, s.Canceled = r.RefusedClosed, r.RefusedStore, r.Canceled
		s.RefusedCost, s.Units = r.RefusedCost, s.Units-r.refunded
	}
	return s
}

// Stats returns a snapshot of the counters. It locks each key in turn, so
// call it for reporting, not on every request.
func (t *Transport) Stats() Stats {
	s := Stats{Keys: make(map[string]KeyStats)}
	now := time.Now()
	t.keys.sweeping.Lock() // no key moves from live to gone meanwhile
	defer t.keys.sweeping.Unlock()
	t.keys.evicted.Lock()
	s.Total = t.keys.gone
	t.keys.evicted.Unlock()
	t.keys.maps.Range(func(_, pm any) bool {
		pm.(*table).each(func(ks *keyState) bool {
			ks.mu.Lock()
			if !ks.dead {
				st := ks.snapshot(t, now)
				s.Total.add(&st) // this state's alone: another of the key's is in the total already
				if k, twice := s.Keys[ks.name()]; twice {
					// One key under two policies.
					k.merge(&st)
					st = k
				}
				s.Keys[ks.name()] = st
			}
			ks.mu.Unlock()
			return false
		})
		return true
	})
	return s
}
