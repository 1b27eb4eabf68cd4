package throttle

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// This file holds how a Transport's line uses the Store set by WithStore:
// the head of a key's line, once the Transport would let it go, asks the
// Store for its departure and waits for it there, in the line; what the key
// learns that others must know (a pause, a cut pace) is told to the Store.

// shares reports whether ks's quota is shared through the Store: with a
// Store set, every key whose Policy paces (a Rate or Windows). An unpaced
// key has nothing to share but its pauses, which are not worth a round
// trip per request; it pauses alone, as without a Store.
func (t *Transport) shares(ks *keyState) bool {
	return t.cfg.store != nil && (ks.pol.paced() || len(ks.pol.Windows) > 0)
}

// book asks the Store for the departure of w, the head of ks's line, and
// marks it booked. It is called with ks.mu held, which it lets go while it
// asks; it returns the error to fail w with, if any (w is still in the
// line).
func (t *Transport) book(ctx context.Context, ks *keyState, w *waiter, deadline time.Time, hasDeadline bool,
	last time.Time, fail func(holder, time.Time, error) error) error {
	now := time.Now()
	maxWait := time.Duration(math.MaxInt64)
	if hasDeadline {
		maxWait = deadline.Sub(now)
	}
	if !last.IsZero() {
		maxWait = min(maxWait, last.Sub(now))
	}
	p := ks.storePolicy()
	var margin time.Duration
	if len(p.Windows) > 0 {
		// What a window's departure booked counts beyond Per (see
		// WindowMargin): the spread of how late the requests reach the
		// server after their departures, which lets departures more
		// than Per apart arrive within one Per: the Store's answer on
		// its way back (up to its last call's time) and the requests'
		// own trips (up to a round trip, srtt + 4·rttvar, which holds
		// a wake-up's lateness too: as a window of the Transport's own
		// counts each request until its answer).
		margin = time.Duration(t.storeTrip.Load()) + ks.lat.bound()
	}
	ks.mu.Unlock()
	// Asked first for no more than MaxRetryAfter: a departure behind a
	// pause too long to wait out fails with ErrPaused, and must not be
	// booked, spent at the pause's end, where it put the departure of the
	// next process a turn past that end, and the Store no longer said
	// that the pause held it (found in review: of three processes whose
	// first request came after another's 429 with Retry-After: 3600, the
	// first failed with ErrPaused and the two others slept the hour). A
	// longer wait that no pause holds (a window's) is asked for again.
	start, mra := now, t.cfg.retry.MaxRetryAfter
	res, err := t.reserve(ctx, ks, w, w.cost, p, min(maxWait, mra), margin)
	if left := maxWait - time.Since(start); err == nil && !res.OK && !res.Paused && maxWait > mra && res.Wait <= left {
		res, err = t.reserve(ctx, ks, w, w.cost, p, left, margin)
	}
	now = time.Now()
	ks.mu.Lock()
	held := holder{limit: LimitStore}
	if res.Paused {
		held = holder{limit: LimitPause}
	}
	until := now.Add(res.Wait)
	switch {
	case t.closed.Load():
		return fail(holder{}, time.Time{}, ErrClosed) // (Close ended the call, or came during it)
	case err != nil && ctx.Err() != nil:
		return fail(held, time.Time{}, ctx.Err())
	case err != nil:
		if !errors.Is(err, ErrStoreUnavailable) {
			err = fmt.Errorf("%w: %w", ErrStoreUnavailable, err)
		}
		return fail(held, time.Time{}, err)
	case res.Paused && res.Wait > t.cfg.retry.MaxRetryAfter:
		// Another process's pause, too long to wait out: the key
		// pauses here too, so that the requests after this one fail
		// at once as well, as they do in the process that met the
		// refusal, without asking the Store (found in review: the
		// first failed, and the next ones, whose departures the Store
		// booked after the pause's end, not at it, slept the hour).
		// Until the pause's end: a departure of n units waits the n-1
		// turns past it for its other tokens (see Reservation.Paused),
		// which the key's other requests, of one unit, do not (found in
		// review: a request of Cost(9) at 0.1 a second paused the key
		// 100 s past the end of another process's pause). A departure
		// of one unit, asked for and not booked, tells that end.
		end := res.Wait
		if w.cost > 1 {
			ks.mu.Unlock()
			// (A wait below 0 is never granted, so nothing is booked:
			// with 0, a unit free at once was booked and never used.
			// A microsecond, the least redisstore's scripts count.)
			one, err := t.reserve(ctx, ks, w, 1, p, -time.Microsecond, margin)
			now = time.Now()
			ks.mu.Lock()
			switch {
			case t.closed.Load():
				return fail(holder{}, time.Time{}, ErrClosed) // (Close ended the call, or came during it)
			case err == nil && !one.Paused:
				// The pause ended while it asked (a Store a round trip
				// away): none holds the key now, the others' turns are
				// the Store's to tell.
				end = 0
			case err == nil && one.Wait < end:
				end, until = one.Wait, now.Add(one.Wait)
			}
		}
		if end > 0 {
			ks.pause(hint{}, end, now)
		}
		return fail(held, until, ErrPaused)
	case hasDeadline && until.After(deadline):
		// Booked or not: a departure after the deadline fails at once,
		// as any wait known to end after it, rather than sleep until the
		// deadline (regression, found in review 45: a departure booked
		// alone past a 700 ms deadline failed at 701 ms with the
		// context's error). A departure the Store booked (its answer
		// came later than maxWait allowed for) is spent there all the
		// same: a Store has no way to give it back.
		return fail(held, until, ErrWouldExceedDeadline)
	case !res.OK || (!last.IsZero() && until.After(last)):
		return fail(held, until, ErrMaxElapsed)
	}
	w.booked, w.departAt, w.alone = true, until, res.Fallback
	w.countedTo = until.Add(margin)
	return nil
}

