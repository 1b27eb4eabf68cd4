// Package throttletest provides a fake third-party API with quotas per API key, in
// the spirit of net/http/httptest, to test clients that must stay under a quota.
//
// An API applies any mix of quota algorithms (token bucket, leaky-bucket queue,
// fixed window, sliding log, sliding counter, concurrency limit) to each API key,
// answers 429 with a Retry-After computed from the true wait and, on demand, the
// X-RateLimit-* and IETF RateLimit/RateLimit-Policy headers; it can add jitter on
// the way in, latency, a seeded share of random 503s and outages (spans of time
// answered 503 only), and it counts everything it saw, including the most requests
// accepted in any one second (see Stats).
//
// # Quota headers
//
// The quota headers say what a client needs to stay under the limits, so that
// one that takes them at its word is never refused: one that sends
// X-RateLimit-Limit at once and again after X-RateLimit-Reset, or spreads
// X-RateLimit-Remaining over it; one that sends RateLimit's r at once and
// waits its t; one that spaces RateLimit-Policy's q over w (the tests prove
// these). Concurrency limits are not quotas over time and appear in none.
//
//   - X-RateLimit-Limit is what a limit holds when whole: N for a window, Burst
//     for a token bucket, Queue+1 for a leaky bucket. X-RateLimit-Remaining is
//     how many requests it would admit at once now: a token bucket's whole
//     tokens. X-RateLimit-Reset is the seconds until the limit is whole again:
//     the window ends, the token bucket is full, the queue is empty.
//   - RateLimit's r is that remaining count; t is the draft's effective window,
//     the seconds in which the limit admits no more than r, were they all sent
//     now (draft -10: until "additional quota is made available"): a fixed
//     window's end, the expiry of a sliding log's oldest entry, a token
//     bucket's next whole token, the next free place in a leaky bucket.
//   - RateLimit-Policy's q per w is the limit's long-run rate and, where it can
//     be, what may be sent at once. A fixed window's or a sliding log's is N per
//     Per. A sliding counter's is N-1 per Per (1 per 2·Per for N = 1): its
//     estimate counts the previous window's requests too, so that is what it
//     admits for ever; at once, only r may go. A bucket of depth
//     B (Burst, or Queue+1) that refills at Rate R is B per B/R, the time it
//     takes to refill: B at once, and B again after B/R, meet no refusal. As w
//     has whole seconds, it is the nearer to R, never above, of B per
//     ceil(B/R) and floor(R·w) per w = floor(B/R). A bucket shallower than a
//     second's worth (B/R under 1s) cannot be told in a whole-second window: w
//     is then 1 and q is floor(R), so q at once may be refused; the item then
//     carries the depth as throttletest-burst=B, a parameter the draft lets
//     vendors add, and r, which never exceeds B, says what may go at once.
//
// Real APIs describe token buckets in other ways too, some of which mislead a
// client that trusts them (a burst announced as a quota per second, Reset
// always 1). Config.TokenBucketHeaders offers those forms on demand, to test
// that a client survives them.
//
// Rounding: a Retry-After in seconds, X-RateLimit-Reset, t and a window's w are
// rounded up to whole seconds, and Retry-After and t are never 0; a Retry-After
// date is the end of the wait rounded up to the next whole second. So a client
// that obeys them is never early.
//
// In tests, serve the API in-process through its RoundTrip method inside a
// testing/synctest bubble, where waits take no real time:
//
//	synctest.Test(t, func(t *testing.T) {
//		api := throttletest.NewAPI(throttletest.Config{
//			Limits: []throttletest.Limit{{Algorithm: throttletest.FixedWindow, N: 100, Per: time.Minute}},
//		})
//		client := &http.Client{Transport: throttle.New(api)}
//		// ... run the code under test with client, whose requests carry X-API-Key ...
//		s := api.Stats()
//		assert.Zero(t, s.Total.Throttled)
//		assert.LessOrEqual(t, s.Total.PeakPerSecond, int64(100))
//	})
//
// An API keeps one clock. One created outside the bubble, before synctest.Test,
// works too: it takes the bubble's clock at its first request, where the clock
// of its Outages then starts. But an API that served requests on one clock and
// is then asked to serve on a clock that is behind, in a second bubble or in a
// bubble after the real clock, panics with "throttletest: API used across a
// synctest bubble boundary", as synctest does with a channel used outside its
// bubble: its quotas would refuse or admit by the wrong time. Reset it between
// bubbles, or create one API per bubble.
//
// Where a real socket is wanted, NewServer listens on loopback:
//
//	srv := throttletest.NewServer(cfg)
//	defer srv.Close()
//	resp, err := srv.Client().Get(srv.URL + "/items") // GET srv.URL+"/__stats" for the counts
package throttletest
