package throttle

import (
	"log/slog"
	"time"
)

// EventKind says what an [Event] reports.
type EventKind uint8

const (
	// EventThrottled: the server answered with a quota signal: 429, or a 403
	// with Retry-After or saying the quota is spent.
	EventThrottled EventKind = iota + 1
	// EventPaused: the key is paused until Event.Until (begun or extended);
	// Event.Reason says "quota" (a quota signal) or "outage" (502, 503, 504
	// or network errors dominated the key's recent answers).
	EventPaused
	// EventRetry: the request will be tried again after Event.Delay (at the
	// earliest: the pause and the pacer may hold it longer).
	EventRetry
	// EventGaveUp: retrying ended; Event.Reason says why. The caller gets the
	// last response, or the last error.
	EventGaveUp
)

func (k EventKind) String() string {
	switch k {
	case EventThrottled:
		return "throttled"
	case EventPaused:
		return "paused"
	case EventRetry:
		return "retry"
	case EventGaveUp:
		return "gave up"
	}
	return "unknown"
}

// An Event is something that matters in the life of a request, given to the
// function set by [WithEvents].
type Event struct {
	Kind    EventKind
	Key     string        // the partition key
	Attempt int           // the attempt this follows: 1 for the first
	Status  int           // the attempt's status code; 0 after a network error
	Err     error         // the attempt's error, if any
	Until   time.Time     // EventPaused: the end of the pause
	Source  string        // EventPaused: "Retry-After", "RateLimit", "X-RateLimit-Reset" or "backoff"
	Delay   time.Duration // EventRetry: the delay before the next attempt
	Reason  string        // EventGaveUp: why retrying ended; EventPaused: "quota" or "outage"
}

// LogValue makes an Event log as a group of its set fields with log/slog.
func (e Event) LogValue() slog.Value {
	attrs := []slog.Attr{slog.String("kind", e.Kind.String()), slog.String("key", e.Key), slog.Int("attempt", e.Attempt)}
	if e.Status != 0 {
		attrs = append(attrs, slog.Int("status", e.Status))
	}
	if e.Err != nil {
		attrs = append(attrs, slog.String("err", e.Err.Error()))
	}
	if !e.Until.IsZero() {
		attrs = append(attrs, slog.Time("until", e.Until))
	}
	if e.Source != "" {
		attrs = append(attrs, slog.String("source", e.Source))
	}
	if e.Delay != 0 {
		attrs = append(attrs, slog.Duration("delay", e.Delay))
	}
	if e.Reason != "" {
		attrs = append(attrs, slog.String("reason", e.Reason))
	}
	return slog.GroupValue(attrs...)
}

func (t *Transport) emit(e Event) {
	if t.cfg.events != nil {
		t.cfg.events(e)
	}
}
