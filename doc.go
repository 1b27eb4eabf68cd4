// Package throttle keeps an HTTP client under a third-party API's quota.
//
// A [Transport] is an [http.RoundTripper]: set it as [http.Client.Transport]
// and every outgoing request is
//
//   - paced per target (per host by default, or per API key, endpoint… with
//     [WithKey]) by a token bucket or a leaky-bucket FIFO queue, exact
//     windows ("5000 per hour") and a cap on requests in flight, all set by a
//     [Policy];
//   - held back while the target says "retry later": a 429, or a 503 with
//     Retry-After, pauses the whole target until the time given, then one
//     request goes first as a probe and the rest follow gently;
//   - retried with jittered exponential backoff when that is safe (see
//     [Retry]), every attempt passing through the same pacer, so retries can
//     never raise the sending rate;
//   - adapted to what the server says: a throttled answer slows a paced key
//     (down at once, back up slowly), and a key with no pace that is
//     throttled twice learns one (see [Policy]).
//
// Pacing waits, it does not refuse: a request waits for its turn, honouring its
// context. Where a wait is known in advance to end after the context's
// deadline, the request fails at once with [ErrWouldExceedDeadline].
//
//	client := &http.Client{Transport: throttle.New(http.DefaultTransport,
//		throttle.WithPolicy(throttle.Policy{Rate: 10, Burst: 5}),
//		throttle.WithHostPolicy("api.github.com", throttle.Policy{Rate: 1.3, Burst: 50,
//			Windows: []throttle.Window{{N: 5000, Per: time.Hour}}}),
//	)}
//
// [ParseRetryAfter] and [ParseQuota] read the server's signals on their own,
// for callers who need them outside a Transport.
package throttle
