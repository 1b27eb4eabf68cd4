package throttletest

import (
	"math"
	"math/bits"
	"time"
)

// A limiter is one Limit's state for one key. Its methods decide from the time they
// are given and never block; the caller holds the key's mutex.
type limiter interface {
	// check reports whether one more request fits at now; if not, wait is how long
	// until it would, provided nothing else is admitted meanwhile.
	check(now time.Time) (ok bool, wait time.Duration)
	// take records a request admitted at now and returns when it is served: now,
	// except in a leaky bucket's queue.
	take(now time.Time) time.Time
	// release is called once an admitted request has been handled.
	release()
	// quota describes the limit at now for the quota headers; ok is false for a
	// limit that is not a quota over time.
	quota(now time.Time) (q quota, ok bool)
}

// quota is the state of one limit at an instant, as the quota headers need
// it; headers.go says how each family announces it.
type quota struct {
	name      string
	algorithm Algorithm
	limit     int           // requests the limit holds when whole: N, Burst, Queue+1
	remaining int           // requests it would admit at once now
	reset     time.Duration // until it is whole again
	next      time.Duration // until it admits more than remaining in all, were they all sent now
	window    time.Duration // Per; for a bucket, the time it takes to refill from empty
}

func newLimiter(l Limit) limiter {
	name := l.Name
	if name == "" {
		name = l.Algorithm.String()
	}
	switch l.Algorithm {
	case TokenBucket:
		return &tokenBucket{name: name, interval: interval(l.Rate), burst: max(l.Burst, 1)}
	case LeakyBucket:
		return &leakyBucket{name: name, interval: interval(l.Rate), capacity: l.Queue + 1}
	case FixedWindow:
		return &fixedWindow{name: name, n: l.N, per: l.Per}
	case SlidingLog:
		return &slidingLog{name: name, n: l.N, per: l.Per}
	case SlidingCounter:
		return &slidingCounter{name: name, n: l.N, per: l.Per}
	default:
		return &concurrency{n: l.N}
	}
}

// interval is the time between two requests at rate per second.
func interval(rate float64) time.Duration {
	return max(time.Duration(math.Round(float64(time.Second)/rate)), 1)
}

type noRelease struct{}

func (noRelease) release() {}

// tokenBucket is GCRA: tat is the theoretical arrival time, when the bucket would be
// full again. A request fits when it leaves at least one token: now >= tat - (burst-1)*interval.
type tokenBucket struct {
	noRelease
	name     string
	interval time.Duration
	burst    int
	tat      time.Time
}

func (b *tokenBucket) check(now time.Time) (bool, time.Duration) {
	allowAt := b.tat.Add(-time.Duration(b.burst-1) * b.interval)
	if now.Before(allowAt) {
		return false, allowAt.Sub(now)
	}
	return true, 0
}

func (b *tokenBucket) take(now time.Time) time.Time {
	b.tat = later(b.tat, now).Add(b.interval)
	return now
}

// quota counts whole tokens: the bucket lacks ceil((tat-now)/interval) of
// Burst. The next whole token comes when tat-now falls to a multiple of
// interval, or one interval after a request when the bucket is full; sending
// the tokens left moves tat by whole intervals, which does not change when.
func (b *tokenBucket) quota(now time.Time) (quota, bool) {
	used := max(b.tat.Sub(now), 0)
	spent := int((used + b.interval - 1) / b.interval) // whole tokens missing
	next := used % b.interval
	if next == 0 {
		next = b.interval
	}
	return quota{
		name: b.name, algorithm: TokenBucket, limit: b.burst, remaining: max(b.burst-spent, 0),
		reset: used, next: next, window: time.Duration(b.burst) * b.interval,
	}, true
}

// fixedWindow counts requests in windows aligned to multiples of per.
type fixedWindow struct {
	noRelease
	name  string
	n     int
	per   time.Duration
	start time.Time
	count int
}

func (w *fixedWindow) roll(now time.Time) {
	if start := now.Truncate(w.per); !start.Equal(w.start) {
		w.start, w.count = start, 0
	}
}

