package redisstore

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/throttlehttp/throttle"
)

// This file holds the Store: each decision is one script run by Redis, on
// Redis's clock.

// Store is a [throttle.Store] in Redis: every Transport given a Store on the
// same Redis, with the same prefix, in any process, shares each key's
// quota. Each Reserve and each Slow is one call of a Lua script, which
// reads the time from the Redis server (never from the processes, whose
// clocks differ) and does the arithmetic of [throttle.MemoryStore] there.
//
// While Redis does not answer, a Store books alone at a share of the quota
// (FailOpen, the default) or fails at once (FailClosed); it asks Redis
// again about once a second, and shares again as soon as Redis answers.
//
// A Store is safe for concurrent use. It holds no connection of its own,
// and no goroutine but a call whose caller stopped waiting (its context
// ended, or its Transport was closed): go-redis bounds a call by its
// deadline alone, so the call runs on until Redis answers or the Store's
// timeout passes (see WithTimeout), and then ends; and, while it holds a
// pause or a cut pace told while Redis did not answer, a timer that tells
// Redis about once a second, each call within the timeout, until Redis
// has them or they are over. Closing the client is
// the caller's business, once the Transports using the Store are closed
// (a call still running then ends with the client's error).
type Store struct {
	client redis.UniversalClient
	cfg    config
	health health
	dials  *dials                // why the client's dials fail, if they do (shared by the Stores of one client)
	local  *throttle.MemoryStore // FailOpen's, while Redis is away

	mu         sync.Mutex
	alone      map[string]time.Time // the keys that booked alone in this outage, and when last
	aloneIn    uint64               // that outage (see health.outage)
	aloneSweep int                  // the size of alone at which it is swept next
	told       map[string]toldNote  // slowdowns told while Redis did not answer, to tell it once it does
	toldSweep  int                  // the size of told at which it is swept next
	retelling  bool                 // a timer will try to tell them (see retellSoon)
}

var _ throttle.Store = (*Store)(nil)

// New returns a Store that keeps its state in the Redis client talks to (a
// client, a cluster client, a failover client...). Make the client with
// Options.ContextTimeoutEnabled set, so that WithTimeout bounds each call
// on the socket too. New adds a hook to the client (to the nodes that a
// cluster or ring client makes from then on), once per client however
// many Stores are made with it, which leaves its commands alone and notes
// why its dials fail, so that a call without an answer says why (a
// refused connection, a failed TLS handshake). New panics on a nil client
// or an option out of range.
func New(client redis.UniversalClient, opts ...Option) *Store {
	if client == nil {
		panic("redisstore: New with a nil client")
	}
	cfg := defaults()
	for _, o := range opts {
		o.apply(&cfg)
	}
	s := &Store{client: client, cfg: cfg, local: throttle.NewMemoryStore()}
	s.dials = dialsOf(client)
	return s
}

// Reserve books the key's next departure, of n units; see [throttle.Store].
func (s *Store) Reserve(ctx context.Context, key string, p throttle.Policy, n int, maxWait time.Duration) (throttle.Reservation, error) {
	if err := ctx.Err(); err != nil {
		return throttle.Reservation{}, err
	}
	n = max(n, 1)
	start := time.Now()
	bound := s.bound(ctx, start)
	ask, down := s.health.ask(start, bound > 0)
	if !ask {
		return s.reserveAlone(ctx, key, p, n, maxWait, down)
	}
	call, cancel := ctx, context.CancelFunc(func() {})
	if bound > 0 {
		call, cancel = context.WithTimeout(ctx, bound)
	}
	defer cancel()
	err := s.retellKey(call, key)
	var res throttle.Reservation
	if err == nil {
		res, err = s.reserve(call, key, p, n, maxWait)
	}
	// What the call to Redis took comes off what the caller can wait, as
	// maxWait is counted from the start of the call: booked alone with the
	// whole of it, a departure fell up to the timeout after the caller's
	// deadline (regression, found in review 45: a departure booked 200 ms
	// into a 700 ms deadline went at 800 ms, and the request slept until
	// its deadline rather than fail at once with ErrWouldExceedDeadline).
	left := maxWait - time.Since(start)
	if bound > 0 && err != nil && call.Err() != nil && ctx.Err() == nil {
		// No answer within what the caller can wait, less what its
		// request needs: it books alone rather than fail (FailOpen's
		// promise), or fails with ErrStoreUnavailable (FailClosed's;
		// see reserveAlone) (found in review: callers whose deadlines were
		// shorter than the timeout all failed while Redis hung, and
		// Redis was never taken for away). A wait shorter than the
		// timeout says too little of Redis to take it for away, but
		// enough that calls as short stop asking it for a while (see
		// health).
		why := noAnswer(err, fmt.Errorf("%w: redisstore: no answer from Redis within %v, what the request could wait", throttle.ErrStoreUnavailable, bound))
		s.health.abandon(down, why, time.Now())
		return s.reserveAlone(ctx, key, p, n, left, why)
	}
	if err = s.health.answered(ctx, err, down, s.cfg.timeout); err == nil || ctx.Err() != nil {
		if err == nil && down != nil {
			s.back()
		}
		return res, err
	}
	return s.reserveAlone(ctx, key, p, n, left, err)
}

