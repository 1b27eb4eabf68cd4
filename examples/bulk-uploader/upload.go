package main

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

	"github.com/throttlehttp/throttle"
)

// result is how one record's upload ended. Every record ends in exactly one
// of: uploaded (err == nil, 2xx), failed (err != nil), or not sent: the job
// was interrupted before its turn, or the transport refused its request
// before any attempt left (err says why; see unsent).
type result struct {
	rec     record
	sent    bool
	status  int
	err     error
	retries int // naive client only: resends after a 429
}

func (r result) ok() bool { return r.sent && r.err == nil }

// sender uploads one record and says how it went.
type sender func(ctx context.Context, rec record) result

// run uploads recs with the given number of workers. When stop is done, no
// further record is started; the ones under way finish (or fail with abort,
// the context of their requests). It returns one result per record, in the
// order of recs, and calls done after each record given to send.
func run(stop, abort context.Context, recs []record, workers int, send sender, done func(result)) []result {
	results := make([]result, len(recs))
	for i, r := range recs {
		results[i].rec = r
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if stop.Err() != nil {
					continue // handed over as stop came: not sent
				}
				results[i] = send(abort, recs[i])
				results[i].sent = !unsent(results[i].err)
				done(results[i])
			}
		}()
	}
dispatch:
	for i := range recs {
		if stop.Err() != nil {
			break
		}
		select {
		case next <- i:
		case <-stop.Done():
			break dispatch
		}
	}
	close(next)
	wg.Wait()
	return results
}

// unsent reports whether err says that nothing of the record was sent: the
// transport refused its first attempt while it waited its turn (the key
// paused for longer than the longest Retry-After honoured, a wait past the
// deadline, a full queue, the shared store away with FailClosed, a second
// Ctrl-C; found in review: such records were listed as failed). A retry so
// refused ends with the last response, or, after a network error, with the
// refusal: an attempt went before it, so that record failed.
func unsent(err error) bool {
	var w *throttle.WaitError
	return errors.As(err, &w) && w.Attempt == 1
}

// client is the HTTP side of the job: throttle's Transport, or with -naive
// a plain client that resends at once on 429; and what it counted.
type client struct {
	send       sender
	rt         *throttle.Transport // nil with -naive
	throttled  atomic.Int64        // 429s
	retries    atomic.Int64        // resends, with -naive
	alone      atomic.Int64        // times the shared store (-redis) stopped answering
	closeStore func()              // nil without -redis
	waits      waits               // time waited, by what was waited for
}

func newClient(o options, base http.RoundTripper, target *url.URL) *client {
	c := &client{}
	if o.naive {
		c.send = naiveWith(&http.Client{Transport: base, CheckRedirect: noRedirects}, o.method, target, o.apiKey, &c.throttled)
		return c
	}
	opts := []throttle.Option{throttle.WithPolicy(o.policy()), throttle.WithEvents(func(e throttle.Event) {
		switch {
		case e.Kind == throttle.EventThrottled:
			c.throttled.Add(1)
		case e.Kind == throttle.EventStore && e.Err != nil:
			c.alone.Add(1)
		case e.Kind == throttle.EventWaited:
			c.waits.add(e.Limit, e.Wait)
		}
	})}
	if o.redis != "" {
		share, closeRedis := sharedThrough(o.redis)
		opts, c.closeStore = append(opts, share), closeRedis
	}
	c.rt = throttle.New(base, opts...)
	c.send = uploadWith(&http.Client{Transport: c.rt, CheckRedirect: noRedirects}, o.method, target, o.apiKey)
	return c
}

// done counts a record's resends.
func (c *client) done(r result) { c.retries.Add(int64(r.retries)) }

