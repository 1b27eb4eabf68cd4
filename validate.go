package throttle

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"golang.org/x/time/rate"
)

// Every check of the configuration is here: a Policy, a Retry, a host
// pattern, an option given twice or nil. New runs them all and panics with
// one error that lists every problem; Policy.Validate and Retry.Validate run
// their part, for a configuration read from a file.

// ErrInvalidConfig is matched, with [errors.Is], by the error New panics
// with and by the errors of [Policy.Validate] and [Retry.Validate].
var ErrInvalidConfig = errors.New("throttle: invalid configuration")

// configError lists every problem of a configuration.
type configError struct{ problems []string }

func (e *configError) Error() string {
	return ErrInvalidConfig.Error() + ": " + strings.Join(e.problems, "; ")
}

func (e *configError) Is(target error) bool { return target == ErrInvalidConfig }

// asError returns nil for no problems, else a configError.
func asError(problems []string) error {
	if len(problems) == 0 {
		return nil
	}
	return &configError{problems: problems}
}

// maxRate is the fastest finite pace: one request a nanosecond, the
// resolution of timers. Faster is unpaced (rate.Inf).
const maxRate = 1e9

// Validate reports every problem of p, or nil; the error matches
// [ErrInvalidConfig]. [New] panics on a Policy that does not validate, as
// net/http panics on a malformed pattern: a mistaken configuration must
// never become a limiter that silently admits everything or nothing. Call
// Validate first for a Policy read from a configuration file.
func (p Policy) Validate() error { return asError(p.problems("Policy")) }

func (p Policy) problems(where string) []string {
	var out []string
	bad := func(format string, args ...any) {
		out = append(out, where+": "+fmt.Sprintf(format, args...))
	}
	r := float64(p.Rate)
	switch {
	case math.IsNaN(r) || r < 0:
		bad("Rate %v: must be >= 0 (0 or rate.Inf: unpaced)", p.Rate)
	case r > maxRate && p.Rate < rate.Inf:
		bad("Rate %v: more than one request a nanosecond cannot be paced (rate.Inf: unpaced)", p.Rate)
	case p.paced() && p.Queue == 0 && p.Burst <= 0:
		bad("Burst %d with Rate %v: a token bucket needs Burst >= 1", p.Burst, p.Rate)
	case !p.paced() && p.Queue > 0:
		bad("Queue %d without a finite Rate: a leaky bucket needs a Rate to release at", p.Queue)
	case !p.paced() && p.Burst > 0:
		bad("Burst %d without a finite Rate: paces nothing (set a Rate, or leave Burst 0)", p.Burst)
	}
	if p.Burst < 0 {
		bad("Burst %d: must be >= 0", p.Burst)
	}
	if p.Queue < 0 {
		bad("Queue %d: must be >= 0", p.Queue)
	}
	if p.MaxInFlight < 0 {
		bad("MaxInFlight %d: must be >= 0", p.MaxInFlight)
	}
	for i, w := range p.Windows {
		if w.N <= 0 || w.Per <= 0 || w.Per > maxPer {
			bad("Windows[%d] {N: %d, Per: %v}: N must be > 0, Per in (0, %v]", i, w.N, w.Per, maxPer)
		}
	}
	return out
}

// Validate reports every problem of r, or nil; the error matches
// [ErrInvalidConfig]. [New] panics on a Retry that does not validate. Zero
// fields take their defaults, and are checked with them (an InitialDelay
// longer than the default MaxDelay is a problem).
func (r Retry) Validate() error { return asError(r.problems("Retry")) }

