package throttle

import (
	"math"
	"math/bits"
	"net/http"
	"time"

	"golang.org/x/time/rate"
)

// This file holds what an answer teaches the key: the signal it carries, the
// pause it begins, the end of a probe. The signals are of two kinds, told
// apart because they call for different reactions:
//
//   - a quota signal — 429, or 403 with Retry-After or with the quota spent
//     (GitHub's rate limits) — says the key's pace is too fast: the whole key
//     pauses until the time given, and the pace is cut (adapt.go);
//   - an availability signal — 502, 503, 504, or a network error — says the
//     server had trouble with one request: that request's retry waits its
//     backoff (never shorter than its Retry-After); the others go on at the
//     same pace, unless such failures dominate the key's recent answers, an
//     outage (outage.go): then the key pauses, without a cut.

// signal is what an answer says about the key.
type signal uint8

const (
	signalNone        signal = iota // nothing about the key, good or bad
	signalQuota                     // the pace is too fast
	signalUnavailable               // the server had trouble with this request
)

// hint is what one answer says about the key.
type hint struct {
	signal  signal
	wait    time.Duration // how long the server asks to wait, if hasWait
	hasWait bool
	whole   bool   // wait is stated in whole seconds: the end meant may be up to a second sooner
	source  string // the header the wait came from
	quota   Quota  // the quota headers, if read and hasQuota
	read    bool   // the quota headers were looked for
	hasQ    bool
	figured bool  // WithCost's function read the server's figure: figure
	figure  int32 // what the server says the attempt cost (<= maxCost)
}

// units is what the attempt tk counts once answered: the server's figure
// of its cost, or its charge.
func (h *hint) units(tk *ticket) int {
	if h.figured {
		return int(h.figure)
	}
	return int(tk.cost)
}

// throttled reports whether the answer is a quota signal. (A pointer
// receiver: hint is 128 bytes, and a value receiver copied it at each of the
// six calls an attempt's answer makes, inlined or not.)
func (h *hint) throttled() bool { return h.signal == signalQuota }

// unstatedWait is what a quota refusal that says nothing of when to come
// back (no Retry-After, no reset) is taken to ask: a second, the shortest
// wait servers state in whole seconds. A backoff of a fraction of a second
// would find a window still spent, refused again and again until its
// reset, and tell the key's pace (learn.go) too little.
const unstatedWait = time.Second

// asked is the wait the answer asks for: its Retry-After or reset, or
// unstatedWait for a quota refusal that states none.
func (h *hint) asked() time.Duration {
	if h.signal == signalQuota && !h.hasWait {
		return unstatedWait
	}
	return h.wait
}

// readHint reads an attempt's outcome: a response, or err when there is
// none (failed says the error is one of the network's, not the caller's).
// Only answers that may carry a signal are parsed, so a 2xx costs nothing.
func readHint(resp *http.Response, failed bool, now *instant) hint {
	if resp == nil {
		if failed {
			return hint{signal: signalUnavailable}
		}
		return hint{}
	}
	var h hint
	switch resp.StatusCode {
	case http.StatusTooManyRequests:
		h.signal = signalQuota
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		h.signal = signalUnavailable
	case http.StatusForbidden:
	default:
		// No signal, but a retry that Retry.ShouldRetry makes of it (a
		// 500, a 408) is never sooner than its Retry-After, and not made
		// when that is longer than MaxRetryAfter (regression, found in
		// review: such retries ignored it).
		if ra, whole, ok := retryAfter(resp.Header, now); ok {
			h.wait, h.hasWait, h.whole, h.source = ra, true, whole, "Retry-After"
		}
		return h
	}
	if ra, whole, ok := retryAfter(resp.Header, now); ok {
		h.wait, h.hasWait, h.whole, h.source = ra, true, whole, "Retry-After"
		if resp.StatusCode == http.StatusForbidden {
			h.signal = signalQuota // GitHub's secondary rate limit
		}
	}
	if h.signal == signalUnavailable {
		return h // Retry-After is a floor for the retry's delay; no news about the quota
	}
	q, ok := parseQuota(resp.Header, now)
	h.quota, h.read, h.hasQ = q, true, ok
	if h.signal == signalNone {
		// 403 without Retry-After: GitHub's primary rate limit says the
		// quota is spent; any other 403 is the caller's business.
		if !ok || !q.Exhausted() {
			return hint{quota: q, read: true, hasQ: ok}
		}
		h.signal = signalQuota
	}
	if !h.hasWait && ok && q.HasReset && (!q.HasRemaining || q.Remaining == 0) {
		// A reset of a second or more is taken to be stated in whole
		// seconds, as most are (its form is not kept). Not when the
		// headers say requests remain: a limit they do not describe
		// refused (a secondary or concurrency limit, a gateway), and
		// their reset, an hour away, is no wait the server asked for
		// (GitHub says to wait for x-ratelimit-reset only when
		// x-ratelimit-remaining is 0). The refusal states none, and is
		// taken to ask for a second (found in review: one such 429, 4,000
		// of 5,000 remaining and a reset in 50 minutes, paused the key
		// that long, and every request after it failed at once, the
		// pause past MaxRetryAfter).
		h.wait, h.hasWait, h.whole = q.Reset, true, q.Reset >= time.Second
		h.source = resetSource(resp.Header, q, now)
	}
	return h
}

