package otelthrottle

// Metrics: the instruments, made once, and New, which makes them.

import (
	"fmt"
	"hash/maphash"
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/throttlehttp/throttle"
)

// ScopeName is the instrumentation scope of the instruments: the name of
// the Meter they are made by.
const ScopeName = "github.com/throttlehttp/throttle/otelthrottle"

// Metrics records what throttle's Transports do as OpenTelemetry metrics:
// the counters and the wait histogram from the Transports' events (see
// Events), the gauges from their Stats at collection time (see Observe).
// One Metrics can serve many Transports. It is safe for concurrent use.
type Metrics struct {
	key bool // WithKeyAttribute

	wait      metric.Float64Histogram       // throttle.wait.duration
	attempts  metric.Int64ObservableCounter // throttle.attempts: summed in sets, observed at collection
	throttled metric.Int64Counter           // throttle.throttled
	pauses    metric.Int64Counter           // throttle.pauses
	retries   metric.Int64Counter           // throttle.retries
	refusals  metric.Int64Counter           // throttle.refusals

	sets attrCache

	mu       sync.Mutex
	observed map[*throttle.Transport]int // Observe's Transports, and how often each is observed
}

// waitBuckets are the wait histogram's bucket boundaries, in seconds: OTel's
// for HTTP durations, then up to the longest Retry-After honoured by
// default (5 minutes), as pauses are waited out too. A View can set others.
var waitBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 30, 60, 120, 300}

// New makes the instruments (see the package doc for the list) with the
// MeterProvider of WithMeterProvider, or the global one. It fails only if
// the provider fails to make one.
func New(opts ...Option) (*Metrics, error) {
	var c config
	for _, o := range opts {
		o.apply(&c)
	}
	if c.provider == nil {
		c.provider = otel.GetMeterProvider()
	}
	meter := c.provider.Meter(ScopeName)
	m := &Metrics{key: c.key, observed: make(map[*throttle.Transport]int)}
	m.sets.seed = maphash.MakeSeed()
	m.sets.overflow.opt = metric.WithAttributeSet(attribute.NewSet(attribute.Bool(overflowAttr, true)))
	var err error
	check := func(e error) {
		if err == nil && e != nil {
			err = e
		}
	}
	var e error
	m.wait, e = meter.Float64Histogram("throttle.wait.duration", metric.WithUnit("s"),
		metric.WithDescription("How long an attempt waited for its turn, by the limit it waited for last; attempts that went at once are not recorded."),
		metric.WithExplicitBucketBoundaries(waitBuckets...))
	check(e)
	m.attempts, e = meter.Int64ObservableCounter("throttle.attempts", metric.WithUnit("{attempt}"),
		metric.WithDescription("Attempts sent to the base RoundTripper that came back, by status code or error type."))
	check(e)
	m.throttled, e = meter.Int64Counter("throttle.throttled", metric.WithUnit("{response}"),
		metric.WithDescription("Answers that were quota signals: 429, or 403 with Retry-After or the quota spent."))
	check(e)
	m.pauses, e = meter.Int64Counter("throttle.pauses", metric.WithUnit("{pause}"),
		metric.WithDescription("Pauses of a key begun or extended by a server's answer, by reason and source."))
	check(e)
	m.retries, e = meter.Int64Counter("throttle.retries", metric.WithUnit("{retry}"),
		metric.WithDescription("Retries scheduled, by the status code or error type of the attempt retried."))
	check(e)
	m.refusals, e = meter.Int64Counter("throttle.refusals", metric.WithUnit("{request}"),
		metric.WithDescription("Requests that ended without being sent, by reason and the limit that held them."))
	check(e)
	waiting, e := meter.Int64ObservableUpDownCounter("throttle.requests.waiting", metric.WithUnit("{request}"),
		metric.WithDescription("Attempts waiting for their turn now, in the Transports given to Observe."))
	check(e)
	inFlight, e := meter.Int64ObservableUpDownCounter("throttle.requests.in_flight", metric.WithUnit("{request}"),
		metric.WithDescription("Attempts sent whose response is not yet in, in the Transports given to Observe."))
	check(e)
	if err != nil {
		return nil, fmt.Errorf("otelthrottle: %w", err)
	}
	if _, err := meter.RegisterCallback(m.observe(waiting, inFlight), m.attempts, waiting, inFlight); err != nil {
		return nil, fmt.Errorf("otelthrottle: %w", err)
	}
	return m, nil
}
