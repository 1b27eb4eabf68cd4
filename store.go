package throttle

import (
	"context"
	"errors"
	"math"
	"time"

	"golang.org/x/time/rate"
)

// This file holds the seam through which Transports share a key's quota: the
// Store interface and what it books. MemoryStore (storemem.go) shares within
// one process; package redisstore shares across processes.

// A Store is where Transports — in one process or in many — share a key's
// quota: its token bucket or queue, its Windows and its pause. Set one with
// [WithStore]. Without a Store each Transport paces alone, and four
// processes each configured at the quota send four times too fast.
//
// A Transport passes its key's Policy, with Burst less the tokens it holds
// back against the network's jitter as it sees it (see Policy.Burst), so the
// shared bucket holds them back too.
//
// Each Transport keeps its own line per key (first come, first served,
// deadlines, Close, MaxInFlight, what the server's headers say) exactly as
// without a Store; the head of the line, once the Transport itself would let
// it go, asks the Store for a departure and waits for it. So a key costs
// one Store call per attempt, and no polling. A Store must be safe for
// concurrent use; its methods must honour their context.
//
// Store implementations share one meaning (the tests in package storetest
// hold every one to it): a Store books departures on its own clock, in the
// order asked, each of n units (a request's Cost, 1 without one), so that
//
//   - the departures of a key with a finite Policy.Rate are a token bucket of
//     that rate and of depth max(1, Burst-1) (one token in reserve, as
//     Policy.Burst says), a departure of n units taking n tokens, or with
//     Queue > 0 one every 1/Rate, the one after a departure of n units n/Rate
//     after it (GCRA, the virtual-scheduling form of a token bucket); a
//     departure of more units than the bucket holds goes when it is full,
//     and leaves it owing the rest;
//   - no more than N units depart in any interval of length Per, for each
//     of the Policy's Windows (a departure of more than N units counts as N);
//     a departure counts from its booking for Per and [WindowMargin] of the
//     call that booked it, whatever the margin of a later call: the
//     request reaches the server later than the departure booked, by how
//     much the Transport that booked it cannot know in advance (a Store
//     may count it longer, until one booked before it stops counting,
//     when its log must stay in the order of booking, as Redis's sorted
//     set does);
//     the windows count the key's departures, whatever the Windows they
//     were booked under: after a change of Policy in every Transport (see
//     [Transport.SetPolicy]), a window of a new N counts those booked
//     before, and a window of a new Per counts those booked within the
//     longest Per of the Policy before, from their booking, as a
//     Transport's own windows count what they logged;
//   - no departure falls within a pause: after one, departures resume one
//     every 1/Rate, not in a burst;
//   - a pace cut by [Slowdown].Pace holds for every Transport, and climbs
//     back by a tenth of Policy.Rate per second.
type Store interface {
	// Reserve books the key's next departure under p, of n units (n >= 1;
	// a Store takes less as 1), at once or later, and says how long from
	// now it is. When the departure would come more than maxWait from now,
	// nothing is booked: Reservation.OK is false and Wait says when it
	// would have been (so a maxWait below 0 asks only: a Transport asks
	// so for the end of a pause). A departure booked is spent even if the request
	// then does not go. An error means the Store could not decide: it
	// wraps [ErrStoreUnavailable] when the Store is out of reach, or is the
	// context's error.
	Reserve(ctx context.Context, key string, p Policy, n int, maxWait time.Duration) (Reservation, error)

	// Slow tells every Transport sharing the key what one of them learned
	// from the server: a pause (a 429 and its Retry-After, quota headers
	// saying nothing remains) and, if its pace was cut, the pace now.
	Slow(ctx context.Context, key string, p Policy, s Slowdown) error
}

// WindowMargin is how much longer than a Window's Per the departure that a
// call of [Store].Reserve with ctx books must count in the window: how much
// the delays between their departures booked and their reaching the server
// differ from one request to another (the Store's answer on its way back,
// the Transport's wake-up, the request's trip: up to the key's round trip,
// as a window of the Transport's own counts each request until its
// answer), so that departures more than Per apart never reach the server
// within one Per. A Transport sets it on the context it passes (a second
// before the key's first answer, when its trip is not known yet); a Store
// reads it (0 when not set) and counts each departure with the margin of
// the call that booked it. Counted for Per alone, departures sent at once
// at a window's start and at its end, whose trips differed by tens of
// milliseconds, reached the server as more than N within one Per (found in
// review: 57-60 of a window of 50 a second, two Transports whose requests
// took 0-30 ms to arrive).
func WindowMargin(ctx context.Context) time.Duration {
	m, _ := ctx.Value(marginKey{}).(time.Duration)
	return max(m, 0)
}