// resetSource names the field whose reset q holds, for EventPaused's
// Source: "RateLimit" for the IETF fields in any of their forms (a named
// policy; draft 07's unnamed RateLimit: limit=5, remaining=0, reset=40;
// draft 06's RateLimit-Reset), "X-RateLimit-Reset" for the others (found in
// review: the unnamed IETF forms were named X-RateLimit-Reset, a field the
// server never sent). ParseQuota takes the IETF fields' reset first.
func resetSource(h http.Header, q Quota, now *instant) string {
	switch {
	case q.Policy != "":
		return "RateLimit"
	case len(h["Ratelimit"]) > 0 && parseIETF(h["Ratelimit"], h["Ratelimit-Policy"], now, nil).HasReset:
		return "RateLimit"
	case len(h["X-Ratelimit-Reset"]) == 0 && len(h["X-Rate-Limit-Reset"]) == 0 && len(h["Ratelimit-Reset"]) > 0:
		return "RateLimit"
	}
	return "X-RateLimit-Reset"
}

// lesson is what learn reports of an answer.
type lesson struct {
	until   time.Time     // a pause began or grew until then; zero if not
	source  string        // which header set that pause, or "backoff"
	outage  bool          // that pause is for an outage, not the quota
	held    time.Time     // the key is paused until then now, whatever began it
	own     time.Duration // of that pause, the end of it that is the key's own, not told to the Store (see told.shifted)
	pace    rate.Limit
	paceWhy string     // the pace changed, or what the key knows of the quota: why ("" if not)
	cut     rate.Limit // the configured pace was cut to this (0: it was not)
}

