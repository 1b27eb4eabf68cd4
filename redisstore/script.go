package redisstore

import (
	_ "embed"
	"math"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/throttlehttp/throttle"
)

// This file holds the two Lua scripts, one per decision, and what they are
// told of a Policy.

var (
	//go:embed common.lua
	commonLua string
	//go:embed reserve.lua
	reserveLua string
	//go:embed slow.lua
	slowLua string

	// reserveScript and slowScript run by EVALSHA, and by EVAL once
	// should Redis not know them (NOSCRIPT: a new or flushed server).
	reserveScript = redis.NewScript(commonLua + reserveLua)
	slowScript    = redis.NewScript(commonLua + slowLua)
)

// margin is how long a key's Redis keys are kept past the moment their
// state stops mattering: a key that comes back just then finds its state.
const margin = time.Second

// policyArgs are the arguments both scripts begin with (see common.lua):
// p's rate, its bucket's tolerance in intervals, and the margin; then room
// for the rest.
func policyArgs(p throttle.Policy, rest int) []any {
	args := make([]any, 3, 3+rest)
	args[0] = decimal(paced(p))
	depth := 0
	if p.Queue <= 0 {
		depth = max(1, p.Burst-1) - 1
	}
	args[1] = depth
	args[2] = micros(margin)
	return args
}

// reserveArgs are the arguments of reserve.lua: a departure of n units,
// counting margin beyond each window's Per (see throttle.WindowMargin),
// and the windows. The windows' Redis key is named by none of them (see
// keys), so that Transports whose margins or windows differ share it.
func reserveArgs(p throttle.Policy, n int, maxWait, margin time.Duration) []any {
	args := append(policyArgs(p, 3+2*len(p.Windows)), micros(maxWait), n, microsUp(margin))
	for _, w := range p.Windows {
		args = append(args, w.N, microsUp(w.Per))
	}
	return args
}

// slowArgs are the arguments of slow.lua.
func slowArgs(p throttle.Policy, s throttle.Slowdown) []any {
	return append(policyArgs(p, 2), microsUp(s.Pause), decimal(float64(s.Pace)))
}

// paced is p's Rate, or 0 for an unpaced Policy (0 or infinite Rate).
func paced(p throttle.Policy) float64 {
	r := float64(p.Rate)
	if r <= 0 || math.IsInf(r, 1) {
		return 0
	}
	return r
}

func decimal(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// micros is d in whole microseconds, rounded down.
func micros(d time.Duration) int64 { return int64(d / time.Microsecond) }

// microsUp is d in whole microseconds, rounded up: a window or a pause is
// never shortened.
func microsUp(d time.Duration) int64 {
	us := int64(d / time.Microsecond)
	if d%time.Microsecond > 0 {
		us++
	}
	return us
}
