package main

import (
	"bytes"
	"context"
	"io"
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/hashicorp/go-retryablehttp"
	"github.com/throttlehttp/throttle"
	"golang.org/x/time/rate"
)

// apiKey is the API key every request carries; the server keeps its quota per key.
const apiKey = "bench"

// maxResends bounds the attempts of one record for the client that resends at once.
const maxResends = 1000

// A client is one row's client, built for one run.
type client struct {
	// send sends one record's PUT and returns the final status code.
	send func(ctx context.Context, url string, body []byte) (int, error)
	// pauses is how many times a throttle.Transport paused the key; nil for peers.
	pauses func() int64
	close  func()
}

// A row is one client under test. make builds it over base (every attempt of
// every client goes through base, then the shared *http.Transport), for the
// scenario's quota.
type row struct {
	id   int
	name string
	make func(base http.RoundTripper, q quota) client
}

// rows are the clients of the benchmark, in table order.
func rows() []row {
	return []row{
		{id: 1, name: "throttle, at the quota", make: throttleRow(1)},
		{id: 2, name: "throttle, 25% above the quota", make: throttleRow(1.25)},
		{id: 3, name: "throttle, no pace", make: throttleRow(0)},
		{id: 4, name: "http.Client, resend 429 at once", make: resendRow},
		{id: 5, name: "go-retryablehttp defaults", make: retryableRow(false)},
		{id: 6, name: "go-retryablehttp + x/time/rate", make: retryableRow(true)},
		// Row 3's client, named for the untold scenarios, where the server's
		// quota headers pace it.
		{id: 7, name: "throttle, no Policy", make: throttleRow(0)},
		// A Policy ten times the quota: a quota guessed far too high,
		// or cut since, with no headers to correct it. Run only when
		// asked (-rows 8).
		{id: 8, name: "throttle, 10x the quota", make: throttleRow(10)},
		// Row 6's client told the same ten times the quota: row 8's peer.
		{id: 9, name: "go-retryablehttp + x/time/rate, 10x", make: scaled(retryableRow(true), 10)},
	}
}

// newTransport is the base transport of every client: the same settings for all,
// with an idle connection kept for each worker.
func newTransport() *http.Transport {
	return &http.Transport{
		MaxIdleConns:        64,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
	}
}

// newPut is the record's request: a PUT of a JSON body that http.NewRequest makes
// replayable (GetBody), with the API key.
func newPut(ctx context.Context, url string, body []byte) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-API-Key", apiKey)
	req.Header.Set("Content-Type", "application/json")
	return req, nil
}

// finish reads a response to its end, so its connection is reused, and closes it.
func finish(resp *http.Response) int {
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// send does one request with c.
func send(c *http.Client, ctx context.Context, url string, body []byte) (int, error) {
	req, err := newPut(ctx, url, body)
	if err != nil {
		return 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	return finish(resp), nil
}

// throttleRow is a throttle.Transport paced at scale times the quota; scale 0
// paces nothing (throttle.New(base) alone: the pause on 429 and the retries).
func throttleRow(scale float64) func(http.RoundTripper, quota) client {
	return func(base http.RoundTripper, q quota) client {
		var t *throttle.Transport
		if scale == 0 {
			t = throttle.New(base)
		} else {
			t = throttle.New(base, throttle.WithPolicy(q.policy(scale)))
		}
		c := &http.Client{Transport: t}
		return client{
			send: func(ctx context.Context, url string, body []byte) (int, error) {
				return send(c, ctx, url, body)
			},
			pauses: func() int64 { return t.Stats().Total.Pauses },
			close:  func() { t.Close() },
		}
	}
}

// resendRow is a plain http.Client that sends again at once on a 429, up to
// maxResends attempts.
func resendRow(base http.RoundTripper, _ quota) client {
	c := &http.Client{Transport: base}
	return client{send: func(ctx context.Context, url string, body []byte) (int, error) {
		for range maxResends - 1 {
			status, err := send(c, ctx, url, body)
			if err != nil || status != http.StatusTooManyRequests {
				return status, err
			}
		}
		return send(c, ctx, url, body)
	}}
}

// retryableRow is go-retryablehttp with its defaults (logger silenced), its
// HTTPClient on base; with limit, every attempt, retries included, first waits on
// an x/time/rate limiter set to the quota, one per host, as each host has the
// quota, and changed when the quota changes.
func retryableRow(limit bool) func(http.RoundTripper, quota) client {
	return func(base http.RoundTripper, q quota) client {
		c := retryablehttp.NewClient()
		c.Logger = nil
		rt := base
		if limit {
			rt = &limited{base: base, quota: q, lims: map[string]*rate.Limiter{}}
		}
		c.HTTPClient = &http.Client{Transport: rt}
		return client{send: func(ctx context.Context, url string, body []byte) (int, error) {
			req, err := newPut(ctx, url, body)
			if err != nil {
				return 0, err
			}
			rreq, err := retryablehttp.FromRequest(req)
			if err != nil {
				return 0, err
			}
			resp, err := c.Do(rreq)
			if err != nil {
				return 0, err
			}
			return finish(resp), nil
		}}
	}
}

// scaled is mk told scale times the quota: a bucket's rate, a window's
// or a counter's N.
func scaled(mk func(http.RoundTripper, quota) client, scale float64) func(http.RoundTripper, quota) client {
	return func(base http.RoundTripper, q quota) client {
		q.rate *= scale
		q.n = int(math.Round(float64(q.n) * scale))
		return mk(base, q)
	}
}

// limited waits on its host's limiter before every request it passes to base.
// Told a quota whose rate halves, it halves its limiters' rate at the same
// moment (halveIfDue).
type limited struct {
	base http.RoundTripper

	mu    sync.Mutex
	quota quota                    // as told; halved once it has halved
	lims  map[string]*rate.Limiter // by req.URL.Host, made at its first request
	start time.Time                // the first request's, from which the quota's change is counted
}

// limiter returns host's limiter at now.
func (l *limited) limiter(host string, now time.Time) *rate.Limiter {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.halveIfDue(now)
	lim := l.lims[host]
	if lim == nil {
		lim = l.quota.limiter()
		l.lims[host] = lim
	}
	return lim
}

func (l *limited) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := l.limiter(req.URL.Host, time.Now()).Wait(req.Context()); err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	return l.base.RoundTrip(req)
}