// learn records an attempt's outcome at the key: the answer it got (or its
// absence), the probe it ends, and a pause of the given length if the answer
// is a quota signal, or if it tips the key into an outage or fails during
// one (then as long as its Retry-After, if it has one). The head of the
// line is woken to recompute; what it teaches is reported in *ls, which
// must be zero. It is called at now (mono from the epoch), with ks.mu held.
func (t *Transport) learn(ls *lesson, ks *keyState, tk *ticket, resp *http.Response, h *hint, pause time.Duration, now time.Time, mono time.Duration) {
	now, at := ks.clock(now, mono)
	prev := ks.health.last // the answer before this one (see evidence.answered)
	ks.sending--
	if !tk.slot {
		ks.bare--
	}
	ks.outUnits -= int64(tk.cost)
	units := h.units(tk)
	ks.answered(tk, units, resp != nil, mono, at)
	// ok: the server took the request (a 5xx says nothing about the pace).
	ok := resp != nil && h.signal == signalNone && resp.StatusCode < http.StatusInternalServerError
	failed := h.signal == signalUnavailable
	if ks.health.outage && (resp != nil || failed) && now.Sub(ks.pausedUntil()) > outageForget {
		// The outage's last pause ended over a minute ago and no probe
		// came since (its job stopped): it is forgotten, as its record of
		// answers is (see health.push), and this answer is judged afresh
		// (found in review: an isolated 503 an hour later, the first
		// answer since, paused the whole key for its Retry-After).
		ks.health.outage, ks.health.grown = false, 0
	}
	outage := (resp != nil || failed) && ks.health.record(mono, failed, h.throttled() && !ks.stale(tk), &tk.own)
	if h.signal != signalNone {
		ks.count(resp, h) // (a 503 is a signal too)
	}
	if tk.probe {
		ks.endProbe(tk, ok, now, at)
	}
	if !h.throttled() && (resp != nil || failed) {
		ks.ev.answered(at, tk.mono, prev, ks.admitted) // not refused for the quota: evidence of what it bears
		if ks.tr != nil {
			ks.ev.record(false) // (adapt.go's rule 3 counts from the first trouble)
			ks.checkDense(tk.adm, false)
			ks.tr.adapt.trial.answered(tk.adm, false, ks.atCeil())
			ks.judge(at)
			ks.tr.adapt.run.answered(tk.adm)
		}
	}
	stored := resp != nil && storedAnswer(resp.Header)
	if stored {
		// A cache's stored answer: the server never saw the request, and
		// the count its headers carry is the one it sent when the answer
		// was stored, no news of the quota now (found in review: one
		// stored when a window was spent, Remaining 0 and a reset of 50
		// s, ten minutes old, held a key 50 s where the server's window
		// held 95 of 100).
	} else if h.hasQ && h.quota.HasRemaining && (ok || ks.mirror() != nil) {
		// The mirror begins with a reading on an answer the server
		// accepted: a server that sends its headers on refusals only
		// says nothing of what it gives back, only that nothing remains,
		// which the refusal says too. Such a key learns its pace from
		// the refusals, as one told nothing (learn.go).
		// A 5xx that carries a reading (a gateway that counts the quota,
		// the backend failing behind it) was counted: its Remaining is
		// what is left after it, 0 included. It is read as a request
		// the quota took, never as the quota's refusal (regression,
		// found in review: taken for one, it gave its unit back to a
		// bucket's level, was left out of the climb the refill is
		// measured by, and cut the rate; a bucket of 2 a second, 20
		// deep, every third answer a 500 with its headers, was measured
		// refilling at nothing, and 21 requests of 300 were refused
		// where none are without the 500s).
		counted := ok || resp != nil && resp.StatusCode >= http.StatusInternalServerError
		ks.readQuota(ls, tk, resp, h, units, counted, at)
	} else if resp != nil && resp.StatusCode >= http.StatusInternalServerError {
		for m := range ks.mirrors() {
			m.unread(at, tk.adm, units) // a 5xx the server may have counted
		}
	} else if resp == nil {
		for m := range ks.mirrors() {
			m.lost(at, units) // no answer: the server may have counted it
		}
	} else if ok && h.read {
		// Accepted without a reading, from a server that sends them: it
		// may have counted it (see toldbare.go).
		for m := range ks.mirrors() {
			m.bareAnswer(tk.adm, tk.mono, units, tk.endpoint(), ks.outUnits)
		}
	}
	spent := h.throttled() && h.hasQ && h.quota.HasRemaining && h.quota.Remaining < units
	for m := range ks.mirrors() {
		m.endTry(tk.adm, spent, at) // the quota's own refusal (see toldbare.go)
	}
	if ok {
		ks.accept(tk, now, at)
		if ks.tr != nil { // a key never in trouble has nothing to raise, no ramp
			if ks.climb(now, at) && ls.paceWhy == "" {
				ls.pace, ls.paceWhy = ks.pace(), paceAdapted
			}
			if !tk.probe {
				ks.widenRamp()
			}
		}
	}
	if tr := ks.tr; tr != nil && tr.ramp > ks.waiting+ks.sending {
		tr.ramp = 0 // no backlog left to hold back
	}
	switch {
	case h.throttled():
		pace, why, was := ls.pace, ls.paceWhy, ks.pace()
		*ls = ks.refused(*tk, *h, pause, now, at)
		ls.pace, ls.paceWhy = pace, why
		if p := ks.pace(); (p < was || was == 0 && p > 0) && !ks.learned() {
			if ks.lim != nil {
				ls.cut = p // shared through a Store (see book); a window's cut is not a pace there
			}
			if ls.paceWhy == "" {
				ls.pace, ls.paceWhy = p, paceAdapted
			}
		}
	case failed && (outage || ks.health.outage):
		// The key comes back when the server says, else after the failed
		// request's backoff, or the outage's own once nothing is served
		// (see outageFloor); the failed request's own retry may wait
		// longer (its backoff), and the next in line probes.
		if h.hasWait && h.wait > 0 {
			pause = h.wait
		} else {
			// No server asked for a wait: the key's pause is held to
			// MaxRetryAfter, as the floor is (found in review: a backoff
			// past it, MaxDelay longer than MaxRetryAfter, failed the
			// requests arriving at once with ErrPaused, as a 429 that
			// stated no wait did before; see judge).
			r := &t.cfg.retry
			pause = min(max(pause, ks.health.outageFloor(tk.probe, r.InitialDelay, min(r.MaxDelay, r.MaxRetryAfter))), r.MaxRetryAfter)
		}
		pace, why := ls.pace, ls.paceWhy
		*ls = ks.pause(*h, pause, now)
		ls.pace, ls.paceWhy = pace, why
		if !ls.until.IsZero() && !ks.health.outage {
			ks.health.outage = true
			ks.troubled().stats.Outages++
		}
		ls.outage = ks.health.outage
	}
	if ks.tr != nil {
		if r, moved := ks.paceNews(); moved {
			ls.pace, ls.paceWhy = r, "learned from 429s"
		}
	}
	if tr := ks.tr; tr != nil && tr.pauseUntil.After(now) {
		ls.held = tr.pauseUntil
	}
	ks.wakeHead()
}