type marginKey struct{}

// ContextWithWindowMargin returns a copy of ctx that carries margin, for
// [WindowMargin] to read: what a Transport sets on the context it passes
// to [Store].Reserve. A Store's own tests (package storetest) book with it
// as Transports would.
func ContextWithWindowMargin(ctx context.Context, margin time.Duration) context.Context {
	return context.WithValue(ctx, marginKey{}, margin)
}

// Reservation is a departure booked by a [Store].
type Reservation struct {
	Wait   time.Duration // from now until the departure (0: at once)
	OK     bool          // booked; false: Wait exceeded the maxWait asked, nothing was booked
	Paused bool          // a pause holds the key until the departure: it goes at the pause's end, or within half a turn of it and the n-1 turns a departure of n units waits for the tokens beyond the one the bucket holds then, or, the pace cut by the pause's Slowdown and climbed since, within what the bucket's tolerance lost as it climbed
	// Fallback is not nil when the Store could not reach what it shares and
	// booked the departure alone, as its configuration allows (see
	// redisstore's FailOpen); it says why. The Transport then sends
	// [EventStore].
	Fallback error
}

// Slowdown is what a Transport tells the others through [Store].Slow.
type Slowdown struct {
	Pause time.Duration // > 0: no departure of the key before this long from now
	Pace  rate.Limit    // > 0: the key's pace was cut to this, below Policy.Rate
}

// ErrStoreUnavailable: the [Store] set by [WithStore] could not be reached
// (or did not answer in time), and it is configured to fail requests rather
// than pace them alone (redisstore's FailClosed). The request failed at once.
var ErrStoreUnavailable = errors.New("throttle: store unavailable")

// WithStore makes the Transport share its keys' quotas through s, with every
// other Transport using the same Store (another process's, through Redis;
// see package redisstore). Each key's Policy should be the same in every
// Transport: the whole quota, not a share of it. Keys whose Policy paces
// (a Rate, or Windows) are shared; an unpaced key is not worth a round trip
// per request, and pauses alone, as without a Store. What the server's
// quota headers say is read by each Transport from its own answers (they
// count every client's requests). nil, the default: each Transport paces
// alone.
func WithStore(s Store) Option {
	return optionFunc(func(c *config) {
		c.once("WithStore")
		c.store = s
	})
}

// Schedule is the arithmetic every Store shares: the departure a key's state
// allows at now under p, and the state after booking it. Stores that keep
// their state elsewhere (Redis) do the same arithmetic there; MemoryStore
// calls these.

// storePace is the key's pace at now: Policy.Rate, or a cut pace climbing
// back by a tenth of Rate per second; 0 for an unpaced policy.
func storePace(p Policy, cut rate.Limit, cutAt, now time.Time) rate.Limit {
	if !p.paced() {
		return 0
	}
	if cut <= 0 {
		return p.Rate
	}
	climbed := cut + p.Rate*climbShare*rate.Limit(now.Sub(cutAt).Seconds())
	return min(p.Rate, climbed)
}

// storeTolerance is how far ahead of its theoretical arrival time a
// departure of n units may go at pace r: the bucket's depth less n (less
// all it holds, if n is more), in intervals.
func storeTolerance(p Policy, r rate.Limit, n int) time.Duration {
	depth := 1
	if p.Queue <= 0 {
		depth = max(1, p.Burst-1)
	}
	return spanOf(depth-min(n, depth), r)
}

// spanOfWindows is the longest Per of ws, for which a key's departures are
// kept, and their largest N, which a departure counts as at most.
func spanOfWindows(ws []Window) (per time.Duration, n int) {
	for _, w := range ws {
		per, n = max(per, w.Per), max(n, w.N)
	}
	return per, n
}

// spanOf is n intervals at pace r (0 for an unpaced key), saturated.
func spanOf(n int, r rate.Limit) time.Duration {
	if r <= 0 || n <= 0 {
		return 0
	}
	secs := float64(n) / float64(r)
	if secs >= math.MaxInt64/1e9 {
		return math.MaxInt64
	}
	return time.Duration(secs * 1e9)
}
