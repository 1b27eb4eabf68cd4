package throttletest

import (
	"fmt"
	"time"
)

// Algorithm names how a Limit counts requests.
type Algorithm int

const (
	// TokenBucket holds up to Burst tokens and refills Rate tokens per second; a
	// request takes one token. It is computed as GCRA, which is the same bucket
	// counted in exact durations.
	TokenBucket Algorithm = iota
	// LeakyBucket is a queue served at a constant rate: a request that arrives while
	// another is being served waits in the server (the handler blocks) until its turn,
	// one every 1/Rate; at most Queue wait, and a request that finds the queue full
	// gets 429 at once, told to wait until the next one is served. The other limits
	// count a request when it joins the queue; one that gives up while waiting keeps
	// its turn used.
	LeakyBucket
	// FixedWindow admits N requests per window of length Per; windows are aligned to
	// multiples of Per since the zero time, so one-minute windows start on the minute
	// (and a synctest bubble, whose clock starts at midnight, starts with a window).
	FixedWindow
	// SlidingLog admits a request when fewer than N were admitted in the last Per.
	SlidingLog
	// SlidingCounter keeps the counts of the current and the previous window (aligned
	// as FixedWindow's) and admits a request when the weighted estimate
	// prev*(1-elapsed/Per) + curr, this request included, is at most N.
	SlidingCounter
	// Concurrency admits a request when fewer than N requests of the key are being
	// handled (waiting in a leaky-bucket queue or in Latency counts as handled).
	Concurrency
)

var algorithmNames = [...]string{
	TokenBucket:    "token-bucket",
	LeakyBucket:    "leaky-bucket",
	FixedWindow:    "fixed-window",
	SlidingLog:     "sliding-log",
	SlidingCounter: "sliding-counter",
	Concurrency:    "concurrency",
}

// String returns the algorithm's name, e.g. "token-bucket"; it is also the default
// policy name in the IETF headers.
func (a Algorithm) String() string {
	if a < 0 || int(a) >= len(algorithmNames) {
		return fmt.Sprintf("Algorithm(%d)", int(a))
	}
	return algorithmNames[a]
}

// A Limit is one quota, applied to each API key separately. Which fields count
// depends on Algorithm; the others are ignored.
type Limit struct {
	Algorithm Algorithm

	// Rate is in requests per second, for TokenBucket and LeakyBucket; it must be > 0.
	Rate float64
	// Burst is the token bucket's depth; zero means 1.
	Burst int
	// Queue is how many requests may wait in the leaky bucket's queue besides the one
	// being served; zero means none wait: a request that cannot be served at once
	// gets 429.
	Queue int

	// N is the number of requests per window (FixedWindow, SlidingLog,
	// SlidingCounter) or at once (Concurrency); it must be > 0.
	N int
	// Per is the window length for FixedWindow, SlidingLog and SlidingCounter; it
	// must be > 0.
	Per time.Duration

	// Name is the policy name in the RateLimit and RateLimit-Policy headers; empty
	// means the algorithm's name. Set it when two limits share an algorithm. It must
	// be printable ASCII.
	Name string
}

// RetryAfterFormat is how 429 and 503 responses say when to come back.
type RetryAfterFormat int

const (
	// RetryAfterSeconds sends whole seconds, rounded up from the true wait and at
	// least 1. It is the default.
	RetryAfterSeconds RetryAfterFormat = iota
	// RetryAfterDate sends an HTTP-date (http.TimeFormat) at or after the end of the
	// true wait: dates have whole seconds, so the instant is rounded up.
	RetryAfterDate
	// RetryAfterNone sends no Retry-After header.
	RetryAfterNone
)

// TokenBucketHeaders is how the quota headers describe a token bucket. The
// forms other than TruthfulBucket are what some real APIs send, and mislead a
// client that takes them at their word: offer them to test that a client
// survives them, by backing off on 429, not to test that it paces well.
type TokenBucketHeaders int

const (
	// TruthfulBucket describes a bucket by its depth and rate, as the
	// package doc ("Quota headers") says. It is the default.
	TruthfulBucket TokenBucketHeaders = iota
	// BurstPerSecond announces the depth as a quota per second:
	// X-RateLimit-Limit and q are Burst, w is 1, and X-RateLimit-Reset and t
	// are always 1, as if the bucket refilled whole every second. A client
	// that believes it sends Burst a second, and is refused whenever Rate is
	// below Burst.
	BurstPerSecond
	// RatePerSecond announces the rate as a quota per second:
	// X-RateLimit-Limit and q are Rate rounded (at least 1), w is 1,
	// X-RateLimit-Remaining and r are the whole tokens but at most that, and
	// X-RateLimit-Reset and t are always 1. A client that believes it sends a
	// second's worth at once, and is refused whenever Burst is below Rate;
	// where Burst is above, it never learns of the burst.
	RatePerSecond
)