// acceptPlain is learn for a plain answer (see judgePlain) of a key never
// in trouble, at mono (from the epoch): the server took the request, and
// the answer says nothing more. Of learn's steps, it takes those such an
// answer takes: the attempt is no longer sending, its windows count it
// from now, its round trip is learned if timed, the answers' record counts
// it (a key never in trouble has no failure in the record: no outage to
// begin), and it is evidence of what the server bears, accepted; then the
// head of the line recomputes. It is called as learn is, with ks.mu held,
// and needs no time.Time: a timed answer's Add was some 70 instructions.
func (ks *keyState) acceptPlain(tk *ticket, mono time.Duration) {
	at := ks.clockAt(mono)
	ks.sending--
	if !tk.slot {
		ks.bare--
	}
	ks.outUnits -= int64(tk.cost)
	ks.answered(tk, int(tk.cost), true, mono, at)
	prev := ks.health.last
	ks.health.push(mono)
	ks.ev.answered(at, tk.mono, prev, ks.admitted)
	ks.ev.run++ // accept, for a key that learns no pace (see learning)
	ks.ev.taken++
	ks.wakeHead()
}

// pace is the key's pacer's rate now; 0 without one. Only trouble moves a
// pace (adapt.go, learn.go): a key that never met any paces at its Policy's
// Rate, which is read without the pacer's lock.
func (ks *keyState) pace() rate.Limit {
	switch {
	case ks.lim == nil:
		return ks.windowPace()
	case ks.tr == nil:
		return ks.pol.Rate
	}
	return ks.lim.Limit()
}

