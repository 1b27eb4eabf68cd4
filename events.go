package throttle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// EventKind says what an [Event] reports.
type EventKind uint8

const (
	// EventThrottled: the server answered with a quota signal: 429, or a 403
	// with Retry-After or saying the quota is spent.
	EventThrottled EventKind = iota + 1
	// EventPaused: the key is paused until Event.Until (begun or extended);
	// Event.Reason says "quota" (a quota signal) or "outage" (502, 503, 504
	// or network errors dominated the key's recent answers).
	EventPaused
	// EventRetry: the request will be tried again after Event.Delay (at the
	// earliest: the pause and the pacer may hold it longer).
	EventRetry
	// EventGaveUp: retrying was cut short while the last answer still
	// called for a retry (attempts, time, MaxRetryAfter or budget used up);
	// Event.Reason says why. The caller gets the last response, or the last
	// error. (An answer that is not retried, a POST's network error, ends
	// the request without it.) A retry refused at once while the
	// last response is in hand ends retrying so: Event.Attempt is the
	// attempt whose answer the caller gets, Event.Reason "the retry was
	// refused: " and the refusal.
	EventGaveUp
	// EventPace: what paces the key changed. Event.Reason says where it
	// comes from: "quota headers: bucket" (Event.Rate is the refill
	// measured, sent when first known and when it moves by a tenth),
	// "quota headers: window" or "quota headers: log" (the server's count
	// holds the key; Event.Rate is 0), or "learned from 429s" (a key with
	// no Policy.Rate and no quota headers that was refused; Event.Rate is
	// the pace learned, sent when first learned and when it moves by a
	// tenth), or "policy, adapted to 429s" (Policy.Rate cut by refusals,
	// or climbing back; Event.Rate is the pace now, sent at each move; of
	// a key paced by Windows alone, its slowest cut window's N per Per, as
	// a rate, and its Rate is 0 once they are whole again).
	EventPace
	// EventStore: the Store set by WithStore could not be reached, and
	// booked departures alone (Event.Err says why; see redisstore's
	// FailOpen), or, with Event.Err nil, it is shared again. Sent when
	// this changes, not for every request.
	EventStore
	// EventWaited: an attempt waited for its turn, and got it: Event.Wait
	// is how long, Event.Limit what it waited for last (the limit that
	// let it go: LimitRate, LimitWindow, LimitPause, LimitLine…). Not sent
	// for an attempt that went at once.
	EventWaited
	// EventRefused: a request ended without being sent (this attempt, or
	// the retry it waited to make), with an error: Event.Err, a
	// *WaitError (ErrQueueFull, ErrWouldExceedDeadline, ErrPaused,
	// ErrClosed, ErrMaxElapsed, ErrCostTooLarge, ErrStoreUnavailable, or
	// the context's error), and Event.Limit which limit held it. A retry
	// refused while the last response is in hand is told by EventGaveUp.
	EventRefused
	// EventAnswered: an attempt sent to the base RoundTripper came back:
	// Event.Status is the answer's status code, or Event.Err the base's
	// error (Status 0). Sent for every attempt sent, before what the
	// answer teaches (EventThrottled, EventPace, EventPaused), so a
	// handler can count attempts and their answers.
	EventAnswered
)

func (k EventKind) String() string {
	switch k {
	case EventThrottled:
		return "throttled"
	case EventPaused:
		return "paused"
	case EventRetry:
		return "retry"
	case EventGaveUp:
		return "gave up"
	case EventPace:
		return "pace"
	case EventStore:
		return "store"
	case EventWaited:
		return "waited"
	case EventRefused:
		return "refused"
	case EventAnswered:
		return "answered"
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k)) // as Limit's (found in review: "unknown")
}

// An Event is something that matters in the life of a request, given to the
// function set by [WithEvents]. Every event is about one request, and says
// which: its Method, its URL (without user info, query or fragment, which
// may hold credentials) and its Context, from which a handler can read the
// request's trace span or logger.
type Event struct {
	Kind    EventKind
	Key     string          // the partition key
	Method  string          // the request's method
	URL     string          // the request's URL: scheme, host and path only
	Context context.Context // the request's context; not logged by LogValue
	Attempt int             // the attempt this follows: 1 for the first
	Status  int             // the attempt's status code; 0 after a network error
	Err     error           // the attempt's error, if any
	Until   time.Time       // EventPaused: the end of the pause
	Source  string          // EventPaused: "Retry-After", "RateLimit", "X-RateLimit-Reset" or "backoff"
	Delay   time.Duration   // EventRetry: the delay before the next attempt
	Rate    rate.Limit      // EventPace: the pace now
	Reason  string          // EventGaveUp: why retrying ended; EventPaused: "quota" or "outage"; EventPace: where the pace comes from
	Wait    time.Duration   // EventWaited: how long the attempt waited for its turn
	Limit   Limit           // EventWaited: what it waited for last; EventRefused: what held it
	// Cost is the units of the key's limits the attempt is charged (see
	// Cost; 1 without it): EventWaited, EventRefused, and EventAnswered,
	// where it is what WithCost's figure corrected it to, if there is one.
	Cost int
}

