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
// under way. The exit status is 1 if any record failed, 130 if interrupted.
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
	"sync/atomic"
	"time"

	"github.com/throttlehttp/throttle"
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
				fmt.Fprintln(stderr, "\n"+name+": interrupted: finishing the records under way (Ctrl-C again to cancel them)")
				cancelStop()
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
	recs, closeIn, err := a.records(o)
	if err != nil {
		a.fail(err)
		return 2
	}
	defer closeIn()
	s := a.upload(stop, abort, o, recs)
	s.print(a.stdout, o.asJSON)
	switch {
	case s.Failed > 0:
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
func (a *app) upload(stop, abort context.Context, o options, recs []record) summary {
	s := summary{Client: "throttle"}
	var api *throttletest.API
	var base http.RoundTripper
	target := o.target
	quotaRate, quotaBurst := o.rate, o.burst
	if target == nil {
		demoURL, demoAPI, demoBase, closeFn := a.demo(demoQuota)
		defer closeFn()
		target, _ = url.Parse(demoURL)
		api, base = demoAPI, demoBase
		l := demoQuota.Limits[0]
		quotaRate, quotaBurst = l.Rate, l.Burst
		s.Target = demoURL + " (embedded demo API: 100 requests/s, bursts of 10)"
	} else {
		s.Target = target.Redacted()
	}
	if base == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = o.workers
		defer tr.CloseIdleConnections()
		base = tr
	}

	var throttled atomic.Int64
	var send sender
	var rt *throttle.Transport
	if o.naive {
		s.Client = "naive (resend at once on 429)"
		send = naiveWith(&http.Client{Transport: base}, o.method, target, o.apiKey, &throttled)
	} else {
		rt = throttle.New(base, throttle.WithPolicy(o.policy()), throttle.WithEvents(func(e throttle.Event) {
			if e.Kind == throttle.EventThrottled {
				throttled.Add(1)
			}
		}))
		defer rt.Close()
		send = uploadWith(&http.Client{Transport: rt}, o.method, target, o.apiKey)
	}

	start := time.Now()
	bar := newProgress(a.progress, a.stderr, len(recs), start)
	var naiveRetries atomic.Int64
	results := run(stop, abort, recs, o.workers, send, func(r result) {
		naiveRetries.Add(int64(r.retries))
		bar.add(time.Now(), throttled.Load())
	})
	bar.finish(time.Now(), stop.Err() != nil)
	s.WallSecs = time.Since(start).Seconds()

	if rt != nil {
		st := rt.Stats().Total
		s.Attempts, s.Throttled, s.Retries, s.WaitSecs = st.Attempts, st.Throttled, st.Retries, st.WaitTime.Seconds()
	} else {
		s.Throttled, s.Retries = throttled.Load(), naiveRetries.Load()
	}
	s.count(results)
	s.IdealSecs = ideal(s.Uploaded+s.Failed, quotaBurst, quotaRate).Seconds()
	if rt == nil {
		s.Attempts = int64(s.Uploaded+s.Failed) + s.Retries
		s.PerRecord = 0
		if sent := s.Uploaded + s.Failed; sent > 0 {
			s.PerRecord = float64(s.Attempts) / float64(sent)
		}
	}
	if api != nil {
		t := api.Stats().Total
		s.Server = &server{Requests: t.Requests, Accepted: t.Accepted, Throttled: t.Throttled, PeakPerSecond: t.PeakPerSecond}
	}
	return s
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
	if recs, err = readFile(f); err != nil {
		f.Close()
		return nil, nil, err
	}
	return recs, func() { f.Close() }, nil
}
