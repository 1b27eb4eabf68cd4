package otelthrottle

// Options of New: where the instruments come from, and what their
// attributes may say.

import "go.opentelemetry.io/otel/metric"

// An Option configures New.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	provider metric.MeterProvider
	key      bool
}

// WithMeterProvider sets where the instruments are made. nil, the default:
// the global MeterProvider (otel.GetMeterProvider), which makes no-op
// instruments until one is set.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) { c.provider = mp })
}

// WithKeyAttribute adds the partition key (see throttle.WithKey), as the
// attribute throttle.key, to every instrument, and splits the gauges by key.
// Off by default, and off is safe: the number of keys is not bounded, nor
// would be the number of time series they make, and a key can name a
// customer or hold a token (throttle shows a key that holds a credential of
// its request as "redacted:" and a digest, but not one derived from it).
// Turn it on only for keys that are few and not secret, such as the names
// of a handful of tenants.
func WithKeyAttribute() Option {
	return optionFunc(func(c *config) { c.key = true })
}