// refused reacts to a quota refusal of tk: the pace adapts, once per
// episode (adapt.go, learn.go), and the key pauses for pause unless the
// refusal is a collision its pace answers.
func (ks *keyState) refused(tk ticket, h hint, pause time.Duration, now time.Time, at time.Duration) lesson {
	learned := ks.learned()
	whole := h.whole || !h.hasWait // none stated: taken to ask for a second (see asked)
	taught := pause
	if h.hasWait && h.wait == 0 && (ks.lim == nil || learned) {
		// "Retry-After: 0", or a date already past, says nothing of when
		// the quota gives back (a wait rounded down, a clock off): to a
		// pace learned from refusals it is a refusal that states none
		// (regression, found in review: a learned pace took each refused
		// request's random backoff for the server's wait, and a window of
		// 100 a second took 1.1-1.3x its ideal with 1-5% refused).
		// So is it to a key without a pace: it pauses the key a second,
		// as a refusal that states no wait does (see Retry), not the
		// refused request's backoff, nor nothing.
		taught = max(pause, unstatedWait)
		pause = taught
	}
	if h.hasQ {
		ks.rarely().refusalsTold = true
	}
	unexpl := ks.unexplained(h, &tk, at)
	ks.slow(tk, now, at, taught, h.hasQ && h.quota.HasRemaining && h.quota.Remaining >= h.units(&tk), unexpl)
	l := ks.learning()
	if l != nil && l.on {
		pause = taught
	}
	switch {
	case l == nil || !l.on:
	case !learned:
		// The first refusal pauses: a pace learned just now holds
		// nothing yet (learn.go, rule 1).
		return ks.pause(h, ks.peek(at, pause, whole), now)
	case l.peekStep != 0 && l.blind && l.first && pause > coarseWait:
		// A guess to come from the answers on their way, which a long
		// wait says were not an overrun but a quota spent: it learns
		// nothing yet, and waits (see startLearning).
		ks.unlearn()
		return ks.pause(h, pause, now)
	case l.peekStep != 0 && (tk.probe || satAdd(at, pause) > satAdd(l.peekEnd, time.Second)):
		// A refused peek, or a refusal that asks for a later end.
		return ks.pause(h, ks.peek(at, pause, whole), now)
	case l.peekStep != 0:
		return lesson{} // sent before the pause: the same news
	}
	if ks.collision(h, unexpl) {
		return lesson{}
	}
	var own time.Duration
	if learned {
		pause = ks.peek(at, pause, whole)
	} else if unexpl && whole {
		pause = ks.peekPast(tk.probe, pause)
	} else if ks.mirror() != nil && whole {
		m := ks.mirrorOf(&h.quota)
		own = m.shifted()
		pause = m.logPause(at, pause) + own
	} else if ks.lim != nil && whole {
		pause = ks.quietPeek(tk.probe, at, pause)
	}
	prev := ks.pausedUntil()
	ls := ks.pause(h, pause, now)
	if !ls.until.IsZero() {
		// The shift is the starved key's own try at another point of the
		// window: told to the Store, it held every Transport of the key
		// half a window past the server's reset, the phase moving with
		// all (found in review). Nor is it counted against MaxRetryAfter,
		// the longest wait asked by the server that is honoured: with
		// MaxRetryAfter of a second, a shifted pause of 1.5 s failed every
		// request at once with ErrPaused, and the starved one gave up
		// (found in review).
		ls.own = own
		// Of the pause, only what passes the pause before it is the
		// key's own (found in review: a shift past an earlier, longer
		// pause the server asked for counted all of itself off that
		// pause's end).
		ks.tr.pauseOwn = min(own, ls.until.Sub(prev))
	}
	if learned && !ls.until.IsZero() {
		ks.heldLearned(now, at) // learn.go
	}
	return ls
}

// collision reports whether a quota refusal is a collision, which the key's
// pace answers, not a sign that the quota is spent, which pauses the whole
// key. It is one when the server asks for a wait of a second or two at most
// (a short wait rounded up to whole seconds), refusals are rare among the
// key's recent answers (fewer than 3 of the last 20; to a configured pace,
// fewer than 4: found in review, three in twenty come by chance when one
// request in a hundred is refused at random, in a third of jobs of 2,000,
// and each paused the key a second; its rule 3 cuts it there; or no more
// often than its share of refusals lately makes likely, as rule 3 tells,
// and rule 3 did not cut for this one: four in twenty come about once a
// job where one request in 33 is refused at random; a Policy ten times
// its quota draws four at once, after each cut: found in review, taken
// for collisions they never paused the key, and each cut by a fifth where
// a resume would have shown the pace several times the quota, 44 429s
// where 16 were), and the key
// is paced by a pace learned from 429s (learn.go; the refusal has cut it),
// by a configured pace or configured windows (adapt.go: found in review,
// pausing the key a second for each made a configured key slower than an
// unpaced one under random refusals, 2-3x the ideal at one in a hundred, and
// a window of 100 a second 6x; a window spent refuses what follows too: its
// refusals pause the key and cut the windows, see refusalRun), or by the
// server's count alone, which the headers show to be a bucket (told.go; the
// refusal has cut its rate). Windows the headers tell refuse until they give
// back: their refusals pause the key. A refusal the headers do not explain
// (unexpl, see unexplained), to a key paced by them or by a configured
// pace, is one unless refusals dominate the key's recent answers, as
// failures must to make an outage (outage.go); the pause they then make
// peeks into the last second of a whole-second wait (see peekPast).
func (ks *keyState) collision(h hint, unexpl bool) bool {
	switch {
	case h.wait > coarseWait:
		return false
	case unexpl:
		return !ks.health.refusedMost()
	case len(ks.wins) > 0:
		return !ks.tr.adapt.run.spent()
	case ks.lim != nil && !ks.learned():
		return bits.OnesCount32(ks.health.refused) <= refusalsMin || !ks.ev.often && !ks.tr.adapt.dense // a configured pace
	case ks.health.refusing():
		return false
	case ks.learned():
		return true
	}
	// A window or a log refuses until it gives back. (The policy that
	// refused has the least remaining: see ParseQuota.)
	return ks.mirror() != nil && ks.mirrorOf(&h.quota).kind == kindBucket
}

