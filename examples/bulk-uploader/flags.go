package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"strings"

	"golang.org/x/time/rate"

	"github.com/throttlehttp/throttle"
)

// The command line: every flag is checked before the first request, and
// every problem found is one line of the error.

const (
	name      = "bulk-uploader"
	apiKeyEnv = "BULK_UPLOADER_API_KEY"

	maxGenerate = 10_000_000 // -n
	maxWorkers  = 10_000     // -workers
)

// options are the command line, checked.
type options struct {
	n, workers, burst, queue int
	in, method, journal      string
	serve, redis             string   // -serve ADDR, -redis ADDR
	target                   *url.URL // nil: the embedded demo API
	apiKey                   string
	rate                     float64
	asJSON, naive            bool
}

const usageHead = `Usage: bulk-uploader [flags]

Uploads JSON records, one a line, each to TARGET/records/ID, through a
throttle.Transport: as fast as the API's quota allows, and no faster.
With no flags it makes up 1,000 records and uploads them to an embedded
demo API (100 requests/s, bursts of 10).

Flags:
`

const usageTail = `
Ctrl-C starts no more uploads, lets those under way finish (Ctrl-C again
cancels them) and prints the summary with the records not sent.

Exit status: 0 when every record was uploaded, 1 when some failed, 130
when interrupted (Ctrl-C), 1 when some were refused unsent (the API paused
for longer than the longest Retry-After honoured), 2 for bad flags or
input.
`

// parse reads the command line. The error is flag.ErrHelp after -h (the
// usage is printed), else every problem found, one a line.
func (a *app) parse(args []string) (options, error) {
	var o options
	var target string
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are printed by the caller, the usage below
	fs.Usage = func() {}
	fs.IntVar(&o.n, "n", 1000, "make up `count` records when -in is not given")
	fs.StringVar(&o.in, "in", "", "upload the JSON records of `file`, one a line, ended by \"\\n\" or \"\\r\\n\" (- for stdin)")
	fs.StringVar(&target, "target", "", "the API's base `URL`, http:// or https://; a record goes to URL/records/ID, ID escaped (default: the embedded demo API)")
	fs.StringVar(&o.apiKey, "api-key", "", "send `key` as X-API-Key (default $"+apiKeyEnv+", else \"demo\" for the embedded API; required with -target; \"\" sends none)")
	fs.StringVar(&o.method, "method", http.MethodPut, "PUT or POST")
	fs.IntVar(&o.workers, "workers", 16, fmt.Sprintf("upload `n` records at once (1 to %d)", maxWorkers))
	fs.Float64Var(&o.rate, "rate", 100, "pace at `n` requests per second (0: unpaced, pausing only on 429)")
	fs.IntVar(&o.burst, "burst", 10, "token-bucket burst, at least 1 (with -rate, without -queue)")
	fs.IntVar(&o.queue, "queue", 0, "> 0: a leaky-bucket FIFO of `n` waiting requests instead of a token bucket (needs -rate > 0)")
	fs.StringVar(&o.journal, "journal", "", "make the run resumable: write each record sent to `file` (JSON lines, fsynced before the record counts as done) and skip the records it lists as uploaded; after Ctrl-C, a crash or a kill, run the same command again")
	fs.BoolVar(&o.asJSON, "json", false, "print the summary as JSON")
	fs.StringVar(&o.redis, "redis", "", "share the quota through the Redis at `addr` (host:port) with every uploader given the same -redis, -target and pacing flags: each paces at the whole quota, together they keep to it")
	fs.StringVar(&o.serve, "serve", "", "upload nothing: serve the embedded demo API on `addr` (host:port) until Ctrl-C, for uploaders started with -target http://addr, then print what it saw")
	fs.BoolVar(&o.naive, "naive", false, "use a plain http.Client that resends at once on 429 instead of throttle (no pacing: not with -rate, -burst or -queue)")
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(a.stderr, usageHead)
		fs.SetOutput(a.stderr)
		fs.PrintDefaults()
		fmt.Fprint(a.stderr, usageTail)
		return o, err
	}
	if err != nil {
		return o, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var errs []error
	if fs.NArg() > 0 {
		errs = append(errs, fmt.Errorf("unexpected argument %q: flags come first, and the input is given with -in", fs.Arg(0)))
	}
	if set["serve"] {
		for _, f := range []string{"n", "in", "target", "api-key", "method", "workers", "rate", "burst", "queue", "journal", "naive", "redis"} {
			if set[f] {
				errs = append(errs, fmt.Errorf("-serve runs the demo API alone: -%s does not apply", f))
			}
		}
		return o, errors.Join(errs...)
	}
	o.target, err = parseTarget(target)
	errs = append(errs, err)
	errs = append(errs, o.resolveAPIKey(set["api-key"], a.getenv))
	errs = append(errs, o.check(set)...)
	if err := errors.Join(errs...); err != nil {
		return o, err
	}
	if err := o.policy().Validate(); err != nil { // a guard: check sees to it
		return o, fmt.Errorf("-rate %v -burst %d -queue %d: %w", o.rate, o.burst, o.queue, err)
	}
	return o, nil
}

