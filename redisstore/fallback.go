package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/throttlehttp/throttle"
	"golang.org/x/time/rate"
)

// This file holds what a Store does while Redis does not answer: it stops
// asking Redis but for one trial about each second, and books alone at its
// share of the quota (FailOpen) or fails at once (FailClosed).

// retryEvery is how often a Store asks again a Redis that did not answer:
// one request's call about each second, not every request's timeout.
const retryEvery = time.Second

// health is whether Redis answers, and when to ask it again if not.
//
// Redis is taken for away (down) when a call bounded by the Store's timeout
// gets no answer. A call cut short for its caller (see Store.bound) that
// gets none says too little for that, but it is slow: calls as short ask
// it again only about each retryEvery, one at a time, until a trial gets
// an answer (regression, found in review 45: with 100 ms deadlines and the
// 200 ms timeout, a hanging Redis was asked by 10 requests of 10, each
// losing 75 ms of its 100).
type health struct {
	mu      sync.Mutex
	down    error     // why Redis did not answer the last call; nil: it did
	slow    error     // why the last call cut short got no answer; nil: none did since a trial's answer
	next    time.Time // while down, or slow for a short call: when it may be asked again
	trying  bool      // while down or slow: a call is asking it (the trial)
	outages uint64    // times Redis went from answering to not, or to slow
}

// abandon records a call cut short for its caller, before the timeout,
// that got no answer from Redis: why says so, down is what ask said. It
// ends the trial, if the call was it, and keeps calls as short from asking
// again before now + retryEvery. Redis is not taken for away.
func (h *health) abandon(down, why error, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if down != nil {
		h.trying = false
	}
	if h.down == nil && h.slow == nil {
		h.outages++ // the bookings alone start afresh (see Store.firstAlone)
	}
	h.slow, h.next = why, now.Add(retryEvery)
}

// outage is the count of times Redis went away: it changes with each
// outage.
func (h *health) outage() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.outages
}

// ask reports whether a call should ask Redis: always while Redis answers;
// while it does not, one call each retryEvery, one at a time (the trial).
// short says the call will be cut short for its caller (see Store.bound):
// while Redis is slow, such a call is held back as if Redis were away.
// down is why Redis is out of reach, or nil; a call that asks with down
// not nil is the trial, and must tell answered or abandon so.
func (h *health) ask(now time.Time, short bool) (ask bool, down error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	down = h.down
	if down == nil && short {
		down = h.slow
	}
	if down == nil {
		return true, nil
	}
	if h.trying || now.Before(h.next) {
		return false, down
	}
	h.trying = true
	return true, down
}

