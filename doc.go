// Package throttle keeps an HTTP client under a third-party API's quota.
//
// A [Transport] is an [http.RoundTripper]: set it as [http.Client.Transport]
// and every outgoing request is
//
//   - paced per target (per host by default, or per API key, endpoint… with
//     [WithKey]) by a token bucket or a leaky-bucket FIFO queue, exact
//     windows ("5000 per hour") and a cap on requests in flight, all set by a
//     [Policy];
//   - held back while the target says "retry later": a quota signal (429,
//     or a 403 with Retry-After or with the quota spent) pauses the whole
//     target until the time given, then one request goes first as a probe
//     and the rest follow gently;
//   - retried with jittered exponential backoff when that is safe (see
//     [Retry]), every attempt passing through the same pacer, so retries can
//     never raise the sending rate;
//   - adapted to what the server says, in proportion (see [Policy.Rate]):
//     a quota signal slows a paced key, once per episode, and the pace is
//     back within seconds unless the refusals prove the quota lower; a key
//     with no pace, no windows and no quota headers learns one from its
//     429s, guessed at the first (whose pause peeks into the last second
//     of a whole-second Retry-After, so a server that gives back at once
//     costs an eighth of a second, not a second) and searched for from
//     there, and then takes an isolated 429 as a collision, not an order
//     to stop;
//   - kept within what the server's quota headers say remains, when it
//     sends them (X-RateLimit-*, the IETF RateLimit fields, GitHub's and
//     Shopify's forms; see [ParseQuota]), on every answer, 2xx included:
//     a window's count holds the key until its reset, a log of recent
//     requests is counted exactly, a bucket's measured refill paces it.
//     Nobody needs to tell the transport the quota. A configured Policy
//     stays a ceiling. [KeyStats] and [EventPace] show what was learned.
//     One refusal from a bucket the headers pace is a collision, not an
//     order to stop: the refused request waits out its Retry-After and the
//     others go on, unless the server asks for more than 2 s or refusals
//     come in 3 of the key's last 20 answers. A 429 whose headers say
//     enough remains was refused by a limit they do not describe (a day's
//     quota told, a second's enforced): the key learns a pace from its
//     429s as well, and the headers still hold back what they count.
//     An HTTP-date Retry-After, and a reset written as a Unix time or a
//     date, are counted from the server's clock, which the answer's Date
//     field shows when it is more than a second off the client's.
//
// Availability signals are not quota signals: a 502, 503, 504 or network
// error delays only its own request's retry (its backoff, never shorter than
// its Retry-After) and spends the key's retry budget; the others go on at
// the same pace. The key pauses as a whole only in an outage, when such
// failures dominate its recent answers: at least 5 of its last 20 answers
// (within a minute of each other) failed, and more than half did; one
// request's retries count one failure at a time while others are served (one
// broken item is no outage), and 20 answers none served make one. Then one
// request probes per Retry-After (without one, per the failed request's
// backoff, and once none of the last 20 answers was served, at least the
// outage's own: InitialDelay doubled at each failed probe, up to MaxDelay;
// never past MaxRetryAfter); a failed probe goes behind the requests
// waiting, but for those of a negative priority below its own (see
// Priority), and the first good answer ends the outage.
//
// A probe, or the first requests of the ramp after it, hold the rest of the
// key only until their answer is overdue: srtt + 4·rttvar of the key's
// round trips (TCP's retransmission timeout), within [1s, 10s], and 1s
// before any round trip is known. Then the next attempt goes.
//
// Pacing waits, it does not refuse: a request waits for its turn, honouring its
// context. Where a wait is known in advance to end after the context's
// deadline, the request fails at once with [ErrWouldExceedDeadline].
//
// A request the server counts as more than one (a GraphQL query's points, a
// batch of items) says so with [Cost], given through [With]: each of its
// attempts is charged that many units of its key's bucket, queue, windows
// and told quota. [WithCost] reads from the answer what it really cost, and
// corrects the charge.
//
//	client := &http.Client{Transport: throttle.New(http.DefaultTransport,
//		throttle.WithPolicy(throttle.Policy{Rate: 10, Burst: 5}),
//		throttle.WithHostPolicy("api.github.com", throttle.Policy{Rate: 1.3, Burst: 50,
//			Windows: []throttle.Window{{N: 5000, Per: time.Hour}}}),
//	)}
//
// # Many processes, one quota
//
// A Transport's limits hold across the requests that pass through it. When
// several processes (pods, workers, cron shards) spend one API key's quota,
// give each Transport the same [Store] with [WithStore], and the same
// Policy, the whole quota: package redisstore shares through Redis,
// [MemoryStore] among the Transports of one process. Each Transport keeps
// its own line per key; its head asks the Store for a departure, one round
// trip, and waits for it there. A pause or a cut pace one Transport learns
// from its answers holds for all.
//
// [ParseRetryAfter] and [ParseQuota] read the server's signals on their own,
// for callers who need them outside a Transport.
//
// # Memory
//
// A Transport keeps a state for each key (each host, or each value of
// [WithKey]) while that state can still matter, and drops it once the key is
// idle. A key is kept while a request holds it, waits in its line or is on
// the wire; while a response body holds one of its MaxInFlight slots; while
// it is paused (a pause longer than MaxRetryAfter too, until it ends); while
// its token bucket has not filled again since its last request (Burst/Rate at
// most); while one of its Windows still counts a request (for Per after the
// request's answer: an hour, for an hourly quota); while its server's quota
// headers say part of their window is spent, until its reset, or that
// their bucket is not full, until it has refilled; and for a
// minute after its pace or windows were last adapted. An idle key is not
// dropped at once: idle keys are swept out as new keys arrive, each time
// the number of live keys has doubled (from 1,024 on), and a key used since
// the last sweep is spared once, so at most about twice the keys in use are
// live.
//
// A live key costs about 360 bytes unpaced, 440 with a token bucket and 570
// with a window, plus some 20 bytes for each request a window still counts,
// whatever its [Cost] (16, and the room its log keeps as it grows). A key
// that met trouble (a quota signal, a 503, a pause, a retry, a request
// refused or canceled) also keeps a record of it (its pause, the adaptation
// of its pace, its rarer counters): about 640 bytes in all when paused.
// These are heap bytes per live key, with 100,000 keys that each sent one
// request (go1.26, amd64), as measured by
//
//	go test -run '^$' -bench KeyMemory -benchtime 1x .
package throttle
