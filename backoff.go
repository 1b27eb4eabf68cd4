package throttle

import (
	"crypto/x509"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// Retry says which requests are retried and how. Retries are on by default:
// every zero field takes the default written beside it.
//
// What is retried: a 429 for every method (the server did not process the
// request); 502, 503, 504 and network errors (connection refused or reset,
// timeouts, EOF before a response) only for idempotent methods (GET, HEAD,
// OPTIONS, TRACE, PUT, DELETE) or requests with an Idempotency-Key or
// X-Idempotency-Key header (those net/http resends a request for).
// A request body is replayed through Request.GetBody; a request with a body
// and no GetBody is sent once and never retried. Every retry waits its turn
// at the key like a first attempt, so retries never raise the sending rate.
//
// Delays grow exponentially with full jitter, and are never shorter than the
// server's Retry-After; a quota refusal that states no wait (no Retry-After,
// no reset in its quota headers) is taken to ask for a second, as is the
// pause of its key. Retrying ends, and the caller gets the last response
// unchanged (or the last error, wrapped), when the attempts or the time are
// used up, when the server asks for a wait longer than MaxRetryAfter or than
// the context's deadline allows, or when the key's retry budget is spent.
// A retry refused at once at its key (its turn known to come too late, its
// queue full) ends retrying too, with the last response, whose body was
// drained while the retry waited: past 4 KiB or 100 ms it is cut, and
// reads [ErrBodyDiscarded] after its first bytes (see [Transport]).
type Retry struct {
	// MaxAttempts bounds the attempts of one request, the first included.
	// 0: 8. 1: no retries.
	MaxAttempts int

	// MaxElapsed bounds the time from a request's arrival to its last
	// attempt's turn: a retry whose turn is known to come later is not made
	// (the caller gets the last answer), and a retry still waiting for its
	// turn when MaxElapsed has passed fails then, with ErrMaxElapsed. It
	// does not bound the first attempt's wait (the context does) nor the
	// time the last attempt takes on the wire. 0: 10 minutes.
	MaxElapsed time.Duration

	// InitialDelay is the backoff before the first retry, before jitter; it
	// doubles at each retry up to MaxDelay. 0: 250 milliseconds, 30 seconds.
	InitialDelay, MaxDelay time.Duration

	// MaxRetryAfter is the longest pause asked by a server that is honoured:
	// past it, the request gives up at once with the server's answer, and
	// requests that would have to wait out such a pause fail at once with
	// ErrPaused. 0: 5 minutes.
	MaxRetryAfter time.Duration

	// Budget caps the retries of 5xx answers and network errors at each key
	// to this share (at most 1) of its first attempts over a sliding minute,
	// plus BudgetFloor a minute, so a backend that is down does not draw a
	// retry storm. 429s do not count: they already wait for the pause and
	// the pacer. 0: 0.2. Negative: no budget.
	Budget float64

	// BudgetFloor is the retries a minute the budget allows a key whatever
	// its share. 0: 10. Negative: none (the share alone).
	BudgetFloor int

	// ShouldRetry, if set, has the last word on whether an attempt's
	// outcome is retried (retry 500s of this API, 408 and 425 always, a 401
	// after a token refresh): it is given the response, or nil and the
	// error, and what the rules above decided, and returns its decision.
	// It is called once per attempt of a request that may be retried (not
	// one with NoRetry, nor one whose body has no GetBody: never sent
	// twice, it is not asked about), after the key has learned from the
	// answer (a 429 pauses the key whatever it says). It may read resp's
	// status and header, not its body. What it cannot change:
	// MaxAttempts, MaxElapsed, MaxRetryAfter, the context and the retry
	// budget still end retrying (every retry but a quota signal's spends
	// the budget); every retry waits its turn at the key. nil: the rules
	// above.
	ShouldRetry func(resp *http.Response, err error, retry bool) bool

	// Prepare, if set, is called before each retry with the request it
	// will send: a copy of the caller's request made for this retry (its
	// Header cloned, its body a fresh one from GetBody), which it may
	// change (a new token, a new signature, a header saying which retry it
	// is). It is called once the retry has its turn at the key, just
	// before it is sent, so that what it makes is fresh then; the retry's
	// turn (its tokens, window entries and in-flight slot) waits for it,
	// and is given back if it fails. The caller's request is never
	// modified. attempt is the retry's number: 2 for the first. An error
	// ends retrying: the caller gets the last answer (its body drained
	// while the retry waited, as when a retry is refused at once), or the
	// last error, and EventGaveUp says why. nil: each retry sends the
	// caller's request, its body from GetBody.
	Prepare func(req *http.Request, attempt int) error

	// NewBackOff, if set, makes a request's backoff, when the request
	// first retries: its NextBackOff is the delay before each retry, taken
	// as it is (no jitter is added), never shorter than the server's
	// Retry-After (a second for a quota refusal that states no wait, as
	// above); backoff.Stop ends retrying. The key's pauses keep their
	// own length (the server's Retry-After, a second for a quota refusal
	// that states none, else, in an outage, the backoff of InitialDelay
	// and MaxDelay). A nil BackOff made: no retries. nil:
	// exponential from InitialDelay to MaxDelay, with full jitter.
	NewBackOff func() backoff.BackOff
}

func (r Retry) withDefaults() Retry {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	if r.MaxAttempts <= 0 {
		r.MaxAttempts = 8
	}
	def(&r.MaxElapsed, 10*time.Minute)
	def(&r.InitialDelay, 250*time.Millisecond)
	def(&r.MaxDelay, 30*time.Second)
	def(&r.MaxRetryAfter, 5*time.Minute)
	if r.Budget == 0 {
		r.Budget = 0.2
	}
	switch {
	case r.BudgetFloor == 0:
		r.BudgetFloor = 10
	case r.BudgetFloor < 0:
		r.BudgetFloor = 0
	}
	return r
}

// backoffFor returns one request's backoff: exponential, without jitter of
// its own (jitter is applied in full by jitter).
func (r Retry) backoffFor() *backoff.ExponentialBackOff {
	b := &backoff.ExponentialBackOff{
		InitialInterval:     r.InitialDelay,
		RandomizationFactor: 0,
		Multiplier:          2,
		MaxInterval:         r.MaxDelay,
		Stop:                backoff.Stop,
		Clock:               backoff.SystemClock,
	}
	b.Reset()
	return b
}

// fullJitter picks a delay uniformly in [0, d].
func fullJitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	// (In uint64: d+1 of the longest Duration, a MaxDelay that validates,
	// wrapped negative in int64, and Int64N panicked.)
	return time.Duration(rand.Uint64N(uint64(d) + 1))
}

