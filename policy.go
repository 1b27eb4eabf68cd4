package throttle

import (
	"fmt"
	"time"

	"golang.org/x/time/rate"
)

// Policy is the pacing of one key: the requests that share a partition key
// (by default, a host) share one Policy's bucket or queue, windows, in-flight
// cap and pause.
//
// The zero Policy paces nothing: requests go at once, and still get the
// handling of the server's signals (a pause for the whole key on a 429 or
// in an outage, retries).
type Policy struct {
	// Rate is the sustained number of requests per second, at most 1e9
	// (units per second, for requests given a Cost).
	// 0, rate.Inf or +Inf: unpaced (Burst and Queue must then be 0).
	//
	// Rate is a ceiling the pace never passes; below it the pace follows the
	// server. A quota signal (429, or a 403 with Retry-After or with the
	// quota spent) reacts once per episode (attempts sent before it are the
	// same episode), and each quiet second brings back a tenth of Rate, so a
	// pace cut by one collision is back within seconds:
	//   - an isolated collision cuts to 0.8 of the pace or to what the server
	//     was just seen to accept, whichever is faster;
	//   - a server that accepted less than 0.9 of the pace proves the quota
	//     lower: the pace stays there (its ceiling climbs back by a twentieth
	//     of Rate per quiet 30 seconds);
	//   - collisions that recur within 10 seconds cut to 0.8 and hold the
	//     pace at 0.95 of where they came;
	//   - two cuts in a row that did not lengthen the run of accepted answers
	//     before the next refusal show refusals that are not the pace's
	//     doing: the pace goes back up, and for 30 seconds they only pause
	//     the key.
	// A configured pace never drops below a tenth of Rate. 502, 503, 504 and
	// network errors never cut it.
	Rate rate.Limit

	// Burst is the depth of the server's token bucket. Required (> 0) with a
	// finite Rate, unless Queue is set; ignored with Queue; must be 0
	// without a finite Rate.
	//
	// Tokens are held in reserve against latency jitter: requests reach the
	// server with varying latency (the first of a run pays for dialing its
	// connection), and a client that spends the server's last token is
	// refused whenever a request overtakes the one before it. The reserve is
	// one token, plus what Rate admits within the round-trip jitter the key
	// observes (4 times the mean deviation of its round trips, as TCP
	// measures it), at most Burst-2 (Burst-1 for a Burst of 2, none for 1:
	// a bucket of depth 1 loses the time by which a waiter wakes late); it
	// only grows, and each token added costs 1/Rate once. After the key has
	// been idle, at most Burst minus the reserve go at once.
	Burst int

	// Queue > 0 makes the key a leaky bucket instead of a token bucket: a
	// FIFO of at most Queue waiting requests, one released every 1/Rate
	// (at once when the queue has been idle that long). A request that finds
	// the queue full fails at once with ErrQueueFull. 0: a token bucket.
	Queue int

	// Windows are extra quotas that must all hold, e.g.
	// {N: 5000, Per: time.Hour}. Each is exact at the server, whatever the
	// network does: a request counts from its sending until its answer
	// comes back, then for Per after the answer, when the server has surely
	// seen it, so the server's count never exceeds N. (A request that ends
	// without an answer, its context done or the connection failed, may
	// still be on its way: it counts for Per after a round trip's bound,
	// srtt+4·rttvar, past its sending (or its end, if later); no client
	// can know when it arrives, and one slower than that bound may still
	// meet a later request within Per.) On a quiet network a window loses
	// only a round trip per Per.
	// Like Rate, N is cut to 0.8 of itself by a quota signal, but only when
	// the window was near its limit (half of it used), and climbs back by a
	// twentieth of N per quiet 30 seconds. nil: none.
	Windows []Window

	// MaxInFlight > 0 allows at most that many requests to the key between
	// being sent and the caller closing the response body (or RoundTrip
	// returning an error). 0: no cap. Set on a live Transport (SetPolicy,
	// SetHostPolicy) where the key had none, it counts the requests sent
	// from then on: response bodies answered before it and still open are
	// not counted (a key without a cap does not track its bodies: it would
	// cost every answer an allocation).
	MaxInFlight int
}

// Window is a quota of at most N requests in ANY interval of length Per
// (N units, for requests given a [Cost]: GitHub's GraphQL API allows
// {N: 5000, Per: time.Hour} points): a sliding log, so a client under it is
// safe whether the server counts in fixed or sliding windows. Both N and
// Per must be positive (Per at most ten years). It keeps one entry per
// request it still counts, whatever its cost: 16 bytes (24 while the
// request is on its way), while the key is in use.
type Window struct {
	N   int
	Per time.Duration
}

// maxPer is the longest window: ten years, far below where time arithmetic
// would overflow.
const maxPer = 10 * 365 * 24 * time.Hour

func (w Window) String() string { return fmt.Sprintf("window %d/%v", w.N, w.Per) }

// paced reports whether p has a finite, positive Rate.
func (p Policy) paced() bool { return p.Rate > 0 && p.Rate < rate.Inf }
