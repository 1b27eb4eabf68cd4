package throttle

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"golang.org/x/time/rate"
)

// This file holds what a request's cost changes beyond the pacer's
// arithmetic: the check that a key can ever admit it, and the server's own
// figure of what it cost, read by WithCost's function, which corrects the
// charge. The rules are in Cost's documentation.

// tooCostly returns, for an attempt of the cost given, the limit of ks that
// can never admit it and the error that says so (matching ErrCostTooLarge),
// or a nil error. ks.mu must be held.
//
// A token bucket holds Burst less the token kept in reserve (max(1,
// Burst-1), what its limiter is made with): more, and the server's own
// bucket, as deep as Burst, would refuse it whenever a request overtook
// another. Beyond that one token, the reserve grows with the jitter the key
// sees; an attempt that costs more than the bucket holds then goes when it
// is full (see tokensFor). A leaky bucket admits any cost: it goes at its
// turn, and the next waits for what it took. A pace learned from the
// server, or its quota headers, are no Policy: a cost beyond them is sent
// when they are whole, and the server decides.
func (ks *keyState) tooCostly(cost int) (holder, error) {
	p := &ks.pol.Policy
	if most := max(1, p.Burst-1); p.paced() && p.Queue == 0 && cost > most {
		return holder{limit: LimitRate}, fmt.Errorf("%w: cost %d, and the token bucket holds %d (Burst %d, less the token kept in reserve)",
			ErrCostTooLarge, cost, most, p.Burst)
	}
	for _, w := range p.Windows {
		if cost > w.N {
			return holder{LimitWindow, w}, fmt.Errorf("%w: cost %d, more than the window's N of %d", ErrCostTooLarge, cost, w.N)
		}
	}
	return holder{}, nil
}

// WithCost sets how the Transport reads, from an answer, what its request
// really cost, in the units of [Cost]: fn is given each response (any
// status, 429s included: a refused request may have cost nothing) and
// returns the figure, or ok false when the answer says nothing. The
// attempt's charge is then corrected against the key's limits:
//
//   - a figure above the charge takes the difference too: tokens from the
//     bucket (which may leave it owing: the requests after wait), and as
//     many units in each Window, from the answer's time;
//   - a figure below gives back the difference: tokens to the bucket (up to
//     what it holds), and the units in each Window that the server says it
//     did not count, whose room is free at once.
//
// The figure, not the charge, is what the key's mirror of the server's
// quota headers counts the answer as.
//
// What the server's quota headers say remains needs no correction: their
// counts are the server's. With a Store (WithStore), the shared quota
// keeps the charge booked; the correction holds in this Transport.
//
// fn may read the response's status and header, not its body, which is
// the caller's. It is called from the request's goroutine, once per
// attempt answered (retries included, each corrected on its own), and must
// be quick. A figure below 0 or above 1e9 is ignored. Should fn panic, the
// key is left in order (the charge as it was, the in-flight slot and the
// probe given back), the response is closed and the panic goes on to the
// caller, as for Retry's hooks. nil, the default: each attempt is charged
// the cost given with Cost, 1 without it.
//
// [CostHeader] reads the figure from a header.
func WithCost(fn func(resp *http.Response) (n int, ok bool)) Option {
	return optionFunc(func(c *config) {
		c.once("WithCost")
		c.cost = fn
	})
}

// CostHeader returns a function for [WithCost] that reads what a request
// cost from the named header of its answer: a whole number of units
// ("12"), with surrounding whitespace. An answer without the header, or
// with another value, says nothing.
func CostHeader(name string) func(*http.Response) (int, bool) {
	name = http.CanonicalHeaderKey(name)
	return func(resp *http.Response) (int, bool) {
		v := resp.Header[name]
		if len(v) == 0 {
			return 0, false
		}
		n, err := strconv.Atoi(strings.TrimSpace(v[0]))
		return n, err == nil
	}
}

// figure is what WithCost's function said of an answer.
type figure struct {
	n   int // the units the attempt cost, if ok
	ok  bool
	hit any // the function panicked with this: the panic goes on once the key is in order
}

// serverCost calls WithCost's function on resp. A panic in it is kept in
// the figure, so that the key can be put in order before it goes on.
func (t *Transport) serverCost(resp *http.Response) (f figure) {
	defer func() {
		if p := recover(); p != nil {
			f = figure{hit: p}
		}
	}()
	n, ok := t.cfg.cost(resp)
	if ok && n >= 0 && n <= maxCost {
		f.n, f.ok = n, true
	}
	return f
}

