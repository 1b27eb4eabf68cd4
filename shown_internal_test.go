package throttle

import (
	"net/url"
	"testing"
)

// shownURL's quick form says what url.URL.String says of a URL without user
// info, query or fragment.
func FuzzShownURL(f *testing.F) {
	for _, raw := range []string{"https://user:pw@API.example.com:8443/v1/a%2Fb/c d?x=1#f", "http://h", "http://h/",
		"https://h/päth", "http://[::1]:80/x", "mailto:x@y", "/relative?q", "http://h/a%2fb", "HTTP://h//x"} {
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := url.Parse(raw)
		if err != nil {
			return
		}
		v := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath, Opaque: u.Opaque}
		if got, want := shownURL(u), v.String(); got != want {
			t.Errorf("%q: %q, want %q", raw, got, want)
		}
	})
}