// peekPast is how long a key pauses, for a wait stated in whole seconds,
// when refusals that the quota its headers describe does not explain (see
// unexplained) came to dominate its recent answers: a gateway that refuses
// everything for a moment, most often, whose count, if it keeps one, is
// not the one the key mirrors. Its wait may be late by up to a second, as
// a learned key's (learn.go, rule 1): the key pauses for what surely
// remains and peeks into the last second, 1/8 s in, then, each time the
// peek (the probe) is refused, twice as far from its refusal, up to the
// wait asked; the refused requests themselves wait their whole
// Retry-After. A wait over coarseWait is kept whole. (Regression, found in
// session 44: a bucket of 100 a second told by X-RateLimit-* on every
// answer, behind a gateway that refused every request for 100 ms every
// 4 s without them, paused a whole second at each, where go-retryablehttp
// + x/time/rate told the quota went on at its pace: 3,000 requests took
// 34.1-37.1 s where the peer took 31.1 s; so did a window of 100 a second,
// 33.5-35.7 s, and one whose first half-second, spread, met a blip of
// 50 ms at its reset: 11 refused in 15 ms.)
func (ks *keyState) peekPast(probe bool, wait time.Duration) time.Duration {
	x := ks.rarely()
	if wait <= peekFirst || wait > coarseWait {
		return wait
	}
	if !probe || x.peekStep == 0 {
		x.peekStep = peekFirst
		return firstPeek(wait)
	}
	x.peekStep *= 2 // the probe was refused: the next peek twice as far from it
	return min(x.peekStep, wait)
}

// A key paced by a Policy peeks into a whole-second wait (see quietPeek)
// when it sent this many requests or more and paused for none of this
// long before.
const (
	peekSent  = 64
	peekQuiet = 2 * time.Second
)

// quietPeek is how long a key paced by a Policy, without quota headers,
// pauses at at for a wait stated in whole seconds: as peekPast has it (1/8
// s in, then twice as far at each refused peek) when the key sent
// peekSent requests or more and paused for none of the last peekQuiet, or
// when its peek (the probe) was refused; the whole wait otherwise.
// Refusals that dominate after a quiet spell are a gateway's that refused
// everything for a moment, most often (regression, found in session 45: a
// Policy at the quota of a bucket of 100 a second, behind a gateway that
// refused every request for 100 ms every 4 s, paused a whole second at
// each: 3,000 requests took 38.9 s where go-retryablehttp + x/time/rate
// told the quota took 31.1 s; now 31.9 s). Refusals that pause the key
// again within peekQuiet, or before it sent much, are the pace's: a Policy
// ten times its quota drains the server's bucket at each resume, and
// peeking there drew more 429s (TestPolicyFarAboveTheQuotaIsCutDown: 34
// where 29 were, peeking at every such pause).
func (ks *keyState) quietPeek(probe bool, at, wait time.Duration) time.Duration {
	x := ks.rarely()
	last := x.pausedAt
	x.pausedAt = at
	if probe && x.peekStep != 0 || ks.admitted >= peekSent && (last == 0 || at-last >= peekQuiet) {
		return ks.peekPast(probe, wait)
	}
	return wait
}