// check returns what is wrong with the flags other than -target and
// -api-key; set holds the flags given.
func (o *options) check(set map[string]bool) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if o.method != http.MethodPut && o.method != http.MethodPost {
		bad("-method %q: want PUT or POST", o.method)
	}
	if o.workers < 1 || o.workers > maxWorkers {
		bad("-workers %d: want 1 to %d", o.workers, maxWorkers)
	}
	if o.n < 0 || o.n > maxGenerate {
		bad("-n %d: want 0 to %d", o.n, maxGenerate)
	}
	if set["n"] && set["in"] {
		bad("-n and -in: give one (-n makes records up, -in reads them)")
	}
	if math.IsNaN(o.rate) || math.IsInf(o.rate, 0) || o.rate < 0 {
		bad("-rate %v: want requests per second, 0 or more (0: unpaced)", o.rate)
	}
	if o.naive && (set["rate"] || set["burst"] || set["queue"] || set["redis"]) {
		bad("-naive does not pace: -rate, -burst, -queue and -redis do not apply")
		return errs
	}
	if set["redis"] && o.rate == 0 {
		bad("-redis needs -rate > 0: an unpaced key has no quota to share")
	}
	if set["redis"] {
		if _, _, err := net.SplitHostPort(o.redis); err != nil {
			bad("-redis %q: want host:port, like 127.0.0.1:6379", shownArg(o.redis))
		}
	}
	switch {
	case o.queue < 0:
		bad("-queue %d: want 0 (a token bucket) or more", o.queue)
	case o.queue > 0 && o.rate == 0:
		bad("-queue %d needs -rate > 0: the queue releases one request every 1/rate", o.queue)
	case o.queue > 0 && o.queue < o.workers:
		// (found in review: -queue 5 with 16 workers failed 194 of
		// 200 records with ErrQueueFull in 0.06 s)
		bad("-queue %d is shorter than -workers %d: a full queue refuses a record at once; want -queue %d or more", o.queue, o.workers, o.workers)
	}
	switch {
	case set["burst"] && o.rate == 0:
		bad("-burst needs -rate > 0: unpaced, there is no bucket")
	case set["burst"] && o.queue > 0:
		bad("-burst is for the token bucket: with -queue, requests go one every 1/rate")
	case o.rate > 0 && o.queue <= 0 && o.burst < 1:
		bad("-burst %d: a token bucket needs at least 1", o.burst)
	}
	return errs
}

// parseTarget checks -target: empty for the demo API, else an absolute
// http or https URL, whose path and query are kept.
func parseTarget(s string) (*url.URL, error) {
	if s == "" {
		return nil, nil
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return nil, fmt.Errorf("-target %q: %w", shownArg(s), errors.Unwrap(err))
	case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
		return nil, fmt.Errorf("-target %q: want an http:// or https:// URL, like https://api.example.com/v1", shownArg(s))
	case u.Fragment != "":
		return nil, fmt.Errorf("-target %q: a fragment (#…) is never sent", shownArg(s))
	}
	return u, nil
}

// shownArg is a URL-like flag value as errors show it, parsed or not: without
// its user info, query or fragment, which may hold credentials (found in
// review: a refused -target or -redis was printed whole, its key or
// password with it). What is cut is shown as "…".
func shownArg(s string) string {
	if i := strings.IndexAny(s, "?#"); i >= 0 {
		s = s[:i] + "…"
	}
	scheme, rest := "", s
	if i := strings.Index(s, "//"); i >= 0 {
		scheme, rest = s[:i+2], s[i+2:]
	}
	authority := rest
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		authority = rest[:i]
	}
	if i := strings.LastIndexByte(authority, '@'); i >= 0 {
		rest = "…@" + rest[i+1:]
	}
	return scheme + rest
}

// resolveAPIKey sets the key: -api-key if given, else the environment's,
// else "demo" for the embedded API. A real target gets no made-up key.
func (o *options) resolveAPIKey(given bool, getenv func(string) string) error {
	if !given && getenv != nil {
		o.apiKey = getenv(apiKeyEnv)
	}
	from := "-api-key"
	if !given {
		from = "$" + apiKeyEnv
	}
	switch {
	case strings.ContainsFunc(o.apiKey, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }):
		return fmt.Errorf("%s: a control character cannot go in a header", from)
	case given || o.apiKey != "":
		return nil
	case o.target != nil:
		return fmt.Errorf("-target needs an API key: give -api-key, or set $%s (-api-key \"\" sends none)", apiKeyEnv)
	}
	o.apiKey = "demo"
	return nil
}

func (o options) policy() throttle.Policy {
	if o.rate == 0 {
		return throttle.Policy{}
	}
	if o.queue > 0 {
		return throttle.Policy{Rate: rate.Limit(o.rate), Queue: o.queue}
	}
	return throttle.Policy{Rate: rate.Limit(o.rate), Burst: o.burst}
}
