package redisstore

import (
	"fmt"
	"time"
)

// This file holds the options of New: where the keys live, how long a call
// may take, and what to do when Redis does not answer.

// An Option configures a [Store] in [New].
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	prefix  string
	timeout time.Duration
	share   float64 // > 0: FailOpen at this share; 0: FailClosed
}

// Defaults of the options.
const (
	// DefaultPrefix begins every Redis key of a Store without WithPrefix.
	DefaultPrefix = "throttle:"
	// DefaultTimeout bounds each call to Redis of a Store without
	// WithTimeout: far above the sub-millisecond answer of a healthy Redis
	// nearby, or the few milliseconds of a busy one, and still short enough
	// that the request which finds Redis gone, and the one trial a second
	// while it stays gone, wait no more than a fifth of a second.
	DefaultTimeout = 200 * time.Millisecond
	// DefaultShare is the share of each quota a Store without FailOpen or
	// FailClosed paces at alone while Redis does not answer: a job of up to
	// four processes stays within the quota; with more, each process still
	// slows down when the server says so (429, quota headers).
	DefaultShare = 0.25
)

func defaults() config {
	return config{prefix: DefaultPrefix, timeout: DefaultTimeout, share: DefaultShare}
}

// WithPrefix sets what begins the name of every Redis key the Store writes,
// so that many Stores (of different jobs, or different quotas) share one
// Redis without sharing keys: Stores with the same prefix share each
// partition key's quota; Stores with different prefixes share nothing. A
// prefix should not hold '{' or '}': they would change the hash tag that
// keeps a key's Redis keys in one cluster slot (see the package
// documentation). "" puts the keys at the root of the database. Without
// WithPrefix: DefaultPrefix, "throttle:".
func WithPrefix(prefix string) Option {
	return optionFunc(func(c *config) { c.prefix = prefix })
}

// WithTimeout bounds each call to Redis: a call that has no answer after d
// counts as Redis not answering (see FailOpen and FailClosed). The bound is
// a deadline on the call's context, which go-redis honours on the socket
// only for a client made with Options.ContextTimeoutEnabled; otherwise the
// client's ReadTimeout and WriteTimeout bound the call. New panics on d <= 0.
// Without WithTimeout: DefaultTimeout, 200 ms.
func WithTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d <= 0 {
			panic(fmt.Sprintf("redisstore: WithTimeout(%v): the timeout must be positive", d))
		}
		c.timeout = d
	})
}

// FailOpen makes the Store, while Redis does not answer, book departures
// alone in this process (in a throttle.MemoryStore of its own) at share of
// each key's quota: share of Policy.Rate and of Policy.Burst, and of each
// Window's N, each at least 1. Set share to about one over the number of
// processes sharing the quota. A key's bucket alone starts empty, at each
// outage: one departure at once, then one every 1/Rate of the share (what
// the processes spent of the shared bucket is not known); its windows
// alone start whole, and do not count what the process booked in Redis
// within their Per (a window may see up to twice its N in the Per that
// Redis goes away in). Each Reservation booked alone carries the
// error in Reservation.Fallback (the Transport sends throttle.EventStore),
// and each Slow told while Redis is away holds the local bookings and
// returns the error. New panics unless 0 < share <= 1. Without FailOpen or
// FailClosed: FailOpen(DefaultShare), a quarter of the quota.
func FailOpen(share float64) Option {
	return optionFunc(func(c *config) {
		if !(share > 0 && share <= 1) {
			panic(fmt.Sprintf("redisstore: FailOpen(%v): the share must be in (0, 1]", share))
		}
		c.share = share
	})
}

// FailClosed makes the Store, while Redis does not answer, fail each
// Reserve and Slow at once with an error that wraps
// throttle.ErrStoreUnavailable: the Transport fails the request rather
// than send it unshared. Use it where exceeding the quota costs more than
// failing requests (a quota whose breach bans the key). Not the default:
// see FailOpen.
func FailClosed() Option {
	return optionFunc(func(c *config) { c.share = 0 })
}
