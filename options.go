package throttle

import (
	"fmt"
	"net/http"
	"strings"
)

// An Option configures a [Transport] in [New].
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	def      *slot            // WithPolicy's; nil: unpaced
	exact    map[string]*slot // WithHostPolicy hostnames (lower-cased)
	wildcard map[string]*slot // WithHostPolicy "*.domain", keyed by "domain"
	ports    bool             // some exact pattern names a port
	hosts    bool             // some WithHostPolicy (New fixes the patterns)
	key      func(*http.Request) string
	retry    Retry
	events   func(Event)
	store    Store
	cost     func(*http.Response) (int, bool) // WithCost's

	given    map[string]bool // options applied, to find one given twice
	problems []string        // what is wrong, for New to panic with
}

// WithPolicy sets the pacing of every key whose host has no WithHostPolicy.
// Without it, such requests are unpaced (they still get the pause on 429 and
// the retries). New panics if p does not [Policy.Validate].
func WithPolicy(p Policy) Option {
	return optionFunc(func(c *config) {
		c.once("WithPolicy")
		if bad := p.problems("WithPolicy"); len(bad) > 0 {
			c.problems = append(c.problems, bad...)
			return
		}
		c.def = newSlot(compile(p))
	})
}

// WithHostPolicy sets the pacing of requests to one host. The pattern is a
// hostname, matched exactly and case-insensitively, on any port
// ("api.example.com"; an IPv6 address with or without its brackets, "::1"
// or "[::1]"); a hostname with a port, matching that port only
// ("localhost:8080", "[::1]:8080"); or "*.example.com", which matches every subdomain of
// example.com but not example.com itself. An exact pattern wins over a
// wildcard, and a longer wildcard over a shorter one. New panics on an empty
// or malformed pattern, on a pattern given twice (case-insensitively), or on
// a Policy that does not validate.
func WithHostPolicy(pattern string, p Policy) Option {
	return optionFunc(func(c *config) {
		if bad := validPattern(pattern); bad != "" {
			c.problems = append(c.problems, bad)
			return
		}
		where := fmt.Sprintf("WithHostPolicy(%q)", pattern)
		pattern := hostPattern(pattern)
		c.once(fmt.Sprintf("WithHostPolicy(%q)", pattern))
		if bad := p.problems(where); len(bad) > 0 {
			c.problems = append(c.problems, bad...)
			return
		}
		if dom, ok := strings.CutPrefix(pattern, "*."); ok {
			c.wildcard[dom] = newSlot(compile(p))
		} else {
			c.exact[pattern] = newSlot(compile(p))
			c.ports = c.ports || strings.Contains(pattern, ":")
		}
	})
}

// hostPattern is a WithHostPolicy pattern as it is looked up: lower-cased,
// and an IPv6 address without a port without its brackets, as a URL's
// Hostname gives it ("[::1]" matches "http://[::1]:8080/", as "::1" does;
// found in review: it matched only URLs without a port).
func hostPattern(pattern string) string {
	pattern = strings.ToLower(pattern)
	if len(pattern) > 2 && pattern[0] == '[' && pattern[len(pattern)-1] == ']' {
		return pattern[1 : len(pattern)-1]
	}
	return pattern
}

// WithKey sets the partition key: requests with the same key (under the same
// Policy) share one bucket or queue, windows and pause. The function must be
// cheap and must not modify the request. nil, the default: the target host,
// lower-cased, with the port kept only when it is not the scheme's default
// ("api.example.com", "localhost:8080"). Each key in use costs some hundreds
// of bytes while it matters (an hour after its last request, under an
// hourly window): see Memory in the package documentation.
//
// A host whose endpoints have quotas of their own (GitHub's search and
// core, named by X-RateLimit-Resource; per-endpoint limits) needs them
// keyed apart, by host and path: under one key the quota spent on one
// holds the others, as the transport cannot tell which quota a request
// counts against before its answer says.
//
// Keys are shown: in WaitError.Key, Event.Key and Stats().Keys, and so in
// every log line and error message. To partition by API token, use
// [KeyByHeader], which keys by a digest of the header, never its value. As
// a safeguard, a key that holds a credential of its request anyway (the
// value of an Authorization, Cookie, X-Api-Key or similar header, or of a
// query parameter named like a key or token, or the URL's user info) is
// shown as "redacted:" and a digest of the key.
func WithKey(key func(*http.Request) string) Option {
	return optionFunc(func(c *config) {
		c.once("WithKey")
		c.key = key
	})
}

// WithRetry sets how requests are retried; see [Retry] for the defaults, which
// apply without this option. New panics if r does not [Retry.Validate].
func WithRetry(r Retry) Option {
	return optionFunc(func(c *config) {
		c.once("WithRetry")
		c.retry = r
	})
}

// WithEvents calls fn for every event that matters: an answer, a throttled
// answer, a pause, a wait, a refusal, a retry scheduled, a request given up
// (see [EventKind]). fn is called synchronously,
// from the goroutine of the request concerned, and must be quick and safe for
// concurrent use. nil, the default: no events. To log them:
//
//	throttle.WithEvents(func(e throttle.Event) { slog.Info("throttle", "event", e) })
func WithEvents(fn func(Event)) Option {
	return optionFunc(func(c *config) {
		c.once("WithEvents")
		c.events = fn
	})
}

// policyFor returns the policy of req, a request to host (lower-cased
// "name[:port]", the port left out when it is the scheme's default: see
// defaultKey).
func (c *config) policyFor(req *http.Request, host string) *policy {
	if !c.hosts {
		return c.def.cur.Load() // no WithHostPolicy
	}
	return c.hostPolicy(req, host)
}

// hostPolicy is policyFor with host patterns. (Apart, and with hosts set
// by New, policyFor is inlined: the usual Transport has none.)
func (c *config) hostPolicy(req *http.Request, host string) *policy {
	scheme, name := req.URL.Scheme, hostName(req, host)
	if s, ok := c.exact[host]; ok {
		return s.cur.Load()
	}
	if host == name && c.ports {
		// A pattern may spell out the scheme's default port.
		port := "443"
		if scheme == "http" {
			port = "80"
		}
		if s, ok := c.exact[name+":"+port]; ok {
			return s.cur.Load()
		}
	}
	if host != name {
		if s, ok := c.exact[name]; ok {
			return s.cur.Load()
		}
	}
	if len(c.wildcard) > 0 {
		for i := 0; i < len(name); i++ {
			if name[i] == '.' {
				if s, ok := c.wildcard[name[i+1:]]; ok {
					return s.cur.Load()
				}
			}
		}
	}
	return c.def.cur.Load()
}
