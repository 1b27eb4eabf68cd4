package throttle

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// A window's log answers as a plain list of its attempts would: checked
// through random costly attempts, answers out of order (some read a moment
// apart, out of time order), figures above and below the charge, and cut
// windows, against a count of every unit at every time that matters.
func TestWindowLogCountsAsAPlainList(t *testing.T) {
	type attempt struct {
		sent, at time.Duration // at: its answer, once answered
		id       uint64
		units    int64 // charged while open; then counted
		open     bool
	}
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 1))
		win := Window{N: 1 + rng.IntN(12), Per: time.Second}
		w := newWindowLog(&win)
		if rng.IntN(3) == 0 {
			w.n = 1 + rng.IntN(win.N)
		}
		var model []attempt
		var last uint64
		// when is nextAt's answer for k units, counted unit by unit.
		when := func(now time.Duration, k int64, bound bool) time.Duration {
			counting := func(at time.Duration) (units int64) {
				for _, a := range model {
					end := a.at + win.Per
					if a.open {
						end = a.sent + win.Per
						if !bound {
							end = holdsForAnswer
						}
					}
					if end > at {
						units += a.units
					}
				}
				return units
			}
			if k < 0 {
				return holdsForAnswer
			}
			times := []time.Duration{now}
			for _, a := range model {
				switch {
				case !a.open:
					times = append(times, a.at+win.Per)
				case bound:
					times = append(times, a.sent+win.Per)
				}
			}
			slices.Sort(times)
			for _, at := range times {
				if at >= now && counting(at) <= k {
					return at
				}
			}
			return holdsForAnswer
		}
		now, sending := time.Duration(0), time.Duration(0) // sending: the last attempt's
		for step := range 80 {
			now += time.Duration(rng.IntN(300)) * time.Millisecond
			at := now
			if rng.IntN(4) == 0 {
				at -= time.Duration(rng.IntN(100)) * time.Microsecond // read before the lock
			}
			var open []int
			for i, a := range model {
				if a.open {
					open = append(open, i)
				}
			}
			switch op := rng.IntN(3); {
			case op == 0 || len(open) == 0: // an attempt sent
				c := 1 + rng.IntN(win.N)
				last += uint64(c)
				w.put(at, last, c, true)
				sending = at
				for i := range model {
					if model[i].open && model[i].sent > at {
						model[i].sent = at
					}
				}
				model = append(model, attempt{sent: at, id: last, units: int64(c), open: true})
			default: // an answer, its figure maybe other than its charge
				a := &model[open[rng.IntN(len(open))]]
				figure := int(a.units)
				if rng.IntN(2) == 0 {
					figure = rng.IntN(2 * win.N)
				}
				w.answered(a.id, figure, at)
				a.at, a.units, a.open = max(a.sent, at), int64(figure), false
			}
			// All the log may hold: the answered that counted when the
			// last attempt was sent (each sending lets go of the others),
			// and those on their way.
			kept, out := 0, 0
			for _, a := range model {
				switch {
				case a.open:
					out++
				case a.units > 0 && a.at+win.Per > sending:
					kept++
				}
			}
			if live := len(w.done.runs) - w.done.head; live > kept || len(w.sent) != out {
				t.Fatalf("seed %d, step %d: the log holds %d answered and %d on their way, want at most %d and %d",
					seed, step, live, len(w.sent), kept, out)
			}
			for _, c := range []int{1, 1 + rng.IntN(win.N)} {
				for _, bound := range []bool{false, true} {
					want := when(now, int64(w.n-min(c, w.n)), bound)
					if got := w.nextAt(now, 0, c, bound); got != want {
						t.Fatalf("seed %d, step %d, N %d, n %d: nextAt(%v, cost %d, bound %v) = %v, want %v; log %+v",
							seed, step, win.N, w.n, now, c, bound, got, want, model)
					}
				}
			}
			var counting int64
			for _, a := range model {
				if a.open || a.at+win.Per > now {
					counting += a.units
				}
			}
			if got := w.count(now); got != counting {
				t.Fatalf("seed %d, step %d: count(%v) = %d, want %d", seed, step, now, got, counting)
			}
		}
	}
}

// Regression: in a window cut below N (n < N), an attempt of several units
// outlives every entry that still counts, however many the log holds. With
// fewer than N logged, one once checked only the n before it, and its
// units overwrote the oldest entries unchecked.
func TestWindowCutOutlivesEveryEntry(t *testing.T) {
	win := Window{N: 4, Per: time.Second}
	fresh := func() *windowLog {
		w := newWindowLog(&win)
		w.n = 2
		for id := uint64(1); id <= 3; id++ { // A, B and C, sent at 0
			w.put(0, id, 1, true)
		}
		w.answered(2, 1, 0) // B and C answered at once
		w.answered(3, 1, 0)
		w.answered(1, 1, 900*time.Millisecond) // A late: it counts until 1.9 s
		return &w
	}
	w := fresh()
	if got := w.nextAt(time.Second, 0, 2, false); got != 1900*time.Millisecond {
		t.Errorf("an attempt of 2 units: at %v, want 1.9s", got)
	}
	w = fresh()
	if got := w.nextAt(time.Second, 0, 1, false); got != time.Second {
		t.Errorf("the first of two attempts of 1 unit: at %v, want 1s", got)
	}
	w.put(time.Second, 4, 1, true)
	w.answered(4, 1, time.Second)
	if got := w.nextAt(time.Second, 0, 1, false); got != 1900*time.Millisecond {
		t.Errorf("the second: at %v, want 1.9s", got)
	}
}

// BenchmarkWindowLog measures what a window costs an attempt of one unit
// under the key's lock: nextAt, put and answered, in a window whose
// entries leave at once, one that is full (an hour's), and one full with
// 8 attempts on their way, answered in order.
func BenchmarkWindowLog(b *testing.B) {
	for _, c := range []struct {
		name string
		per  time.Duration
		out  int
	}{{"leaving", time.Microsecond, 0}, {"full", time.Hour, 0}, {"full-8-out", time.Hour, 8}} {
		b.Run(c.name, func(b *testing.B) {
			win := Window{N: 100, Per: c.per}
			w := newWindowLog(&win)
			var adm uint64
			now := time.Duration(1)
			for range c.out {
				adm++
				w.put(now, adm, 1, true)
			}
			first := uint64(1)
			for b.Loop() {
				now += time.Microsecond
				if at := w.nextAt(now, 0, 1, false); at > now && at != holdsForAnswer {
					now = at
				}
				adm++
				w.put(now, adm, 1, true)
				if c.out > 0 {
					w.answered(first, 1, now)
					first++
				} else {
					w.answered(adm, 1, now)
				}
			}
		})
	}
}
