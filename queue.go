package throttle

import (
	"context"
	"net/http"
	"time"
)

// The line is each key's queue of waiting attempts, ordered by the arrival
// of their requests (a retry keeps its request's place, so it goes before
// requests that came later) and by their priority (see Priority): an
// attempt joins the line ahead of every waiting attempt whose priority,
// raised by one for each second its request has waited (aging), is lower
// than its own; among equals, first come, first served. Only the head
// computes when it may go; the others sleep until they become the head, so
// a long line costs no wake-ups.
//
// With Policy.Queue set, the line is the leaky bucket: at most Queue wait,
// and the limiter, of depth 1, releases the head every 1/Rate. A waiter that
// leaves (cancelled, deadline) leaves no hole: the one behind moves up.

type waiter struct {
	place
	wake       chan struct{} // buffered 1: "you are the head", or "the key changed"
	prev, next *waiter
	booked     bool      // the Store booked its departure (booking.go)
	bounded    bool      // its wait has an end: the context's deadline, or Retry.MaxElapsed
	recheck    bool      // the key's Policy changed: check the bounds again (see repolicy)
	by         time.Time // the earlier of those ends; zero if it has none
	doomed     time.Time // a lower bound of its turn, found after by: it fails (see failBehind)
	doomedBy   holder    // what holds it there
	departAt   time.Time // when, if booked
	countedTo  time.Time // then: the latest sending its windows' booking counted (departAt and the margin)
	alone      error     // the Reservation's Fallback, if booked
}

// place is where a request's attempts join a key's line, and what each
// costs there.
type place struct {
	seq     uint64        // the request's arrival order at its key
	prio    int           // its priority (0 unless the request says: see Priority)
	arrived time.Time     // when it arrived, for aging
	unaged  time.Duration // of its wait since, what does not age it: the wait before it was sent behind (see judge)
	cost    int           // what each attempt is charged (1 unless the request says: see Cost)
}

// agingStep is the wait that raises a request's priority in the line by one.
const agingStep = time.Second

// before reports whether p goes before q in a line at now: a higher
// priority, each raised by one per agingStep its request has waited, or an
// earlier arrival among equals.
func (p *place) before(q *place, now time.Time) bool {
	// Equal priorities too compare their aging, not their seq alone: a
	// request's seq is given when it reaches its key, after its arrival
	// (a WithKey function on the way), and ordered by seq among its
	// equals but by aging among the others, the line was no order: a
	// request of priority 7 was passed by one of 0 that came 5 s before
	// it (found in review).
	//
	// The priorities' difference, exact: a float64 of each is not, above
	// 2^53, where its step is longer than the waits that age it (at
	// 2^60, 256 levels: a request was passed by one of 2 levels above it
	// that came 2 minutes later; found in review). One that overflows an
	// int is beyond any aging.
	d := p.prio - q.prio
	if (d > 0) != (p.prio > q.prio) {
		return p.prio > q.prio
	}
	e := float64(d) + (float64(now.Sub(p.arrived)-p.unaged)-float64(now.Sub(q.arrived)-q.unaged))/float64(agingStep)
	if e == 0 {
		return p.seq < q.seq
	}
	return e > 0
}

// behind is the priority at which p, its wait aging it afresh from now and
// its arrival the latest, goes behind every request waiting in the line
// of priority 0 or more, or of its own or more if lower: the lowest of
// theirs, if below its own. No arithmetic on priorities or waits: any
// int is a priority (Priority(math.MaxInt)). Waiters of a lower priority
// than that are not passed: a request sent behind a nightly batch's,
// Priority(-3600), was passed by every request of priority 0 for an hour
// (found in review). ks.mu must be held.
func (ks *keyState) behind(p *place) int {
	floor, prio := min(p.prio, 0), p.prio
	for w := ks.head; w != nil; w = w.next {
		if w.prio >= floor {
			prio = min(prio, w.prio)
		}
	}
	return prio
}

// insert puts w in the line at now, ahead of the waiters at its end that
// it goes before (see place.before), and returns the units of those ahead
// of it, each its cost.
func (ks *keyState) insert(w *waiter, now time.Time) int {
	ahead := ks.waitUnits
	at := ks.tail
	for at != nil && w.before(&at.place, now) {
		ahead -= int64(at.cost)
		at = at.prev
	}
	w.prev = at
	if at == nil {
		w.next, ks.head = ks.head, w
	} else {
		w.next, at.next = at.next, w
	}
	if w.next == nil {
		ks.tail = w
	} else {
		w.next.prev = w
	}
	ks.waiting++
	ks.waitUnits += int64(w.cost)
	if ks.head == w {
		poke(w.wake)
		if w.next != nil {
			poke(w.next.wake) // no longer the head: recompute
		}
	}
	return int(ahead)
}

