package main

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/throttlehttp/throttle/throttletest"
)

// recordTimeout bounds one record, all its attempts and waits included.
const recordTimeout = 2 * time.Minute

// A result is one row's run of the job in one scenario.
type result struct {
	Scenario    string        `json:"scenario"`
	Quota       string        `json:"quota"`
	RetryAfter  string        `json:"retry_after"`
	Noise       string        `json:"noise,omitempty"`
	Headers     string        `json:"quota_headers,omitempty"` // untold scenarios: the quota headers the server sent
	Row         int           `json:"row"`
	Client      string        `json:"client"`
	Run         int           `json:"run"` // 1 to -runs
	Records     int           `json:"records"`
	Workers     int           `json:"workers"`
	OK          int64         `json:"ok"`
	Failed      int64         `json:"failed"`
	Sent        int64         `json:"sent"`        // requests the server saw
	Throttled   int64         `json:"throttled"`   // 429s the server sent
	Unavailable int64         `json:"unavailable"` // random 503s the server sent
	Outage      int64         `json:"outage"`      // requests that reached the server during the outage
	Peak        int64         `json:"peak_per_second"`
	Wall        time.Duration `json:"wall_ns"`
	Ideal       time.Duration `json:"ideal_ns"`
	FirstError  string        `json:"first_error,omitempty"`
	// Pauses is how many times a throttle.Transport paused the key; -1 for peers.
	Pauses int64 `json:"pauses"`
	// ThrottledAt is when the client got each 429, from the start of the run
	// (at most maxThrottledAt of them).
	ThrottledAt []time.Duration `json:"throttled_at_ns,omitempty"`
}

// maxThrottledAt bounds the 429 times kept per result.
const maxThrottledAt = 200

func (r result) sentPerRecord() float64 { return float64(r.Sent) / float64(r.Records) }

func (r result) overIdeal() float64 {
	if r.Ideal <= 0 {
		return 0
	}
	return r.Wall.Seconds() / r.Ideal.Seconds()
}

// run does the uploader's job with one row's client against fresh servers of
// the scenario (one per host), whose noise is drawn from seed: records PUTs,
// each its own record, by workers goroutines, record i to host i mod hosts.
// Each record has recordTimeout; the whole run has rowTimeout, after which the
// records left fail at once.
func run(sc scenario, rw row, records, workers int, rowTimeout time.Duration, seed int64) result {
	srvs := make([]*throttletest.Server, sc.hostCount())
	for h := range srvs {
		// Host 0 draws from seed, as the one server of a single-host scenario.
		srvs[h] = throttletest.NewServer(sc.config(records, seed+int64(h)<<32))
		defer srvs[h].Close()
	}
	tr := newTransport()
	defer tr.CloseIdleConnections()
	rec := &recorder{base: tr}
	c := rw.make(rec, sc.quota)

	body := func(i int) []byte {
		return fmt.Appendf(nil, `{"id":%d,"name":"record %d","size":%d}`, i, i, i*7%1000)
	}
	var ok, failed atomic.Int64
	var firstErr sync.Once
	res := result{
		Scenario: sc.name, Quota: sc.quotaString(), RetryAfter: sc.retryAfter(),
		Row: rw.id, Client: rw.name, Records: records, Workers: workers, Ideal: sc.ideal(records),
	}
	if sc.noise != (noise{}) {
		res.Noise = sc.noise.String()
	}
	if sc.set == untoldSet {
		res.Headers = sc.headers.String()
	}
	fail := func(msg string) {
		failed.Add(1)
		firstErr.Do(func() { res.FirstError = msg })
	}

	next := make(chan int)
	go func() {
		defer close(next)
		for i := range records {
			next <- i
		}
	}()
	rowCtx, cancelRow := context.WithTimeout(context.Background(), rowTimeout)
	defer cancelRow()
	var wg sync.WaitGroup
	start := time.Now()
	rec.start = start
	for range workers {
		wg.Go(func() {
			for i := range next {
				ctx, cancel := context.WithTimeout(rowCtx, recordTimeout)
				status, err := c.send(ctx, fmt.Sprintf("%s/records/%d", srvs[i%len(srvs)].URL, i), body(i))
				cancel()
				switch {
				case err != nil:
					fail(err.Error())
				case status != http.StatusOK:
					fail(fmt.Sprintf("status %d", status))
				default:
					ok.Add(1)
				}
			}
		})
	}
	wg.Wait()
	res.Wall = time.Since(start)
	res.Pauses = -1
	if c.pauses != nil {
		res.Pauses = c.pauses()
	}
	if c.close != nil {
		c.close()
	}
	at := rec.throttledAt()
	res.ThrottledAt = at[:min(len(at), maxThrottledAt)]

	total := sum(srvs)
	res.OK, res.Failed = ok.Load(), failed.Load()
	res.Sent, res.Throttled, res.Peak = total.Requests, total.Throttled, total.PeakPerSecond
	res.Unavailable, res.Outage = total.Unavailable, total.Outage
	return res
}

// sum adds up what the servers saw; its PeakPerSecond is the highest of any
// one server, whose quota it is measured against.
func sum(srvs []*throttletest.Server) throttletest.Counts {
	var c throttletest.Counts
	for _, srv := range srvs {
		t := srv.API.Stats().Total
		c.Requests += t.Requests
		c.Throttled += t.Throttled
		c.Unavailable += t.Unavailable
		c.Outage += t.Outage
		c.PeakPerSecond = max(c.PeakPerSecond, t.PeakPerSecond)
	}
	return c
}
