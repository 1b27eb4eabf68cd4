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
// Rounding: a Retry-After in seconds, X-RateLimit-Reset and the IETF t parameter
// are the true wait rounded up to whole seconds, and Retry-After is never 0; a
// Retry-After date is the end of the wait rounded up to the next whole second. So a
// client that obeys them is never early.
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