// bound is how long a Reserve asks Redis for, from now: 0 (the Store's
// timeout), or, when ctx's deadline comes before the timeout would, three
// quarters of the way to it, so that a request whose Store call found no
// answer still has the time to go alone (FailOpen), or to fail with
// ErrStoreUnavailable rather than its deadline (FailClosed). Either way the
// call cut short tells health that Redis did not answer, and calls as short
// stop asking it for a while (found in review, under FailClosed: while
// Redis hung, every request with a deadline under the timeout waited out
// its whole deadline and failed with it, never with ErrStoreUnavailable,
// and Redis was never taken for away).
func (s *Store) bound(ctx context.Context, now time.Time) time.Duration {
	dl, ok := ctx.Deadline()
	if !ok {
		return 0
	}
	left := dl.Sub(now)
	if left >= s.cfg.timeout {
		return 0
	}
	return max(left*3/4, 0)
}

// Slow shares a pause and a cut pace; see [throttle.Store].
func (s *Store) Slow(ctx context.Context, key string, p throttle.Policy, sd throttle.Slowdown) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ask, down := s.health.ask(time.Now(), false)
	if !ask {
		return s.slowAlone(ctx, key, p, sd, down)
	}
	err := s.retellKey(ctx, key)
	if err == nil {
		err = s.slow(ctx, key, p, sd)
	}
	if err = s.health.answered(ctx, err, down, s.cfg.timeout); err == nil || ctx.Err() != nil {
		if err == nil && down != nil {
			s.back()
		}
		return err
	}
	return s.slowAlone(ctx, key, p, sd, err)
}

// call runs f, a call of Redis, bounded by the Store's timeout, and
// returns as soon as ctx ends. go-redis bounds a call on the socket by its
// context's deadline alone: a caller's context canceled without one (a
// client gone, Close) would wait for Redis, as long as the timeout
// (regression, found in review). f then runs on to its own end, within the
// timeout, and its result is dropped: what it booked counts against the
// quota, as any booking of a request that did not go. A call that ends
// without an answer carries why, if the client's dials failed meanwhile
// (see dials.why).
func (s *Store) call(ctx context.Context, f func(context.Context) error) error {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, s.cfg.timeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- f(ctx) }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		select {
		case err = <-done: // an answer that came with the end: it stands
		default:
			err = ctx.Err()
		}
	}
	return s.dials.why(ctx, err, start)
}

// reserve runs reserve.lua.
func (s *Store) reserve(ctx context.Context, key string, p throttle.Policy, n int, maxWait time.Duration) (throttle.Reservation, error) {
	var v []int64
	err := s.call(ctx, func(ctx context.Context) (err error) {
		v, err = reserveScript.Run(ctx, s.client, s.keys(key, p), reserveArgs(p, n, maxWait, throttle.WindowMargin(ctx))...).Int64Slice()
		return err
	})
	if err != nil {
		return throttle.Reservation{}, err
	}
	if len(v) != 3 {
		return throttle.Reservation{}, fmt.Errorf("redisstore: the reserve script answered %v, want 3 integers", v)
	}
	return throttle.Reservation{
		OK:     v[0] == 1,
		Wait:   fromMicros(v[1]),
		Paused: v[2] == 1,
	}, nil
}

// fromMicros is us microseconds as a Duration, saturated: a wait beyond
// its range (some 292 years) is the longest, as MemoryStore's.
func fromMicros(us int64) time.Duration {
	if us >= math.MaxInt64/int64(time.Microsecond) {
		return math.MaxInt64
	}
	return time.Duration(us) * time.Microsecond
}

// slow runs slow.lua.
func (s *Store) slow(ctx context.Context, key string, p throttle.Policy, sd throttle.Slowdown) error {
	keys := s.keys(key, throttle.Policy{}) // the hash alone
	return s.call(ctx, func(ctx context.Context) error {
		return slowScript.Run(ctx, s.client, keys, slowArgs(p, sd)...).Err()
	})
}
