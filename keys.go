package throttle

import (
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// keyState is everything the transport knows about one partition key. Its
// mutex guards every field but the immutable ones; different keys share no
// lock.
//
// It holds what every key needs from its first request on; what only a key
// that met trouble needs is in tr, made at the first need (see trouble), so
// that the many keys that are only ever answered cost little.
type keyState struct {
	key string // the partition key
	pol *policy

	mu         sync.Mutex
	lim        *rate.Limiter // nil: unpaced (a pace may be learned, see adapt.go)
	limAt      time.Duration // the latest time lim was used at, from the epoch: its clock never goes back
	timedAt    time.Duration // the last admission whose answer is timed, from the epoch
	wins       []windowLog
	head, tail *waiter   // the line
	leastBy    time.Time // no bound of a waiter in the line (see waiter.by) is earlier; zero: none known
	admitted   uint64    // units admitted so far, each attempt its cost (see Cost) and corrections up (see WithCost): a ticket's number is its last unit's
	waitUnits  int64     // the units of the attempts in the line, each its cost
	arrived    uint64    // places given in the line: each request that acquired the state, and each failed probe of an outage sent behind (see judge)
	outUnits   int64     // units of the attempts sending

	// Counts of goroutines (int32: a key has fewer than 2^31), packed
	// with the flags into two words.
	waiting int32         // attempts in the line
	sending int32         // attempts sent, response not yet in
	refs    int32         // RoundTrips holding the state
	reserve int32         // tokens of Burst held back against jitter (see latency.go)
	slots   int32         // in-flight slots held (MaxInFlight > 0)
	bare    int32         // attempts on the wire that hold no slot: sent while the key had no cap (see SetPolicy)
	used    bool          // acquired since the last sweep: spared once
	dead    bool          // evicted: holders of a stale pointer must look it up again
	aliased bool          // tr.x.alias is set: fixed before the state is shared, so name() reads it unlocked
	born    uint8         // the sweep it was made during or after (keys.swept, the low byte)
	hdr     atomic.Uint32 // quota headers seen, or answers without them (told.go)

	lat    latency
	health health
	ev     evidence // what the answers show the server bears (adapt.go)
	budget budget
	tr     *trouble // nil until the key meets trouble
	stats  counts
	levels *levels // WithCost: the pacer's levels at its takes, which bound a refund (cost.go); nil without
}

// trouble is what a key keeps only once it has met trouble: an answer that
// was a quota signal or a 503, a pause, a retry, a refusal. A key that is
// only ever answered never makes one.
type trouble struct {
	pauseUntil time.Time     // the server said: nothing before this
	pauseOwn   time.Duration // of that pause, the end that is the key's own try, not asked by the server (see told.shifted): not counted against MaxRetryAfter
	probeAt    time.Duration // when the probe out was sent, from the epoch
	probeID    uint64        // its admission number
	rampAt     time.Duration // when the ramp last let one go, from the epoch
	ramp       int32         // > 0: at most this many attempts awaiting their response
	probe      probeState
	adapt      adaptation
	stats      rareCounts
	x          *rare // what only a rare key needs
}

// rare is what a key rarely needs: an alias, the mirror of quota headers,
// a pace learned from 429s.
type rare struct {
	alias  string        // shown instead of key when key holds a credential (see shownKey)
	told   told          // the server's count, from its quota headers (told.go), if told.on
	more   []told        // the counts of the further IETF policies its answers list (toldpolicies.go)
	readAt time.Duration // when the key's last answer with quota headers was read (see mirrorFor)
	learn  learner       // a pace learned from 429s alone (learn.go)
	// refusalsTold: the server's refusals of this key carried its quota
	// headers: one without them came from elsewhere (see unexplained)
	refusalsTold bool
	// peekStep: paused by refusals the headers do not explain, the wait
	// before the last peek (see peekPast); 0 once the key resumed
	peekStep time.Duration
	// pausedAt: a key paced by a Policy, without quota headers, last
	// paused for a refusal then, from the epoch (see quietPeek)
	pausedAt time.Duration
}

// mirror returns the key's mirror of the server's count, or nil; of its
// first policy, when the server lists several (see mirrors).
func (ks *keyState) mirror() *told {
	if tr := ks.tr; tr != nil && tr.x != nil && tr.x.told.on {
		return &tr.x.told
	}
	return nil
}

// rarely returns the key's rare needs, made at the first call.
func (ks *keyState) rarely() *rare {
	tr := ks.troubled()
	if tr.x == nil {
		tr.x = &rare{}
	}
	return tr.x
}

// troubled returns the key's trouble, made at the first call.
func (ks *keyState) troubled() *trouble {
	if ks.tr == nil {
		ks.tr = &trouble{adapt: newAdaptation(ks.pol.Rate)}
		ks.ev.begin() // the share of refusals lately (adapt.go)
	}
	return ks.tr
}

// pausedUntil is the end of the key's pause; zero if it never paused.
func (ks *keyState) pausedUntil() time.Time {
	if ks.tr == nil {
		return time.Time{}
	}
	return ks.tr.pauseUntil
}

// pausedAsked is pausedUntil less the key's own end of the pause: when the
// server asked it to end.
func (ks *keyState) pausedAsked() time.Time {
	if ks.tr == nil {
		return time.Time{}
	}
	return ks.tr.pauseUntil.Add(-ks.tr.pauseOwn)
}

type probeState uint8

const (
	probeNone probeState = iota
	probeDue             // a pause ended: the next attempt goes alone
	probeOut             // the probe is on the wire; the others wait for its answer
)

// never is the readyAt of a wait that only an event can end.
var never = time.Unix(1<<62, 0)

// readyAt is the earliest time at which the head of the line, of the cost
// given, may go, and the limit that holds it until then (never: until
// woken). It takes nothing.
func (ks *keyState) readyAt(now time.Time, mono time.Duration, cost int) (time.Time, holder) {
	at, h := ks.heldUntil(now, mono, cost)
	if ks.lim != nil && !at.Equal(never) {
		if d := tokenDelay(ks.lim, at, tokensFor(ks.lim, cost)); d > 0 {
			at, h = at.Add(d), holder{limit: ks.pol.limit}
		}
	}
	return at, h
}

// heldUntil is readyAt without the pacer: the earliest time at which every
// other limit lets the head, of the cost given, go, and the limit that
// holds it until then: LimitNone only if nothing does, and at is now.
//
// A probe, or a ramp that is full, holds the rest only until its answer is
// overdue (latency.probeWait): then one more may go, so an answer that never
// comes cannot hold the key.
func (ks *keyState) heldUntil(now time.Time, mono time.Duration, cost int) (time.Time, holder) {
	at, h := now, holder{}
	if tr := ks.tr; tr != nil && tr.probe == probeOut {
		if end := now.Add(tr.probeAt + ks.lat.probeWait() - mono); end.After(at) {
			at, h = end, holder{limit: LimitProbe}
		}
	}
	if tr := ks.tr; tr != nil && tr.ramp > 0 && ks.sending >= tr.ramp {
		if end := now.Add(tr.rampAt + ks.lat.probeWait() - mono); end.After(at) {
			at, h = end, holder{limit: LimitRamp}
		}
	}
	if ks.pol.MaxInFlight > 0 && int(ks.slots+ks.bare) >= ks.pol.MaxInFlight {
		return never, holder{limit: LimitInFlight}
	}
	if tr := ks.tr; tr != nil && tr.pauseUntil.After(at) {
		at, h = tr.pauseUntil, holder{limit: LimitPause}
	}
	for m := range ks.mirrors() {
		next := m.lowerBound(mono, ks.admitted, ks.outUnits, 0, cost)
		if next == holdsForAnswer {
			return never, holder{limit: LimitQuota}
		}
		if next := now.Add(next - mono); next.After(at) {
			at, h = next, holder{limit: LimitQuota}
		}
	}
	for i := range ks.wins {
		// A window's time is absolute: taken at now, then compared, so that
		// a pause saturated near the end of time cannot overflow it.
		w := &ks.wins[i]
		next := w.nextAt(mono, 0, cost, false)
		if next == holdsForAnswer {
			return never, holder{LimitWindow, *w.Window}
		}
		if next <= mono {
			continue // free now: at is not before now
		}
		if wt := now.Add(next - mono); wt.After(at) {
			at, h = wt, holder{LimitWindow, *w.Window}
		}
	}
	return at, h
}

// free reports whether nothing but the pacer holds an attempt of the cost
// given at now: heldUntil says LimitNone. A plain key (see plain) is held
// by nothing but a full MaxInFlight or a window that is not free now,
// which free tells from mono alone, without heldUntil's times: the
// shortcut of the usual admission.
func (ks *keyState) free(now time.Time, mono time.Duration, cost int) bool {
	if !ks.plain() {
		_, h := ks.heldUntil(now, mono, cost)
		return h.limit == LimitNone
	}
	if ks.pol.MaxInFlight > 0 && int(ks.slots+ks.bare) >= ks.pol.MaxInFlight {
		return false
	}
	for i := range ks.wins {
		if w := &ks.wins[i]; !w.room(cost) && w.nextAt(mono, 0, cost, false) > mono {
			return false // (holdsForAnswer too)
		}
	}
	return true
}

// plain reports whether the key has met no trouble: no probe, ramp, pause
// or server's count can hold it.
func (ks *keyState) plain() bool { return ks.tr == nil }

// holder is what holds a wait: a limit and, for a window, which.
type holder struct {
	limit Limit
	win   Window
}

// lowerBound is the earliest time at which an attempt of the cost given,
// with ahead units before it (the costs of those in the line before it),
// could go: exact for the head, a lower bound behind it. (Each of those
// ahead once counted as costing 1: behind a request of cost 10 on a bucket
// of 1 a second, one with a deadline 5 s away, its turn 11 s away, waited
// out its deadline rather than fail at once with ErrWouldExceedDeadline;
// found in review.)
//
// None of the line goes before the pause ends, nor, behind a head the Store
// booked, before that head departs: the room those ahead and this one need
// in the windows and the pacer counts from then, where they can first take
// it, not from now (regression, found in review 46: a leaky bucket of 1 a
// second paused until 3 s, its head a retry waiting for the end; the next
// request's turn, 4 s at the soonest, was counted 3 s, the larger of the
// pause and its two tokens counted from now, and one with a deadline at
// 3.5 s waited 3 s to fail). The pacer holds at most its burst at then,
// and a window lets go at then only what aged out by then, so the bound is
// still one. The server's counts (mirrors) are read at now only: reading
// one rolls it over.
func (ks *keyState) lowerBound(now time.Time, mono time.Duration, ahead, cost int) (time.Time, holder) {
	at, h := now, holder{}
	if until := ks.pausedUntil(); until.After(at) {
		at, h = until, holder{limit: LimitPause}
	}
	if hd := ks.head; ahead > 0 && hd != nil && hd.booked && hd.departAt.After(at) {
		// Behind a head the Store booked: none behind it goes before it
		// does (regression, found in review 46: a request behind a head
		// booked a minute out, with a deadline of 1 s, failed after 1 s
		// with the context's error, not at once).
		at, h = hd.departAt, holder{limit: LimitStore}
	}
	from, fromMono := at, mono
	if d := at.Sub(now); d <= farOff {
		fromMono += d
	} else {
		from = now // a pause saturated near the end of time: mono plus it overflows
	}
	for m := range ks.mirrors() {
		// A wait for an answer counts as ending now: its end is not known.
		if next := m.lowerBound(mono, ks.admitted, ks.outUnits, ahead, cost); next != holdsForAnswer && now.Add(next-mono).After(at) {
			at, h = now.Add(next-mono), holder{limit: LimitQuota}
		}
	}
	for i := range ks.wins {
		w := &ks.wins[i]
		if next := w.nextAt(fromMono, ahead, cost, true); from.Add(next - fromMono).After(at) {
			at, h = from.Add(next-fromMono), holder{LimitWindow, *w.Window}
		}
	}
	if ks.lim != nil {
		if d := tokenDelay(ks.lim, from, ahead+tokensFor(ks.lim, cost)); from.Add(d).After(at) {
			at, h = from.Add(d), holder{limit: ks.pol.limit}
		}
	}
	return at, h
}

// farOff is a span past which lowerBound counts the windows and the pacer
// from now: a window's Per (at most maxPer) added to it still fits in a
// time.Duration.
const farOff = 10 * maxPer

// take admits the head, of the cost given, at now: its tokens (which may
// leave the bucket owing, see tokensFor), its entries in every window, an
// in-flight slot, and the probe if one is due (or the last one's answer is
// overdue), into tk, which is zero. readyAt(now) must have said now.
func (ks *keyState) take(tk *ticket, now time.Time, mono time.Duration, retry bool, cost int) {
	switch {
	case ks.lim == nil:
	case cost <= 1:
		ks.lim.ReserveN(now, 1) // at most a float error's worth early
	default:
		takeTokens(ks.lim, now, cost)
	}
	ks.enter(tk, now, mono, retry, cost)
}

// enter is take once the pacer's tokens, if the key has a pacer, are taken.
// It fills tk, which is zero, in place.
func (ks *keyState) enter(tk *ticket, now time.Time, mono time.Duration, retry bool, cost int) {
	ks.admitted += uint64(cost)
	ks.stats.Attempts++
	tk.adm, tk.cost, tk.sent, tk.mono = ks.admitted, int32(cost), now, mono
	if ks.tr != nil || len(ks.wins) > 0 || ks.lat.samples < minSamples || mono-ks.timedAt >= sampleEvery {
		tk.timed, ks.timedAt = true, mono
	}
	if !retry {
		ks.budget.first(mono)
	}
	if ks.lim != nil {
		ks.limAt = mono
	}
	for i := range ks.wins {
		ks.wins[i].put(mono, tk.adm, cost, true)
	}
	ks.sending++
	ks.outUnits += int64(cost)
	if ks.pol.MaxInFlight > 0 {
		ks.slots++
		tk.slot = true
	} else {
		// Counted against a cap SetPolicy may set while it is on the
		// wire (found in review: a cap of 2 set with 3 on the wire let
		// 2 more go at once).
		ks.bare++
	}
	if tr := ks.tr; tr != nil && tr.probe != probeNone {
		tr.probe, tr.probeAt, tr.probeID = probeOut, mono, tk.adm
		tk.probe = true
	}
	if tr := ks.tr; tr != nil && tr.ramp > 0 {
		tr.ramp = max(tr.ramp, ks.sending) // past ramp only when the head's answer was overdue
		tr.rampAt = mono
	}
	for m := range ks.mirrors() {
		m.took(mono, tk.adm, ks.outUnits-int64(cost), cost) // the others on their way
	}
	if ks.levels != nil && ks.lim != nil {
		ks.levels.took(tk.adm, ks.lim.TokensAt(now)+float64(cost)) // the level before the take
	}
}

// freeSlot gives back an in-flight slot and lets the head recompute.
func (ks *keyState) freeSlot() {
	ks.mu.Lock()
	ks.slots--
	ks.wakeHead()
	ks.mu.Unlock()
}

// idle reports whether the state holds nothing that matters at now, so it
// can be dropped: nobody holds it, the bucket is full, the queue empty, the
// windows expired, the server's count whole again, no pause, no probe on
// the wire, no pace adapted in the last minute. (A ramp, or a probe due,
// with nobody left to hold back is over; the retry budget's counts are let
// go: an idle key draws no retries to limit.)
func (ks *keyState) idle(now time.Time, mono time.Duration) bool {
	if ks.refs > 0 || ks.waiting > 0 || ks.sending > 0 ||
		ks.pausedUntil().After(now) || ks.slots > 0 || ks.keep(mono) {
		return false
	}
	if ks.lim != nil && ks.lim.TokensAt(now) < float64(ks.lim.Burst()) {
		return false
	}
	for m := range ks.mirrors() {
		if m.lowerBound(mono, ks.admitted, 0, 0, 1) > mono {
			return false // the server's count holds it back
		}
		if m.kind != kindBucket && m.resetAt > mono && m.tokens(mono, 0) < float64(m.limit) {
			// The server's window still counts what was spent of it, until
			// its reset: a key dropped now would send the line as if it
			// were whole (found in review: told 2 remain until the reset
			// an hour away, a sweep let 5 go, 3 refused).
			return false
		}
		if m.kind == kindBucket && m.rate > 0 && m.levelAt != 0 && m.bucket(mono) < float64(m.depth) &&
			(mono-m.levelAt).Seconds()*m.rate < float64(m.depth) {
			// The server's bucket, by its headers, is not full again: a key
			// dropped now would send the line as if it were (found in
			// review: 13 of 40 left, a sweep let 60 go at once, 49
			// refused). Kept no longer than the bucket takes to refill
			// whole from empty since its last reading, so that sends
			// whose answers carried no reading cannot keep it for ever.
			return false
		}
	}
	for i := range ks.wins {
		if !ks.wins[i].expired(mono) {
			return false
		}
	}
	return true
}

// keys maps partition keys to their states, one table per policy, so that
// the same key under two policies never shares a bucket. Lookups of live
// keys take no lock (see table); idle states are swept out
// as new keys arrive, so the number of live states stays bounded by the
// keys in use.
type keys struct {
	maps     sync.Map // *policy -> its table, for sweeps and Stats
	live     atomic.Int64
	sweepAt  atomic.Int64  // sweep when live reaches this
	swept    atomic.Uint32 // sweeps begun
	sweeping sync.Mutex
	evicted  sync.Mutex // guards gone
	gone     KeyStats   // stats of dropped states
}

const minSweep = 1024

// register lists p's table, so that sweeps and Stats find its keys.
func (k *keys) register(p *policy) { k.maps.Store(p, p.keys) }

// acquire returns the state of key, the partition key of req, under p,
// with a reference held and its mutex locked, and the request's place among
// the key's arrivals (its order in the line). A key that is not the
// request's host (given by WithKey or PartitionKey) is shown redacted if it
// holds a credential of the request: host, its default key, is compared
// with it only when the state is made.
func (t *Transport) acquire(p *policy, key string, req *http.Request, host string) (*keyState, uint64) {
	m := p.keys
	for {
		ks := m.load(key)
		if ks == nil {
			var made bool
			ks, made = m.loadOrStore(key, func() *keyState {
				ks := t.newKeyState(p, key)
				if key != host {
					if shown := shownKey(req, key); shown != key {
						ks.rarely().alias, ks.aliased = shown, true // rare: a key misused
					}
				}
				return ks
			})
			if made {
				t.keys.created(t)
			}
		}
		ks.mu.Lock()
		if !ks.dead {
			if p.gen > ks.pol.gen {
				ks.repolicy(p, time.Now()) // replaced at run time (swap.go)
			}
			ks.refs++
			ks.used = true
			ks.arrived++
			return ks, ks.arrived
		}
		ks.mu.Unlock()
		m.remove(key, ks)
	}
}

// name is the key as shown in errors, events and Stats.
// It takes no lock: a state's alias is set before the state is shared, and
// its trouble, made then, is never replaced.
func (ks *keyState) name() string {
	if ks.aliased {
		return ks.tr.x.alias
	}
	return ks.key
}

func (t *Transport) newKeyState(p *policy, key string) *keyState {
	ks := &keyState{key: key, pol: p, lim: p.newLimiter(), used: true, // used: a sweep its making begins spares it
		born: uint8(t.keys.swept.Load())}
	ks.ev.spanAt = longAgo
	if t.cfg.cost != nil || t.cfg.retry.Prepare != nil {
		// Refunds (WithCost's corrections down, a retry Prepare refused:
		// see unadmit) give back no more than the bucket lost.
		ks.levels = &levels{}
	}
	if ks.lim != nil && p.Queue == 0 {
		ks.reserve = int32(ks.lat.reserve(float64(p.Rate), p.Burst))
	}
	if len(p.Windows) > 0 {
		ks.wins = make([]windowLog, len(p.Windows))
		for i := range p.Windows {
			ks.wins[i] = newWindowLog(&p.Windows[i])
		}
	}
	return ks
}

// created counts a new state and, once the count has doubled since the last
// sweep, drops every state that is idle and was not used since the sweep
// before (a second chance, so keys in steady use are not churned):
// amortised O(1) per new key, and at most about twice the keys in use live.
func (k *keys) created(t *Transport) {
	n := k.live.Add(1)
	if n < max(k.sweepAt.Load(), minSweep) || !k.sweeping.TryLock() {
		return
	}
	defer k.sweeping.Unlock()
	now := time.Now()
	mono := t.since(now)
	during := uint8(k.swept.Add(1)) // keys born so were made during this sweep
	var kept int64                  // the keys made before it that it kept
	k.maps.Range(func(_, pm any) bool {
		pm.(*table).each(func(ks *keyState) bool {
			ks.mu.Lock()
			defer ks.mu.Unlock()
			drop := !ks.used && ks.idle(now, mono)
			ks.used = false
			if !drop && ks.born != during {
				kept++
			}
			if drop {
				ks.dead = true
				k.evicted.Lock()
				st := ks.snapshot(t, now)
				st.Queued, st.InFlight, st.Slots, st.Rate = 0, 0, 0, 0 // gauges of the live
				k.gone.add(&st)
				k.evicted.Unlock()
				k.live.Add(-1)
			}
			return drop
		})
		return true
	})
	// The next sweep when the keys kept have doubled: not counting those
	// made by other requests during this sweep, which the next one keeps
	// too, so that the trigger, and the keys kept, grew by as many at
	// every sweep (regression, found in review: 8 workers sending to
	// 100,000 hosts, one request each, left 17,000 to 33,000 keys live,
	// not the few thousand of minSweep).
	k.sweepAt.Store(2 * kept)
}

// defaultKey is the request's host, lower-cased, with the port only when it
// is not the scheme's default.
//
// The usual URL.Host, a name in lower case without a port, is the key as it
// is (see ownKey); hostKey does the rest, and returns the same for such a
// host (FuzzDefaultKey holds the two to it).
func defaultKey(req *http.Request) string {
	if host := req.URL.Host; ownKey(host) {
		return host
	}
	return hostKey(req)
}

// ownKey reports whether host, a URL.Host, is its own key: not empty, and
// without a byte from ':' to 'Z' (the colon of a port, an upper-case letter
// to lower; ";<=>?@" too, which no usual host has: hostKey looks at those).
// It tests eight bytes at a time, the last eight overlapping the eight
// before if need be: a table's test a byte took some 120 instructions for
// "api.example.com", this about 40.
func ownKey(host string) bool {
	n := len(host)
	if n < 8 {
		for i := 0; i < n; i++ {
			if ':' <= host[i] && host[i] <= 'Z' {
				return false
			}
		}
		return n > 0
	}
	var in uint64
	for i := 0; i < n-8; i += 8 {
		in |= colonToZ(word(host[i:]))
	}
	return (in|colonToZ(word(host[n-8:])))&highBits == 0
}

const (
	lowBits  = 0x0101010101010101 // the lowest bit of each byte of a word
	highBits = 0x80 * lowBits     // the highest
)

// colonToZ sets the highest bit of each byte of x from ':' to 'Z', and of
// no other: for a byte b below 0x80, 0xda-b has it when b <= 'Z' and
// b+0x46 when b >= ':', and neither borrows from nor carries into the next
// byte (Bit Twiddling Hacks' hasbetween); a byte from 0x80 on is cleared by
// ^x. Its other bits are noise.
func colonToZ(x uint64) uint64 {
	low := x & (0x7f * lowBits)
	return ((127+'Z'+1)*lowBits - low) &^ x & (low + (127-(':'-1))*lowBits)
}

// word is the first eight bytes of s, little-endian: one load.
func word(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// hostKey is defaultKey for any request: URL.Host, else Host, lower-cased,
// without the scheme's default port.
func hostKey(req *http.Request) string {
	host := req.URL.Host
	if host == "" {
		host = req.Host
	}
	// One pass from the end: the last colon is the port's unless a ']'
	// follows it (an IPv6 literal without a port).
	colon, bracket, upper := -1, false, false
	for i := len(host) - 1; i >= 0; i-- {
		switch c := host[i]; {
		case 'A' <= c && c <= 'Z':
			upper = true
		case c == ']' && colon < 0:
			bracket = true
		case c == ':' && colon < 0:
			colon = i
		}
	}
	if colon >= 0 && !bracket {
		switch port := host[colon+1:]; {
		case port == "",
			port == "443" && req.URL.Scheme == "https",
			port == "80" && req.URL.Scheme == "http":
			host = host[:colon]
		}
	}
	if upper {
		return strings.ToLower(host)
	}
	return host
}

// hostName is the request's hostname, lower-cased, as policyFor needs it;
// host is defaultKey(req). Without a port or brackets in URL.Host, the two
// are the same.
func hostName(req *http.Request, host string) string {
	if h := req.URL.Host; h != "" && h[0] != '[' && strings.IndexByte(h, ':') < 0 {
		return host
	}
	return lower(req.URL.Hostname())
}

// lower is strings.ToLower without its allocation for the usual, already
// lower-case host.
func lower(s string) string {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			return strings.ToLower(s)
		}
	}
	return s
}
