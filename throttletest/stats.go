package throttletest

import (
	"slices"
	"sync"
	"time"
)

// Counts are what the API saw, for one key or in total. Requests is the sum of the
// six outcomes, counted when a request is answered.
type Counts struct {
	Requests     int64 `json:"requests"`     // every request but GET /__stats
	Accepted     int64 `json:"accepted"`     // answered 200
	Throttled    int64 `json:"throttled"`    // answered 429 by a quota, at random (Config.Refused), or by an Outage of 429s
	Unavailable  int64 `json:"unavailable"`  // answered 503 by the Unavailable share
	Outage       int64 `json:"outage"`       // answered 503: arrived during an Outage (of 503s)
	Unauthorized int64 `json:"unauthorized"` // answered 401: no API key
	// Canceled requests got no answer: their context ended while they waited in
	// ArrivalJitter, a queue or Latency, or their body could not be read.
	Canceled int64 `json:"canceled"`
	// BytesReceived counts request body bytes; every body is read to its end.
	BytesReceived int64 `json:"bytes_received"`
	// PeakPerSecond is the most requests accepted within any interval [t, t+1s),
	// counted at the instant each was served (after any queue wait, before Latency).
	PeakPerSecond int64 `json:"peak_per_second"`
	// InFlight is the number of requests admitted by the quotas and not yet
	// answered: waiting in a leaky-bucket queue or in Latency.
	InFlight int64 `json:"in_flight"`
	// PeakInFlight is the most requests in flight at once.
	PeakInFlight int64 `json:"peak_in_flight"`
}

// Stats is a snapshot of the counts, in total and per API key (requests without a
// key count only in Total).
type Stats struct {
	Total Counts            `json:"total"`
	Keys  map[string]Counts `json:"keys"`
}

// recorder keeps the counts and the acceptance times from which peaks are computed.
type recorder struct {
	mu    sync.Mutex
	total tally
	keys  map[string]*tally
}

type tally struct {
	c        Counts
	accepted []time.Time
}

// outcome is how a request ended, for the counts.
type outcome int

const (
	accepted outcome = iota
	throttled
	unavailable
	inOutage
	unauthorized
	canceled
)

func (t *tally) admit() {
	t.c.InFlight++
	t.c.PeakInFlight = max(t.c.PeakInFlight, t.c.InFlight)
}

func (t *tally) add(o outcome, admitted bool, bytes int64, at time.Time) {
	if admitted {
		t.c.InFlight--
	}
	t.c.Requests++
	t.c.BytesReceived += bytes
	switch o {
	case accepted:
		t.c.Accepted++
		t.accepted = append(t.accepted, at)
	case throttled:
		t.c.Throttled++
	case unavailable:
		t.c.Unavailable++
	case inOutage:
		t.c.Outage++
	case unauthorized:
		t.c.Unauthorized++
	case canceled:
		t.c.Canceled++
	}
}

// admit counts a request of key as in flight, until record counts its answer.
func (r *recorder) admit(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.total.admit()
	r.key(key).admit()
}

// record counts the answer to a request of key ("" for none) that admit counted
// or not; at is when an accepted request was served.
func (r *recorder) record(key string, o outcome, admitted bool, bytes int64, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.total.add(o, admitted, bytes, at)
	if key != "" {
		r.key(key).add(o, admitted, bytes, at)
	}
}

func (r *recorder) key(key string) *tally {
	if r.keys == nil {
		r.keys = make(map[string]*tally)
	}
	t := r.keys[key]
	if t == nil {
		t = new(tally)
		r.keys[key] = t
	}
	return t
}

func (r *recorder) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.total, r.keys = tally{}, nil
}

func (r *recorder) snapshot() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := Stats{Total: r.total.counts(), Keys: make(map[string]Counts, len(r.keys))}
	for key, t := range r.keys {
		s.Keys[key] = t.counts()
	}
	return s
}

func (t *tally) counts() Counts {
	c := t.c
	c.PeakPerSecond = int64(peakPerSecond(t.accepted))
	return c
}

// peakPerSecond returns the most times within any interval [t, t+1s). It sorts ts
// in place: requests served in one order may be recorded in another.
func peakPerSecond(ts []time.Time) int {
	slices.SortFunc(ts, time.Time.Compare)
	peak, j := 0, 0
	for i := range ts {
		for j < len(ts) && ts[j].Sub(ts[i]) < time.Second {
			j++
		}
		peak = max(peak, j-i)
	}
	return peak
}
