// Command bulk-uploader uploads a batch of records to a quota-limited API
// through a throttle.Transport, as fast as the quota allows and no faster,
// and shows that nothing was wasted.
//
// With no flags it generates 1,000 records and uploads them to an embedded
// fake API (throttletest) with a demo quota of 100 requests a second,
// bursts of 10, answering 429 with Retry-After beyond it:
//
//	go run ./examples/bulk-uploader
//
// Progress goes to stderr: a bar on a terminal, else (a log file, CI) a
// plain line at each tenth of the records and at least every 10 seconds.
//
// Records can also come as JSON lines from a file (-in records.jsonl) or
// stdin (-in -), and go to a real API (-target https://api.example.com,
// with -api-key or $BULK_UPLOADER_API_KEY: only the embedded API has a
// default key). -naive runs the same job through a plain http.Client that
// resends at once on 429, to show the resend storm the library avoids.
// Every flag is checked before the first request; bad ones exit with
// status 2, one line each.
//
// Ctrl-C stops starting records; the ones under way finish and every record
// is reported as uploaded, failed or not sent. A second Ctrl-C cancels those
// under way. The exit status is 1 if any record failed, 130 if
// interrupted, and 1 if any record was refused unsent (the API paused the
// key for longer than the longest Retry-After honoured).
//
// With -journal FILE a run can be resumed: each record sent is appended to
// FILE and fsynced before it counts as done, and the same command run
// again skips the records FILE lists as uploaded, whether the run before
// was stopped by Ctrl-C, a crash or SIGKILL (see journal.go).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/throttlehttp/throttle/throttletest"
)

// The embedded demo API's quota, per API key.
var demoQuota = throttletest.Config{
	Limits:     []throttletest.Limit{{Algorithm: throttletest.TokenBucket, Rate: 100, Burst: 10}},
	RetryAfter: throttletest.RetryAfterSeconds,
	XRateLimit: true,
	IETF:       true,
	Latency:    2 * time.Millisecond,
}

func main() {
	stop, abort, cancel := interrupts(os.Stderr)
	defer cancel()
	a := &app{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv, progress: progressFor(os.Stderr), demo: serveDemo}
	code := a.main(stop, abort, os.Args[1:])
	cancel()
	os.Exit(code)
}

// interrupts returns two contexts: stop ends at the first Ctrl-C, abort at
// the second.
func interrupts(stderr io.Writer) (stop, abort context.Context, cancel func()) {
	stop, cancelStop := context.WithCancel(context.Background())
	abort, cancelAbort := context.WithCancel(context.Background())
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt)
	done := make(chan struct{})
	go func() {
		for n := 0; ; n++ {
			select {
			case <-sig:
			case <-done:
				return
			}
			if n == 0 {
				// Stop first, then say so: a record handed over between
				// the two would start after the message said none would.
				cancelStop()
				fmt.Fprintln(stderr, "\n"+name+": interrupted: stopping; what is under way finishes (Ctrl-C again to cancel it)")
			} else {
				cancelAbort()
			}
		}
	}()
	return stop, abort, func() {
		signal.Stop(sig)
		close(done)
		cancelStop()
		cancelAbort()
	}
}

// serveDemo starts the embedded API on a loopback socket.
func serveDemo(cfg throttletest.Config) (target string, api *throttletest.API, base http.RoundTripper, closeFn func()) {
	srv := throttletest.NewServer(cfg)
	return srv.URL, srv.API, nil, srv.Close
}

type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string // nil: an empty environment
	progress       progressMode
	// demo starts the embedded API; base, if not nil, replaces the network.
	demo func(throttletest.Config) (target string, api *throttletest.API, base http.RoundTripper, closeFn func())
}

// main runs the job and returns the exit status.
func (a *app) main(stop, abort context.Context, args []string) int {
	o, err := a.parse(args)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		a.fail(err)
		return 2
	}
	if o.serve != "" {
		return a.serve(stop, o.serve, o.asJSON)
	}
	recs, closeIn, err := a.records(o)
	if err != nil {
		a.fail(err)
		return 2
	}
	defer closeIn()
	var j *journal
	if o.journal != "" {
		inFile := o.in
		if inFile == "-" {
			inFile = ""
		}
		if j, err = openJournal(o.journal, inFile); err != nil {
			a.fail(err)
			return 2
		}
		defer j.close()
		if j.torn {
			fmt.Fprintf(a.stderr, "%s: journal %s: dropped its unfinished last line (the run before stopped while writing it)\n", name, o.journal)
		}
	}
	s := a.upload(stop, abort, o, recs, j)
	s.print(a.stdout, o.asJSON)
	switch {
	case s.Failed > 0 || s.JournalError != "":
		return 1
	case stop.Err() != nil && s.NotSent > 0:
		return 130 // what a second Ctrl-C cancelled is the interrupt's too
	case len(s.NotSentList) > 0:
		return 1
	case s.NotSent > 0:
		return 130
	}
	return 0
}