// unexplained reports whether a quota refusal of tk, at at, is one that the
// quota the server describes does not explain: it came without quota
// headers, where the server's refusals of the key carried them before, or
// while each count the headers told held room for the request beyond the
// requests still on their way. The server that counts did not refuse it
// for that quota: a gateway in front of it did, or a limit it does not
// describe, or another tenant's burst. Taken for the quota's, each such
// refusal paused a key told by headers (regression, found in session 43:
// behind 3% random 429s, as a gateway sends them, without the headers the
// server put on every other answer, a window of 100 a second told by
// X-RateLimit-* paused a second at every one and took 4.1x the ideal, a
// log of 200 a second 7.2x, where go-retryablehttp + x/time/rate told the
// quota took 1.06x and 1.08x), and cut a pace learned from refusals whose
// headers the server sends on its 429s only (a bucket of 100 a second
// behind them took 1.95x the ideal, a window 1.49x; the peer 1.05x). A
// pace learned from refusals, with no refusal carrying headers yet, judges
// every refusal by its own rules (learn.go): the count it mirrors, if any,
// is not what paces it.
func (ks *keyState) unexplained(h hint, tk *ticket, at time.Duration) bool {
	if h.hasQ {
		return false
	}
	if tr := ks.tr; tr != nil && tr.x != nil && tr.x.refusalsTold {
		return true
	}
	if ks.mirror() == nil || ks.learned() {
		return false
	}
	n := float64(h.units(tk))
	for m := range ks.mirrors() {
		if m.leftAt == 0 || m.tokens(at, ks.outUnits) < n {
			return false
		}
	}
	return true
}

// clock returns now (mono from the epoch), or the latest time the limiter
// was used at if that is later: now was read before the lock, another
// attempt may have used the limiter since, and its clock must not go back
// (x/time/rate would count the time between twice).
func (ks *keyState) clock(now time.Time, mono time.Duration) (time.Time, time.Duration) {
	if ks.limAt > mono {
		return now.Add(ks.limAt - mono), ks.limAt
	}
	ks.limAt = mono
	return now, mono
}

// clockAt is clock for mono alone. (clock does not call it: it would no
// longer be inlined.)
func (ks *keyState) clockAt(mono time.Duration) time.Duration {
	if ks.limAt > mono {
		return ks.limAt
	}
	ks.limAt = mono
	return mono
}

// answered closes the attempt's window entries at mono (from the epoch),
// where they count units from then (its charge, or the server's figure),
// and learns its round trip, to at (mono as clock has it), when it got a
// response.
//
// An attempt that ended without a response (its context ended, a network
// error) may still be on its way: the server counts it when it arrives,
// after the client's error. Its entries count from a round trip's bound
// after the error (latency.bound, as a Store's booking counts), not from
// the error (found in review: a request whose deadline ended it 100 ms
// after its sending, 400 ms from the server, counted until 1.1 s; the
// next went then, and the server saw both within 0.7 s, 2 in a window of
// 1 a second). A round trip's bound after its admission, not after the
// error: by then it reached the server, if it ever does, and an attempt
// ended long after its sending need not count longer (found in review: a
// server taking 3 s over its answers, a request that hung to its deadline
// at 10 s held a window of 1 a second 4 s past it).
func (ks *keyState) answered(tk *ticket, units int, response bool, mono, at time.Duration) {
	counted := mono
	if !response {
		counted = max(mono, satAdd(tk.mono, ks.lat.bound()))
	}
	for i := range ks.wins {
		ks.wins[i].answered(tk.adm, units, counted)
	}
	if !response {
		return
	}
	if !tk.timed {
		return // no round trip measured (see answeredAt)
	}
	jitter := ks.lat.jitter()
	ks.lat.observe(at - tk.mono)
	if ks.lim == nil || ks.pol.Queue > 0 || ks.learned() {
		return
	}
	if ks.tr == nil && ks.lat.jitter() <= jitter {
		// The reserve grows with the jitter and the pace alone, and a key
		// never in trouble paces at its Policy's Rate: with no more
		// jitter than at the answer before, it is no larger than then
		// (some 25 instructions of an answer timed under a window).
		return
	}
	// The reserve only grows: a key sending at its pace keeps the server's
	// bucket as low as it found it, so a larger reserve is built by leaving
	// tokens unused, and giving it back would only have to be paid again.
	r := int32(ks.lat.reserve(float64(ks.pace()), ks.pol.Burst))
	if r <= ks.reserve {
		return
	}
	// The time at, made only here: the reserve grows rarely.
	now := tk.sent.Add(at - tk.mono)
	want := ks.lim.TokensAt(now) - float64(r-ks.reserve) // the server keeps r-reserve more
	depth := max(1, ks.pol.Burst-int(r))
	ks.lim.SetBurstAt(now, depth) // caps what the bucket holds at the new depth
	takeTokens(ks.lim, now, int(math.Ceil(ks.lim.TokensAt(now)-want)))
	ks.reserve = r
}