// answered records how Redis answered a call bounded by timeout, err being
// the call's error; down is what ask said. It returns nil when Redis
// answered, the context's error when the caller gave up (which says nothing
// of Redis), or else an error wrapping throttle.ErrStoreUnavailable that
// says why.
//
// An error reply about the call alone (a Lua error, a key someone else
// wrote that the scripts could not mend) says Redis answered: it is
// returned, and the Store stays shared for every other key (regression,
// found in review: one key's bad value took the whole Store down, so that
// every key booked alone or, FailClosed, failed).
func (h *health) answered(ctx context.Context, err, down error, timeout time.Duration) error {
	up := err == nil
	switch {
	case err == nil:
	case ctx.Err() != nil:
		err = ctx.Err()
	case errors.Is(err, context.DeadlineExceeded):
		// not the caller's deadline: the error must not say it is
		err = noAnswer(err, fmt.Errorf("%w: redisstore: no answer from Redis within %v", throttle.ErrStoreUnavailable, timeout))
	case callOnly(err):
		up = true
		err = fmt.Errorf("%w: redisstore: Redis refused the call: %w", throttle.ErrStoreUnavailable, err)
	default:
		err = fmt.Errorf("%w: redisstore: %w", throttle.ErrStoreUnavailable, err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if down != nil {
		h.trying = false
	}
	switch {
	case up && down != nil:
		h.down, h.slow = nil, nil // a trial's answer: every call asks again
	case up:
		h.down = nil // slow stays: this call was not held back by it
	case ctx.Err() == nil:
		if h.down == nil {
			h.outages++
		}
		h.down, h.next = err, time.Now().Add(retryEvery)
	}
	return err
}

// noAnswer is msg, the error of a call that had no answer from Redis, and
// why, if err, the call's error, says it: the client could not connect
// (regression, found in review: a Redis that refused connections failed
// requests with "no answer from Redis within 200ms", and the refusal was
// only in go-redis's log).
func noAnswer(err, msg error) error {
	var dial *dialError
	if !errors.As(err, &dial) {
		return msg
	}
	return fmt.Errorf("%w: %w", msg, dial)
}

// callOnly reports whether err is an error reply of Redis about the call
// alone, not one that says Redis cannot serve any (loading, a read-only
// replica, a cluster or master down, a script busy, out of memory, refused
// credentials, too many clients).
func callOnly(err error) bool {
	var reply redis.Error
	if !errors.As(err, &reply) {
		return false
	}
	msg := reply.Error()
	for _, p := range [...]string{"LOADING", "READONLY", "CLUSTERDOWN", "TRYAGAIN", "MASTERDOWN", "BUSY", "OOM",
		"NOAUTH", "WRONGPASS", "NOPERM", "ERR max number of clients"} {
		if strings.HasPrefix(msg, p) {
			return false
		}
	}
	return true
}

// reserveAlone books the departure in the Store's own MemoryStore, at its
// share of the quota, or fails with why under FailClosed.
func (s *Store) reserveAlone(ctx context.Context, key string, p throttle.Policy, n int, maxWait time.Duration, why error) (throttle.Reservation, error) {
	if s.cfg.share == 0 {
		return throttle.Reservation{}, why
	}
	alone := shareOf(p, s.cfg.share)
	if s.firstAlone(key) {
		// The local bucket starts empty, not full: what the processes
		// spent of the shared one is not known here, and a burst into
		// a bucket they had drained was refused at the server (found in
		// review). From there, one departure every 1/Rate of the share.
		_ = s.local.Slow(ctx, key, alone, throttle.Slowdown{Pause: time.Nanosecond})
	}
	res, err := s.local.Reserve(ctx, key, alone, n, maxWait)
	if err != nil {
		return throttle.Reservation{}, err
	}
	res.Fallback = why
	return res, nil
}

// aloneIdle is how long a key that booked alone is remembered so without
// booking again: one idle longer starts empty again at its next booking
// alone, as at an outage's start (which only holds it back), so that the
// keys of a long outage do not pile up in memory.
const aloneIdle = time.Minute

// firstAlone reports whether key books alone for the first time since
// Redis last went away (or ever, for a Store that never reached it), or
// since it last booked alone more than aloneIdle ago.
func (s *Store) firstAlone(key string) bool {
	out := s.health.outage()
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.aloneIn != out || s.alone == nil {
		s.aloneIn, s.alone = out, map[string]time.Time{}
	}
	at, ok := s.alone[key]
	if !ok && len(s.alone) >= s.aloneSweep {
		for k, at := range s.alone {
			if now.Sub(at) > aloneIdle {
				delete(s.alone, k)
			}
		}
		s.aloneSweep = max(1024, 2*len(s.alone))
	}
	s.alone[key] = now
	return !ok || now.Sub(at) > aloneIdle
}

// back forgets the outage that a trial's answer ended: the keys that
// booked alone in it (the next outage starts afresh anyway).
func (s *Store) back() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.alone, s.aloneSweep = nil, 0
}

// toldNote is a slowdown told to a Store while Redis did not answer, under
// its policy: Redis is told what remains of it once it answers again, so
// that a pause learned during an outage (a 429 and its Retry-After: 3600)
// holds for every process once it is over, not for the one that met it
// alone.
type toldNote struct {
	p     throttle.Policy
	until time.Time  // the pause's end
	pace  rate.Limit // a pace cut to, at cutAt
	cutAt time.Time
}

// left is what remains of the note at now: the pause, and the cut pace
// climbed back by a tenth of Rate per second (see throttle.Store); ok is
// false once nothing does.
func (n toldNote) left(now time.Time) (sd throttle.Slowdown, ok bool) {
	if n.until.After(now) {
		sd.Pause = n.until.Sub(now)
	}
	if r := paced(n.p); n.pace > 0 && r > 0 {
		if climbed := float64(n.pace) + r*0.1*now.Sub(n.cutAt).Seconds(); climbed < r {
			sd.Pace = rate.Limit(climbed)
		}
	}
	return sd, sd.Pause > 0 || sd.Pace > 0
}

// merge is n and a newer note of its key: the later pause's end, the pace
// that is slower now, and the newer note's policy.
func (n toldNote) merge(newer toldNote, now time.Time) toldNote {
	m := newer
	m.until = latest(n.until, newer.until)
	was, _ := n.left(now)
	is, _ := newer.left(now)
	if was.Pace > 0 && (is.Pace <= 0 || was.Pace < is.Pace) {
		m.pace, m.cutAt = n.pace, n.cutAt
	}
	return m
}

// note keeps sd, told for key under p while Redis did not answer, to tell
// Redis once it answers.
func (s *Store) note(key string, p throttle.Policy, sd throttle.Slowdown) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.told == nil {
		s.told = map[string]toldNote{}
	}
	n, ok := s.told[key]
	if !ok && len(s.told) >= s.toldSweep {
		for k, n := range s.told {
			if _, live := n.left(now); !live {
				delete(s.told, k)
			}
		}
		s.toldSweep = max(1024, 2*len(s.told))
	}
	s.retellSoon()
	n.p = p
	if sd.Pause > 0 {
		n.until = latest(n.until, now.Add(sd.Pause))
	}
	if was, _ := n.left(now); sd.Pace > 0 && (was.Pace <= 0 || sd.Pace < was.Pace) {
		n.pace, n.cutAt = sd.Pace, now
	}
	s.told[key] = n
}