// fail prints err, one line of it a line, each with the program's name.
func (a *app) fail(err error) {
	for line := range strings.Lines(err.Error()) {
		fmt.Fprint(a.stderr, name+": "+line)
		if !strings.HasSuffix(line, "\n") {
			fmt.Fprintln(a.stderr)
		}
	}
}

// upload sends recs to the target of o, or to the embedded demo API, and
// says how it went.
func (a *app) upload(stop, abort context.Context, o options, recs []record, j *journal) summary {
	s := summary{Client: "throttle"}
	if j != nil {
		s.Journal = o.journal
		recs, s.Skipped = j.skip(recs)
	}
	ep, closeEndpoint := a.endpoint(o)
	defer closeEndpoint()
	s.Target = ep.name
	s.SharedVia = o.redis
	c := newClient(o, ep.base, ep.url)
	defer c.close()
	if o.naive {
		s.Client = "naive (resend at once on 429)"
	}

	// A journal that cannot be written stops the run as Ctrl-C does.
	stop, stopForJournal := context.WithCancel(stop)
	defer stopForJournal()
	start := time.Now()
	bar := newProgress(a.progress, a.stderr, len(recs), start)
	results := run(stop, abort, recs, o.workers, c.send, func(r result) {
		if j != nil && j.append(entryFor(r)) != nil {
			stopForJournal()
		}
		c.done(r)
		bar.add(time.Now(), c.throttled.Load())
	})
	bar.finish(time.Now(), stop.Err() != nil)
	s.WallSecs = time.Since(start).Seconds()
	if j != nil && j.failure() != nil {
		s.JournalError = j.failure().Error()
	}

	s.count(results)
	c.tally(&s)
	s.IdealSecs = ideal(s.Uploaded+s.Failed, ep.quotaBurst, ep.quotaRate).Seconds()
	if ep.api != nil {
		t := ep.api.Stats().Total
		s.Server = &server{Requests: t.Requests, Accepted: t.Accepted, Throttled: t.Throttled, PeakPerSecond: t.PeakPerSecond}
	}
	return s
}

// endpoint is where the records go: -target, or the embedded demo API.
type endpoint struct {
	url  *url.URL
	name string            // for the summary
	api  *throttletest.API // the demo API, for its own counts; nil for -target
	base http.RoundTripper // the network
	// The quota, as far as it is known, for the ideal time.
	quotaRate  float64
	quotaBurst int
}

func (a *app) endpoint(o options) (ep endpoint, closeFn func()) {
	ep = endpoint{url: o.target, quotaRate: o.rate, quotaBurst: o.burst}
	closeFn = func() {}
	if o.target == nil {
		var demoURL string
		demoURL, ep.api, ep.base, closeFn = a.demo(demoQuota)
		ep.url, _ = url.Parse(demoURL)
		ep.name = demoURL + " (embedded demo API: 100 requests/s, bursts of 10)"
		l := demoQuota.Limits[0]
		ep.quotaRate, ep.quotaBurst = l.Rate, l.Burst
	} else {
		ep.name = shownURL(o.target)
	}
	if ep.base == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = o.workers
		ep.base = tr
		closeDemo := closeFn
		closeFn = func() { tr.CloseIdleConnections(); closeDemo() }
	}
	return ep, closeFn
}

// records reads the records of -in, or makes up -n of them. closeFn
// closes the input file, which stays open for the run: each record's body
// is read from it, as often as the record is sent.
func (a *app) records(o options) (recs []record, closeFn func(), err error) {
	switch o.in {
	case "":
		return generate(o.n), func() {}, nil
	case "-":
		recs, err = readAll(a.stdin)
		return recs, func() {}, err
	}
	f, err := os.Open(o.in)
	if err != nil {
		return nil, nil, err
	}
	if fi, err := f.Stat(); err == nil && !fi.Mode().IsRegular() && !fi.IsDir() {
		// A pipe (-in /dev/stdin, -in <(zcat records.gz), a FIFO) cannot
		// be read twice, nor at an offset: read it as stdin is (found in
		// review: every record failed at upload, "illegal seek").
		defer f.Close()
		recs, err = readStream(f, o.in)
		return recs, func() {}, err
	}
	if recs, err = readFile(f); err != nil {
		f.Close()
		return nil, nil, err
	}
	return recs, func() { f.Close() }, nil
}
