package throttle_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlehttp/throttle"
)

// A base built on an http.Client (the case shownErr is written for) names
// the URL as http.Client does: its password replaced by "***", the user
// name kept. A user name that is the API's secret key (Stripe's, sent as
// curl -u sk_live_...: does, "https://sk_live_...:@api.stripe.com/...")
// shows neither in Event.Err nor in its log line (regression, found in
// review: it showed whole).
func TestEventsHideTheUserOfAnHTTPClientsURLError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const token = "sk_live_9f8e7d6c5b4a3210"
		inner := &http.Client{Transport: rtFunc(func(*http.Request) (*http.Response, error) {
			return nil, errors.New("connection reset by peer")
		})}
		var mu sync.Mutex
		var logs bytes.Buffer
		log := slog.New(slog.NewTextHandler(&logs, nil))
		var errs []string
		rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) { return inner.Do(r) }),
			throttle.WithRetry(throttle.Retry{MaxAttempts: 1}),
			throttle.WithEvents(func(e throttle.Event) {
				mu.Lock()
				defer mu.Unlock()
				log.Info("throttle", "event", e)
				if e.Err != nil {
					errs = append(errs, e.Err.Error())
				}
			}))
		defer rt.Close()
		for _, u := range []string{
			"https://" + token + ":@api.test/v1/charges",      // the key as the user, an empty password
			"https://" + token + ":x@api.test/v1/charges?a=1", // and with a password and a query
		} {
			req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, u, nil)
			require.NoError(t, err)
			_, err = rt.RoundTrip(req)
			require.Error(t, err)
		}
		require.NotEmpty(t, errs)
		for _, e := range errs {
			t.Log("Event.Err: ", e)
			assert.NotContains(t, e, token, "an Event's Err")
		}
		assert.NotContains(t, logs.String(), token, "the events' log lines")
		assert.True(t, strings.Contains(errs[0], "https://api.test/v1/charges"), "the URL as events show it")
	})
}

// A request whose path is set verbatim through URL.Opaque, as net/url
// documents for a path net/url would escape otherwise ("/v1/items%2F7":
// net/http sends Opaque as the request-target, to URL.Host), is shown by
// its events with its host, as Event.URL promises scheme, host and path,
// and otelthrottle reads server.address from it (regression, found in
// review: "https:/v1/items%2F7").
func TestEventsOfAnOpaquePathNameTheHost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var got []string
		var sentTo string
		rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
			sentTo = r.URL.Host + " " + r.URL.RequestURI()
			return reply(r, http.StatusOK), nil
		}), throttle.WithEvents(func(e throttle.Event) { got = append(got, e.URL) }))
		defer rt.Close()
		req := newReq(t, context.Background(), http.MethodGet, "https://api.test/")
		req.URL.Opaque = "/v1/items%2F7"
		resp, err := rt.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, "api.test /v1/items%2F7", sentTo)
		require.NotEmpty(t, got)
		assert.Equal(t, "https://api.test/v1/items%2F7", got[0])
	})
}

// A URL sent verbatim through URL.Opaque in the "//host/path" form net/url
// documents, here a pre-signed URL whose query is its credential (as S3's
// X-Amz-Signature), is shown by the events without its query or user
// info, as Event.URL promises ("without user info, query or fragment"):
// neither Event.URL nor Event.Err (a base built on http.Client names the
// URL in a *url.Error) holds the signature.
func TestEventsOfAnOpaqueAuthorityHoldNoCredential(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const sig = "X-Amz-Signature=5f1c0ffee"
		var urls, errs []string
		rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
			return nil, &url.Error{Op: "Put", URL: r.URL.String(), Err: errors.New("connection reset by peer")}
		}), throttle.WithEvents(func(e throttle.Event) {
			urls = append(urls, e.URL)
			if e.Err != nil {
				errs = append(errs, e.Err.Error())
			}
		}), throttle.WithRetry(throttle.Retry{MaxAttempts: 1}))
		defer rt.Close()
		req := newReq(t, context.Background(), http.MethodPut, "https://api.test/")
		req.URL.Opaque = "//ak:sk@api.test/bucket/a%2Fb?" + sig
		_, err := rt.RoundTrip(req)
		require.Error(t, err)
		require.NotEmpty(t, urls)
		require.NotEmpty(t, errs)
		for _, u := range urls {
			assert.Equal(t, "https://api.test/bucket/a%2Fb", u, "Event.URL")
		}
		for _, e := range errs {
			assert.NotContains(t, e, sig, "Event.Err")
			assert.NotContains(t, e, "ak:sk", "Event.Err")
		}
	})
}

