package main

import (
	"net/http"
	"sync"
	"time"
)

// A recorder passes every attempt to base and notes when each 429 arrived,
// counted from start, to tell 429s at the start of a run from collisions later.
type recorder struct {
	base  http.RoundTripper
	start time.Time

	mu sync.Mutex
	at []time.Duration
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.base.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusTooManyRequests {
		d := time.Since(r.start)
		r.mu.Lock()
		r.at = append(r.at, d)
		r.mu.Unlock()
	}
	return resp, err
}

// throttledAt returns the arrival times of the 429s, in order.
func (r *recorder) throttledAt() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Duration(nil), r.at...)
}
