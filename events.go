package throttle

import (
	"log/slog"
	"time"

	"golang.org/x/time/rate"
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
	// EventPace: what paces the key changed. Event.Reason says where it
	// comes from: "quota headers: bucket" (Event.Rate is the refill
	// measured, sent when first known and when it moves by a tenth),
	// "quota headers: window" or "quota headers: log" (the server's count
	// holds the key; Event.Rate is 0), or "learned from 429s" (a key with
	// no Policy.Rate and no quota headers that was refused; Event.Rate is
	// the pace learned, sent when first learned and when it moves by a
	// tenth).
	EventPace
	// EventStore: the Store set by WithStore could not be reached, and
	// booked departures alone (Event.Err says why; see redisstore's
	// FailOpen), or, with Event.Err nil, it is shared again. Sent when
	// this changes, not for every request.
	EventStore
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
	case EventPace:
		return "pace"
	case EventStore:
		return "store"
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
	Rate    rate.Limit    // EventPace: the pace now
	Reason  string        // EventGaveUp: why retrying ended; EventPaused: "quota" or "outage"; EventPace: where the pace comes from
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
	if e.Rate != 0 {
		attrs = append(attrs, slog.Float64("rate", float64(e.Rate)))
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