// LogValue makes an Event log as a group of its set fields with log/slog.
func (e Event) LogValue() slog.Value {
	attrs := []slog.Attr{slog.String("kind", e.Kind.String()), slog.String("key", e.Key),
		slog.String("method", e.Method), slog.String("url", e.URL), slog.Int("attempt", e.Attempt)}
	if e.Status != 0 {
		attrs = append(attrs, slog.Int("status", e.Status))
	}
	if e.Err != nil {
		attrs = append(attrs, slog.String("err", e.Err.Error()))
	}
	if !e.Until.IsZero() {
		attrs = append(attrs, slog.Time("until", e.Until))
	}
	if e.Source != "" {
		attrs = append(attrs, slog.String("source", e.Source))
	}
	if e.Delay != 0 {
		attrs = append(attrs, slog.Duration("delay", e.Delay))
	}
	if e.Rate != 0 {
		attrs = append(attrs, slog.Float64("rate", float64(e.Rate)))
	}
	if e.Reason != "" {
		attrs = append(attrs, slog.String("reason", e.Reason))
	}
	if e.Wait != 0 {
		attrs = append(attrs, slog.Duration("wait", e.Wait))
	}
	if e.Limit != LimitNone {
		attrs = append(attrs, slog.String("limit", e.Limit.String()))
	}
	if e.Cost > 1 {
		attrs = append(attrs, slog.Int("cost", e.Cost)) // 1, the usual, goes without saying
	}
	return slog.GroupValue(attrs...)
}

// emit gives e, about r, to the events function, with what every event
// says of its request. Callers check that there is one first, so that no
// event is made without one.
func (r *request) emit(e Event) {
	e.Key, e.Method, e.URL, e.Context = r.ks.name(), r.req.Method, r.url(), r.ctx
	if e.Err != nil {
		e.Err = r.shownErr(e.Err)
	}
	if e.Method == "" {
		e.Method = http.MethodGet // as net/http reads an empty one
	}
	r.t.cfg.events(e)
}

// url is the request's URL as events show it (see shownURL), made when an
// event first needs it, unless the one they last showed on this P (see
// lastURLs) is the same: requests that go to one URL (one endpoint, or one
// path with different queries) make it once, not once each.
func (r *request) url() string {
	if r.shown == "" {
		last := lastURLs.Get().(*string)
		r.shown = shownURL(r.req.URL, *last)
		*last = r.shown
		lastURLs.Put(last)
	}
	return r.shown
}