// correct charges the attempt tk what its answer says it really cost, n
// units, at now, and returns n. ks.mu must be held, and the answer learned
// with n as its figure (learn counts n in the windows, from the answer, and
// in the mirror of the quota headers).
func (t *Transport) correct(ks *keyState, tk ticket, n int, now time.Time) int {
	diff := n - int(tk.cost)
	if diff == 0 {
		return n
	}
	now, _ = ks.clock(now, t.since(now))
	if diff > 0 {
		ks.admitted += uint64(diff)
		if ks.lim != nil {
			if ks.levels != nil {
				// A take like an admission's: the level before it bounds
				// the refunds of the attempts charged before it (found in
				// review: a bucket that refilled whole after a charge, then
				// emptied by another answer's correction up, gave the
				// charge back whole, tokens the refill had restored).
				ks.levels.took(ks.admitted, ks.lim.TokensAt(now))
			}
			takeTokens(ks.lim, now, diff)
		}
	} else {
		if ks.lim != nil {
			giveTokens(ks.lim, now, ks.levels.refund(ks.lim, now, tk.adm, -diff))
		}
		ks.troubled().stats.refunded += int64(-diff)
	}
	ks.wakeHead()
	return n
}

// levels keeps, for a key whose answers may correct their charge down
// (WithCost), the pacer's level just before each of its takes since the
// oldest it still needs, so that a refund gives back no more than the
// bucket lost. An attempt charged c that cost f < c left the bucket c - f
// lower than it would have been, but only until the bucket would have been
// full: past its depth the refill is lost. The refund at the answer is
// min(c - f, depth - the highest level the bucket reached since the
// charge), and the level is highest just before a take, or now (it only
// rises between takes). Given back whole, the refill that other requests
// took while the attempt was on its way was handed out twice (found in
// review: a bucket of 10 a second, 2 deep, an attempt of cost 2 answered
// "cost 0" after 250 ms, while another of cost 2 went at 200 ms: the next
// went at once, 4 units within 50 ms; a leaky bucket let two go 50 ms
// apart at 10 a second).
//
// The takes are kept as a stack whose levels fall from the oldest to the
// newest: a take at a level no higher than a later one's never bounds a
// refund that the later one does not (a refund counts the takes after its
// own charge). At most maxLevels; a refund to an attempt older than the
// ones dropped gives back nothing, not knowing how high the bucket was.
type levels struct {
	adm  []uint64  // the takes' admission numbers, oldest first
	lvl  []float64 // the level before each, falling
	lost uint64    // takes up to this admission were dropped
}

// maxLevels is the most takes levels keeps.
const maxLevels = 64

// took notes a take by the attempt adm at the level lvl, before it.
func (l *levels) took(adm uint64, lvl float64) {
	n := len(l.lvl)
	for n > 0 && l.lvl[n-1] <= lvl {
		n--
	}
	l.adm, l.lvl = append(l.adm[:n], adm), append(l.lvl[:n], lvl)
	if len(l.adm) > maxLevels {
		l.lost = l.adm[0]
		l.adm, l.lvl = append(l.adm[:0], l.adm[1:]...), append(l.lvl[:0], l.lvl[1:]...)
	}
}

// forget drops the takes up to the admission adm: the bucket was emptied
// on purpose after them (see keyState.drain), and their refunds give back
// nothing, which the drain would have taken had they not been charged.
func (l *levels) forget(adm uint64) {
	l.lost = max(l.lost, adm)
	l.adm, l.lvl = l.adm[:0], l.lvl[:0]
}

// refund is how much of want tokens lim may give back at now to the
// attempt adm: no more than its depth less the highest level since the
// attempt's take. Nil levels (no WithCost) give back none.
func (l *levels) refund(lim *rate.Limiter, now time.Time, adm uint64, want int) int {
	if l == nil || adm <= l.lost {
		return 0
	}
	most := lim.TokensAt(now)
	for i, a := range l.adm {
		if a > adm {
			most = max(most, l.lvl[i]) // the highest of the takes since
			break
		}
	}
	return min(want, int(math.Floor(float64(lim.Burst())-most)))
}

// giveTokens gives n tokens back to lim at now, up to what it holds. A
// reservation of -n tokens is what x/time/rate offers for it: it adds them
// (the limiter caps its tokens at its depth when next it counts them), and
// nothing else of the limiter moves. (Reservation.Cancel gives back a
// whole reservation, and only before its time.)
func giveTokens(lim *rate.Limiter, now time.Time, n int) {
	if n > 0 {
		lim.ReserveN(now, -n)
	}
}
