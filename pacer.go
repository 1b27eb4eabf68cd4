package throttle

import (
	"math"
	"time"

	"golang.org/x/time/rate"
)

// policy is a validated Policy, ready to make key states from.
type policy struct {
	Policy
	limit Limit  // the pacer: LimitRate, or LimitQueue for a leaky bucket
	keys  *table // the states of the keys under it
	gen   uint64 // replacements of its slot's Policy before it (swap.go)
}

func compile(p Policy) *policy {
	p.Windows = append([]Window(nil), p.Windows...)
	if p.Rate > rate.Inf { // +Inf: unpaced, as rate.Inf
		p.Rate = rate.Inf
	}
	cp := &policy{Policy: p, limit: LimitRate, keys: newTable()}
	if p.Queue > 0 {
		cp.limit = LimitQueue
	}
	return cp
}

// newLimiter returns the key's pacer: a token bucket of depth Burst-1 (one
// token is held in reserve, see Policy.Burst), or, for a leaky bucket, one
// of depth 1 (an idle queue releases at once, then one every 1/Rate, never
// two closer). nil: unpaced.
func (p *policy) newLimiter() *bucket {
	switch {
	case !p.paced():
		return nil
	case p.Queue > 0:
		return newBucket(p.Rate, 1)
	default:
		return newBucket(p.Rate, max(1, p.Burst-1))
	}
}

// bucket is a key's token bucket: x/time/rate's Limiter, its arithmetic to
// the float (tokens refill at limit a second up to burst, from full; a
// reservation may leave them owing), without its mutex. Every call is made
// under the key's lock, which already orders them: the Limiter's own lock,
// and the Reservation each call builds, cost a paced attempt about 22 ns
// of the 200 throttle added to it (BenchmarkRoundTrip, 2 cores). Its
// methods are the Limiter's that the key uses, with the same meaning, and
// TestBucketIsTheLimitersArithmetic holds them to it.
type bucket struct {
	limit  rate.Limit
	burst  int
	tokens float64
	last   time.Time // when tokens was last set
}

func newBucket(r rate.Limit, b int) *bucket { return &bucket{limit: r, burst: b, tokens: float64(b)} }

// Limit is the rate at which the bucket refills.
func (b *bucket) Limit() rate.Limit { return b.limit }

// Burst is the most the bucket holds.
func (b *bucket) Burst() int { return b.burst }

// TokensAt is what the bucket holds at t.
func (b *bucket) TokensAt(t time.Time) float64 { return b.advance(t) }

// AllowN takes n tokens at t if the bucket holds them, and reports whether
// it did.
func (b *bucket) AllowN(t time.Time, n int) bool { return b.reserveN(t, n, 0) }

// ReserveN takes n tokens at t, leaving the bucket owing what it lacks,
// unless n is more than it can ever hold; a negative n gives -n back.
func (b *bucket) ReserveN(t time.Time, n int) { b.reserveN(t, n, rate.InfDuration) }

// SetLimitAt sets the rate from t on: what the bucket held at t stays.
func (b *bucket) SetLimitAt(t time.Time, r rate.Limit) {
	b.tokens, b.last, b.limit = b.advance(t), t, r
}

// SetBurstAt sets the depth from t on: what the bucket held at t stays,
// capped at the new depth when next counted.
func (b *bucket) SetBurstAt(t time.Time, n int) {
	b.tokens, b.last, b.burst = b.advance(t), t, n
}

// reserveN takes n tokens at t if the wait for them is at most most, and
// reports whether it did.
func (b *bucket) reserveN(t time.Time, n int, most time.Duration) bool {
	if b.limit == rate.Inf {
		return true
	}
	tokens := b.advance(t) - float64(n)
	var wait time.Duration
	if tokens < 0 {
		wait = durationFromTokens(b.limit, -tokens)
	}
	if n > b.burst || wait > most {
		return false
	}
	b.tokens, b.last = tokens, t
	return true
}

// advance is what the bucket holds at t: what it held when last set, and
// what it gained since, up to its depth. A t before then counts from t.
func (b *bucket) advance(t time.Time) float64 {
	last := b.last
	if t.Before(last) {
		last = t
	}
	var gained float64
	if b.limit > 0 {
		gained = t.Sub(last).Seconds() * float64(b.limit)
	}
	return min(b.tokens+gained, float64(b.burst))
}

// durationFromTokens is the time r takes to give n tokens, saturated at
// rate.InfDuration.
func durationFromTokens(r rate.Limit, n float64) time.Duration {
	if r <= 0 {
		return rate.InfDuration
	}
	d := n / float64(r) * float64(time.Second)
	if d > float64(math.MaxInt64) {
		return rate.InfDuration
	}
	return time.Duration(d)
}

// tokenDelay is how long after at the limiter will hold the k-th token from
// now (k >= 1), if nothing else takes any. It takes nothing.
func tokenDelay(lim *bucket, at time.Time, k int) time.Duration {
	missing := float64(k) - lim.TokensAt(at)
	if missing <= 1e-6 {
		return 0 // a millionth of a token short is float error, not a wait
	}
	secs := missing / float64(lim.Limit())
	if secs >= math.MaxInt64/1e9 {
		return math.MaxInt64
	}
	return max(1, time.Duration(math.Round(secs*1e9)))
}

// tokensFor is how many tokens lim must hold for an attempt of the cost
// given to go: its cost, or all lim can hold if that is less. So an attempt
// that costs more than a leaky bucket's one token, or more than a token
// bucket holds once its reserve against jitter has grown (latency.go), goes
// when the bucket is full, and leaves it owing the rest (see takeTokens):
// the attempts after it wait for what it took.
func tokensFor(lim *bucket, cost int) int {
	if cost <= 1 {
		return 1
	}
	return min(cost, lim.Burst())
}
