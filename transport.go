package throttle

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// Transport is an [http.RoundTripper] that paces requests per key, pauses a
// key when its server says "retry later", and retries what is safe to retry,
// every attempt through the same pacer. Make one with [New] and share it: it
// is safe for concurrent use, and its limits hold only across the requests
// that pass through it.
//
// It keeps the net/http contract: it never modifies the caller's request,
// always closes the request body, and returns err == nil whenever it
// obtained a response, whatever its status (after retries, the last one,
// also when a retry is refused at once: its turn known to come after the
// deadline or MaxRetryAfter, its queue full, or the Store unable to book
// it). The body of a response
// so returned was read and closed while the retry waited: it reads as it
// was if it ended within 4 KiB and 100 ms (one that failed, up to its
// error); else it reads its first bytes (4 KiB at most), then fails with
// [ErrBodyDiscarded]. A retry whose wait
// the context ends, or Close, or that is still waiting when
// Retry.MaxElapsed has passed, fails with that error: the last response's
// body was read (4 KiB at most) and closed while it waited.
type Transport struct {
	base  http.RoundTripper
	cfg   config
	keys  keys
	epoch time.Time // window logs count from here

	plain     bool         // no WithCost, WithEvents, Store or Retry.ShouldRetry: see judgePlain
	storeDown atomic.Bool  // the Store's last Reservation was a Fallback
	storeTrip atomic.Int64 // how long the Store's last call that booked a window took (ns)
	closed    atomic.Bool
	done      chan struct{}
	closing   context.Context // done at Close: it ends the Store's calls
	cancel    context.CancelFunc
	closeOnce sync.Once
}

var _ http.RoundTripper = (*Transport)(nil)

// New returns a Transport that sends through base (nil: http.DefaultTransport).
// Without options, every request is unpaced, 429s (and 403s that are quota
// signals) pause their key, a 502, 503 or 504 or a network error delays
// its own retry and pauses the key only in an outage (see the package
// documentation), and retries follow the defaults of [Retry].
//
// New panics on a configuration error, as net/http does for programmer
// errors: a Policy or Retry that does not validate, a malformed host
// pattern, an option given twice (the same host pattern twice, or WithPolicy,
// WithKey, WithRetry or WithEvents twice) or a nil Option. It panics with
// one error, matching [ErrInvalidConfig], that lists every problem.
//
// A key's state is dropped once it is idle and holds nothing that matters
// (bucket full, queue empty, windows expired, not paused), so memory stays
// bounded however many hosts or keys pass through: see Memory in the package
// documentation for what keeps a key and what it costs.
func New(base http.RoundTripper, opts ...Option) *Transport {
	if base == nil {
		base = http.DefaultTransport
	}
	t := &Transport{
		base:  base,
		cfg:   config{exact: map[string]*slot{}, wildcard: map[string]*slot{}, given: map[string]bool{}},
		epoch: time.Now(),
		done:  make(chan struct{}),
	}
	t.closing, t.cancel = context.WithCancel(context.Background())
	if err := t.cfg.apply(opts); err != nil {
		panic(err)
	}
	t.cfg.given, t.cfg.problems = nil, nil
	t.cfg.hosts = len(t.cfg.exact) > 0 || len(t.cfg.wildcard) > 0
	t.cfg.retry = t.cfg.retry.withDefaults()
	t.plain = t.cfg.cost == nil && t.cfg.events == nil && t.cfg.store == nil && t.cfg.retry.ShouldRetry == nil
	if t.cfg.def == nil {
		t.cfg.def = newSlot(compile(Policy{}))
	}
	t.keys.register(t.cfg.def.cur.Load())
	for _, s := range t.cfg.exact {
		t.keys.register(s.cur.Load())
	}
	for _, s := range t.cfg.wildcard {
		t.keys.register(s.cur.Load())
	}
	return t
}

// since is now as an offset from the transport's epoch (monotonic).
func (t *Transport) since(now time.Time) time.Duration { return now.Sub(t.epoch) }

// now is an admission's time, read from the monotonic clock alone: the
// epoch plus the time since, about half the cost of time.Now, which reads
// the wall clock too. Such an instant is only compared with and subtracted
// from others of the Transport, which Go does on their monotonic readings;
// its wall reading is the epoch's plus the time elapsed, off from the
// system's by any step of the wall clock or sleep of the machine since New.
// So nothing shown to a user (an error's or an event's Until), compared with
// a time from elsewhere (a context's deadline, a date in a header) or given
// to a Store is made from it: an attempt that must wait, and an answer
// other than a plain one (see judge), read time.Now.
//
// It returns the instant and its offset from the epoch.
func (t *Transport) now() (time.Time, time.Duration) {
	mono := time.Since(t.epoch)
	return t.epoch.Add(mono), mono
}

