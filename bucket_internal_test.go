package throttle

import (
	"math/rand/v2"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// The key's bucket is x/time/rate's Limiter without its lock: the same
// operations, in the same order, at the same times, leave both holding the
// same tokens, to the float, and admit the same requests. Times go back now
// and then (an answer read before another attempt used the bucket), depths
// change, reservations leave the bucket owing and give tokens back.
func TestBucketIsTheLimitersArithmetic(t *testing.T) {
	for seed := range uint64(64) {
		rnd := rand.New(rand.NewPCG(seed, 7))
		r, depth := rate.Limit(rnd.Float64()*1000), 1+rnd.IntN(40)
		if seed%8 == 0 {
			r = rate.Inf
		}
		b, lim := newBucket(r, depth), rate.NewLimiter(r, depth)
		now := time.Unix(1000, 0)
		for step := range 500 {
			now = now.Add(time.Duration(rnd.Int64N(int64(20*time.Millisecond))) - 2*time.Millisecond)
			n := 1 + rnd.IntN(3)
			switch op := rnd.IntN(10); op {
			case 0:
				r = rate.Limit(rnd.Float64() * 1000)
				b.SetLimitAt(now, r)
				lim.SetLimitAt(now, r)
			case 1:
				depth = 1 + rnd.IntN(40)
				b.SetBurstAt(now, depth)
				lim.SetBurstAt(now, depth)
			case 2:
				b.ReserveN(now, n)
				lim.ReserveN(now, n)
			case 3:
				b.ReserveN(now, -n) // tokens given back
				lim.ReserveN(now, -n)
			default:
				if got, want := b.AllowN(now, n), lim.AllowN(now, n); got != want {
					t.Fatalf("seed %d step %d: AllowN(%d) = %v, the Limiter's %v", seed, step, n, got, want)
				}
			}
			if got, want := b.TokensAt(now), lim.TokensAt(now); got != want {
				t.Fatalf("seed %d step %d (op on %v/s, depth %d): %v tokens, the Limiter %v", seed, step, r, depth, got, want)
			}
			if b.Limit() != lim.Limit() || b.Burst() != lim.Burst() {
				t.Fatalf("seed %d step %d: %v/s depth %d, the Limiter %v/s depth %d", seed, step, b.Limit(), b.Burst(), lim.Limit(), lim.Burst())
			}
		}
	}
}
