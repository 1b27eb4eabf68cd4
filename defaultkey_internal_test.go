package throttle

import (
	"net/http"
	"net/url"
	"testing"
)

// defaultKey's one pass keeps what the key always was: the host
// lower-cased, the port dropped only when it is the scheme's default, an
// IPv6 literal kept whole.
func TestDefaultKey(t *testing.T) {
	for _, c := range []struct{ url, host, want string }{
		{"https://api.example.com/x", "", "api.example.com"},
		{"https://API.Example.COM:443/x", "", "api.example.com"},
		{"http://api.example.com:80/x", "", "api.example.com"},
		{"https://api.example.com:80/x", "", "api.example.com:80"},
		{"http://api.example.com:8080/x", "", "api.example.com:8080"},
		{"http://h:/x", "", "h"},
		{"http://[::1]/x", "", "[::1]"},
		{"http://[::1]:80/x", "", "[::1]"},
		{"http://[FE80::1]:8080/x", "", "[fe80::1]:8080"},
		{"/relative", "Example.com:443", "example.com:443"}, // no scheme: no default port
		{"/relative", "Example.com", "example.com"},
	} {
		u, err := url.Parse(c.url)
		if err != nil {
			t.Fatal(err)
		}
		if got := defaultKey(&http.Request{URL: u, Host: c.host}); got != c.want {
			t.Errorf("defaultKey(%q, Host %q) = %q, want %q", c.url, c.host, got, c.want)
		}
	}
}

// FuzzDefaultKey holds defaultKey's shortcut for the usual host to what
// hostKey, the general path, returns: the same key for any URL, whether
// url.Parse made it or a caller built it by hand.
func FuzzDefaultKey(f *testing.F) {
	for _, c := range []struct{ scheme, urlHost, host string }{
		{"https", "api.example.com", ""},
		{"https", "API.example.com:443", ""},
		{"http", "api.example.com:80", ""},
		{"http", "h:", ""},
		{"http", "[::1]:80", ""},
		{"http", "[fe80::1]", ""},
		{"", "", "Example.com:443"},
		{"https", "a-b.c0", "ignored"},
		{"https", "ex_ample.com", ""},
		{"https", "", ""},
	} {
		f.Add(c.scheme, c.urlHost, c.host)
	}
	f.Fuzz(func(t *testing.T, scheme, urlHost, host string) {
		req := &http.Request{URL: &url.URL{Scheme: scheme, Host: urlHost}, Host: host}
		if got, want := defaultKey(req), hostKey(req); got != want {
			t.Errorf("defaultKey(scheme %q, URL.Host %q, Host %q) = %q, hostKey says %q", scheme, urlHost, host, got, want)
		}
		raw := scheme + "://" + urlHost + "/x"
		u, err := url.Parse(raw)
		if err != nil {
			return
		}
		req = &http.Request{URL: u, Host: host}
		if got, want := defaultKey(req), hostKey(req); got != want {
			t.Errorf("defaultKey(%q, Host %q) = %q, hostKey says %q", raw, host, got, want)
		}
	})
}

// ownKey, eight bytes at a time, finds a byte from ':' to 'Z' wherever it
// is, whatever the bytes around it (none borrows from or carries into
// another), and no other byte.
func TestOwnKeyFindsEveryByteFromColonToZ(t *testing.T) {
	for n := 1; n <= 17; n++ {
		for pos := 0; pos < n; pos++ {
			for _, fill := range []byte{'a', 0x00, 0x7f, 0xff, ':' - 1, 'Z' + 1} {
				for b := 0; b < 256; b++ {
					host := make([]byte, n)
					for i := range host {
						host[i] = fill
					}
					host[pos] = byte(b)
					want := (fill < ':' || fill > 'Z') && (b < ':' || b > 'Z')
					if got := ownKey(string(host)); got != want {
						t.Fatalf("ownKey(%q) = %v, want %v", host, got, want)
					}
				}
			}
		}
	}
	if ownKey("") {
		t.Error(`ownKey("") = true: an empty URL.Host is not its own key`)
	}
}