// Close makes every request waiting for its turn, and every later one, fail
// with ErrClosed. Requests already on the wire are not cut. No goroutine of
// the Transport outlives Close. It always returns nil.
func (t *Transport) Close() error {
	t.closeOnce.Do(func() {
		t.closed.Store(true)
		close(t.done)
		t.cancel()
	})
	return nil
}

// CloseIdleConnections calls the base RoundTripper's CloseIdleConnections,
// if it has one, so that http.Client.CloseIdleConnections keeps working.
func (t *Transport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// RoundTrip sends req when its key's turn comes, and retries it as [Retry]
// allows. See the package documentation.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL == nil {
		closeBody(req)
		return nil, errors.New("throttle: nil Request.URL")
	}
	now, mono := t.now() // the request's start, and when its first attempt is admitted
	host := defaultKey(req)
	pol := t.cfg.policyFor(req, host)
	var ro reqConfig
	if err := requestOptions(req.Context(), &ro); err != nil {
		closeBody(req)
		return nil, err
	}
	key := host
	switch {
	case ro.key != "":
		key = ro.key
	case t.cfg.key != nil:
		key = t.userKey(req)
		// The first attempt is admitted, and its round trip timed, from
		// now: the WithKey function (a tenant looked up) may have taken
		// long, and counted in its round trip, two such lookups of 9 s
		// took the reserve of a bucket of 50 to 48 (found in review). It
		// ages from its arrival still (see place.before).
		_, mono = t.now()
	}
	var r request // (filled in place, field by field: a literal was made aside, then copied)
	r.prio, r.arrived, r.cost = ro.prio, now, max(ro.cost, 1)
	r.t, r.req, r.ctx, r.mono, r.held, r.noRetry = t, req, req.Context(), mono, true, ro.noRetry
	r.ks, r.seq = t.acquire(pol, key, req, host) // locked: the first attempt's admission goes on
	// One deferred call for the whole request: should the base or user
	// code on the way panic (events, GetBody, WithCost, a Store), what the
	// request has on its way is put in order (see tidy), and the key is
	// let go of however RoundTrip ends, before the panic goes on. (One
	// each in send, do and here cost some 35 instructions an attempt.)
	defer func() {
		var p any
		if r.onWire || r.inHand != nil || r.pending != nil || r.unsent != nil || !r.budgetAt.IsZero() {
			p = recover()
			r.tidy(p)
		}
		if r.held {
			r.ks.mu.Lock()
			r.release()
			r.ks.mu.Unlock()
		}
		if p != nil {
			panic(p)
		}
	}()
	return r.do()
}

// tidy puts in order, after a panic p (nil: none), what the request has on
// its way: the attempt with the base ends as one with no answer (see
// unsend), and the response in hand is closed, which gives back its
// in-flight slot, and so are a body GetBody made for a retry and the body
// of a request not yet handed to the base, and the retry budget a retry
// not yet sent spent is given back: a panicking base or callback cannot
// break the key, nor keep a body open.
func (r *request) tidy(p any) {
	if p == nil {
		return
	}
	if r.onWire {
		r.t.unsend(r.ks, &r.tk, true)
	}
	// The bodies are closed each under its own recover: a body whose
	// Close panics again (the panic on its way may be its own) must not
	// keep the others open, the budget spent and the key held (found in
	// review: the request was never counted, its key never let go of).
	// The panic that goes on is the first.
	if r.inHand != nil && r.inHand.Body != nil {
		closeQuietly(r.inHand.Body)
	}
	if r.pending != nil && r.pending.Body != nil {
		closeQuietly(r.pending.Body)
	}
	if r.unsent != nil && r.unsent.Body != nil {
		closeQuietly(r.unsent.Body)
	}
	// A retry the panic kept from being sent spends no budget, as one that
	// GetBody or Prepare refuses (see next).
	r.refund()
}

// closeQuietly closes c after a panic, and lets a panic of its own go:
// the first panic is the one RoundTrip passes on.
func closeQuietly(c io.Closer) {
	defer func() { _ = recover() }()
	c.Close()
}

// release lets go of the request's reference to its key, and counts the
// request, once: at its last answer (see judge), or on the way out. ks.mu
// must be held.
func (r *request) release() {
	ks := r.ks
	ks.refs--
	ks.stats.Requests++
	if r.waited > 0 {
		ks.stats.Waited++
		ks.stats.WaitTime += r.waited
	}
	r.held = false
}

// userKey calls the WithKey function. Should it panic, the request's body
// is closed, as RoundTrip always does, before the panic goes on.
func (t *Transport) userKey(req *http.Request) string {
	defer func() {
		if p := recover(); p != nil {
			closeBody(req)
			panic(p)
		}
	}()
	return t.cfg.key(req)
}