// shownErr is err as events show it: without the user info, query or
// fragment of the request's URL, or of its attempt's (Retry.Prepare may
// sign it), which the base's error may name (a *url.Error, as a base built
// on an http.Client returns, says the URL whole; found in review: Event.URL
// dropped them, and Event.Err and its log line showed them). A *url.Error
// is shown as a copy with its URL so cut (errors.As finds that copy);
// another error naming them, by a redactedError with its message so cut,
// which unwraps to it and is a timeout when it is.
func (r *request) shownErr(err error) error {
	secret := func(u *url.URL) bool {
		// (An Opaque set verbatim may hold them too: "//user@host/p?sig=…".)
		return u != nil && (u.User != nil || u.RawQuery != "" || u.Fragment != "" || strings.ContainsAny(u.Opaque, "@?#"))
	}
	sent := r.sentURL
	if sent == r.req.URL || !secret(sent) {
		sent = nil
	}
	if !secret(r.req.URL) && sent == nil {
		return err
	}
	scrub := func(m string) string {
		for _, u := range [...]*url.URL{sent, r.req.URL} {
			if !secret(u) {
				continue
			}
			// The URL whole: as it is, as URL.Redacted writes it, and as
			// net/http's Client names it in its *url.Error (the password
			// "***", the user name kept: a user name that is the API's
			// key, as "https://sk_live_...:@host" sends it, showed).
			for _, s := range [...]string{u.String(), u.Redacted(), clientForm(u)} {
				m = strings.ReplaceAll(m, s, r.url())
			}
			// What is left, in another form: the parts themselves.
			if u.RawQuery != "" {
				m = strings.ReplaceAll(m, "?"+u.RawQuery, "")
			}
			if u.Fragment != "" {
				m = strings.ReplaceAll(m, "#"+u.EscapedFragment(), "")
			}
			// An Opaque set verbatim holds its own ("/p?sig=…"): the
			// request's target, as RequestURI writes it, named it (found
			// in review).
			for _, c := range "?#" {
				if i := strings.IndexRune(u.Opaque, c); i >= 0 && i+1 < len(u.Opaque) {
					m = strings.ReplaceAll(m, u.Opaque[i:], "")
				}
			}
			if u.User != nil {
				m = strings.ReplaceAll(m, u.User.String()+"@", "")
				if _, ok := u.User.Password(); ok {
					for _, masked := range [...]string{":***@", ":xxxxx@"} {
						m = strings.ReplaceAll(m, u.User.Username()+masked, "")
					}
				}
			}
		}
		return m
	}
	if ue, ok := err.(*url.Error); ok && scrub(ue.Err.Error()) == ue.Err.Error() {
		if u := scrub(ue.URL); u != ue.URL {
			shown := *ue
			shown.URL = u
			return &shown
		}
		return err
	}
	if msg := err.Error(); scrub(msg) != msg {
		return &redactedError{scrub(msg), err}
	}
	return err
}

// clientForm is u as net/http's Client names it in its errors: its
// password, if set, replaced by "***" (see net/http's stripPassword).
func clientForm(u *url.URL) string {
	if _, ok := u.User.Password(); ok {
		return strings.Replace(u.String(), u.User.String()+"@", u.User.Username()+":***@", 1)
	}
	return u.String()
}

// redactedError is an error shown with another message (see shownErr).
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
func (e *redactedError) Timeout() bool { return isTimeout(e.err) }

// lastURLs holds the URL events last showed, one per P: a pool's own slot
// of each P is taken and given back without a lock or an allocation, where
// a URL kept per key would cost every key its room, events or not. A GC
// empties it.
var lastURLs = sync.Pool{New: func() any { return new(string) }}

// shownURL is u as events show it: without user info, query or fragment,
// which may hold credentials ("https://user:pass@host/p?api_key=…"). It is
// last, rather than a string of its own, when last says the same.
func shownURL(u *url.URL, last string) string {
	if u.Opaque == "" && u.Scheme != "" && plainHost(u.Host) {
		// What url.URL.String makes of these, in one allocation.
		p := u.EscapedPath()
		slash := p != "" && p[0] != '/'
		if joins(last, u.Scheme, u.Host, slash, p) {
			return last
		}
		if slash {
			p = "/" + p
		}
		return u.Scheme + "://" + u.Host + p
	}
	if strings.HasPrefix(u.Opaque, "/") && (u.Host != "" || strings.HasPrefix(u.Opaque, "//")) {
		// A path set verbatim ("/v1/items%2F7", or "//host/path" as
		// net/url documents): net/http sends it to Host, which
		// URL.String leaves out of the first ("https:/v1/items%2F7")
		// and writes the second whole, the user info and query in its
		// authority and path with it (found in review: a pre-signed
		// URL's signature, a token as user info, showed; otelthrottle
		// made server.address "token@host" of it).
		host, p := u.Host, u.Opaque
		if rest, ok := strings.CutPrefix(p, "//"); ok {
			auth := rest
			p = ""
			if i := strings.IndexAny(rest, "/?#"); i >= 0 {
				auth, p = rest[:i], rest[i:]
			}
			if host == "" {
				host = auth[strings.LastIndexByte(auth, '@')+1:]
			}
		}
		if i := strings.IndexAny(p, "?#"); i >= 0 {
			p = p[:i]
		}
		v := url.URL{Scheme: u.Scheme, Host: host}
		return v.String() + p
	}
	// An Opaque set by hand may hold a query or fragment too ("/p?sig=…"
	// without Host, "p?sig=…"): written whole, they showed (found in
	// review). One url.Parse made holds neither.
	op := u.Opaque
	if i := strings.IndexAny(op, "?#"); i >= 0 {
		op = op[:i]
	}
	v := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath, Opaque: op}
	return v.String()
}