// takeTokens takes n tokens from lim at now in one reservation, which may
// leave it owing: the depth is raised for the reservation if n exceeds it.
func takeTokens(lim *rate.Limiter, now time.Time, n int) {
	if n <= 0 {
		return
	}
	depth := lim.Burst()
	if n > depth {
		lim.SetBurstAt(now, n)
		defer lim.SetBurstAt(now, depth)
	}
	lim.ReserveN(now, n)
}

// count adds the answer to the key's counters.
func (ks *keyState) count(resp *http.Response, h *hint) {
	switch {
	case h.throttled():
		ks.troubled().stats.Throttled++
	case resp != nil && resp.StatusCode == http.StatusServiceUnavailable:
		ks.troubled().stats.Unavailable++
	}
}

// endProbe ends the probe phase when the probe's answer is not a refusal and
// no pause began while it was out; a failed probe makes the next attempt
// probe again. (A late answer of a probe whose wait ran out counts as well,
// if it is good news.)
func (ks *keyState) endProbe(tk *ticket, ok bool, now time.Time, at time.Duration) {
	tr := ks.tr // a probe was sent: the key paused
	switch {
	case tr == nil || tr.probe == probeNone:
	case ok && !tr.pauseUntil.After(now):
		tr.probe = probeNone
		ks.resume(now, at)
	case tk.adm == tr.probeID:
		tr.probe = probeDue
	}
}

// widenRamp lets one more attempt go per good answer after a pause, which
// doubles the attempts in flight per round trip, until no backlog is left.
func (ks *keyState) widenRamp() {
	tr := ks.tr
	if tr == nil || tr.ramp == 0 {
		return
	}
	tr.ramp++
	if tr.ramp > ks.waiting+ks.sending {
		tr.ramp = 0
	}
}

// pause holds the key until now+d if that is later than the pause in force,
// and says so; a pause that begins makes the next attempt a probe.
func (ks *keyState) pause(h hint, d time.Duration, now time.Time) lesson {
	until := now.Add(d)
	if d <= 0 || !until.After(ks.pausedUntil()) {
		return lesson{}
	}
	source := "backoff"
	if h.hasWait {
		source = h.source
	}
	tr := ks.troubled()
	if !tr.pauseUntil.After(now) {
		tr.stats.Pauses++
	}
	tr.pauseUntil, tr.pauseOwn = until, 0
	tr.ramp = 0
	ks.failBehind(until, holder{limit: LimitPause})
	if tr.probe == probeNone {
		tr.probe = probeDue
	}
	return lesson{until: until, source: source}
}

// resume lets the backlog follow a successful probe gently: through the
// pacer, whose bucket is emptied so the backlog does not go as one burst, or,
// with no pacer, ramping up from one request in flight. An outage is over;
// the pace's count of accepted answers starts again.
func (ks *keyState) resume(now time.Time, at time.Duration) {
	tr := ks.troubled() // it paused
	if tr.x != nil {
		tr.x.peekStep = 0 // see peekPast
	}
	tr.adapt.resumed, ks.ev.taken = true, 0
	ks.health.recovered()
	ks.ev.restart(at, ks.admitted)
	ks.resumeLearned(now, at)
	if tr.adapt.calming {
		// The quiet spell counts from the pause's end, not from this
		// answer: a key idle since is quiet since.
		tr.adapt.quietAt, tr.adapt.calming = at-max(0, now.Sub(tr.pauseUntil)), false
	}
	if ks.lim == nil {
		tr.ramp = 1
		tr.rampAt = at
		if tr.ramp > ks.waiting+ks.sending {
			tr.ramp = 0
		}
		return
	}
	ks.drain(now)
}

// drain empties the key's pacer at now, on purpose: a refund after it, to
// an attempt admitted before, would fill it again, which the charge's
// refill would not have (see levels.forget; found in review: the probe's
// answer "cost 0", refunded after a resume, let the backlog's first three
// go within 50 ms at 8 a second).
func (ks *keyState) drain(now time.Time) {
	if n := int(ks.lim.TokensAt(now)); n > 0 {
		ks.lim.AllowN(now, n)
	}
	if ks.levels != nil {
		ks.levels.forget(ks.admitted)
	}
}