func (r Retry) problems(where string) []string {
	var out []string
	bad := func(format string, args ...any) {
		out = append(out, where+": "+fmt.Sprintf(format, args...))
	}
	if r.MaxAttempts < 0 {
		bad("MaxAttempts %d: must be >= 0 (0: 8; 1: no retries)", r.MaxAttempts)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"MaxElapsed", r.MaxElapsed}, {"InitialDelay", r.InitialDelay}, {"MaxDelay", r.MaxDelay}, {"MaxRetryAfter", r.MaxRetryAfter}} {
		if d.v < 0 {
			bad("%s %v: must be >= 0 (0: the default)", d.name, d.v)
		}
	}
	if d := r.withDefaults(); r.InitialDelay >= 0 && r.MaxDelay >= 0 && d.InitialDelay > d.MaxDelay {
		bad("InitialDelay %v is longer than MaxDelay %v", d.InitialDelay, d.MaxDelay)
	}
	if math.IsNaN(r.Budget) || math.IsInf(r.Budget, 0) || r.Budget > 1 {
		bad("Budget %v: a share of first attempts, at most 1 (0: 0.2; negative: no budget)", r.Budget)
	}
	return out
}

// validPattern reports what is wrong with a WithHostPolicy pattern: a
// hostname ("api.example.com", optionally with ":port") or "*.example.com".
func validPattern(pattern string) string {
	rest, wild := strings.CutPrefix(pattern, "*.")
	switch {
	case pattern == "":
		return "WithHostPolicy: empty host pattern"
	case strings.ContainsAny(rest, "*/ \t") || rest == "" || strings.HasPrefix(rest, ".") || strings.HasSuffix(rest, "."):
		return fmt.Sprintf("WithHostPolicy(%q): want a hostname or *.domain", pattern)
	case wild && strings.Contains(rest, ":"):
		return fmt.Sprintf("WithHostPolicy(%q): a wildcard pattern takes no port", pattern)
	case strings.Contains(rest, ".."):
		return fmt.Sprintf("WithHostPolicy(%q): want a hostname or *.domain (an empty label)", pattern)
	}
	// Found in review: "[::1" and "::1]" were taken, and matched nothing.
	host, port := rest, ""
	switch {
	case strings.HasPrefix(rest, "["):
		end := strings.Index(rest, "]")
		if end < 0 {
			return fmt.Sprintf("WithHostPolicy(%q): an IPv6 address's '[' without its ']'", pattern)
		}
		host, port = rest[1:end], rest[end+1:]
		if a, err := netip.ParseAddr(host); err != nil || !a.Is6() {
			return fmt.Sprintf("WithHostPolicy(%q): want an IPv6 address within the brackets", pattern)
		}
		if port != "" && !strings.HasPrefix(port, ":") {
			return fmt.Sprintf("WithHostPolicy(%q): want a ':port' after the brackets", pattern)
		}
		port = strings.TrimPrefix(port, ":")
	case strings.ContainsAny(rest, "[]"):
		return fmt.Sprintf("WithHostPolicy(%q): a bracket out of place", pattern)
	case strings.Count(rest, ":") > 1:
		if a, err := netip.ParseAddr(rest); err != nil || !a.Is6() {
			return fmt.Sprintf("WithHostPolicy(%q): not an IPv6 address (with a port, write \"[addr]:port\")", pattern)
		}
		return ""
	default:
		host, port, _ = strings.Cut(rest, ":")
		if strings.Contains(rest, ":") && port == "" {
			return fmt.Sprintf("WithHostPolicy(%q): an empty port", pattern)
		}
	}
	if port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || port[0] == '+' {
			return fmt.Sprintf("WithHostPolicy(%q): port %q: want 1 to 65535", pattern, port)
		}
	}
	if host == "" {
		return fmt.Sprintf("WithHostPolicy(%q): want a hostname or *.domain", pattern)
	}
	return ""
}

// once records a problem when the option named is given a second time.
func (c *config) once(name string) {
	if c.given[name] {
		c.problems = append(c.problems, name+": given twice")
	}
	c.given[name] = true
}

// apply applies opts to c and returns every problem of the result.
func (c *config) apply(opts []Option) error {
	for i, o := range opts {
		if o == nil {
			c.problems = append(c.problems, fmt.Sprintf("option %d of %d is nil", i+1, len(opts)))
			continue
		}
		o.apply(c)
	}
	c.problems = append(c.problems, c.retry.problems("WithRetry")...)
	return asError(c.problems)
}