// request is one RoundTrip on its way through attempts.
type request struct {
	place  // its place in the key's line: its arrival (when: its start), Priority and Cost
	t      *Transport
	ks     *keyState
	req    *http.Request
	ctx    context.Context
	mono   time.Duration // its first attempt's admission, from the epoch: its start, or the end of the WithKey function
	waited time.Duration
	bo     *backoff.ExponentialBackOff // made at the first backoff
	own    backoff.BackOff             // Retry.NewBackOff's, made at the first retry
	shown  string                      // the URL as events show it, once an event needs it
	tk     ticket                      // the attempt's (filled in place: admit, send and judge take its address)

	sentURL *url.URL // the URL of the attempt last sent (Retry.Prepare may sign it): see shownErr

	held     bool      // it holds a reference to ks (see release)
	budgetAt time.Time // when the retry to come spent the key's retry budget (zero: it did not), until it is sent
	noRetry  bool      // the request's NoRetry option
	failed   failMark  // where its last failure counted in the key's record of answers (see health.fail)

	// What a panic on the way puts in order (see tidy).
	onWire  bool           // tk's attempt is with the base
	inHand  *http.Response // the response in hand
	pending *http.Request  // the next attempt's, GetBody's body open
	unsent  *http.Request  // the attempt's, until the base has it
}

// do makes the request's attempts. User code runs on the way (events,
// GetBody, a Store): should it panic, RoundTrip puts in order what r notes
// (see tidy).
func (r *request) do() (*http.Response, error) {
	// The first attempt's admission: r.arrived, unless a WithKey function
	// ran (see RoundTrip).
	send, now, mono := r.req, r.t.epoch.Add(r.mono), r.mono
	var kept *http.Response // the last response, its body read, while its retry is not yet sent
	var lastErr error       // or the last error, while its retry is not yet sent
	for attempt := 1; ; attempt++ {
		r.unsent = send    // until the base has it
		var last time.Time // a retry must be admitted by MaxElapsed
		if attempt > 1 {
			last = r.arrived.Add(r.t.cfg.retry.MaxElapsed)
			now, mono = r.t.now()
			r.ks.mu.Lock() // (the first attempt's was taken by acquire)
		}
		if attempt > 1 {
			r.tk = ticket{} // (the first's is zero: RoundTrip made r so)
		}
		tk := &r.tk
		err := r.t.admit(r.ctx, r.ks, &r.place, attempt, last, now, mono, tk)
		r.waited += tk.waited
		if err != nil {
			// A retry refused at the key, or whose wait there ended, was
			// never sent: it spends no budget, as one GetBody or Prepare
			// refuses (see next).
			r.refund()
			closeBody(send)
			r.unsent = nil // closed: a panicking events function must not close it again (see tidy)
			if now, _ = r.t.now(); (kept != nil || lastErr != nil) && (endsRetrying(err) || errors.Is(err, ErrMaxElapsed) && now.Before(last)) {
				// A retry refused at once, its turn known to come too
				// late (a pause another request began, past the
				// deadline, MaxRetryAfter or MaxElapsed, before
				// MaxElapsed passed), or the queue full: retrying
				// ends, and the caller gets the last response
				// (regression, found in review: it got the refusal,
				// the response lost; found in review 45 for
				// MaxElapsed, where a pause began during the retry's
				// backoff). A retry still waiting when MaxElapsed
				// passed fails with ErrMaxElapsed (see Retry).
				// So for a network error: the caller gets it, wrapped,
				// as at any other end of retrying (found in review: it
				// got the refusal alone, the error it met lost).
				why := r.retryRefused(attempt, kept, lastErr, err)
				if kept == nil {
					return nil, &triesError{r.gaveUpMsg(attempt-1, why), lastErr}
				}
				return kept, nil
			}
			r.count(err)
			r.refused(attempt, err)
			return nil, err
		}
		if r.t.cfg.events != nil {
			r.admitted(attempt, tk)
		}
		if attempt > 1 && r.t.cfg.retry.Prepare != nil {
			// Prepare makes the retry once it has its turn, so that its
			// token or signature is fresh when it is sent (found in
			// review: made when the retry was planned, before its
			// backoff and its wait at the key, it was as old as they
			// were, 10 s for a 429 asking for 10 s).
			if why := r.prepare(send, attempt, tk); why != "" {
				r.refund()
				r.gaveUp(attempt-1, kept, lastErr, why)
				if kept == nil {
					return nil, &triesError{r.gaveUpMsg(attempt-1, why), lastErr}
				}
				return kept, nil
			}
		}
		kept, lastErr = nil, nil
		r.budgetAt = time.Time{} // sent: the retry spent the budget
		r.unsent, r.sentURL = nil, send.URL
		resp, err := r.send(send)
		r.inHand = resp
		if r.plain(tk, resp) {
			r.judgePlain(tk, resp) // not retried
			r.inHand = nil
			return resp, nil
		}
		var o outcome // (large: judged in place, passed on by pointer)
		r.judge(&o, tk, attempt, resp, err)
		if !o.retryable {
			if err != nil && attempt > 1 {
				err = &triesError{fmt.Sprintf("throttle: key %q: after %d attempts", r.ks.name(), attempt), err}
			}
			r.inHand = nil
			return resp, err
		}
		next, why := r.next(attempt, &o)
		if why != "" {
			r.gaveUp(attempt, resp, err, why)
			if err != nil {
				err = &triesError{r.gaveUpMsg(attempt, why), err}
			}
			r.inHand = nil
			return resp, err
		}
		// discard closes resp's body, once, even should the base's Read or
		// Close panic: tidy must not close it again (found in review: its
		// Close panicked again in RoundTrip's recovery, and the request
		// was never let go of, its key held for good). The retry's body,
		// GetBody's, is tidy's to close until it is sent.
		r.inHand, r.pending = nil, next
		kept, lastErr = discard(resp), err
		r.retrying(attempt, resp, err, o.delay)
		send, r.pending = next, nil
		if werr := r.backOff(&o); werr != nil {
			r.refund() // never sent (see above)
			closeBody(send)
			r.count(werr)
			err := &WaitError{Key: r.ks.name(), Attempt: attempt + 1, Limit: LimitBackoff, Until: o.now.Add(o.delay), Err: werr}
			r.refused(attempt+1, err)
			return nil, err
		}
	}
}

