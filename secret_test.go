package throttle_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlehttp/throttle"
)

const secret = "s3cr3t-T0ken-abcdef0123456789"

// Nothing the transport logs, returns or exports carries a credential it
// was handed, whatever the key function does with it (issue 8, point 5:
// keying by Authorization put the token in every error and log line).
func TestKeysNeverShowACredential(t *testing.T) {
	tests := []struct {
		name  string
		url   string
		setup func(*http.Request)
		key   func(*http.Request) string
		shown string // the prefix of the key as shown
	}{
		{"authorization-whole", "http://h.test/", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+secret) },
			func(r *http.Request) string { return r.Header.Get("Authorization") }, "redacted:"},
		{"authorization-token-only", "http://h.test/", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+secret) },
			func(r *http.Request) string {
				return r.Host + "/" + strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
			}, "redacted:"},
		{"api-key-header", "http://h.test/", func(r *http.Request) { r.Header.Set("X-Api-Key", secret) },
			func(r *http.Request) string { return "k=" + r.Header.Get("X-Api-Key") }, "redacted:"},
		{"cookie", "http://h.test/", func(r *http.Request) { r.Header.Set("Cookie", "session="+secret+"; theme=dark") },
			func(r *http.Request) string { c, _ := r.Cookie("session"); return c.Value }, "redacted:"},
		{"query", "http://h.test/?access_token=" + secret, nil,
			func(r *http.Request) string { return r.URL.String() }, "redacted:"},
		{"user-info", "http://user:" + secret + "@h.test/", nil,
			func(r *http.Request) string { return r.URL.User.String() }, "redacted:"},
		// Basic auth: the header carries user:password in base64, and a
		// key of the user (Stripe's secret key is sent so, curl -u
		// sk_live_...:) or the password was shown as it was (found in
		// review 45).
		{"basic-auth-user", "http://h.test/", func(r *http.Request) { r.SetBasicAuth(secret, "") },
			func(r *http.Request) string { u, _, _ := r.BasicAuth(); return u }, "redacted:"},
		{"basic-auth-password", "http://h.test/", func(r *http.Request) { r.SetBasicAuth("acct", secret) },
			func(r *http.Request) string { _, p, _ := r.BasicAuth(); return "acct:" + p }, "redacted:"},
		{"proxy-basic-auth", "http://h.test/", func(r *http.Request) {
			r.Header.Set("Proxy-Authorization", "basic "+base64.StdEncoding.EncodeToString([]byte("proxy:"+secret)))
		}, func(r *http.Request) string { return "via " + secret }, "redacted:"},
		{"key-by-header", "http://h.test/", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+secret) },
			throttle.KeyByHeader("Authorization"), "h.test authorization:"},
		// As the URL carries them: a base64 token's '/', '+' and '=',
		// and a password's '@' and '/', escaped (they were shown so:
		// found in review).
		{"query-escaped", "http://h.test/v1/items?access_token=" + url.QueryEscape(secret+"/+q=="), nil,
			func(r *http.Request) string { return r.URL.String() }, "redacted:"},
		{"user-info-escaped", "http://bob:" + url.QueryEscape(secret+"@/p") + "@h.test/", nil,
			func(r *http.Request) string { return r.URL.String() }, "redacted:"},
		{"user-info-path-escaped", "http://bob:" + url.PathEscape(secret+"@/p") + "@h.test/", nil,
			func(r *http.Request) string { return r.URL.String() }, "redacted:"},
	}
	for _, tt := range tests {
		for _, option := range []bool{false, true} {
			name := tt.name
			if option {
				name += "/PartitionKey"
				if tt.shown != "redacted:" {
					continue // KeyByHeader's digest is its own
				}
			}
			t.Run(name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					keysCredentialsHidden(t, tt.url, tt.setup, tt.key, option, tt.shown)
				})
			})
		}
	}
}