// tally adds the client's counts to s, whose records are counted.
func (c *client) tally(s *summary) {
	sent := s.Uploaded + s.Failed
	if c.rt != nil {
		st := c.rt.Stats().Total
		s.Attempts, s.Throttled, s.Retries, s.WaitSecs = st.Attempts, st.Throttled, st.Retries, st.WaitTime.Seconds()
		s.StoreAlone = c.alone.Load()
		s.WaitByLimit = c.waits.seconds()
	} else {
		s.Throttled, s.Retries = c.throttled.Load(), c.retries.Load()
		s.Attempts = int64(sent) + s.Retries
	}
	if sent > 0 {
		s.PerRecord = float64(s.Attempts) / float64(sent)
	}
}

func (c *client) close() {
	if c.rt != nil {
		c.rt.Close()
	}
	if c.closeStore != nil {
		c.closeStore()
	}
}

// uploadWith returns a sender that uploads through client, the way a user of
// the library would: one request per record, the transport doing the
// pacing, the pausing and the retries.
func uploadWith(client *http.Client, method string, target *url.URL, apiKey string) sender {
	return func(ctx context.Context, rec record) result {
		res := result{rec: rec}
		req, err := rec.request(method, recordURL(target, rec.id), apiKey)
		if err != nil {
			res.err = err
			return res
		}
		resp, err := client.Do(req.WithContext(ctx))
		if err != nil {
			var ue *url.Error
			if errors.As(err, &ue) {
				// The request's URL, as the summary and the journal show
				// it: not the query of -target, which may hold the API's
				// key (found in review: printed and journaled in full).
				if u, perr := url.Parse(ue.URL); perr == nil {
					ue.URL = shownURL(u)
				}
			}
			res.err = err
			return res
		}
		res.status = resp.StatusCode
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		switch {
		case resp.StatusCode/100 == 3:
			// Not followed (noRedirects): say where to, as errors show URLs.
			to := "elsewhere"
			if loc, err := resp.Location(); err == nil {
				to = shownURL(loc)
			}
			res.err = fmt.Errorf("%s: redirected to %s, not followed: give -target the URL the API is at", resp.Status, to)
		case resp.StatusCode/100 != 2:
			res.err = fmt.Errorf("%s", resp.Status)
		}
		return res
	}
}

// noRedirects is the clients' CheckRedirect: a redirect is not followed.
// http.Client follows a 301 or 302 of a PUT or POST with a GET without the
// body, whose 2xx counted the record uploaded (and journaled it so) when it
// never was; and it sends X-API-Key along to any host a 307 names (found in
// review).
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// naiveWith returns a sender that does what many clients do: resend at once
// on 429, as often as it takes (up to maxNaive attempts). It shows the
// resend storm the library avoids.
func naiveWith(client *http.Client, method string, target *url.URL, apiKey string, throttled *atomic.Int64) sender {
	const maxNaive = 1000
	upload := uploadWith(client, method, target, apiKey)
	return func(ctx context.Context, rec record) result {
		var res result
		for attempt := 1; ; attempt++ {
			res = upload(ctx, rec)
			if res.status == http.StatusTooManyRequests {
				throttled.Add(1)
			}
			if res.status != http.StatusTooManyRequests || attempt == maxNaive || ctx.Err() != nil {
				res.retries = attempt - 1
				return res
			}
		}
	}
}

// shownURL is u as the summary, the journal and errors show it: its
// scheme, host and path, without user info, query or fragment, which may
// hold credentials (an API whose key goes in the query: -target
// "https://api.example.com/v1?api_key=...", -api-key "").
func shownURL(u *url.URL) string {
	c := *u
	c.User, c.RawQuery, c.ForceQuery, c.Fragment, c.RawFragment = nil, "", false, "", ""
	return c.String()
}

// recordURL is target/records/ID, the id escaped as one path segment: no
// character of an id ("/", "?", "#", "%", "..") can add a segment, a query
// or a fragment. target's own path is kept, and its query.
func recordURL(target *url.URL, id string) string {
	u := *target
	u.Path = strings.TrimSuffix(target.Path, "/") + "/records/" + id
	u.RawPath = strings.TrimSuffix(target.EscapedPath(), "/") + "/records/" + url.PathEscape(id)
	return u.String()
}
