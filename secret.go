package throttle

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"net/url"
	"strings"
)

// Partition keys may be credentials: the obvious way to keep one bucket per
// API token is to key by the Authorization header. A key is shown in errors,
// events, Stats and log lines, so the transport never shows one that holds a
// credential of its request: such a key is shown as "redacted:" and a digest
// of it. KeyByHeader keys by a header's digest in the first place.

// KeyByHeader returns a key function for [WithKey] that partitions by the
// target host and a digest of the named header's value, never the value
// itself: "api.example.com authorization:" followed by 32 hexadecimal digits
// (the first half of the value's SHA-256). Requests without the header are
// keyed by their host alone. Use it to keep one bucket per API token:
//
//	throttle.WithKey(throttle.KeyByHeader("Authorization"))
//
// The digest names the token without revealing it when the token is long
// and random, as API tokens are; it does not hide a guessable value (a
// short password in Basic authorization) from a dictionary search. It costs
// a SHA-256 of the value per request.
func KeyByHeader(name string) func(*http.Request) string {
	label := " " + strings.ToLower(http.CanonicalHeaderKey(name)) + ":"
	return func(req *http.Request) string {
		v := req.Header.Values(name)
		if len(v) == 0 {
			return defaultKey(req)
		}
		h := sha256.New()
		for i, s := range v {
			if i > 0 {
				h.Write([]byte{0})
			}
			h.Write([]byte(s))
		}
		var sum [sha256.Size]byte
		return defaultKey(req) + label + hex.EncodeToString(h.Sum(sum[:0])[:16])
	}
}

// shownKey is how key, the partition key of req, is shown: itself, or
// "redacted:" and a digest of it when it holds a credential of req. It is
// called when a key's state is made, not per request.
func shownKey(req *http.Request, key string) string {
	if !holdsCredential(req, key) {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return "redacted:" + hex.EncodeToString(sum[:8])
}

// minSecret is the shortest value taken for a credential: shorter ones
// (a scheme such as "Bearer", a user name) are found in keys by chance.
const minSecret = 8

// holdsCredential reports whether key contains a credential of req: the
// value, or a word of the value, of a header or query parameter whose name
// says it is one (see secretName), or the URL's user info.
func holdsCredential(req *http.Request, key string) bool {
	if len(key) < minSecret {
		return false
	}
	plain := func(v string) bool {
		if len(v) >= minSecret && strings.Contains(key, v) {
			return true
		}
		for _, w := range strings.FieldsFunc(v, func(r rune) bool { return r == ' ' || r == ',' || r == ';' || r == '=' }) {
			if len(w) >= minSecret && strings.Contains(key, w) {
				return true
			}
		}
		return false
	}
	// A key made from the URL (its String, its query) holds a value as
	// the URL carries it, escaped: a base64 token's '/', '+' and '=', a
	// password's '@' (regression, found in review: such keys were shown
	// as they were).
	in := func(v string) bool {
		return plain(v) || plain(url.QueryEscape(v)) || plain(url.PathEscape(v))
	}
	for name, vs := range req.Header {
		if secretName(name) {
			for _, v := range vs {
				if in(v) || basicHolds(v, in) {
					return true
				}
			}
		}
	}
	if u := req.URL.User; u != nil {
		if p, ok := u.Password(); ok && in(p) || in(u.Username()) {
			return true
		}
		if name, p, ok := strings.Cut(u.String(), ":"); ok && plain(p) || plain(name) {
			return true // as the URL writes them
		}
	}
	for q := req.URL.RawQuery; q != ""; {
		var pair string
		pair, q, _ = strings.Cut(q, "&")
		raw, v, _ := strings.Cut(pair, "=")
		if name, err := url.QueryUnescape(raw); err == nil && secretName(name) || err != nil && secretName(raw) {
			if plain(v) { // as the URL carries it
				return true
			}
			if v, err := url.QueryUnescape(v); err == nil && in(v) {
				return true
			}
		}
	}
	return false
}

// basicHolds reports whether v, an Authorization or Proxy-Authorization
// value of the Basic scheme, holds a user or a password for which in is
// true: the header carries them in base64, where no key made from them is
// found (found in review 45: a key of the Basic-auth user, as an API that
// takes its secret key so, curl -u sk_live_...:, was shown as it was).
func basicHolds(v string, in func(string) bool) bool {
	scheme, enc, ok := strings.Cut(strings.TrimSpace(v), " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return false
	}
	dec, err := base64.StdEncoding.DecodeString(strings.TrimSpace(enc))
	if err != nil {
		return false
	}
	user, pass, _ := strings.Cut(string(dec), ":")
	return in(user) || in(pass)
}

// secretName reports whether a header or query parameter of this name
// carries a credential: Authorization, Proxy-Authorization, Cookie, and
// every name that speaks of a key, token, secret, session, password,
// signature or credential (X-Api-Key, X-Auth-Token, access_token, ...),
// in short too: an Azure SAS token's "sig", a password's "pwd" or "pass"
// (found in review: a key of such a URL was shown as it was); and those
// that carry one by custom: OpenWeatherMap's "appid", Azure Functions'
// "code" (and an OAuth authorization code), a "jwt", a "bearer". A name that
// only happens to hold one ("design", "compass") hides a key that holds its
// value: more is hidden, never less.
func secretName(name string) bool {
	name = strings.ToLower(name)
	for _, w := range [...]string{"auth", "cookie", "key", "token", "secret", "session", "pass", "pwd", "sig", "credential",
		"appid", "code", "jwt", "bearer"} {
		if strings.Contains(name, w) {
			return true
		}
	}
	return false
}
