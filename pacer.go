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
func (p *policy) newLimiter() *rate.Limiter {
	switch {
	case !p.paced():
		return nil
	case p.Queue > 0:
		return rate.NewLimiter(p.Rate, 1)
	default:
		return rate.NewLimiter(p.Rate, max(1, p.Burst-1))
	}
}

// tokenDelay is how long after at the limiter will hold the k-th token from
// now (k >= 1), if nothing else takes any. It takes nothing.
func tokenDelay(lim *rate.Limiter, at time.Time, k int) time.Duration {
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
func tokensFor(lim *rate.Limiter, cost int) int {
	if cost <= 1 {
		return 1
	}
	return min(cost, lim.Burst())
}
