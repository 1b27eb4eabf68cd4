package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
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
	// ProcessWalls is when each process finished its part, from the start of
	// the run, where several share the key.
	ProcessWalls []time.Duration `json:"process_walls_ns,omitempty"`
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
// Where several processes share the key, each has its own client and its
// part of the records and of the workers (procs.go). Each record has
// recordTimeout; the whole run has rowTimeout, after which the records left
// fail at once.
func run(sc scenario, rw row, records, workers int, rowTimeout time.Duration, seed int64) result {
	hosts := sc.startHosts(records, seed)
	defer func() {
		for _, h := range hosts {
			h.stop()
		}
	}()
	procs := make([]process, sc.procCount())
	for p := range procs {
		procs[p] = newProcess(rw, sc.told(records))
		defer procs[p].tr.CloseIdleConnections()
	}

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

	rowCtx, cancelRow := context.WithTimeout(context.Background(), rowTimeout)
	defer cancelRow()
	n := len(procs)
	walls := make([]time.Duration, n)
	var all sync.WaitGroup
	start := time.Now()
	for p := range procs {
		procs[p].rec.start = start
	}
	for p, pr := range procs {
		next := make(chan int)
		go func() {
			defer close(next)
			for i := p; i < records; i += n {
				next <- i
			}
		}()
		var wg sync.WaitGroup
		for range max(part(workers, n, p), 1) {
			wg.Go(func() {
				for i := range next {
					ctx, cancel := context.WithTimeout(rowCtx, recordTimeout)
					status, err := pr.c.send(ctx, fmt.Sprintf("%s/records/%d", hosts[i%len(hosts)].url, i), body(i))
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
		all.Go(func() {
			wg.Wait()
			walls[p] = time.Since(start)
		})
	}
	all.Wait()
	res.Wall = time.Since(start)
	if n > 1 {
		res.ProcessWalls = walls
	}
	res.Pauses = -1
	var at []time.Duration
	for _, pr := range procs {
		if pr.c.pauses != nil {
			res.Pauses = max(res.Pauses, 0) + pr.c.pauses()
		}
		if pr.c.close != nil {
			pr.c.close()
		}
		at = append(at, pr.rec.throttledAt()...)
	}
	slices.Sort(at)
	res.ThrottledAt = at[:min(len(at), maxThrottledAt)]

	total := sum(hosts)
	res.OK, res.Failed = ok.Load(), failed.Load()
	res.Sent, res.Throttled, res.Peak = total.Requests, total.Throttled, total.PeakPerSecond
	res.Unavailable, res.Outage = total.Unavailable, total.Outage
	return res
}

// A process is one row's client on its own transport, as one process of
// the uploader would have.
type process struct {
	c   client
	tr  *http.Transport
	rec *recorder // between c and tr
}

// newProcess builds rw's client, told q, on a new transport.
func newProcess(rw row, q quota) process {
	tr := newTransport()
	rec := &recorder{base: tr}
	return process{c: rw.make(rec, q), tr: tr, rec: rec}
}
