// Package otelthrottle records what throttle's Transports do as
// OpenTelemetry metrics: how long requests waited and for which limit,
// their attempts, throttled answers, pauses, retries and refusals, and the
// requests waiting and in flight now.
//
// It is its own module, so that throttle itself does not depend on
// OpenTelemetry. It uses the OTel metric API only: the MeterProvider (of
// the OTel SDK, or any other) is yours.
//
//	m, err := otelthrottle.New(otelthrottle.WithMeterProvider(mp))
//	if err != nil { … }
//	t := throttle.New(http.DefaultTransport,
//		throttle.WithPolicy(throttle.Policy{Rate: 10, Burst: 5}),
//		throttle.WithEvents(m.Events(nil))) // or m.Events(yourOwn): it gets every event too
//	stop := m.Observe(t)                    // the gauges
//	defer stop()
//
// The counters and the histogram come from the Transport's events (see
// throttle.WithEvents), recorded on the request's goroutine with the
// request's context, so an exemplar can name its trace. Each event finds
// its attributes among those made before (once per combination) by a hash,
// without a lock, and allocates nothing. throttle.attempts, the one
// instrument every request moves, is summed here, in an atomic counter per
// combination, and handed to OTel at collection: a request pays about 30 ns
// for it, where an Add of the OTel SDK (v1.47) with the same attributes
// costs about 180 ns and an allocation. The gauges are
// read from the Transports' Stats at collection (see Metrics.Observe):
// nothing is paid for them on a request. See the README for the figures.
//
// At most 1024 combinations of attributes are kept (under the OTel SDK's
// own limit of 2000 per instrument, by default). Past that (thousands of hosts, or keys
// with WithKeyAttribute), an event of a new combination is recorded with the
// one attribute otel.metric.overflow=true, as the SDK does past its limit.
//
// # Instruments
//
// Names follow OTel's semantic conventions for HTTP clients where one
// applies (the attributes server.address, server.port,
// http.request.method, http.response.status_code, error.type); what they do
// not cover is named throttle.*. Durations are in seconds.
//
//	| instrument                  | kind                         | unit       | from             | attributes |
//	|-----------------------------|------------------------------|------------|------------------|------------|
//	| throttle.wait.duration      | Float64Histogram             | s          | EventWaited      | server.address, server.port, http.request.method, throttle.limit |
//	| throttle.attempts           | Int64ObservableCounter       | {attempt}  | EventAnswered    | server.address, server.port, http.request.method, http.response.status_code or error.type |
//	| throttle.throttled          | Int64Counter                 | {response} | EventThrottled   | server.address, server.port, http.request.method, http.response.status_code |
//	| throttle.pauses             | Int64Counter                 | {pause}    | EventPaused      | server.address, server.port, throttle.pause.reason, throttle.pause.source |
//	| throttle.retries            | Int64Counter                 | {retry}    | EventRetry       | server.address, server.port, http.request.method, http.response.status_code or error.type |
//	| throttle.refusals           | Int64Counter                 | {request}  | EventRefused     | server.address, server.port, http.request.method, throttle.refusal.reason, throttle.limit |
//	| throttle.requests.waiting   | Int64ObservableUpDownCounter | {request}  | Stats().Queued   | none (throttle.key with WithKeyAttribute) |
//	| throttle.requests.in_flight | Int64ObservableUpDownCounter | {request}  | Stats().InFlight | none (throttle.key with WithKeyAttribute) |
//
// The attributes:
//   - server.address, server.port: the request's host, lower-cased, and its
//     port (the scheme's default when the URL gives none).
//   - http.request.method: the request's method; "_OTHER" for one not of
//     RFC 9110 or PATCH.
//   - http.response.status_code: the attempt's status code; error.type, for
//     an attempt that got no answer, "timeout", "canceled" (the context's),
//     or the Go type of the base RoundTripper's error (such as
//     "*net.OpError").
//   - throttle.limit: the limit waited for last (EventWaited), or that held
//     a refused request (EventRefused), as throttle.Limit's String says it:
//     "rate", "queue", "window", "pause", "probe", "ramp", "in-flight",
//     "backoff", "quota", "store", "line", "none".
//   - throttle.refusal.reason: which error refused the request:
//     "queue_full", "would_exceed_deadline", "paused", "closed",
//     "max_elapsed", "cost_too_large", "store_unavailable" (throttle's
//     sentinel errors),
//     "deadline_exceeded", "canceled" (the context ended while it
//     waited), "_OTHER" (another error of the Store).
//   - throttle.pause.reason: "quota" or "outage"; throttle.pause.source:
//     "Retry-After", "RateLimit", "X-RateLimit-Reset" or "backoff".
//   - throttle.key: the partition key, only with WithKeyAttribute.
//
// Every attribute is bounded by the hosts called and throttle's own
// vocabulary, never by the requests: the partition key, which can be an API
// token and whose number has no bound, is left out unless WithKeyAttribute
// asks for it. Nor is a URL's path recorded.
//
// throttle.requests.waiting and throttle.requests.in_flight are not
// OTel's http.client.active_requests: that one needs server.address, and a
// Transport's Stats count by key, not by host. In flight counts the
// attempts on the wire to the base RoundTripper; to see them by host, wrap
// the base RoundTripper in OTel's otelhttp.
package otelthrottle