func (w *fixedWindow) check(now time.Time) (bool, time.Duration) {
	w.roll(now)
	if w.count < w.n {
		return true, 0
	}
	return false, w.start.Add(w.per).Sub(now)
}

func (w *fixedWindow) take(now time.Time) time.Time {
	w.roll(now)
	w.count++
	return now
}

func (w *fixedWindow) quota(now time.Time) (quota, bool) {
	w.roll(now)
	end := w.start.Add(w.per).Sub(now)
	return quota{
		name: w.name, algorithm: FixedWindow, limit: w.n, remaining: w.n - w.count,
		reset: end, next: end, window: w.per,
	}, true
}

// slidingLog keeps the times of the requests admitted in the last per; an entry at
// t counts while now-t < per.
type slidingLog struct {
	noRelease
	name string
	n    int
	per  time.Duration
	log  []time.Time
}

func (s *slidingLog) prune(now time.Time) { s.log = expire(s.log, s.per, now) }

// expire drops from the sorted times ts those at least d old at now.
func expire(ts []time.Time, d time.Duration, now time.Time) []time.Time {
	i := 0
	for i < len(ts) && !now.Before(ts[i].Add(d)) {
		i++
	}
	return ts[i:]
}

func (s *slidingLog) check(now time.Time) (bool, time.Duration) {
	s.prune(now)
	if len(s.log) < s.n {
		return true, 0
	}
	return false, s.log[0].Add(s.per).Sub(now) // until the oldest entry expires
}

func (s *slidingLog) take(now time.Time) time.Time {
	s.prune(now)
	s.log = append(s.log, now)
	return now
}

// quota's next is when the oldest entry expires: the entries sent now
// expire after it. With an empty log, those sent now are the oldest.
func (s *slidingLog) quota(now time.Time) (quota, bool) {
	s.prune(now)
	q := quota{name: s.name, algorithm: SlidingLog, limit: s.n, remaining: s.n - len(s.log), next: s.per, window: s.per}
	if len(s.log) > 0 {
		q.reset = s.log[len(s.log)-1].Add(s.per).Sub(now)
		q.next = s.log[0].Add(s.per).Sub(now)
	}
	return q, true
}

// slidingCounter keeps the counts of the current and the previous fixed window and
// estimates the requests in the last per as prev*(1-elapsed/per) + curr.
//
// It decides in integers: the estimate at e into a window is at most a whole
// count c when prev*(per-e) + curr*per <= c*per, in 128-bit products. In
// floats the estimate landed a hair above a whole count where it was exactly
// on it (15*(1-1/3)+5 = 15.000000000000002), and the check refused what the
// headers, counted with a slack, said it would admit: a client spacing
// RateLimit-Policy's 15 per 3s of N=16 was refused 10 times a minute, and the
// 12th of 12 said to remain got a 429. Check, wait and quota now count alike.
type slidingCounter struct {
	noRelease
	name       string
	n          int
	per        time.Duration
	start      time.Time
	prev, curr int
}

func (s *slidingCounter) roll(now time.Time) {
	start := now.Truncate(s.per)
	switch {
	case start.Equal(s.start):
		return
	case start.Equal(s.start.Add(s.per)):
		s.prev, s.curr = s.curr, 0
	default:
		s.prev, s.curr = 0, 0
	}
	s.start = start
}

// u128 is an unsigned 128-bit integer, for the products of counts and
// nanoseconds, which overflow 64 bits (a count of 10^6 over a day).
type u128 struct{ hi, lo uint64 }

func mul(count int, d time.Duration) u128 {
	hi, lo := bits.Mul64(uint64(count), uint64(d))
	return u128{hi, lo}
}

func (a u128) add(b u128) u128 {
	lo, carry := bits.Add64(a.lo, b.lo, 0)
	hi, _ := bits.Add64(a.hi, b.hi, carry)
	return u128{hi, lo}
}

