package throttle

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// A window's log holds its entries in the order of their numbers, finds
// each by its number, and closes up where entries are dropped: checked
// against a plain list through random puts of costly attempts, answers,
// corrections up and drops (issue 12, point 3: Cost and WithCost).
func TestWindowLogKeepsItsEntries(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 1))
		win := Window{N: 1 + rng.IntN(12), Per: time.Second}
		w := newWindowLog(&win)
		var model []winEntry // oldest first
		var last uint64
		put := func(at time.Duration, c int, open bool) {
			w.put(at, last+uint64(c), c, open)
			for range c {
				last++
				e := winEntry{at: at, id: last}
				if open {
					e.id |= openBit
				}
				model = append(model, e)
			}
			if len(model) > win.N {
				model = model[len(model)-win.N:]
			}
		}
		var tickets [][2]uint64 // last number and cost of attempts put open
		for step := range 60 {
			at := time.Duration(step) * time.Millisecond
			switch op := rng.IntN(4); {
			case op == 0 || len(tickets) == 0: // an attempt sent
				c := 1 + rng.IntN(win.N+2)
				put(at, c, true)
				tickets = append(tickets, [2]uint64{last, uint64(c)})
			case op == 1: // a correction up
				put(at, 1+rng.IntN(3), false)
			default: // an answer, and maybe its correction down
				i := rng.IntN(len(tickets))
				tk := tickets[i]
				tickets = slices.Delete(tickets, i, i+1)
				w.answered(tk[0], int(tk[1]), at)
				for j := range model {
					if id := model[j].num(); id > tk[0]-tk[1] && id <= tk[0] && model[j].open() {
						model[j] = winEntry{at: max(model[j].at, at), id: id}
					}
				}
				if op == 3 {
					c := 1 + rng.IntN(int(tk[1]))
					w.drop(tk[0], c)
					model = slices.DeleteFunc(model, func(e winEntry) bool {
						return e.num() > tk[0]-uint64(c) && e.num() <= tk[0]
					})
				}
			}
			got := make([]winEntry, len(w.log))
			for j := range got {
				got[j] = *w.entry(j)
			}
			if !slices.Equal(got, model) {
				t.Fatalf("seed %d, step %d, N %d: log %v, want %v", seed, step, win.N, got, model)
			}
			for _, e := range model {
				if f := w.logged(e.num()); f == nil || *f != e {
					t.Fatalf("seed %d, step %d: logged(%d) = %v, want %v", seed, step, e.num(), f, e)
				}
			}
		}
	}
}