// storePolicy is the policy the key books its departures and shares its
// slowdowns under: its own, less the tokens it holds back against the
// jitter this Transport sees (latency.go), which it holds back in the
// shared bucket too. Slow and Reserve must be told the same depth: a pause
// that Slow set counted with a deeper bucket than Reserve counts from put
// the departure after it a bucket's refill past the pause's end, not at
// it, and the Store did not say that the pause held it (found in review:
// with Redis, a pause of an hour shared by another process was waited out
// by every request, none failed with ErrPaused).
func (ks *keyState) storePolicy() Policy {
	p := ks.pol.Policy
	if p.Queue == 0 && ks.reserve > 1 {
		p.Burst = max(1, p.Burst-int(ks.reserve)+1)
	}
	return p
}

// reserve calls the Store, with a context that Close ends too: a request
// waiting for its turn fails with ErrClosed at once, not once the Store
// answers. Should the Store panic, w leaves the line, so that the key is
// not left without a head, before the panic goes on.
func (t *Transport) reserve(ctx context.Context, ks *keyState, w *waiter, n int, p Policy, maxWait, margin time.Duration) (Reservation, error) {
	defer func() {
		if p := recover(); p != nil {
			ks.mu.Lock()
			ks.remove(w)
			ks.mu.Unlock()
			panic(p)
		}
	}()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(t.closing, cancel)
	defer stop()
	if len(p.Windows) > 0 {
		ctx = ContextWithWindowMargin(ctx, margin)
	}
	start := time.Now()
	res, err := t.cfg.store.Reserve(ctx, ks.key, p, n, maxWait)
	if len(p.Windows) > 0 {
		t.storeTrip.Store(int64(time.Since(start)))
	}
	return res, err
}

// storeNews sends EventStore when the Store goes from shared to alone, or
// back, as the booking of r's attempt shows.
func (r *request) storeNews(tk ticket) {
	t := r.t
	if down := tk.alone != nil; t.storeDown.Load() != down && t.storeDown.Swap(down) != down && t.cfg.events != nil {
		r.emit(Event{Kind: EventStore, Err: tk.alone})
	}
}

// share tells the Store what an answer taught the key that the other
// Transports must know: the pause it began or extended, and the pace it
// cut, under p, the key's policy when the answer came. The Store's errors
// are not the request's: the key itself holds whatever it learned. The
// call outlives the request's cancellation (the answer is in: what it
// taught is worth telling), but not its deadline, which bounds RoundTrip,
// nor Close (found in review 45: a Redis that hung held a throttled
// answer's RoundTrip the Store's whole timeout, 2 s against a deadline of
// 300 ms, and Close did not end it).
func (t *Transport) share(ctx context.Context, ks *keyState, p *Policy, ls lesson, now time.Time) {
	s := Slowdown{Pace: ls.cut}
	if ls.until.After(now) {
		s.Pause = ls.until.Sub(now) - ls.own // not the key's own end of it (see told.shifted)
	}
	if s.Pause <= 0 && s.Pace <= 0 {
		return
	}
	sctx := context.WithoutCancel(ctx)
	if d, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		sctx, cancel = context.WithDeadline(sctx, d)
		defer cancel()
	}
	sctx, cancel := context.WithCancel(sctx)
	defer cancel()
	defer context.AfterFunc(t.closing, cancel)()
	_ = t.cfg.store.Slow(sctx, ks.key, *p, s)
}