// outcome is one attempt's result, judged.
type outcome struct {
	h         hint
	retryable bool          // by the rules of Retry, before its limits
	stop      bool          // Retry.NewBackOff's backoff said stop
	delay     time.Duration // before a retry: the jittered backoff, never shorter than the server asked
	ls        lesson
	now       time.Time // when the answer came
	cost      int       // the units the attempt was charged, as WithCost's figure corrected them
}

// held reports whether the key's pause covers the retry's delay: the retry
// waits at the key, with the others, not on its own.
func (o *outcome) held() bool { return !o.ls.held.Before(o.now.Add(o.delay)) }

// judge reads an attempt's answer, teaches it to the key, corrects its
// charge by WithCost's figure, gives back the attempt's in-flight slot (or
// ties it to the body), lets go of the key if the answer is the last, and
// tells the events. It locks the key once.
func (r *request) judge(o *outcome, tk *ticket, attempt int, resp *http.Response, err error) {
	var fig figure
	if resp != nil && r.t.cfg.cost != nil {
		fig = r.t.serverCost(resp) // user code: a panic waits until the key is in order
	}
	o.cost = int(tk.cost)
	wants := resp != nil && r.ks.wantsQuota(tk.adm)
	var mono time.Duration // o.now from the epoch
	o.now, mono = r.answeredAt(tk, resp, wants)
	if resp == nil || resp.StatusCode >= 400 || wants {
		// The answer's headers are read: absolute times in them are
		// counted from the server's clock (see instant).
		at := instant{now: o.now}
		if resp != nil {
			at.h, at.rtt = resp.Header, max(0, mono-tk.mono)
		}
		if resp == nil || resp.StatusCode >= 400 { // a status below carries no signal (see readHint)
			o.h = readHint(resp, err != nil && r.ctx.Err() == nil && retryableErr(err), &at)
		}
		if !o.h.read && wants {
			o.h.quota, o.h.hasQ = parseQuota(resp.Header, &at)
			o.h.read = true
		}
	}
	if o.h.read {
		r.ks.sawQuota(o.h.hasQ)
	}
	o.retryable = r.retryable(resp, err, &o.h)
	least := o.h.asked() // the shortest wait before a retry, whatever the backoff
	if o.retryable || o.h.signal != signalNone {
		// Also the length of a pause, should the answer begin one.
		o.delay = max(r.backoff(), least)
	}
	o.h.figure, o.h.figured = int32(fig.n), fig.ok
	ks := r.ks
	ks.mu.Lock()
	if !tk.timed && (ks.tr != nil || len(ks.wins) > 0) {
		// Trouble came, or a window, since the attempt went: its answer's
		// time counts (see answeredAt).
		tk.timed = true
		o.now, mono = r.t.now()
	}
	pause := o.delay
	if o.h.throttled() {
		// The key pauses for what the server asked (a second, for a
		// refusal that states no wait: see Retry); the refused request
		// itself may wait longer, its own backoff. (One unlucky request
		// must not pause the whole key for its growing backoff: a key
		// whose every probe found the quota spent by another client,
		// which the server's whole-second waits always woke it too late
		// for, paused ever longer; and a refusal that stated no wait
		// paused the key for the refused request's backoff, up to
		// MaxDelay: with a MaxDelay past MaxRetryAfter, the other
		// requests failed at once with ErrPaused, a pause no server
		// asked for; so for "Retry-After: 0", a pause of 0, which a
		// learned pace takes as none stated (see refused): found in
		// review, it paused the key for the refused request's backoff,
		// 17 s after the last of its 12 attempts, no retry to come.)
		pause = least
	}
	tk.req = r.req
	failed := o.h.signal == signalUnavailable
	if failed {
		tk.own = r.failed // (a copy: a pointer to r's own field would move r to the heap)
	}
	r.t.learn(&o.ls, ks, tk, resp, &o.h, pause, o.now, mono)
	if failed {
		r.failed = tk.own
	}
	if tk.probe && o.ls.outage {
		// A failed probe of an outage goes behind the requests waiting:
		// the next in line probes next (see outage.go). Keeping its
		// place, a request that fails whatever the server's health (one
		// broken item) probed again at every pause, and the pause grew
		// with each while the requests behind it, which the server
		// would have served, waited. It ages afresh from now too: aged
		// past the others (one priority a second since it began), a
		// request of another priority than theirs kept its place (found
		// in review: two broken items of a batch, Priority -1, held a
		// user's healthy worker 10 s on average, up to 28 s). Of higher
		// priority than those waiting, it goes behind them too, at the
		// lowest priority of theirs, 0 or more (see keyState.behind): two
		// broken items at Priority(5) held a healthy worker of priority
		// 0 9 s on average, up to 23 s.
		ks.arrived++
		r.seq, r.unaged, r.prio = ks.arrived, o.now.Sub(r.arrived), ks.behind(&r.place)
	}
	if o.h.throttled() && o.h.hasWait && o.h.wait == 0 && ks.learned() {
		// A zero wait teaches a learned pace as none stated (see
		// refused); the refused request, too, waits as for one.
		least = unstatedWait
		o.delay = max(o.delay, least)
	}
	if fig.ok {
		o.cost = r.t.correct(ks, *tk, fig.n, o.now)
	}
	tied := tk.slot && holdsSlot(resp)
	if tk.slot && !tied {
		ks.slots-- // learn woke the head: it recomputes once the lock is free
	}
	if !o.retryable && !r.asksUser() {
		r.release() // the last answer (else RoundTrip lets go of the key on the way out)
	}
	var shared Policy // the policy to tell the Store under, read while the key is locked (SetPolicy may replace it)
	sharing := r.t.shares(ks)
	if sharing {
		shared = ks.storePolicy()
	}
	ks.mu.Unlock()
	if sharing {
		// Told even if the user's code below panics (WithCost's, events,
		// ShouldRetry): the key has learned it, and the other Transports
		// must (found in review: a panicking event handler on a 429 left
		// the others sending through its Retry-After).
		defer r.t.share(r.ctx, r.ks, &shared, o.ls, o.now)
	}
	if tied {
		holdSlot(resp, ks)
	}
	if fig.hit != nil {
		panic(fig.hit) // WithCost's: the response in hand is closed (see do)
	}
	// The user's code runs once the key is in order: should it panic, the
	// response in hand is closed (see do), and the key holds nothing.
	if r.asksUser() {
		if o.retryable = r.t.cfg.retry.ShouldRetry(resp, err, o.retryable); o.retryable && o.delay == 0 {
			o.delay = max(r.backoff(), least)
		}
	}
	if o.retryable && r.t.cfg.retry.NewBackOff != nil {
		// Never shorter than what the answer asks, a second for a quota
		// refusal that states none (regression, found in review 46: given
		// the server's stated wait alone, a 429 without Retry-After to a
		// configured pace was retried after a NewBackOff of 10 ms, and
		// one of "Retry-After: 0" to a learned pace after 125 ms, the
		// key's peek, where the default backoff waits the second).
		o.delay, o.stop = r.ownBackoff(least)
	}
	if r.t.cfg.events != nil {
		r.told(attempt, resp, err, o)
	}
}

