package throttle

import (
	"math"
	"time"

	"golang.org/x/time/rate"
)

// policy is a validated Policy, ready to make key states from.
type policy struct {
	Policy
	limit string // the name of the pacer in errors: "rate" or "queue"
}

func compile(p Policy) *policy {
	p.Windows = append([]Window(nil), p.Windows...)
	cp := &policy{Policy: p, limit: "rate"}
	if p.Queue > 0 {
		cp.limit = "queue"
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

// windowLog is an exact sliding window: the times of the last N admissions,
// as offsets from the transport's epoch, oldest first in a ring.
//
// It admits at most n (N, or fewer while the server objects: see adapt.go)
// in any interval of length Per plus a margin: requests reach the server
// with varying latency, so a log that is exact at the sender would be one
// over at a server that counts arrivals. The margin, 1% of Per and at most a
// second, absorbs that jitter.
type windowLog struct {
	Window
	n      int             // admitted per window now, <= N
	margin time.Duration   // added to Per
	times  []time.Duration // len <= N
	start  int             // index of the oldest when len == N
}

func newWindowLog(w Window) windowLog {
	return windowLog{Window: w, n: w.N, margin: min(w.Per/100, time.Second)}
}

// at returns the j-th oldest of the logged times.
func (w *windowLog) at(j int) time.Duration { return w.times[(w.start+j)%len(w.times)] }

// nextAt is the earliest time >= now at which the k-th further admission
// (k = 0: the next) can happen, if none of the k before it is later than
// needed: never more than n in any interval of length Per (+ margin).
func (w *windowLog) nextAt(now time.Duration, k int) time.Duration {
	c := min(len(w.times), w.n) // the logged admissions that can count
	j := k - (w.n - c)          // which of them the admission must outlive
	if j < 0 || j >= c {
		return now
	}
	return max(now, w.at(len(w.times)-c+j)+w.Per+w.margin)
}

func (w *windowLog) add(now time.Duration) {
	if len(w.times) < w.N {
		w.times = append(w.times, now)
		return
	}
	w.times[w.start] = now
	w.start = (w.start + 1) % w.N
}

// expired reports whether no logged admission still counts at now.
func (w *windowLog) expired(now time.Duration) bool {
	return len(w.times) == 0 || w.at(len(w.times)-1)+w.Per+w.margin <= now
}

func (w *windowLog) String() string { return w.Window.String() }
