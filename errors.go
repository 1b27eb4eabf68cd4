package throttle

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Sentinel errors, matched with [errors.Is]. Errors returned by a [Transport]
// wrap them in a [*WaitError] that names the key and the limit.
var (
	// ErrQueueFull: the key's leaky-bucket queue already held Policy.Queue
	// waiting requests.
	ErrQueueFull = errors.New("throttle: queue full")

	// ErrClosed: the Transport was closed while the request waited, or before
	// it arrived.
	ErrClosed = errors.New("throttle: transport closed")

	// ErrWouldExceedDeadline: the request's turn is known to come after its
	// context's deadline, so it failed at once. It also matches
	// [context.DeadlineExceeded].
	ErrWouldExceedDeadline error = deadlineError{}

	// ErrPaused: the key is held by the server for longer than the longest
	// Retry-After honoured ([Retry].MaxRetryAfter): paused by its answer, or
	// its quota headers say nothing is left until a reset that far off. The
	// request failed at once instead of waiting.
	ErrPaused = errors.New("throttle: key paused for longer than the longest Retry-After honoured")

	// ErrMaxElapsed: a retry's turn would come after [Retry].MaxElapsed had
	// passed since the request arrived, so it failed at once.
	ErrMaxElapsed = errors.New("throttle: retry would pass MaxElapsed")

	// ErrCostTooLarge: the request's [Cost] is more than a limit of its key
	// can ever admit — more tokens than its bucket holds (Burst less the
	// token kept in reserve, see Policy.Burst), or more than a Window's N —
	// so it failed at once, unsent. The [*WaitError] names the limit
	// (LimitRate or LimitWindow, and the Window), and its message the cost
	// and what the limit holds.
	ErrCostTooLarge = errors.New("throttle: cost too large")
)

// ErrBodyDiscarded is the error a response body reads after its first
// bytes when the response was to be replaced by a retry, and the body was
// drained and closed while the retry waited: a retry refused at once gives
// the caller that response (see [Transport]), and a body longer than 4 KiB,
// or that did not end within 100 ms, was cut. It is a read's error, never
// RoundTrip's.
var ErrBodyDiscarded = errors.New("throttle: the rest of the body was discarded when a retry was planned")

// endsRetrying reports whether a retry refused with err ends retrying as
// the server's answer would have (see Retry): its turn known to come after
// the deadline or past MaxRetryAfter, no room in the queue, or the Store
// unable to book it. The caller gets the last response then. The
// context's end, Close and MaxElapsed passed while it waited are errors of
// their own. (A Store's failure was one too, and the caller of a retry
// the Store refused lost the 503 it had obtained: found in review.)
func endsRetrying(err error) bool {
	return errors.Is(err, ErrWouldExceedDeadline) || errors.Is(err, ErrPaused) || errors.Is(err, ErrQueueFull) ||
		errors.Is(err, ErrStoreUnavailable)
}

type deadlineError struct{}

func (deadlineError) Error() string {
	return "throttle: wait would exceed the context deadline"
}

// Is makes ErrWouldExceedDeadline match context.DeadlineExceeded.
func (deadlineError) Is(target error) bool { return target == context.DeadlineExceeded }

// Timeout reports true, as net.Error timeouts do.
func (deadlineError) Timeout() bool { return true }

// Limit names what held a request back. Errors ([WaitError]) and events
// carry it.
type Limit uint8