// retell tells Redis the slowdowns told while it did not answer, what
// remains of them, before the call that found it answering: it returns
// the first error of Redis as that call's, and keeps what it could not
// tell for the next call. A note that Redis refused for itself (an error
// reply about that call alone) is dropped.
func (s *Store) retell(ctx context.Context) error {
	s.mu.Lock()
	notes := s.told
	if len(notes) == 0 {
		s.mu.Unlock()
		return nil
	}
	s.told, s.toldSweep = nil, 0
	s.mu.Unlock()
	for key, n := range notes {
		sd, live := n.left(time.Now())
		if live {
			if err := s.slow(ctx, key, n.p, sd); err != nil && !callOnly(err) {
				s.mu.Lock()
				defer s.mu.Unlock()
				// The timer may have found no notes while this call held
				// them, and not been armed again: they must not wait for
				// a call that may never come (see retellSoon).
				s.retellSoon()
				if s.told == nil {
					s.told = notes
					return err
				}
				now := time.Now()
				for k, n := range notes {
					if newer, ok := s.told[k]; ok {
						// A note of the key told meanwhile starts afresh:
						// what each holds stands, the longer pause and
						// the slower pace, under the newer policy.
						n = n.merge(newer, now)
					}
					s.told[k] = n
				}
				return err
			}
		}
		delete(notes, key)
	}
	return nil
}

// retellKey tells Redis what remains of the note of key, if any, before a
// call about key: that call's booking must find the pause. The notes of
// the other keys are the timer's, in the background (see retellSoon): told
// here, one round trip each, they held the call that found Redis back
// for as many round trips as keys were paused during the outage (found in
// review: 200 of them, Redis 5 ms away, a Reserve with a deadline of 300
// ms failed at it with the context's error, nothing booked). It returns
// Redis's error, keeping the note for a later call.
func (s *Store) retellKey(ctx context.Context, key string) error {
	s.mu.Lock()
	n, ok := s.told[key]
	if ok {
		delete(s.told, key)
	}
	s.mu.Unlock()
	if !ok {
		return nil
	}
	sd, live := n.left(time.Now())
	if !live {
		return nil
	}
	err := s.slow(ctx, key, n.p, sd)
	if err == nil || callOnly(err) {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.told == nil {
		s.told = map[string]toldNote{}
	}
	if newer, ok := s.told[key]; ok {
		n = n.merge(newer, time.Now())
	}
	s.told[key] = n
	s.retellSoon()
	return err
}

// retellSoon arms a timer, unless one is armed, to tell Redis the notes
// in retryEvery, so that they reach it even if no call of this Store asks
// it (the key the process learned a pause on waits it out without asking
// Redis, and other keys may have nothing to send). Called with s.mu held.
func (s *Store) retellSoon() {
	if !s.retelling {
		s.retelling = true
		time.AfterFunc(retryEvery, s.retellNow)
	}
}

// retellNow is the timer's: it tells Redis the notes if the Store may ask
// it now (a trial, while Redis is away), bounded by the Store's timeout,
// and arms the timer again while a note still holds. A Store thus calls
// Redis in the background only while it holds slowdowns told during an
// outage, about once a second, for no longer than the longest of them.
func (s *Store) retellNow() {
	if ask, down := s.health.ask(time.Now(), false); ask {
		ctx := context.Background()
		if err := s.health.answered(ctx, s.retell(ctx), down, s.cfg.timeout); err == nil && down != nil {
			s.back()
		}
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.retelling = false
	for k, n := range s.told {
		if _, live := n.left(now); !live {
			delete(s.told, k)
		}
	}
	if len(s.told) > 0 {
		s.retellSoon()
	}
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// slowAlone holds the Store's own bookings to sd (under FailOpen), and
// returns why.
func (s *Store) slowAlone(ctx context.Context, key string, p throttle.Policy, sd throttle.Slowdown, why error) error {
	s.note(key, p, sd)
	if s.cfg.share == 0 {
		return why
	}
	sd.Pace = rate.Limit(float64(sd.Pace) * s.cfg.share)
	if err := s.local.Slow(ctx, key, shareOf(p, s.cfg.share), sd); err != nil {
		return err
	}
	return why
}

// shareOf is the share of p's quota one process keeps alone: share of its
// Rate, of its Burst and of each Window's N, each at least 1.
func shareOf(p throttle.Policy, share float64) throttle.Policy {
	if r := paced(p); r > 0 {
		p.Rate = rate.Limit(r * share)
	}
	if p.Burst > 0 {
		p.Burst = max(1, int(float64(p.Burst)*share))
	}
	if len(p.Windows) > 0 {
		ws := make([]throttle.Window, len(p.Windows))
		for i, w := range p.Windows {
			ws[i] = throttle.Window{N: max(1, int(float64(w.N)*share)), Per: w.Per}
		}
		p.Windows = ws
	}
	return p
}
