package main

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/throttlehttp/throttle/throttletest"
)

func TestTwoProcessesScenario(t *testing.T) {
	for _, sc := range pickScenarios("untold-2procs") {
		if sc.procCount() != 2 || sc.hostCount() != 1 {
			t.Errorf("%s: %d processes, %d hosts", sc.name, sc.procCount(), sc.hostCount())
		}
		// The combined job on the one quota: 20 at once, 3,980 at 200/s.
		if got := sc.ideal(4000); got != 19900*time.Millisecond {
			t.Errorf("%s: ideal(4000) = %s, want 19.9s", sc.name, got)
		}
		if l := sc.config(4000, 0).Limits[0]; l.Rate != 200 || l.Burst != 20 {
			t.Errorf("%s: the server's quota %+v, want 200/s burst 20", sc.name, l)
		}
		// Each process told the quota is told half of it.
		if q := sc.told(4000); q.rate != 100 || q.burst != 10 {
			t.Errorf("%s: told %+v, want 100/s burst 10", sc.name, q)
		}
		if lim := sc.told(4000).limiter(); lim.Limit() != 100 || lim.Burst() != 10 {
			t.Errorf("%s: limiter %v/%d, want 100/10", sc.name, lim.Limit(), lim.Burst())
		}
	}
}

func TestShare(t *testing.T) {
	window := quota{algo: throttletest.SlidingLog, n: 201, per: time.Second}
	if got := window.share(2).n; got != 100 {
		t.Errorf("window share: %d, want 100", got)
	}
	if got := (quota{algo: throttletest.TokenBucket, rate: 10, burst: 1}).share(2); got.rate != 5 || got.burst != 1 {
		t.Errorf("bucket share: %+v, want 5/s burst 1", got)
	}
	if got := window.share(1); got != window {
		t.Errorf("one process: %+v", got)
	}
	for _, tt := range []struct{ total, n, p, want int }{
		{16, 2, 0, 8}, {16, 2, 1, 8}, {4001, 2, 0, 2001}, {4001, 2, 1, 2000}, {1, 2, 1, 0},
	} {
		if got := part(tt.total, tt.n, tt.p); got != tt.want {
			t.Errorf("part(%d, %d, %d) = %d, want %d", tt.total, tt.n, tt.p, got, tt.want)
		}
	}
	if got := processWalls([]time.Duration{19850 * time.Millisecond, 19900 * time.Millisecond}); got != "19.85s and 19.90s" {
		t.Errorf("processWalls: %q", got)
	}
}

// Two processes: two clients, each told its share, each sending its half
// of the records with its half of the workers.
func TestTwoProcessesSplit(t *testing.T) {
	sc := pickScenarios("untold-2procs-xrl")[0]
	var mu sync.Mutex
	var told []quota
	sent := map[int][]int{} // records, by client
	busy, most := map[int]int{}, map[int]int{}
	fake := row{id: 7, name: "fake", make: func(_ http.RoundTripper, q quota) client {
		mu.Lock()
		id := len(told)
		told = append(told, q)
		mu.Unlock()
		return client{send: func(ctx context.Context, url string, _ []byte) (int, error) {
			i, err := strconv.Atoi(url[strings.LastIndexByte(url, '/')+1:])
			mu.Lock()
			sent[id] = append(sent[id], i)
			busy[id]++
			most[id] = max(most[id], busy[id])
			mu.Unlock()
			defer func() {
				mu.Lock()
				busy[id]--
				mu.Unlock()
			}()
			return http.StatusOK, err
		}}
	}}
	r := run(sc, fake, 40, 4, time.Minute, 0)
	if r.OK != 40 || r.Failed != 0 || len(r.ProcessWalls) != 2 {
		t.Fatalf("%d ok, %d failed, process walls %v", r.OK, r.Failed, r.ProcessWalls)
	}
	if len(told) != 2 || told[0].rate != 100 || told[1].burst != 10 {
		t.Errorf("told %+v, want two clients told 100/s burst 10", told)
	}
	for id := range 2 {
		if len(sent[id]) != 20 || slices.ContainsFunc(sent[id], func(i int) bool { return i%2 != id }) {
			t.Errorf("client %d sent %v, want the 20 records i with i mod 2 = %d", id, sent[id], id)
		}
		if most[id] > 2 {
			t.Errorf("client %d: %d records at once, want at most its 2 workers'", id, most[id])
		}
	}
}