// remove takes w out of the line and wakes the new head.
func (ks *keyState) remove(w *waiter) {
	if w.prev == nil {
		ks.head = w.next
	} else {
		w.prev.next = w.next
	}
	if w.next == nil {
		ks.tail = w.prev
	} else {
		w.next.prev = w.prev
	}
	w.prev, w.next = nil, nil
	ks.waiting--
	ks.waitUnits -= int64(w.cost)
	ks.wakeHead()
}

// leave takes w out of the line without its going (its context ended, a
// refusal, Close). A departure the Store booked it is spent there whether
// or not a request goes (see Store.Reserve): it passes to the waiter
// behind w, if that one has none and costs no more, so that a cancelled
// waiter leaves no hole, as without a Store (found in review: a request
// cancelled while it waited for its booked departure put every request
// behind it a turn later, a second at 1/s).
func (ks *keyState) leave(w *waiter) {
	if nx := w.next; w.booked && nx != nil && !nx.booked && nx.cost <= w.cost {
		nx.booked, nx.departAt, nx.countedTo, nx.alone = true, w.departAt, w.countedTo, w.alone
	}
	ks.remove(w)
}

func (ks *keyState) wakeHead() {
	if ks.head != nil {
		poke(ks.head.wake)
	}
}

func poke(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// ticket is an admitted attempt.
type ticket struct {
	adm    uint64        // its number among the key's admissions, from 1
	sent   time.Time     // when it was admitted
	mono   time.Duration // the same, from the transport's epoch
	probe  bool          // the first attempt after a pause
	timed  bool          // its answer's time is read, not taken for its admission's (see answeredAt)
	slot   bool          // holds one of the key's MaxInFlight slots
	cost   int32         // the units it was charged: adm is the last of them
	waited time.Duration // time spent waiting for the turn
	heldBy Limit         // what it waited for last, if it waited
	asked  bool          // the Store booked its departure
	alone  error         // then: the Store's Reservation.Fallback
	req    *http.Request // the caller's request, once answered: its method and path name its endpoint (see toldbare.go)
	own    failMark      // once answered, if it failed: where its request's last failure counted in the key's record (see health.fail)
}

// admit waits for an attempt's turn at the key: the pause, the pacer, every
// window and an in-flight slot must all admit it at once. It is the one
// place where requests wait for their turn. An error is a *WaitError.
//
// It is called at now (mono from the epoch), with ks.mu held, and returns
// with it released. An attempt that finds its turn come goes at once, at
// now (or at the latest time the key's pacer was used, if later: see
// keyState.clock); the others wait in the line.
//
// A retry must also be admitted by last, the end of Retry.MaxElapsed (zero:
// no such bound): one whose turn is known to come later fails at once, one
// still waiting then fails then, with ErrMaxElapsed.
//
// The ticket is filled in place, in tk, which is zero.
func (t *Transport) admit(ctx context.Context, ks *keyState, pl *place, attempt int, last, now time.Time, mono time.Duration, tk *ticket) error {
	if err := ctx.Err(); err != nil {
		ks.mu.Unlock()
		return &WaitError{Key: ks.name(), Attempt: attempt, Err: err}
	}
	if pl.cost > 1 && attempt == 1 {
		// A retry is not refused for its cost: its request was admitted
		// under the Policy then, and none is refused for a change of it
		// (SetPolicy; found in review 45: the caller got ErrCostTooLarge,
		// the last answer lost). It goes when the bucket or the window is
		// whole, as a cost beyond what they hold does (see tokensFor).
		if h, err := ks.tooCostly(pl.cost); err != nil {
			ks.mu.Unlock()
			return &WaitError{Key: ks.name(), Attempt: attempt, Limit: h.limit, Window: h.win, Err: err}
		}
	}
	now, mono = ks.clock(now, mono)
	if ks.head == nil && !t.closed.Load() && !t.shares(ks) {
		// The pacer last: AllowN takes its tokens only if it has them, as
		// readyAt and take would, under one lock of the limiter.
		if ks.free(now, mono, pl.cost) && (ks.lim == nil || ks.lim.AllowN(now, pl.cost)) {
			ks.enter(tk, now, mono, attempt > 1, pl.cost)
			if ks.tr != nil {
				ks.paced(now, false, attempt > 1) // learn.go
			}
			ks.mu.Unlock()
			return nil // no wait for a limit: waited stays 0
		}
	}
	// A wait reads the wall clock: its times are compared with the
	// context's deadline and shown in errors (see Transport.now).
	return t.wait(ctx, ks, pl, attempt, last, time.Now(), tk)
}

// wait is admit for an attempt that must wait, or fail: it joins the line,
// at now, with ks.mu held, and leaves it admitted or refused.
func (t *Transport) wait(ctx context.Context, ks *keyState, pl *place, attempt int, last, now time.Time, tk *ticket) error {
	start, retry := now, attempt > 1
	joined := false // in the line, past the refusal at once of a wait known to end too late
	fail := func(h holder, until time.Time, err error) error {
		if joined {
			// Its wait counts in Stats (Waited, WaitTime), though it
			// ended without its turn (found in review: a waiter cancelled
			// or timed out was left out, the waits that hurt most).
			tk.waited = time.Since(start)
		}
		return &WaitError{Key: ks.name(), Attempt: attempt, Limit: h.limit, Window: h.win, Until: until, Err: err}
	}
	deadline, hasDeadline := ctx.Deadline()
	if t.closed.Load() {
		ks.mu.Unlock()
		return fail(holder{}, time.Time{}, ErrClosed)
	}
	if ks.pol.Queue > 0 && int(ks.waiting) >= ks.pol.Queue {
		// A retry too: the queue holds at most Queue, and a retry refused
		// so ends retrying with its last response (see endsRetrying).
		ks.mu.Unlock()
		return fail(holder{limit: LimitQueue}, time.Time{}, ErrQueueFull)
	}
	w := &waiter{place: *pl, wake: make(chan struct{}, 1), bounded: hasDeadline || !last.IsZero()}
	switch {
	case hasDeadline && (last.IsZero() || deadline.Before(last)):
		w.by = deadline
	case !last.IsZero():
		w.by = last
	}
	if w.bounded && (ks.leastBy.IsZero() || w.by.Before(ks.leastBy)) {
		ks.leastBy = w.by
	}
	ahead := ks.insert(w, now)
	// Refuse at once a wait that is known to end too late.
	if werr := t.refuse(ks, now, ahead, pl.cost, deadline, hasDeadline, last, fail); werr != nil {
		ks.remove(w)
		ks.mu.Unlock()
		return werr
	}
	joined = true
	if w.next != nil {
		t.failPassed(ks, w, now, ahead)
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	waitingFor := holder{limit: LimitLine} // what it waits for: behind others, in the line
	var until time.Time                    // when that ends, if known
	for {
		var sleep time.Duration = -1 // until woken
		until = time.Time{}
		if ks.head == w {
			mono := t.since(now)
			at, h := ks.readyAt(now, mono, pl.cost)
			if w.booked && len(ks.pol.Windows) > 0 && at.After(w.countedTo) {
				// Held here (a pause, an in-flight slot taken by a
				// request of higher priority) past what the Store counted
				// of its departure: it books again when it can go, so that
				// its windows count it from its sending, as a Transport
				// alone does; the first departure stays spent (regression,
				// found in review 46: a head booked for 70.02 s, then
				// paused to 73 s, went at 73.014 s counted from 70.02 s,
				// and another Transport got 11 of a window of 10 within
				// [73.014, 83.014)). Only beyond the margin, and only for
				// windows: a bucket's readiness here trails the Store's
				// departure a little, and rebooking on any lateness never
				// ended (redisstore's TestTransportsShareQuota hung).
				w.booked = false
			}
			if w.booked && w.departAt.After(at) {
				at, h = w.departAt, holder{limit: LimitStore}
			}
			if h.limit != LimitNone {
				waitingFor = h
			}
			switch {
			case !at.After(now) && ctx.Err() == nil && t.shares(ks) && !w.booked:
				// Ready here: ask the Store when it may go (booking.go).
				if werr := t.book(ctx, ks, w, deadline, hasDeadline, last, fail); werr != nil {
					ks.remove(w)
					ks.mu.Unlock()
					return werr
				}
				if t.closed.Load() {
					// Closed while it asked the Store (regression, found
					// in review: it went after Close).
					ks.remove(w)
					ks.mu.Unlock()
					return fail(holder{}, time.Time{}, ErrClosed)
				}
				now = time.Now()
				continue
			case !at.After(now) && ctx.Err() == nil:
				ks.remove(w)
				ks.take(tk, now, mono, retry, pl.cost)
				ks.paced(now, waitingFor.limit == LimitRate, retry) // learn.go
				ks.mu.Unlock()
				tk.waited, tk.heldBy = now.Sub(start), waitingFor.limit
				tk.asked, tk.alone = w.booked, w.alone
				return nil
			case !at.After(now): // its turn, but its context ended: take nothing
				ks.leave(w)
				ks.mu.Unlock()
				return fail(holder{}, time.Time{}, ctx.Err())
			}
			lb, lh, werr := t.refuseAt(ks, now, 0, pl.cost, deadline, hasDeadline, last, fail)
			if werr == nil {
				w.doomed = time.Time{} // (a head passed back by a higher priority finds its turn again)
				if w.booked && w.departAt.After(lb) {
					// None behind it goes before the departure the Store
					// booked it (see lowerBound), which may have come
					// after they joined.
					lb, lh = w.departAt, holder{limit: LimitStore}
				}
				ks.failBehind(lb, lh)
			}
			if werr == nil && w.booked && h.limit == LimitStore {
				// A departure handed over by a waiter that left (see
				// leave) may come after this one's bounds, which its
				// own booking would not have.
				switch {
				case hasDeadline && at.After(deadline):
					werr = fail(h, at, ErrWouldExceedDeadline)
				case !last.IsZero() && at.After(last):
					werr = fail(h, at, ErrMaxElapsed)
				}
			}
			if werr == nil && !last.IsZero() && !now.Before(last) { // an end not known in advance
				werr = fail(h, time.Time{}, ErrMaxElapsed)
			}
			if werr != nil {
				ks.leave(w)
				ks.mu.Unlock()
				return werr
			}
			if !at.Equal(never) {
				sleep, until = at.Sub(now), at
			}
		}
		if !last.IsZero() && (sleep < 0 || now.Add(sleep).After(last)) {
			sleep = max(0, last.Sub(now)) // wake at last, to fail then
		}
		ks.mu.Unlock()
		err := t.sleep(ctx, w.wake, sleep, &timer)
		ks.mu.Lock()
		now = time.Now()
		if err == nil && ks.head != w && !last.IsZero() && !now.Before(last) {
			err = ErrMaxElapsed
		}
		if err != nil {
			ks.leave(w)
			ks.mu.Unlock()
			return fail(waitingFor, until, err) // (found in review: Until was zero when it was known)
		}
		if w.recheck && ks.head != w {
			// The Policy changed (repolicy): a turn that now comes after
			// the deadline is refused then, as at its arrival, not at the
			// deadline (regression, found in review 46: in a queue slowed
			// from 10 to 0.1 a second, a request behind four others, its
			// turn now at 50 s, failed at its deadline, 2 s, with the
			// context's error). The head checks at every wake.
			w.recheck = false
			if werr := t.refuse(ks, now, ks.ahead(w), pl.cost, deadline, hasDeadline, last, fail); werr != nil {
				ks.leave(w)
				ks.mu.Unlock()
				return werr
			}
		}
		if !w.doomed.IsZero() && ks.head != w {
			// The head's turn, and so its own, is known to come after its
			// deadline (or MaxElapsed): it fails now, as at its arrival
			// (see failBehind).
			var werr error
			if hasDeadline && w.doomed.After(deadline) {
				werr = fail(w.doomedBy, w.doomed, ErrWouldExceedDeadline)
			} else {
				werr = fail(w.doomedBy, w.doomed, ErrMaxElapsed)
			}
			ks.leave(w)
			ks.mu.Unlock()
			return werr
		}
	}
}

// failPassed fails at once, through their wake, the waiters w passed as it
// joined the line (a higher priority: all those behind it), whose turn,
// later by w's cost, now comes after their deadline (or MaxElapsed), as at
// their arrival, not at the deadline with the context's error (found in
// review). Each is told its units ahead as the walk goes, so the walk is
// one pass over those w passed, which insert walked already. ks.mu must be
// held.
func (t *Transport) failPassed(ks *keyState, w *waiter, now time.Time, ahead int) {
	n, mono := ahead+w.cost, t.since(now)
	for b := w.next; b != nil; b = b.next {
		if b.bounded && b.doomed.IsZero() {
			if at, h := ks.lowerBound(now, mono, n, b.cost); at.After(b.by) {
				b.doomed, b.doomedBy = at, h
				poke(b.wake)
			}
		}
		n += b.cost
	}
}

// ahead is the units of the waiters before w in the line, each its cost.
func (ks *keyState) ahead(w *waiter) int {
	n := 0
	for p := w.prev; p != nil; p = p.prev {
		n += p.cost
	}
	return n
}

// refuse returns the error for a request of the cost given, with ahead
// others before it, whose turn is known to come after its deadline, or
// during a pause longer than the longest Retry-After honoured; nil if it
// may wait. What it knows is a lower bound: waits whose end depends on an
// answer (a probe, a ramp, an in-flight slot, a window entry still on the
// wire) count as ending now.
func (t *Transport) refuse(ks *keyState, now time.Time, ahead, cost int, deadline time.Time, hasDeadline bool,
	last time.Time, fail func(holder, time.Time, error) error) error {
	_, _, err := t.refuseAt(ks, now, ahead, cost, deadline, hasDeadline, last, fail)
	return err
}

// refuseAt is refuse, and the lower bound of the turn it found, and what
// holds it there.
func (t *Transport) refuseAt(ks *keyState, now time.Time, ahead, cost int, deadline time.Time, hasDeadline bool,
	last time.Time, fail func(holder, time.Time, error) error) (time.Time, holder, error) {
	if until := ks.pausedUntil(); ks.pausedAsked().Sub(now) > t.cfg.retry.MaxRetryAfter {
		return until, holder{limit: LimitPause}, fail(holder{limit: LimitPause}, until, ErrPaused)
	}
	at, h := ks.lowerBound(now, t.since(now), ahead, cost)
	switch {
	case h.limit == LimitQuota && at.Sub(now) > t.cfg.retry.MaxRetryAfter:
		return at, h, fail(h, at, ErrPaused)
	case hasDeadline && at.After(deadline):
		return at, h, fail(h, at, ErrWouldExceedDeadline)
	case !last.IsZero() && at.After(last):
		return at, h, fail(h, at, ErrMaxElapsed)
	}
	return at, h, nil
}

// failBehind wakes, to fail at once, the waiters behind the head of the
// line whose deadline (or MaxElapsed) comes before until, a lower bound
// of the head's turn, and so of theirs: none behind the head goes before
// it. The head finds its own at each wake (a pause begun, a quota read
// spent to its reset, a window full), and a pause tells it when it begins
// (regression, found in review: behind a head without a deadline, the
// refused request's own retry, a request whose 5 s deadline a 30 s pause
// passed waited its 5 s, then failed with the context's error; so did one
// behind a head held by a 200 that said the quota spent for a minute).
// The line is walked only when a bound in it may be that early
// (ks.leastBy, a lower bound of them, made exact by the walk), so that
// every wake of the head, and the refusals of a burst that each extend the
// pause a little, walk it once. ks.mu must be held.
func (ks *keyState) failBehind(until time.Time, h holder) {
	if ks.head == nil || ks.leastBy.IsZero() || !until.After(ks.leastBy) {
		return
	}
	var least time.Time
	for w := ks.head.next; w != nil; w = w.next {
		switch {
		case !w.bounded || !w.doomed.IsZero():
		case until.After(w.by):
			w.doomed, w.doomedBy = until, h
			poke(w.wake)
		case least.IsZero() || w.by.Before(least):
			least = w.by
		}
	}
	if hd := ks.head; hd.bounded && (least.IsZero() || hd.by.Before(least)) {
		least = hd.by
	}
	ks.leastBy = least
}

// sleep waits for d (d < 0: indefinitely) or until woken, honouring ctx and
// Close. It reuses *timer across calls.
func (t *Transport) sleep(ctx context.Context, wake <-chan struct{}, d time.Duration, timer **time.Timer) error {
	var fire <-chan time.Time
	if d >= 0 {
		if *timer == nil {
			*timer = time.NewTimer(d)
		} else {
			(*timer).Reset(d)
		}
		fire = (*timer).C
	}
	select {
	case <-wake:
		return nil
	case <-fire:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.done:
		return ErrClosed
	}
}
