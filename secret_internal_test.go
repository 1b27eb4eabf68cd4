package throttle

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
)

// A Basic-auth header, however malformed, never panics the check of a key,
// and a user or password long enough to be taken for a credential is found
// in a key that holds it (see basicHolds).
func FuzzBasicAuthKey(f *testing.F) {
	f.Add("sk_live_4eC39HqLyjWDarjtT1zdp7dc", "", "Basic")
	f.Add("acct", "s3cr3t-passw0rd", "basic")
	f.Add("a:b", "c", "Bearer")
	f.Fuzz(func(t *testing.T, user, pass, scheme string) {
		req, err := http.NewRequest(http.MethodGet, "http://h.test/", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", scheme+" "+user+pass) // raw, as a hostile header may be
		holdsCredential(req, "k/"+user)
		req.Header.Set("Authorization", scheme+" "+base64.StdEncoding.EncodeToString([]byte(user+":"+pass)))
		basic := strings.EqualFold(scheme, "Basic")
		for _, c := range [...]string{user, pass} {
			if basic && len(c) >= minSecret && !strings.Contains(user, ":") && !holdsCredential(req, "k/"+c) {
				t.Errorf("a key holding %q of Basic auth %q:%q is not taken for a credential", c, user, pass)
			}
		}
	})
}