// Config describes a fake API. The zero Config admits every request that has a key,
// at once, with no quota headers.
type Config struct {
	// Limits are the quotas of each key; a request must pass all of them, and a
	// request refused by one consumes from none. Nil means no quota.
	Limits []Limit

	// RetryAfter is the form of Retry-After on 429 and 503; the zero value is
	// RetryAfterSeconds.
	RetryAfter RetryAfterFormat
	// XRateLimit adds X-RateLimit-Limit, -Remaining and -Reset to the 429
	// responses of the quotas (not to a 429 of Refused or of an Outage: a
	// gateway's, which knows no quota). They describe the limit that refused
	// the request, or else the limit with the fewest requests remaining; the
	// package doc ("Quota headers") says what they hold. False means not sent.
	XRateLimit bool
	// IETF adds the fields of draft-ietf-httpapi-ratelimit-headers-11 to the
	// 429 responses of the quotas (as XRateLimit, not to a gateway's), one list
	// member per limit, in the order of Limits:
	//
	//	RateLimit: "name";r=<remaining>;t=<seconds>
	//	RateLimit-Policy: "name";q=<quota>;w=<seconds>
	//
	// The package doc ("Quota headers") says what they hold. False means not
	// sent.
	IETF bool
	// IETFDraft07 writes the fields IETF adds as draft 07 of that draft
	// writes them, and express-rate-limit's standardHeaders 'draft-7' sends
	// them: RateLimit a Dictionary of the limit X-RateLimit-* describe, with
	// their values, and RateLimit-Policy one unnamed item per limit, in the
	// order of Limits:
	//
	//	RateLimit: limit=<limit>, remaining=<remaining>, reset=<seconds>
	//	RateLimit-Policy: <quota>;w=<seconds>
	//
	// False means draft 11's form; without IETF, nothing is sent.
	IETFDraft07 bool
	// TokenBucketHeaders announces the TokenBucket limits in one of the
	// misleading forms real APIs use, in both header families; the zero
	// value, TruthfulBucket, tells the truth. It changes nothing else.
	TokenBucketHeaders TokenBucketHeaders
	// HeadersOnSuccess sends the enabled quota headers on accepted responses too.
	// False means only the quotas' 429 responses carry them.
	HeadersOnSuccess bool

	// KeyHeader is the request header that carries the API key; empty means
	// "X-API-Key". When it is absent, "Authorization: Bearer <key>" (or
	// GitHub's "Authorization: token <key>") is used. A request with neither
	// gets 401.
	KeyHeader string

	// ArrivalJitter delays every request by a random time, uniform in
	// [0, ArrivalJitter), before anything else sees it, to play jitter on the way to
	// a real server: the Outages and the quotas see a request when its delay ends,
	// so requests sent in one order may be counted in another, and requests sent
	// apart may bunch up. Zero means none. The delay ends early, with the request
	// canceled, when the request's context ends.
	ArrivalJitter time.Duration

	// Latency delays every admitted request before it is answered, after any wait in
	// a leaky-bucket queue; zero means no delay. The delay ends early, with the
	// request canceled, when the request's context ends.
	Latency time.Duration
	// LatencyJitter adds a random delay, uniform in [0, LatencyJitter), to Latency;
	// zero means none.
	LatencyJitter time.Duration

	// Unavailable is the share, from 0 to 1, of admitted requests answered 503 after
	// their latency, to play an overloaded backend; they still count against the
	// quotas. Zero means none.
	Unavailable float64
	// UnavailableRetryAfter is the Retry-After sent with those 503s; zero means 1
	// second.
	UnavailableRetryAfter time.Duration

	// Refused is the share, from 0 to 1, of requests answered 429 at random, with a
	// Retry-After of a second in the form RetryAfter says and no quota headers,
	// before the quotas see them: a gateway's refusals that no pace causes and no pace avoids (a
	// collision with another tenant, an edge's hiccup). They count in Stats as
	// throttled and against no quota. Zero means none.
	Refused float64

	// Outages are spans of time in which the backend is down (see Outage): a request
	// that arrives during one, after its ArrivalJitter, is answered 503 (or the
	// outage's Status) at once, without Latency, with the outage's Retry-After. It
	// is counted in Stats as Outage, apart from the random 503s (as Throttled, for
	// an outage of 429s), and not against the quotas: it never reached the
	// backend. A request that arrived before an outage began is answered as usual.
	// When outages overlap, the first listed gives the Retry-After. Nil means none.
	Outages []Outage

	// Seed seeds every random draw (ArrivalJitter, Refused, Unavailable, LatencyJitter): the
	// same Seed and the same sequence of requests give the same answers. Zero is a
	// seed like any other.
	Seed int64
}

// validate panics, as httptest does on misuse, when a Limit or an Outage cannot
// work.
func (c Config) validate() {
	for i, l := range c.Limits {
		bad := func(what string) {
			panic(fmt.Sprintf("throttletest: Limits[%d] (%v): %s", i, l.Algorithm, what))
		}
		switch l.Algorithm {
		case TokenBucket, LeakyBucket:
			if !(l.Rate > 0) {
				bad("Rate must be > 0")
			}
			if float64(time.Second)/l.Rate*float64(max(l.Burst, l.Queue)+1) > float64(1<<62) {
				bad("Rate too small: the bucket takes longer than a time.Duration can hold")
			}
			if l.Burst < 0 || l.Queue < 0 {
				bad("Burst and Queue must be >= 0")
			}
		case FixedWindow, SlidingLog, SlidingCounter:
			if l.N <= 0 || l.Per <= 0 {
				bad("N and Per must be > 0")
			}
		case Concurrency:
			if l.N <= 0 {
				bad("N must be > 0")
			}
		default:
			bad("unknown algorithm")
		}
		for _, r := range l.Name {
			if r < 0x20 || r > 0x7e {
				bad("Name must be printable ASCII")
			}
		}
	}
	if !(c.Unavailable >= 0 && c.Unavailable <= 1) { // NaN too
		panic("throttletest: Unavailable must be within [0, 1]")
	}
	if !(c.Refused >= 0 && c.Refused <= 1) {
		panic("throttletest: Refused must be within [0, 1]")
	}
	if c.ArrivalJitter < 0 || c.Latency < 0 || c.LatencyJitter < 0 || c.UnavailableRetryAfter < 0 {
		panic("throttletest: durations must be >= 0")
	}
	for i, o := range c.Outages {
		o.validate(i)
	}
}