// keysCredentialsHidden sends two requests to u (made by setup) through a
// transport that always refuses, keyed by key: by WithKey, or, with
// option, by the PartitionKey option of each request (a transport without
// WithKey redacted nothing of it: found in review). The key is shown as
// shown (a prefix), and no log line, error or Stats shows the secret.
func keysCredentialsHidden(t *testing.T, u string, setup func(*http.Request), key func(*http.Request) string, option bool, shown string) {
	var logs bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(&logs, nil))
	opts := []throttle.Option{throttle.WithRetry(throttle.Retry{MaxAttempts: 2}),
		throttle.WithEvents(func(e throttle.Event) {
			mu.Lock()
			defer mu.Unlock()
			log.Info("throttle", "event", e)
		})}
	if !option {
		opts = append(opts, throttle.WithKey(key))
	}
	rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
		return reply(r, http.StatusTooManyRequests, "Retry-After", "60"), nil
	}), opts...)
	defer rt.Close()
	send := func(ctx context.Context) error {
		req := newReq(t, ctx, http.MethodGet, u)
		if setup != nil {
			setup(req)
		}
		if option {
			req = req.WithContext(throttle.With(ctx, throttle.PartitionKey(key(req))))
		}
		resp, err := rt.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	require.NoError(t, send(context.Background())) // throttled, retried, then the 429
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := send(ctx)
	require.ErrorIs(t, err, throttle.ErrWouldExceedDeadline)

	st := rt.Stats()
	require.Len(t, st.Keys, 1)
	for k := range st.Keys {
		assert.True(t, strings.HasPrefix(k, shown), "shown as %q", k)
	}
	for what, text := range map[string]string{"logs": logs.String(), "error": err.Error(), "stats": fmt.Sprint(st)} {
		assert.NotContains(t, text, secret, what)
		assert.NotContains(t, text, secret[:12], what)
	}
	assert.NotZero(t, logs.Len(), "events were logged")
}

// A key without a credential in it is shown as it is, and KeyByHeader
// keeps tokens apart and requests without the header by host.
func TestKeysShownAsTheyAre(t *testing.T) {
	rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) { return reply(r, http.StatusOK), nil }),
		throttle.WithKey(func(r *http.Request) string { return r.URL.Path }))
	defer rt.Close()
	req := newReq(t, context.Background(), http.MethodGet, "http://h.test/v1/items")
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := rt.RoundTrip(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Contains(t, rt.Stats().Keys, "/v1/items")

	key := throttle.KeyByHeader("x-api-key")
	with := func(v ...string) string {
		r := newReq(t, context.Background(), http.MethodGet, "https://API.example.com:443/x")
		for _, s := range v {
			r.Header.Add("X-Api-Key", s)
		}
		return key(r)
	}
	assert.Equal(t, "api.example.com", with())
	assert.Regexp(t, `^api\.example\.com x-api-key:[0-9a-f]{32}$`, with("a"))
	assert.Equal(t, with("a"), with("a"), "the same token, the same key")
	assert.NotEqual(t, with("a"), with("b"))
	assert.NotEqual(t, with("ab"), with("a", "b"), "values are kept apart")
}

// A key made of the request's URL, query and all, holds a credential when
// the query carries one under a short name: an Azure SAS token's "sig" (its
// HMAC signature, which grants access until the token expires), a
// password as "pwd" or "pass", OpenWeatherMap's "appid", Azure Functions'
// "code". Regression, found in review: such a key was shown as it is in
// errors and Stats.
func TestKeysHideCredentialsOfShortQueryNames(t *testing.T) {
	const cred = "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MA"
	for _, u := range []string{
		"https://acct.blob.core.windows.net/c/b.txt?sv=2022-11-02&se=2026-01-01&sr=b&sp=r&sig=" + cred,
		"https://h.test/api?user=bob&pwd=" + cred,
		"https://h.test/api?user=bob&pass=" + cred,
		"https://api.openweathermap.org/data/2.5/weather?q=Oslo&appid=" + cred,
		"https://fn.azurewebsites.net/api/hook?name=x&code=" + cred,
	} {
		t.Run(u[strings.LastIndexByte(u, '&')+1:][:4], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
					return reply(r, http.StatusTooManyRequests, "Retry-After", "60"), nil
				}), throttle.WithRetry(throttle.Retry{MaxAttempts: 1}),
					throttle.WithKey(func(r *http.Request) string { return r.URL.String() }))
				defer rt.Close()
				require.NoError(t, do(t, rt, u)) // the 429: the key pauses a minute
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				err := doCtx(t, ctx, rt, u)
				require.ErrorIs(t, err, throttle.ErrWouldExceedDeadline)
				assert.NotContains(t, err.Error(), cred, "the error")
				assert.NotContains(t, fmt.Sprint(rt.Stats().Keys), cred, "Stats")
			})
		})
	}
}
