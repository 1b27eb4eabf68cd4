package throttletest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// StatsPath is the path at which GET answers Stats as JSON.
const StatsPath = "/__stats"

// ServeHTTP answers r as described on API. A request whose context ends before it
// is answered (the client went away) is counted as Canceled and answered 503.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rep, err := a.handle(r)
	if err != nil {
		rep = newReply(http.StatusServiceUnavailable, "canceled")
	}
	h := w.Header()
	for k, v := range rep.header {
		h[k] = v
	}
	h.Set("Content-Length", strconv.Itoa(len(rep.body)))
	w.WriteHeader(rep.status)
	_, _ = io.WriteString(w, rep.body)
}

// RoundTrip serves r in-process, without any network, and keeps the RoundTripper
// contract: it reads r's body to the end and closes it (on errors too), does not
// modify r, and returns a response whatever its status, whose Body the caller
// closes. It returns an error only when r's context ends before the answer (the
// context's error, as a real transport does), r's body fails to read, or r has no
// URL. It panics, as ServeHTTP does, when the API served requests on a clock
// that r's goroutine is behind (see API).
func (a *API) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		defer r.Body.Close()
	}
	if r.URL == nil {
		return nil, errors.New("throttletest: nil Request.URL")
	}
	if err := r.Context().Err(); err != nil {
		return nil, err
	}
	rep, err := a.handle(r)
	if err != nil {
		return nil, err
	}
	return rep.response(r), nil
}

func (a *API) handle(r *http.Request) (reply, error) {
	if r.URL.Path == StatsPath && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		b, err := json.Marshal(a.Stats())
		if err != nil {
			return reply{}, err
		}
		return reply{status: http.StatusOK, header: jsonHeader(), body: string(b) + "\n"}, nil
	}
	return a.serve(r)
}

// serve is the request path: read the body, arrive, then answer as the backend
// is: down in an outage, else up.
func (a *API) serve(r *http.Request) (reply, error) {
	var n int64
	var err error
	if r.Body != nil {
		n, err = io.Copy(io.Discard, r.Body)
	}
	key := apiKey(r.Header, a.cfg.KeyHeader)
	if err != nil {
		a.stats.record(key, canceled, false, n, time.Time{})
		return reply{}, fmt.Errorf("throttletest: reading request body: %w", err)
	}
	if err := sleep(r.Context(), a.arrivalDelay()); err != nil {
		a.stats.record(key, canceled, false, n, time.Time{})
		return reply{}, err
	}
	now, since := a.arrive()
	if o, down := a.outageAt(since); down {
		return a.outage(o, key, n, now), nil
	}
	if key == "" {
		a.stats.record(key, unauthorized, false, n, time.Time{})
		return newReply(http.StatusUnauthorized, "missing API key"), nil
	}
	if a.refuseAtRandom() {
		a.stats.record(key, throttled, false, n, time.Time{})
		rep := newReply(http.StatusTooManyRequests, "refused")
		rep.setRetryAfter(a.cfg.RetryAfter, now, time.Second)
		return rep, nil
	}
	return a.answer(r.Context(), key, n, now)
}

// answer serves a request of key, with n body bytes, that arrived at now while
// the backend is up: admit, wait for the queue turn and the latency, answer.
func (a *API) answer(ctx context.Context, key string, n int64, now time.Time) (reply, error) {
	k := a.state(key)
	wantQuotas := a.cfg.XRateLimit || a.cfg.IETF
	ad := k.admit(now, wantQuotas)
	if !ad.ok {
		a.stats.record(key, throttled, false, n, time.Time{})
		rep := newReply(http.StatusTooManyRequests, "quota exceeded")
		rep.setRetryAfter(a.cfg.RetryAfter, ad.now, ad.wait)
		a.cfg.setQuotaHeaders(rep.header, ad.quotas, ad.bind)
		return rep, nil
	}
	defer k.release()
	a.stats.admit(key)

	if err := sleep(ctx, time.Until(ad.serveAt)); err != nil {
		a.stats.record(key, canceled, true, n, time.Time{})
		return reply{}, err
	}
	// The instant the quotas served it at: where they decided, or its turn
	// in a queue. time.Now() here reads it late by the locks and the
	// scheduler (on the real clock, by up to milliseconds), and counted so,
	// a sliding log of 50 a second showed a peak of 66 a second.
	servedAt := ad.serveAt
	delay, down := a.draw()
	if err := sleep(ctx, delay); err != nil {
		a.stats.record(key, canceled, true, n, time.Time{})
		return reply{}, err
	}
	if down {
		a.stats.record(key, unavailable, true, n, time.Time{})
		return a.cfg.serviceUnavailable(time.Now(), a.cfg.UnavailableRetryAfter), nil
	}
	a.stats.record(key, accepted, true, n, servedAt)
	rep := reply{status: http.StatusOK, header: jsonHeader(), body: `{"ok":true}` + "\n"}
	if a.cfg.HeadersOnSuccess {
		a.cfg.setQuotaHeaders(rep.header, ad.quotas, ad.bind)
	}
	return rep, nil
}

// sleep is the one place the API blocks: it waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// reply is an answer, written by ServeHTTP or returned by RoundTrip.
type reply struct {
	status int
	header http.Header
	body   string
}

func newReply(status int, msg string) reply {
	b, _ := json.Marshal(struct {
		OK    bool   `json:"ok"`
		Error string `json:"error"`
	}{false, msg})
	return reply{status: status, header: jsonHeader(), body: string(b) + "\n"}
}

func jsonHeader() http.Header {
	return http.Header{"Content-Type": {"application/json"}}
}

// outage answers a request of key, with n body bytes, that arrived at now
// during the outage o.
func (a *API) outage(o Outage, key string, n int64, now time.Time) reply {
	if o.Status != http.StatusTooManyRequests {
		a.stats.record(key, inOutage, false, n, time.Time{})
		return a.cfg.serviceUnavailable(now, o.RetryAfter)
	}
	a.stats.record(key, throttled, false, n, time.Time{})
	rep := newReply(http.StatusTooManyRequests, "refused")
	rep.setRetryAfter(a.cfg.RetryAfter, now, o.RetryAfter)
	return rep
}

// serviceUnavailable is a 503 that tells the client to come back after d from now.
func (c *Config) serviceUnavailable(now time.Time, d time.Duration) reply {
	rep := newReply(http.StatusServiceUnavailable, "service unavailable")
	rep.setRetryAfter(c.RetryAfter, now, d)
	return rep
}

func (rep *reply) setRetryAfter(f RetryAfterFormat, now time.Time, d time.Duration) {
	if v := retryAfter(f, now, d); v != "" {
		rep.header.Set("Retry-After", v)
	}
}

// response turns rep into what a transport returns for r.
func (rep reply) response(r *http.Request) *http.Response {
	h := rep.header.Clone()
	h.Set("Content-Length", strconv.Itoa(len(rep.body)))
	resp := &http.Response{
		Status:        strconv.Itoa(rep.status) + " " + http.StatusText(rep.status),
		StatusCode:    rep.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          io.NopCloser(strings.NewReader(rep.body)),
		ContentLength: int64(len(rep.body)),
		Request:       r,
	}
	if r.Method == http.MethodHead {
		resp.Body = http.NoBody
	}
	return resp
}
