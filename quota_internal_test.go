package throttle

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// An answer that lists several IETF policies is read one reading per
// policy, for the Transport's mirror of each (toldpolicies.go).
func TestPolicyReadings(t *testing.T) {
	for _, tt := range []struct {
		name              string
		rateLimit, policy string
		want              []Quota
	}{
		{"one", `"burst";r=7;t=1`, `"burst";q=10;w=1`, nil},
		{"two", `"burst";r=7;t=1, "day";r=120;t=45`, `"burst";q=10;w=1, "day";q=300;w=60`, []Quota{
			{Limit: 10, Remaining: 7, Reset: time.Second, Window: time.Second, Policy: "burst", HasLimit: true, HasRemaining: true, HasReset: true},
			{Limit: 300, Remaining: 120, Reset: 45 * time.Second, Window: time.Minute, Policy: "day", HasLimit: true, HasRemaining: true, HasReset: true}}},
		{"no-policy-field", `"a";r=0, b;r=3;t=2`, ``, []Quota{
			{Policy: "a", HasRemaining: true},
			{Remaining: 3, Reset: 2 * time.Second, Policy: "b", HasRemaining: true, HasReset: true}}},
		{"first-of-each-name", `"a";r=1;t=1, "a";r=0;t=9, "b";r=2`, ``, []Quota{
			{Remaining: 1, Reset: time.Second, Policy: "a", HasRemaining: true, HasReset: true},
			{Remaining: 2, Policy: "b", HasRemaining: true}}},
		{"one-of-each-name", `"a";r=1, "a";r=0`, ``, nil},
		{"one-counts-requests", `"bytes";r=0;t=1, "req";r=5;t=1`, `"bytes";q=9;w=1;qu="content-bytes", "req";q=5;w=1`, nil},
		{"at-most-four", `a;r=1, b;r=2, c;r=3, d;r=4, e;r=0`, ``, []Quota{
			{Remaining: 1, Policy: "a", HasRemaining: true}, {Remaining: 2, Policy: "b", HasRemaining: true},
			{Remaining: 3, Policy: "c", HasRemaining: true}, {Remaining: 4, Policy: "d", HasRemaining: true}}},
		{"invalid", `"a";r=1, (b)`, ``, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{"Ratelimit": {tt.rateLimit}}
			if tt.policy != "" {
				h["Ratelimit-Policy"] = []string{tt.policy}
			}
			var rs policyReadings
			rs.read(h)
			assert.Equal(t, tt.want, append([]Quota(nil), rs.q[:rs.n]...))
		})
	}
}

// FuzzPolicyReadings holds the readings of each policy to ParseQuota's:
// none is below the lowest r it reports, and its policy is among them,
// when it is among the first maxPolicies listed.
func FuzzPolicyReadings(f *testing.F) {
	f.Add(`"burst";r=7;t=1, "day";r=120;t=45`, `"burst";q=10;w=1, "day";q=300;w=60`)
	f.Add(`"burst";r=10;t=5, "daily";r=0;t=3600`, `"burst";q=100;w=60, "daily";q=1000;w=86400`)
	f.Add("a;r=1, b;r=2, c;r=3, d;r=4, e;r=0\n\"f\";r=9", "")
	f.Add(`"a";r=1;t=1, "a";r=0;t=9`, `"a";q=1;w=1;qu="requests"`)
	f.Add(`a;r=1;t=1, a;r=0, b;r=5`, ``)
	f.Fuzz(func(t *testing.T, rl, policy string) {
		h := http.Header{}
		for line := range strings.SplitSeq(rl, "\n") {
			h.Add("Ratelimit", line)
		}
		for line := range strings.SplitSeq(policy, "\n") {
			h.Add("Ratelimit-Policy", line)
		}
		var rs policyReadings
		rs.read(h)
		if rs.n < 0 || rs.n > maxPolicies || rs.n == 1 {
			t.Fatalf("%d readings", rs.n)
		}
		q, ok := ParseQuota(h, time.Unix(1_700_000_000, 0))
		found := rs.n == 0
		for i, r := range rs.q[:rs.n] {
			if !r.HasRemaining || r.Remaining < 0 || r.Reset < 0 || r.Limit < 0 || r.Window < 0 {
				t.Fatalf("reading %d: %+v", i, r)
			}
			for _, o := range rs.q[:i] {
				if o.Policy == r.Policy {
					t.Fatalf("policy %q read twice", r.Policy)
				}
			}
			if !ok || !q.HasRemaining {
				t.Fatalf("reading %d: %+v, but ParseQuota read none: %+v", i, r, q)
			}
			if r.Remaining < q.Remaining {
				t.Fatalf("reading %d: %+v, below ParseQuota's lowest: %+v", i, r, q)
			}
			found = found || r.Policy == q.Policy
		}
		if !found && rs.n < maxPolicies {
			t.Fatalf("ParseQuota's %+v is none of %+v", q, rs.q[:rs.n])
		}
	})
}
