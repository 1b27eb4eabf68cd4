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

	// ErrPaused: the key is paused by the server for longer than the longest
	// Retry-After honoured ([Retry].MaxRetryAfter), so the request failed at
	// once instead of waiting.
	ErrPaused = errors.New("throttle: key paused for longer than the longest Retry-After honoured")
)

type deadlineError struct{}

func (deadlineError) Error() string {
	return "throttle: wait would exceed the context deadline"
}

// Is makes ErrWouldExceedDeadline match context.DeadlineExceeded.
func (deadlineError) Is(target error) bool { return target == context.DeadlineExceeded }

// Timeout reports true, as net.Error timeouts do.
func (deadlineError) Timeout() bool { return true }

// WaitError is the error of a request that did not get its turn: which key,
// which limit held it back, and until when if that is known. Limit is the
// pacer ("rate", or "queue" for a leaky bucket), a window ("window
// 5000/1h0m0s"), "pause", "probe" or "ramp" (after a pause, the backlog
// waits for the probe's answer, then ramps up; each for a bounded time),
// "in-flight", "line" (behind others), "turn" (its context had ended when
// its turn came) or "closed".
type WaitError struct {
	Key   string    // the partition key
	Limit string    // see above
	Until time.Time // when the limit would have admitted it; zero if unknown
	Err   error     // ErrQueueFull, ErrClosed, ErrWouldExceedDeadline, ErrPaused or the context's error
}

func (e *WaitError) Error() string {
	msg := fmt.Sprintf("throttle: key %q: %s", e.Key, e.Limit)
	if !e.Until.IsZero() {
		msg += " until " + e.Until.UTC().Format(time.RFC3339Nano)
	}
	return msg + ": " + trimPrefix(e.Err.Error())
}

func (e *WaitError) Unwrap() error { return e.Err }

// trimPrefix drops a leading "throttle: " so messages are not prefixed twice.
func trimPrefix(s string) string {
	const p = "throttle: "
	if len(s) > len(p) && s[:len(p)] == p {
		return s[len(p):]
	}
	return s
}