const (
	// LimitNone: no limit held it. The request failed before it waited
	// (the Transport was closed, its context had ended) or its context
	// ended just as its turn came.
	LimitNone Limit = iota
	// LimitLine: earlier requests of the key were waiting (its line is
	// first come, first served; a retry keeps its request's place).
	LimitLine
	// LimitRate: the token bucket of Policy.Rate and Burst, or the pace
	// the server taught the key.
	LimitRate
	// LimitQueue: the leaky bucket of Policy.Queue (full, or not yet
	// releasing this request).
	LimitQueue
	// LimitWindow: one of Policy.Windows; WaitError.Window says which.
	LimitWindow
	// LimitPause: the key's pause, begun by a server's answer.
	LimitPause
	// LimitProbe: after a pause, the first request's answer, awaited
	// before the others go (for a bounded time).
	LimitProbe
	// LimitRamp: after the probe, the ramp back up, which lets few
	// requests await their answers at once (for a bounded time).
	LimitRamp
	// LimitInFlight: Policy.MaxInFlight: requests on the wire, and
	// response bodies not yet closed.
	LimitInFlight
	// LimitBackoff: a retry's own delay (jittered backoff, or the server's
	// Retry-After).
	LimitBackoff
	// LimitQuota: the server's quota headers: what it said remains is
	// spent until its reset, or until its bucket refills.
	LimitQuota
	// LimitStore: the Store set by WithStore: the departure it booked for
	// the request (other Transports' requests went first, or one of them
	// paused the key), or the Store could not be reached
	// (ErrStoreUnavailable).
	LimitStore
)

var limitNames = [...]string{
	LimitNone: "none", LimitLine: "line", LimitRate: "rate", LimitQueue: "queue", LimitWindow: "window",
	LimitPause: "pause", LimitProbe: "probe", LimitRamp: "ramp", LimitInFlight: "in-flight", LimitBackoff: "backoff", LimitQuota: "quota",
	LimitStore: "store",
}

func (l Limit) String() string {
	if int(l) < len(limitNames) {
		return limitNames[l]
	}
	return fmt.Sprintf("Limit(%d)", uint8(l))
}

// WaitError is the error of a request that did not get its turn: which key,
// which attempt, which limit held it back, and until when if that is known.
type WaitError struct {
	Key     string    // the partition key (see WithKey for keys that hold credentials)
	Attempt int       // the attempt that waited: 1 for the first
	Limit   Limit     // what held it
	Window  Window    // with LimitWindow: which window; else zero
	Until   time.Time // when the limit would have admitted it; zero if unknown
	Err     error     // ErrQueueFull, ErrClosed, ErrWouldExceedDeadline, ErrPaused, ErrMaxElapsed, ErrCostTooLarge, ErrStoreUnavailable or the context's error
}

func (e *WaitError) Error() string {
	msg := fmt.Sprintf("throttle: key %q", e.Key)
	if e.Attempt > 1 {
		msg += fmt.Sprintf(": attempt %d", e.Attempt)
	}
	switch e.Limit {
	case LimitNone:
	case LimitWindow:
		msg += ": " + e.Window.String()
	default:
		msg += ": " + e.Limit.String()
	}
	if !e.Until.IsZero() {
		msg += " until " + e.Until.UTC().Format(time.RFC3339Nano)
	}
	return msg + ": " + trimPrefix(e.Err.Error())
}

func (e *WaitError) Unwrap() error { return e.Err }

// Timeout reports whether the wait ended for the request's deadline (its
// context's, or one it would have passed), as net.Error timeouts do: an
// http.Client's url.Error says Timeout for it, as it does for its own
// (found in review: os.IsTimeout was false for a request that
// Client.Timeout ended in a throttle wait).
func (e *WaitError) Timeout() bool { return isTimeout(e.Err) }

// isTimeout reports whether err is a timeout: a deadline exceeded, or an
// error that says so (a net.Error's Timeout).
func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// triesError is the base's error, as the last of a request's attempts
// met it: it says how many were made and why retrying ended, and is a
// timeout when the base's was (found in review: wrapped by fmt.Errorf, a
// network timeout stopped being one for os.IsTimeout and url.Error).
type triesError struct {
	msg string
	err error
}

func (e *triesError) Error() string { return e.msg + ": " + e.err.Error() }
func (e *triesError) Unwrap() error { return e.err }
func (e *triesError) Timeout() bool { return isTimeout(e.err) }

// trimPrefix drops a leading "throttle: " so messages are not prefixed twice.
func trimPrefix(s string) string {
	const p = "throttle: "
	if len(s) > len(p) && s[:len(p)] == p {
		return s[len(p):]
	}
	return s
}