// plain reports whether resp, the answer to the attempt tk, is a plain one,
// the usual one: a response below 400 whose quota headers are not read (see
// wantsQuota), from a Transport without WithCost, WithEvents, a Store or
// Retry.ShouldRetry. Such an answer carries no signal and is not retried,
// and no user code runs for it: judgePlain takes it.
func (r *request) plain(tk *ticket, resp *http.Response) bool {
	return r.t.plain && resp != nil && resp.StatusCode < 400 && !r.ks.wantsQuota(tk.adm)
}

// judgePlain is judge for a plain answer (see plain): under the key's lock,
// the key learns it, the slot goes back or is tied to the body, and the
// request lets go of the key, as judge has it, without judge's tests of
// what such an answer cannot be nor its outcome to fill, and a key never in
// trouble learns it as acceptPlain has it, without learn's: some 280
// instructions of the 2,030 of a call on a paced key when it came
// (callgrind). TestAnswerShortcut holds the two to the same ticket and the
// same key.
func (r *request) judgePlain(tk *ticket, resp *http.Response) {
	var now time.Time // (made only for learn: acceptPlain needs mono alone)
	mono := tk.mono   // when the answer came, from the epoch: as judge's answeredAt has it
	if tk.timed {
		mono += time.Since(tk.sent)
	}
	tk.req = r.req // (see judge)
	ks := r.ks
	ks.mu.Lock()
	if !tk.timed && (ks.tr != nil || len(ks.wins) > 0) {
		tk.timed = true // (see judge)
		now, mono = r.t.now()
	}
	if ks.tr == nil {
		ks.acceptPlain(tk, mono)
	} else {
		if now.IsZero() {
			now = tk.sent.Add(mono - tk.mono)
		}
		r.t.learn(&lesson{}, ks, tk, resp, &hint{}, 0, now, mono)
	}
	tied := tk.slot && holdsSlot(resp)
	if tk.slot && !tied {
		ks.slots--
	}
	r.release()
	ks.mu.Unlock()
	if tied {
		holdSlot(resp, ks)
	}
}

