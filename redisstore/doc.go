// Package redisstore shares each key's quota among many processes through
// Redis: a [throttle.Store] for batch jobs that outgrow one machine (pods,
// workers, cron shards) and all spend one third-party quota.
//
// Give every process's Transport a Store on the same Redis, and the same
// Policy — the whole quota, not a share of it:
//
//	client := redis.NewClient(&redis.Options{
//		Addr:                  "redis:6379",
//		ContextTimeoutEnabled: true, // so that each call's timeout holds on the socket
//	})
//	tr := throttle.New(http.DefaultTransport,
//		throttle.WithStore(redisstore.New(client)),
//		throttle.WithPolicy(throttle.Policy{Rate: 10, Burst: 5}),
//	)
//
// Four processes configured so send 10 requests a second together, not 40.
//
// # What is shared, and what stays in each process
//
// Shared, per partition key (see [throttle.WithKey]): the token bucket or
// the leaky-bucket queue's pace, the Policy's Windows, a pause begun by any
// process (a 429 and its Retry-After, quota headers saying nothing
// remains), and a pace cut after a refusal, climbing back by a tenth of
// Rate per second. Each process books its requests' departures from Redis
// (each of the units of its [throttle.Cost]) and sleeps until its own,
// without polling. The correction of a cost by the server's figure
// ([throttle.WithCost]) holds in the process that read the answer; Redis
// keeps the cost booked.
//
// Each process keeps its own line per key (first come, first served,
// deadlines, Close), its Policy.MaxInFlight cap (requests in flight from
// this process), its retries and retry budget, and what the server's
// answers to its own requests teach it: what quota headers say remains
// paces that process, and only the pause or cut they lead to is shared. So
// Policy.Queue bounds each process's line, and MaxInFlight is per process:
// set it to the server's cap divided by the number of processes.
//
// # One round trip per decision, on Redis's clock
//
// Only the head of a key's line asks Redis, once per attempt, the next
// once the last has gone: a Redis a round trip r away caps each process at
// 1/r requests a second per key (1,000 a second 1 ms away, 50 at 20 ms),
// so keep Redis near its clients. Each Reserve
// and each Slow is one EVALSHA of a Lua script (EVAL once, should Redis not
// know it yet), which reads the time with TIME on the Redis server (the
// processes' clocks never enter the arithmetic, so skew between machines
// does not matter) and does the arithmetic of [throttle.MemoryStore]:
// GCRA (virtual scheduling) for the bucket and the queue, the departures
// of each Window's last Per, the pause and the cut pace. A departure later
// than the caller can wait is not booked, and nothing is written. It needs
// Redis 4.0 or later (tested with 7.0); on servers older than 5, the
// scripts ask for effects replication, which a script that reads TIME
// before it writes needs.
//
// # Redis keys and their lifetime
//
// A partition key may hold a credential (an API token, through
// [throttle.KeyByHeader] or a key function of one's own), so it is never
// written to Redis: its Redis keys are named by a digest of it, the first
// 16 bytes of its SHA-256 in hexadecimal, between braces:
//
//	throttle:{9f86d081884c7d659a2feaa0c55ad015}
//	throttle:{9f86d081884c7d659a2feaa0c55ad015}:win
//
// The first is a hash (tat, last, pause, cut, cutAt, seq: the bucket's
// theoretical arrival time, the latest departure, the pause's end, the cut
// pace and when it was cut, a count of bookings); the second, for a key
// with Windows, a sorted set of their departures, which every window
// counts with its own N and Per (passed on each call): a window whose N
// or Per changes keeps counting what was booked before. (Earlier versions
// kept one set per Window, named by its N and Per,
// "…:win:5000:3600000000000": such keys are no longer read, and expire
// within their Per.)
//
// Times are microseconds of the Redis server's clock. The windows' sorted
// set keeps one member per departure that may still count, whatever its
// units: its score is the departure and the margin it counts beyond Per
// (see [throttle.WindowMargin]; never below the newest score, so that the
// set stays in the order of booking), its name the units of the departures
// kept up to it and its own ("0000000000001200:5"), so that a booking finds
// the units kept, and the departure whose units make room for its own in
// each window, in a few reads (O(log) of the departures kept), and lets go
// of what departed the longest Per before it. Each script sets its keys'
// time to live (PEXPIRE) as it writes them: until the state no longer
// holds any departure (the bucket full again, the pause over, the newest
// departure the longest Per ago, a cut pace climbed back), and a
// second more. An idle key thus costs nothing in Redis; a key used again
// later starts afresh. A key that someone else
// wrote (of another type, or the windows' set holding a member not of the
// scripts') is dropped by the next script that reads it, and starts
// afresh too: one key's bad value concerns that key alone. An error reply
// about one call (not one that says Redis cannot serve any: LOADING,
// READONLY, CLUSTERDOWN, BUSY...) fails that call, or books it alone under
// FailOpen, and the Store stays shared for the others.
//
// Two ways in which Redis's windows count otherwise than a
// [throttle.MemoryStore], both allowed by [throttle.Store]'s meaning:
//
//   - As the windows' set stays in the order of booking, a departure counts
//     at least as long as any booked before it. A Transport that has had
//     no answer yet on the key books with a margin of a second (see
//     [throttle.WindowMargin]); every departure booked after one of those,
//     by any process, counts a second past Per too, until that one stops
//     counting, where a MemoryStore counts each with its own margin. The
//     caution that costs a key at most a second of its windows' first Per
//     in memory costs every process sharing it as long as some process
//     books before its first answer: in review 46, a process booking one
//     departure a second with that margin cut the bookings of another,
//     whose margins were 2 ms, from 49 in a MemoryStore to 28 in 6 s.
//   - The windows' set expires a second after its newest score and the
//     longest Per of the Policy that wrote it last: a window lengthened
//     after a quiet spell longer than that finds it gone, and counts none
//     of the departures of its new Per before, which a lone Transport
//     still counts, and a MemoryStore too unless it has swept the key out
//     as idle meanwhile (it lets go of them at the key's next booking, or
//     at a sweep: see its doc). A Store need count, under a new Per, only
//     those booked within the longest Per of the Policy before.
//
// Redis Cluster hashes only what is between the first braces, so every
// Redis key of one partition key falls in one slot, as a script's keys
// must, and partition keys spread over the cluster. Give
// [redis.NewClusterClient]'s client to New as any other. A prefix (see
// [WithPrefix]) should hold no braces.
//
// # When Redis does not answer
//
// Each call has a timeout ([WithTimeout], 200 ms by default). A call that
// fails or times out marks Redis out of reach: from then on the Store
// asks it again with one call about each second, one at a time (that
// call's request may wait up to the timeout), and the other requests do
// not ask it at all, so they do not each pay a timeout while Redis is
// down. As soon as such a trial is answered, every request shares through
// Redis again, by itself. Meanwhile, each Reserve without an answer from
// Redis
//
//   - under [FailOpen] (the default, at a quarter of the quota) books alone,
//     in a [throttle.MemoryStore] of the Store's own, at its share of each
//     quota, and says so in Reservation.Fallback: the Transport sends
//     [throttle.EventStore] when its Store goes alone, and again when it
//     shares again; a Slow holds those local bookings and returns the
//     error;
//   - under [FailClosed] fails at once with an error wrapping
//     [throttle.ErrStoreUnavailable]: the Transport fails the request with
//     it, and sends nothing.
//
// Either way no request hangs and none is lost: each gets a response or an
// error that says why. When the client could not connect to Redis, the
// error (and Reservation.Fallback) holds the dial's error, such as
// "connect: connection refused", which go-redis itself only logs: New adds
// a hook to the client that notes it. Neither the partition key nor a
// password is ever in these errors. The bookings made alone never reach Redis: they do
// not count once it is back. A pause or a cut pace told while Redis does
// not answer does: the Store tells Redis what remains of it as soon as
// Redis answers again (a timer asks it about once a second meanwhile), so
// that every process holds to a 429 one of them met during the outage. Redis's own are kept across a restart only if
// it persists them.
// A caller's context that ends during a call ends the call at once,
// canceled or past its deadline (the call itself runs on, within the
// timeout, and what it books counts), and says nothing about Redis. Under
// FailOpen, a Reserve whose caller can wait less than the timeout asks
// Redis for three quarters of that at most, then books alone, so that the
// request still goes; that does not take Redis for away, but the Reserves
// as short then ask it again only with one call about each second, one at
// a time, until one of them gets an answer.
//
// go-redis honours a call's context deadline on its socket only for a
// client made with Options.ContextTimeoutEnabled; without it, a Redis that
// stops answering (rather than refusing connections) holds a call for the
// client's ReadTimeout (5 s by default) instead of WithTimeout's bound.
package redisstore