func (a u128) sub(b u128) u128 { // a >= b
	lo, borrow := bits.Sub64(a.lo, b.lo, 0)
	hi, _ := bits.Sub64(a.hi, b.hi, borrow)
	return u128{hi, lo}
}

func (a u128) less(b u128) bool { return a.hi < b.hi || a.hi == b.hi && a.lo < b.lo }

// div returns a/d, which the caller knows fits in 64 bits (a.hi < d).
func (a u128) div(d uint64) uint64 {
	q, _ := bits.Div64(a.hi, a.lo, d)
	return q
}

// within reports whether the estimate at elapsed time e into a window is at
// most limit: prev*(per-e) + curr*per <= limit*per.
func within(prev, curr, limit int, e, per time.Duration) bool {
	return !mul(limit, per).less(mul(prev, per-e).add(mul(curr, per)))
}

func (s *slidingCounter) check(now time.Time) (bool, time.Duration) {
	s.roll(now)
	wait := s.wait(s.curr, now.Sub(s.start))
	return wait == 0, wait
}

// wait returns how long from elapsed into the current window until one more
// request fits, were curr the current window's count.
func (s *slidingCounter) wait(curr int, elapsed time.Duration) time.Duration {
	limit := s.n - 1 // the estimate must leave room for this request
	if within(s.prev, curr, limit, elapsed, s.per) {
		return 0
	}
	if e, ok := fit(s.prev, curr, s.per, limit); ok {
		return e - elapsed // later in this window
	}
	e, ok := fit(curr, 0, s.per, limit) // in the next window, curr becomes prev
	if !ok {
		e = s.per // N is 1: in the window after
	}
	return s.per - elapsed + e
}

// fit returns the least elapsed time e < per, in whole nanoseconds, at which
// the estimate is at most limit, and whether there is one:
// prev*(per-e) <= (limit-curr)*per holds from per-e = floor((limit-curr)*per/prev).
func fit(prev, curr int, per time.Duration, limit int) (time.Duration, bool) {
	room := limit - curr
	switch {
	case room < 0:
		return 0, false
	case room >= prev: // from the window's start (prev 0 included)
		return 0, true
	}
	e := per - time.Duration(mul(room, per).div(uint64(prev))) // room < prev: the quotient is below per
	return e, e < per
}

func (s *slidingCounter) take(now time.Time) time.Time {
	s.roll(now)
	s.curr++
	return now
}

// quota's remaining is the most r with the estimate at most N after r more:
// prev*(per-e) + (curr+r)*per <= N*per.
func (s *slidingCounter) quota(now time.Time) (quota, bool) {
	s.roll(now)
	elapsed := now.Sub(s.start)
	q := quota{name: s.name, algorithm: SlidingCounter, limit: s.n, window: s.per}
	whole, past := mul(s.n, s.per), mul(s.prev, s.per-elapsed)
	if !whole.less(past) {
		q.remaining = max(int(whole.sub(past).div(uint64(s.per)))-s.curr, 0) // at most N: fits
	}
	q.next = s.wait(s.curr+q.remaining, elapsed)
	switch end := s.start.Add(s.per); {
	case s.curr > 0:
		q.reset = end.Add(s.per).Sub(now)
	case s.prev > 0:
		q.reset = end.Sub(now)
	}
	return q, true
}

// concurrencyWait is what a concurrency refusal says to wait: when a request in
// flight ends is not known in advance, so it is the shortest wait Retry-After can
// express.
const concurrencyWait = time.Second

// concurrency counts the requests being handled.
type concurrency struct {
	n        int
	inFlight int
}

func (c *concurrency) check(time.Time) (bool, time.Duration) {
	if c.inFlight < c.n {
		return true, 0
	}
	return false, concurrencyWait
}

func (c *concurrency) take(now time.Time) time.Time {
	c.inFlight++
	return now
}

func (c *concurrency) release() { c.inFlight-- }

func (c *concurrency) quota(time.Time) (quota, bool) { return quota{}, false }

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