// answeredAt is the time of the answer resp (nil: an error) to the attempt
// tk, and that from the epoch. A plain answer's is read from the monotonic
// clock alone, as its admission's plus the time since (see Transport.now):
// it goes no further than the key's arithmetic (no signal, so no pause; not
// retried). Unless the attempt is timed (see keyState.enter), it is taken
// for its admission's, with no clock read: a key without windows and never
// in trouble needs it only to sample its round trips (see sampleEvery).
// Any other answer reads time.Now, and is timed: its headers may hold a
// date (wants: its quota headers are read), a retry is compared with the
// context's deadline.
func (r *request) answeredAt(tk *ticket, resp *http.Response, wants bool) (time.Time, time.Duration) {
	if resp == nil || resp.StatusCode >= 400 || wants || r.asksUser() {
		tk.timed = true
		now := time.Now()
		return now, r.t.since(now)
	}
	return tk.answeredAt()
}

// answeredAt is the time of a plain answer to the attempt (see
// request.answeredAt), and that from the epoch: its admission's, unless it
// is timed.
func (tk *ticket) answeredAt() (time.Time, time.Duration) {
	if !tk.timed {
		return tk.sent, tk.mono
	}
	d := time.Since(tk.sent)
	return tk.sent.Add(d), tk.mono + d
}

// asksUser reports whether Retry.ShouldRetry decides whether the request's
// answers are retried.
func (r *request) asksUser() bool {
	return r.t.cfg.retry.ShouldRetry != nil && replayable(r.req) && !r.noRetry
}

// retrying counts and tells a retry that will be made.
func (r *request) retrying(attempt int, resp *http.Response, err error, delay time.Duration) {
	r.ks.mu.Lock()
	r.ks.troubled().stats.Retries++
	r.ks.mu.Unlock()
	if r.t.cfg.events != nil {
		r.emit(Event{Kind: EventRetry, Attempt: attempt, Status: status(resp), Err: err, Delay: delay})
	}
}

// backOff waits out what is left of the retry's delay here, unless the key's
// pause covers it: then the retry waits at the key.
func (r *request) backOff(o *outcome) error {
	left := time.Until(o.now.Add(o.delay))
	if o.held() || left <= 0 {
		return nil // (a negative wait would be one until woken: forever)
	}
	var timer *time.Timer
	err := r.t.sleep(r.ctx, nil, left, &timer)
	timer.Stop()
	return err
}

// send passes the admitted attempt r.tk to the base RoundTripper. Should
// the base panic, RoundTrip leaves the key in order (nothing on the wire,
// the slot and the probe given back: see tidy) before the panic goes on to
// the caller.
func (r *request) send(req *http.Request) (*http.Response, error) {
	r.onWire = true
	resp, err := r.t.base.RoundTrip(req)
	r.onWire = false
	switch {
	case resp == nil && err == nil:
		err = errors.New("throttle: the base RoundTripper returned neither a response nor an error")
	case resp != nil && err != nil:
		// Both, which the RoundTripper contract forbids: the error
		// stands, as net/http's Client has it, and the response's body
		// is closed here, where the Client drops it open (found in
		// review 45: returned as it was, both went to the caller, and
		// under MaxInFlight the body the Client never closed held its
		// slot for ever).
		if resp.Body != nil {
			resp.Body.Close()
		}
		resp = nil
	}
	return resp, err
}

// unsend puts the key in order after a panic between the admission of the
// attempt tk and its answer (the base's, or an events function's before the
// attempt went): the attempt ends as one with no answer, which gives back
// its place on the wire (a window's entry, the count of those sending), and
// its in-flight slot. One the base had (sent) may have reached the server,
// and counts in its windows from now, as any attempt with no answer does;
// one never sent counts nothing there (found in review: an EventWaited that
// panicked left its attempt counted in a window of 1 a second, and the next
// request went a whole window after the turn the attempt had).
func (t *Transport) unsend(ks *keyState, tk *ticket, sent bool) {
	now := time.Now()
	h := hint{figured: !sent} // never sent: figure 0, its entries count no units
	ks.mu.Lock()
	t.learn(&lesson{}, ks, tk, nil, &h, 0, now, t.since(now))
	if tk.slot {
		ks.slots--
	}
	ks.mu.Unlock()
}

