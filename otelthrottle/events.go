package otelthrottle

// Events: the counters and the wait histogram, recorded from the events a
// Transport gives to its events function.

import (
	"context"
	"errors"

	"github.com/throttlehttp/throttle"
)

// Events returns the function to give to throttle.WithEvents: it records
// each event in the instruments, then passes it to next, if next is not
// nil. As a Transport takes one events function, next is where your own
// goes (a logger, say); it gets every event, whatever the metrics make of
// it. The metrics are recorded with the event's Context, so an exemplar can
// name the request's trace (all but throttle.attempts, summed here).
//
//	t := throttle.New(base, throttle.WithEvents(m.Events(logEvent)))
func (m *Metrics) Events(next func(throttle.Event)) func(throttle.Event) {
	if next == nil {
		return func(e throttle.Event) { m.record(&e) }
	}
	return func(e throttle.Event) {
		m.record(&e)
		next(e)
	}
}

// record records e in the instruments.
func (m *Metrics) record(e *throttle.Event) {
	var k attrKey
	if e.Kind == throttle.EventAnswered { // the one event of every request: first, and without ctx
		m.answerKey(&k, shapeAttempt, e)
		m.sets.of(&k).count.Add(1)
		return
	}
	ctx := e.Context
	if ctx == nil {
		ctx = context.Background()
	}
	switch e.Kind {
	case throttle.EventRetry:
		m.answerKey(&k, shapeRetry, e)
		m.retries.Add(ctx, 1, m.sets.of(&k).opt)
	case throttle.EventThrottled:
		m.attrKey(&k, shapeThrottled, e, "", "", e.Status)
		m.throttled.Add(ctx, 1, m.sets.of(&k).opt)
	case throttle.EventPaused:
		m.attrKey(&k, shapePaused, e, e.Reason, e.Source, 0)
		m.pauses.Add(ctx, 1, m.sets.of(&k).opt)
	case throttle.EventWaited:
		m.attrKey(&k, shapeWaited, e, e.Limit.String(), "", 0)
		m.wait.Record(ctx, e.Wait.Seconds(), m.sets.of(&k).opt)
	case throttle.EventRefused:
		m.attrKey(&k, shapeRefused, e, refusal(e.Err), e.Limit.String(), 0)
		m.refusals.Add(ctx, 1, m.sets.of(&k).opt)
	}
}

// answerKey sets k to the attributes of an attempt's answer: its status
// code, or the type of the base's error.
func (m *Metrics) answerKey(k *attrKey, s shape, e *throttle.Event) {
	if e.Status != 0 || e.Err == nil {
		m.attrKey(k, s, e, "", "", e.Status)
		return
	}
	m.attrKey(k, s, e, errorType(e.Err), "", 0)
}

// refusal is the reason of a refusal, for throttle.refusal.reason: one word
// per sentinel error of throttle, and the context's.
func refusal(err error) string {
	switch {
	case errors.Is(err, throttle.ErrQueueFull):
		return "queue_full"
	case errors.Is(err, throttle.ErrWouldExceedDeadline):
		return "would_exceed_deadline"
	case errors.Is(err, throttle.ErrPaused):
		return "paused"
	case errors.Is(err, throttle.ErrClosed):
		return "closed"
	case errors.Is(err, throttle.ErrMaxElapsed):
		return "max_elapsed"
	case errors.Is(err, throttle.ErrCostTooLarge):
		return "cost_too_large"
	case errors.Is(err, throttle.ErrStoreUnavailable):
		// Before the context's: a Store's own call that timed out says
		// so with its context's error, wrapped (found in review: such a
		// refusal was "deadline_exceeded", the request's context live,
		// where Stats counts it RefusedStore).
		return "store_unavailable"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline_exceeded"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return "_OTHER" // another error of the Store, as semconv names what is not listed
}