// joins reports whether s is scheme://host, then "/" if slash, then path.
// The path, where the URLs of one key differ most, is compared first.
func joins(s, scheme, host string, slash bool, path string) bool {
	n := len(scheme) + len("://") + len(host)
	if slash {
		n++
	}
	return len(s) == n+len(path) && s[n:] == path && s[:len(scheme)] == scheme &&
		s[len(scheme):len(scheme)+len("://")] == "://" && s[len(scheme)+len("://"):][:len(host)] == host &&
		(!slash || s[n-1] == '/')
}

// plainHost reports whether h is a host url.URL.String writes as it is:
// letters, digits, '.', '-', ':', '[' and ']' (a name, an IP, a port).
func plainHost(h string) bool {
	if h == "" {
		return false
	}
	for i := 0; i < len(h); i++ {
		switch c := h[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '-', c == ':', c == '[', c == ']':
		default:
			return false
		}
	}
	return true
}

// admitted tells an attempt's wait for its turn, if it waited, and the
// Store's news.
func (r *request) admitted(attempt int, tk *ticket) {
	if !tk.asked && tk.waited <= 0 {
		return
	}
	// The events function is the user's: should it panic, the attempt,
	// admitted but never sent, gives back all it holds (see unsend), its
	// pacer's tokens and its units too (found in review 45: the next
	// request waited a whole turn more, and Units counted the attempt).
	done := false
	defer func() {
		if !done {
			r.unadmit(tk)
		}
	}()
	if tk.asked {
		r.storeNews(*tk)
	}
	if tk.waited > 0 {
		r.emit(Event{Kind: EventWaited, Attempt: attempt, Wait: tk.waited, Limit: tk.heldBy, Cost: r.cost})
	}
	done = true
}

// unadmit gives back all that the attempt tk, admitted but never sent,
// holds (see unsend), its pacer's tokens and its units too (found in
// review 45: the next request waited a whole turn more, and Units counted
// the attempt).
func (r *request) unadmit(tk *ticket) {
	r.t.unsend(r.ks, tk, false)
	ks := r.ks
	ks.mu.Lock()
	ks.stats.Attempts-- // never sent (found in review: it was counted)
	ks.troubled().stats.refunded += int64(tk.cost)
	if ks.lim != nil {
		// No more than the bucket lost (see levels): a retry that
		// Retry.Prepare refused may have held its tokens for long, while
		// the bucket would have been full and others took what refilled
		// (found in review: given back whole, 8 units went within 0.6 s
		// where Burst 5 and 1 a second allow 5.6). Without levels (no
		// WithCost nor Prepare), only a panicking events function gets
		// here, at once after the admission: all it took is lost.
		now := time.Now()
		n := int(tk.cost)
		if ks.levels != nil {
			n = ks.levels.refund(ks.lim, now, tk.adm, n)
		}
		giveTokens(ks.lim, now, n)
	}
	ks.mu.Unlock()
}

// refused tells a request that ended without being sent: err is a
// *WaitError, or the context's error.
func (r *request) refused(attempt int, err error) {
	if r.t.cfg.events == nil {
		return
	}
	e := Event{Kind: EventRefused, Attempt: attempt, Err: err, Cost: r.cost}
	var we *WaitError
	if errors.As(err, &we) {
		e.Limit, e.Until = we.Limit, we.Until
	}
	r.emit(e)
}

// told tells an attempt's answer, and what it taught: a quota signal, the
// pace, a pause.
func (r *request) told(attempt int, resp *http.Response, err error, o *outcome) {
	r.emit(Event{Kind: EventAnswered, Attempt: attempt, Status: status(resp), Err: err, Cost: o.cost})
	if o.h.throttled() {
		r.emit(Event{Kind: EventThrottled, Attempt: attempt, Status: resp.StatusCode})
	}
	if o.ls.paceWhy != "" {
		r.emit(Event{Kind: EventPace, Attempt: attempt, Status: status(resp), Rate: o.ls.pace, Reason: o.ls.paceWhy})
	}
	if !o.ls.until.IsZero() {
		reason := "quota"
		if o.ls.outage {
			reason = "outage"
		}
		r.emit(Event{Kind: EventPaused, Attempt: attempt, Status: status(resp), Err: err,
			Until: o.ls.until, Source: o.ls.source, Reason: reason})
	}
}