// retryable reports whether the attempt's outcome is one that may be retried
// for this request, before limits of attempts, time and budget.
func (r *request) retryable(resp *http.Response, err error, h *hint) bool {
	if r.noRetry || !replayable(r.req) {
		return false
	}
	if err != nil {
		return r.ctx.Err() == nil && idempotent(r.req) && retryableErr(err)
	}
	return h.throttled() || retryableStatus(resp.StatusCode) && idempotent(r.req)
}

// attempts says n attempts, in English.
func attempts(n int) string {
	if n == 1 {
		return "1 attempt"
	}
	return fmt.Sprintf("%d attempts", n)
}

// next returns the request to send for the next attempt, or why not.
func (r *request) next(attempt int, o *outcome) (next *http.Request, why string) {
	cfg := &r.t.cfg.retry
	h, now := &o.h, o.now
	deadline, hasDeadline := r.ctx.Deadline()
	if attempt >= cfg.MaxAttempts {
		return nil, attempts(attempt)
	}
	if o.stop {
		return nil, "the backoff of Retry.NewBackOff said stop"
	}
	if h.hasWait && h.wait > cfg.MaxRetryAfter {
		return nil, fmt.Sprintf("%s %v is longer than MaxRetryAfter %v", h.source, h.wait, cfg.MaxRetryAfter)
	}
	at := r.earliest(now, o.delay)
	switch in := at.Sub(now).Round(time.Millisecond); {
	case hasDeadline && at.After(deadline):
		return nil, fmt.Sprintf("a retry in %v would pass the context's deadline", in)
	case at.Sub(r.arrived) > cfg.MaxElapsed:
		return nil, fmt.Sprintf("a retry in %v would pass MaxElapsed %v", in, cfg.MaxElapsed)
	case !h.throttled() && !r.spend(now):
		return nil, "the key's retry budget is spent"
	}
	if !h.throttled() {
		// A retry that GetBody or Prepare refuses (or panics in) is never
		// sent: it spends nothing (found in review: each such refusal
		// spent the budget, and a later 503 was refused a retry with
		// none made). See refund.
		r.budgetAt = now
		defer func() {
			if next == nil {
				r.refund()
			}
		}()
	}
	return r.replay()
}

// replay returns the request for the next retry: the caller's, or, with
// Retry.Prepare, a copy of it for Prepare to make once the retry has its
// turn (see prepare), with a fresh body from GetBody; or why not.
func (r *request) replay() (*http.Request, string) {
	if r.t.cfg.retry.Prepare != nil {
		return r.cloned()
	}
	if r.req.Body == nil || r.req.Body == http.NoBody {
		return r.req, ""
	}
	body, gerr := r.req.GetBody()
	if gerr != nil {
		return nil, "GetBody: " + gerr.Error()
	}
	copied := *r.req // shallow: the caller's request stays untouched
	copied.Body = body
	return &copied, ""
}

// cloned returns the copy of the caller's request that Retry.Prepare will
// make the next retry of (see prepare), its body fresh from GetBody, or why
// not.
func (r *request) cloned() (*http.Request, string) {
	next := r.req.Clone(r.ctx)
	if r.req.Body != nil && r.req.Body != http.NoBody {
		body, err := r.req.GetBody()
		if err != nil {
			return nil, "GetBody: " + err.Error()
		}
		next.Body = body
	}
	return next, ""
}

// prepare has Retry.Prepare make next, the copy of retry number attempt
// (see cloned), once the retry, tk, has its turn. Should Prepare fail or
// panic, neither body is sent: both are closed, and the attempt, admitted
// but never sent, gives back all it holds (see unadmit); it returns why.
func (r *request) prepare(next *http.Request, attempt int, tk *ticket) string {
	var body io.ReadCloser // GetBody's
	if r.req.Body != nil && r.req.Body != http.NoBody {
		body = next.Body
	}
	ok := false
	defer func() {
		if !ok {
			r.unsent = nil // closed here, not again by tidy
			closeBody(next)
			if body != nil && next.Body != body {
				body.Close()
			}
			r.unadmit(tk)
		}
	}()
	if err := r.t.cfg.retry.Prepare(next, attempt); err != nil {
		return "Retry.Prepare: " + err.Error()
	}
	ok = true
	if body != nil && next.Body != body {
		// Prepare replaced the body (a new signature over it): the one
		// GetBody made is closed with the new one, once the base is done
		// with it, for it may read from it (found in review: it was
		// never closed, a file's descriptor per retry).
		if next.Body == nil || next.Body == http.NoBody {
			body.Close()
		} else {
			next.Body = &alsoCloses{next.Body, body}
		}
	}
	return ""
}

// alsoCloses is a request body that closes another with it.
type alsoCloses struct {
	io.ReadCloser
	other io.Closer
}

func (b *alsoCloses) Close() error {
	err := b.ReadCloser.Close()
	b.other.Close()
	return err
}