// Event.URL is "without user info, query or fragment, which may hold
// credentials", whatever form the URL takes: an Opaque set by hand holds
// them verbatim in forms other than "//host/p" and "/p" with Host too.
// (The base may refuse such a URL, as http.Transport refuses one without
// Host: the events show it all the same, EventAnswered with its error.)
func TestAnOpaqueURLsQueryNeverShows(t *testing.T) {
	for _, u := range []url.URL{
		{Scheme: "https", Opaque: "/v1/items?sig=SECRET"}, // Host only in req.Host
		{Scheme: "https", Opaque: "/v1/items#SECRET"},
		{Scheme: "https", Host: "api.example", Opaque: "v1/items?sig=SECRET"},
	} {
		var shown []string
		tr := throttle.New(rtFunc(func(req *http.Request) (*http.Response, error) {
			return nil, &url.Error{Op: "Get", URL: req.URL.String(), Err: errors.New("no route")}
		}), throttle.WithRetry(throttle.Retry{MaxAttempts: 1}), throttle.WithEvents(func(e throttle.Event) {
			shown = append(shown, e.URL)
			if e.Err != nil {
				shown = append(shown, e.Err.Error())
			}
		}))
		req, err := http.NewRequest(http.MethodGet, "https://api.example/", nil)
		require.NoError(t, err)
		req.URL, req.Host = &u, "api.example"
		_, err = tr.RoundTrip(req)
		require.Error(t, err)
		require.NoError(t, tr.Close())
		require.NotEmpty(t, shown)
		for _, s := range shown {
			assert.NotContains(t, s, "SECRET", "URL %q: an event showed %q", u.String(), s)
		}
	}
}

// Event.Err is the base's error "without the user info, query or fragment
// of the request's URL" (see shownErr): of a URL url.Parse made, the query
// goes wherever the error names it ("?"+RawQuery is cut from the message).
// A base that names the request's target (URL.RequestURI, as an access log
// or an error of its own does: "GET /v1/items?sig=…: connection reset")
// shows none of a URL whose path was set verbatim either (Opaque, which
// holds the query itself). (Regression, found in review: it showed the
// signature, where the same error of the parsed form showed none.)
func TestAnOpaqueURLsQueryNeverShowsInEventErr(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const secret = "SECRET0123456789"
		for _, u := range []*url.URL{
			{Scheme: "https", Host: "api.example", Path: "/v1/items", RawQuery: "sig=" + secret}, // parsed: hidden
			{Scheme: "https", Host: "api.example", Opaque: "/v1/items?sig=" + secret},            // verbatim
			{Scheme: "https", Opaque: "/v1/items?sig=" + secret},                                 // verbatim, Host in req.Host
			{Scheme: "https", Host: "api.example", Opaque: "/v1/items#" + secret},
		} {
			var mu sync.Mutex
			var shown []string
			tr := throttle.New(rtFunc(func(req *http.Request) (*http.Response, error) {
				return nil, errors.New("GET " + req.URL.RequestURI() + ": connection reset by peer")
			}), throttle.WithRetry(throttle.Retry{MaxAttempts: 1}), throttle.WithEvents(func(e throttle.Event) {
				mu.Lock()
				defer mu.Unlock()
				shown = append(shown, e.URL)
				if e.Err != nil {
					shown = append(shown, e.Err.Error())
				}
			}))
			req, err := http.NewRequest(http.MethodGet, "https://api.example/", nil)
			require.NoError(t, err)
			req.URL, req.Host = u, "api.example"
			_, err = tr.RoundTrip(req)
			require.Error(t, err)
			require.NoError(t, tr.Close())
			mu.Lock()
			require.NotEmpty(t, shown)
			for _, s := range shown {
				assert.NotContains(t, s, secret, "URL %#v: an event showed %q", u.String(), s)
			}
			mu.Unlock()
		}
	})
}
