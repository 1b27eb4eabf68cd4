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
		if got, want := shownURL(u, ""), v.String(); got != want {
			t.Errorf("%q: %q, want %q", raw, got, want)
		}
	})
}

// shownURL takes the last URL shown only if it says the same as its own
// would: given any string as last, it says what it says without one.
func FuzzShownURLOfTheLast(f *testing.F) {
	for _, pair := range [][2]string{
		{"https://API.example.com/v1/items?page=2", "https://API.example.com/v1/items?page=3"},
		{"https://api.example.com/v1/items", "https://api.example.com/v1/items/2"},
		{"http://h", "http://h/"}, {"http://h/a%2fb", "http://h/a/b"}, {"http://h/a b", "http://h/a%20b"},
		{"https://h:443/x", "https://h/x"}, {"http://[::1]:80/x", "http://[::1]:8/0/x"}, {"mailto:x@y", "mailto:x@y"},
		{"http://a.b/c", "http://a/.b/c"}, {"HTTP://h//x", "http://h//x"}, {"/relative", "/relative"},
	} {
		f.Add(pair[0], pair[1])
	}
	f.Fuzz(func(t *testing.T, raw, other string) {
		u, err := url.Parse(raw)
		if err != nil {
			return
		}
		own := shownURL(u, "")
		lasts := []string{other, own, "x" + own, own + "x"}
		if v, err := url.Parse(other); err == nil {
			lasts = append(lasts, shownURL(v, ""))
		}
		for _, last := range lasts {
			if got := shownURL(u, last); got != own {
				t.Errorf("%q, after %q: %q, want %q", raw, last, got, own)
			}
		}
	})
}