// earliest is the earliest a retry delayed by delay from now can go: after
// its delay, and after what is known of the key's own wait (its pause, its
// windows, its pacer), which may be longer.
func (r *request) earliest(now time.Time, delay time.Duration) time.Time {
	ks := r.ks
	ks.mu.Lock()
	at, _ := ks.lowerBound(now, r.t.since(now), 0, r.cost)
	ks.mu.Unlock()
	if d := now.Add(delay); d.After(at) {
		return d
	}
	return at
}

func (r *request) spend(now time.Time) bool {
	r.ks.mu.Lock()
	defer r.ks.mu.Unlock()
	return r.ks.budget.spend(r.t.since(now), r.t.cfg.retry.Budget, r.t.cfg.retry.BudgetFloor)
}

// refund gives back the retry that spend took for the retry to come, at
// r.budgetAt, when that retry is not sent after all, if it did.
func (r *request) refund() {
	if r.budgetAt.IsZero() {
		return
	}
	r.ks.mu.Lock()
	defer r.ks.mu.Unlock()
	if r.t.cfg.retry.Budget >= 0 {
		r.ks.budget.refund(r.t.since(r.budgetAt))
	}
	r.budgetAt = time.Time{}
}

// backoff returns the next jittered backoff delay of this request.
func (r *request) backoff() time.Duration {
	if r.bo == nil {
		r.bo = r.t.cfg.retry.backoffFor()
	}
	return fullJitter(r.bo.NextBackOff())
}

// ownBackoff returns the delay before the next retry from Retry.NewBackOff's
// backoff, never shorter than wait, or stop.
func (r *request) ownBackoff(wait time.Duration) (delay time.Duration, stop bool) {
	if r.own == nil {
		if r.own = r.t.cfg.retry.NewBackOff(); r.own == nil {
			r.own = &backoff.StopBackOff{} // a nil BackOff: no retries, rather than a panic
		}
	}
	d := r.own.NextBackOff()
	if d == backoff.Stop {
		return wait, true
	}
	return max(d, wait), false
}

// gaveUpMsg says that the request gave up after attempt attempts, and why,
// unless why is that the attempts were used up: just said (regression,
// found in review 46: `gave up after 3 attempts (3 attempts)`).
func (r *request) gaveUpMsg(attempt int, why string) string {
	msg := fmt.Sprintf("throttle: key %q: gave up after %s", r.ks.name(), attempts(attempt))
	if attempt < r.t.cfg.retry.MaxAttempts { // (else why is attempts(attempt): see next)
		msg += " (" + why + ")"
	}
	return msg
}

func (r *request) gaveUp(attempt int, resp *http.Response, err error, why string) {
	r.ks.mu.Lock()
	r.ks.troubled().stats.GaveUp++
	r.ks.mu.Unlock()
	if r.t.cfg.events != nil {
		r.emit(Event{Kind: EventGaveUp, Attempt: attempt, Status: status(resp), Err: err, Reason: why})
	}
}

// count records why a request ended without being sent. It is counted
// here, once the request is known to fail, not where admit refused it: a
// retry refused while the last response is in hand ends with that response,
// not a refusal (see retryRefused).
func (r *request) count(err error) {
	ks := r.ks
	ks.mu.Lock()
	defer ks.mu.Unlock()
	s := &ks.troubled().stats
	switch {
	case errors.Is(err, ErrClosed):
		s.RefusedClosed++
	case errors.Is(err, ErrQueueFull):
		s.RefusedQueueFull++
	case errors.Is(err, ErrWouldExceedDeadline), errors.Is(err, ErrMaxElapsed):
		s.RefusedDeadline++
	case errors.Is(err, ErrPaused):
		s.RefusedPaused++
	case errors.Is(err, ErrStoreUnavailable):
		s.RefusedStore++
	case errors.Is(err, ErrCostTooLarge):
		s.RefusedCost++
	default:
		s.Canceled++
	}
}

// retryRefused ends retrying when a retry is refused at once while the last
// response is in hand: the caller gets that response, so the request did not
// fail without being sent (a refusal) but ended with that answer, and
// counts in GaveUp and tells EventGaveUp of the attempt whose answer it is,
// Reason the refusal (regression, found in review 46: it counted as
// RefusedDeadline with an EventRefused, and GaveUp missed it: 1 and one
// EventGaveUp for two requests that both ended with a 429).
func (r *request) retryRefused(attempt int, kept *http.Response, lastErr, err error) string {
	why := err.Error()
	var we *WaitError
	if errors.As(err, &we) {
		why = strings.TrimPrefix(why, fmt.Sprintf("throttle: key %q: ", we.Key))
	}
	why = "the retry was refused: " + why
	r.gaveUp(attempt-1, kept, lastErr, why)
	return why
}

func status(resp *http.Response) int {
	if resp == nil {
		return 0
	}
	return resp.StatusCode
}
