package main

import (
	"sync"
	"time"

	"github.com/throttlehttp/throttle"
)

// waits sums the time attempts waited for their turn, by the limit each
// waited for last, as the transport's EventWaited says it: no bookkeeping
// of its own.
type waits struct {
	mu      sync.Mutex
	byLimit map[throttle.Limit]time.Duration
}

func (w *waits) add(l throttle.Limit, d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.byLimit == nil {
		w.byLimit = make(map[throttle.Limit]time.Duration)
	}
	w.byLimit[l] += d
}

// seconds is the time waited in seconds, by the limit's name ("rate",
// "pause", "window"…); nil if no attempt waited.
func (w *waits) seconds() map[string]float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.byLimit) == 0 {
		return nil
	}
	out := make(map[string]float64, len(w.byLimit))
	for l, d := range w.byLimit {
		out[l.String()] = d.Seconds()
	}
	return out
}
