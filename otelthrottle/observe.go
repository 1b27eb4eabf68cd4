package otelthrottle

// The gauges: requests waiting and in flight, read from the observed
// Transports' Stats when the metrics are collected.

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/throttlehttp/throttle"
)

// Observe adds t to the Transports whose requests waiting and in flight the
// gauges report, until stop is called. The gauges are read from t.Stats()
// at each collection, which locks each of t's keys in turn, once: a cost
// in proportion to the keys live, paid at the collection interval, never
// on a request. Without WithKeyAttribute they are totals of every Transport
// observed (Stats says nothing of hosts); with it, one series per key. A
// Transport observed twice counts once, until both stops are called. Observe
// panics if t is nil.
func (m *Metrics) Observe(t *throttle.Transport) (stop func()) {
	if t == nil {
		panic("otelthrottle: Observe of a nil Transport")
	}
	m.mu.Lock()
	m.observed[t]++
	m.mu.Unlock()
	var once bool
	return func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		if once {
			return
		}
		once = true
		if m.observed[t]--; m.observed[t] == 0 {
			delete(m.observed, t)
		}
	}
}

// observe returns the callback of the observed instruments: the attempts
// counted, and the gauges.
func (m *Metrics) observe(waiting, inFlight metric.Int64ObservableUpDownCounter) metric.Callback {
	return func(_ context.Context, o metric.Observer) error {
		m.sets.each(shapeAttempt, func(s *series) { o.ObserveInt64(m.attempts, s.count.Load(), s.opt) })
		m.mu.Lock()
		ts := make([]*throttle.Transport, 0, len(m.observed))
		for t := range m.observed {
			ts = append(ts, t)
		}
		m.mu.Unlock()
		if !m.key {
			var queued, sending int64
			for _, t := range ts {
				total := t.Stats().Total
				queued, sending = queued+int64(total.Queued), sending+int64(total.InFlight)
			}
			o.ObserveInt64(waiting, queued)
			o.ObserveInt64(inFlight, sending)
			return nil
		}
		type now struct{ queued, sending int64 }
		byKey := make(map[string]now)
		for _, t := range ts {
			for k, s := range t.Stats().Keys {
				n := byKey[k]
				n.queued, n.sending = n.queued+int64(s.Queued), n.sending+int64(s.InFlight)
				byKey[k] = n
			}
		}
		for k, n := range byKey {
			set := metric.WithAttributeSet(attribute.NewSet(attribute.String(keyAttr, k)))
			o.ObserveInt64(waiting, n.queued, set)
			o.ObserveInt64(inFlight, n.sending, set)
		}
		return nil
	}
}
