package throttletest

import "time"

// leakyBucket is a queue served one request every interval. served holds the times
// at which the requests in the bucket are (or were) served, in order; a request
// stays in the bucket for one interval from its service time, so the bucket holds
// the one being served and those waiting. capacity is Queue+1.
type leakyBucket struct {
	noRelease
	name     string
	interval time.Duration
	capacity int
	served   []time.Time
}

func (b *leakyBucket) prune(now time.Time) { b.served = expire(b.served, b.interval, now) }

func (b *leakyBucket) check(now time.Time) (bool, time.Duration) {
	b.prune(now)
	if len(b.served) < b.capacity {
		return true, 0
	}
	return false, b.served[0].Add(b.interval).Sub(now) // until the next one is served
}

func (b *leakyBucket) take(now time.Time) time.Time {
	b.prune(now)
	at := now
	if n := len(b.served); n > 0 {
		at = later(now, b.served[n-1].Add(b.interval))
	}
	b.served = append(b.served, at)
	return at
}

// quota's next is when the first request in the bucket leaves it, or, in an
// empty bucket, the first of those sent now.
func (b *leakyBucket) quota(now time.Time) (quota, bool) {
	b.prune(now)
	q := quota{
		name: b.name, algorithm: LeakyBucket, limit: b.capacity, remaining: b.capacity - len(b.served),
		next: b.interval, window: time.Duration(b.capacity) * b.interval,
	}
	if n := len(b.served); n > 0 {
		q.reset = b.served[n-1].Add(b.interval).Sub(now)
		q.next = b.served[0].Add(b.interval).Sub(now)
	}
	return q, true
}