// idempotent reports whether req may be sent twice without harm. Its
// header keys are net/http's (Request.isReplayable): a POST with
// X-Idempotency-Key that net/http resends on a lost connection was sent
// once here (found in review 46).
func idempotent(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	if _, ok := req.Header["Idempotency-Key"]; ok {
		return true
	}
	_, ok := req.Header["X-Idempotency-Key"]
	return ok
}

// replayable reports whether req's body can be sent again.
func replayable(req *http.Request) bool {
	return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
}

// retryableStatus reports whether a response with this status may be retried
// for a request that may be sent twice.
func retryableStatus(code int) bool {
	switch code {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// retryableErr reports whether a network error may be retried: the request
// may not have reached the server, or its answer was lost on the way.
func retryableErr(err error) bool {
	var (
		unknownAuthority x509.UnknownAuthorityError
		hostname         x509.HostnameError
		invalid          x509.CertificateInvalidError
		dnsErr           *net.DNSError
		netErr           net.Error
	)
	switch {
	case errors.As(err, &unknownAuthority), errors.As(err, &hostname), errors.As(err, &invalid):
		return false // retrying cannot fix a certificate
	case errors.As(err, &dnsErr):
		return !dnsErr.IsNotFound
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNABORTED), errors.Is(err, syscall.EPIPE):
		return true
	case errors.As(err, &netErr):
		return true // timeouts and other failures of the connection
	}
	return false
}

// budget counts a key's first attempts and budgeted retries over a sliding
// minute, in six buckets of ten seconds: the one of slot s at s mod 6.
type budget struct {
	slot    int64                 // the latest ten seconds counted, since the Unix epoch
	firsts  [budgetBuckets]uint32 // 2^32 in ten seconds is far beyond any key
	retries [budgetBuckets]uint32
}

const (
	budgetSpan    = 10 * time.Second
	budgetBuckets = 6
)

// at moves the budget to now's ten seconds, emptying the buckets of the ten
// seconds it passes, and returns now's bucket. A clock that went back
// counts in the latest bucket.
// at is the bucket of mono, a time from the transport's epoch (monotonic:
// a wall clock stepped back cannot freeze the minute).
func (b *budget) at(mono time.Duration) int64 {
	slot := int64(mono / budgetSpan)
	for s := max(b.slot+1, slot-budgetBuckets+1); s <= slot; s++ {
		b.firsts[s%budgetBuckets], b.retries[s%budgetBuckets] = 0, 0
	}
	b.slot = max(b.slot, slot)
	return b.slot % budgetBuckets
}

func (b *budget) first(mono time.Duration) { b.firsts[b.at(mono)]++ }

// spend takes one retry from the budget if it has one.
func (b *budget) spend(mono time.Duration, ratio float64, floor int) bool {
	if ratio < 0 {
		return true
	}
	i := b.at(mono)
	var firsts, retries int
	for j := range budgetBuckets {
		firsts += int(b.firsts[j])
		retries += int(b.retries[j])
	}
	if float64(retries+1) > float64(floor)+ratio*float64(firsts) {
		return false // (this one would pass the share: found in review, a share of 0.0001 let a fresh key's first retry go)
	}
	b.retries[i]++
	return true
}

// refund gives back a retry spend took at mono, unless its ten seconds
// have left the minute since.
func (b *budget) refund(mono time.Duration) {
	slot := int64(mono / budgetSpan)
	if i := slot % budgetBuckets; slot > b.slot-budgetBuckets && b.retries[i] > 0 {
		b.retries[i]--
	}
}
