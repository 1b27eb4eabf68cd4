package redisstore_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/throttlehttp/throttle"
	"github.com/throttlehttp/throttle/redisstore"
)

// mostWithin is the most of times that any interval of length per holds.
func mostWithin(times []time.Time, per time.Duration) int {
	ts := slices.Clone(times)
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	most, j := 0, 0
	for i := range ts {
		for ts[i].Sub(ts[j]) >= per {
			j++
		}
		most = max(most, i-j+1)
	}
	return most
}

// timeLog is the times at which a fake server saw requests.
type timeLog struct {
	mu sync.Mutex
	at []time.Time
}

func (l *timeLog) add() {
	l.mu.Lock()
	l.at = append(l.at, time.Now())
	l.mu.Unlock()
}

// since is the times logged from from on.
func (l *timeLog) since(from time.Time) []time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []time.Time
	for _, at := range l.at {
		if !at.Before(from) {
			out = append(out, at)
		}
	}
	return out
}

// get sends a GET through rt with ctx, and closes the answer.
func get(ctx context.Context, rt http.RoundTripper) error {
	req, err := http.NewRequestWithContext(ctx, "GET", "http://api.test/items", nil)
	if err != nil {
		return err
	}
	resp, err := rt.RoundTrip(req)
	if err == nil {
		_ = resp.Body.Close()
	}
	return err
}

// TestASharedWindowKeepsCountingAcrossAChange: two Transports share a
// window of 10 a minute through Redis; the first sends 10, then both move
// to 20 a minute (SetPolicy). The 10 sent this minute still count: the
// second sends 10 more, and its next 10, whose deadline of 2 s the window
// would pass, fail at once. Regression, found in review 46: the window's
// Redis key was named by its N and Per, so the new window started an
// empty set, and 30 went within a minute.
func TestASharedWindowKeepsCountingAcrossAChange(t *testing.T) {
	addr, pre := redisAddr(t), prefix(t)
	log := &timeLog{}
	base := rtFunc(func(r *http.Request) (*http.Response, error) {
		log.add()
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: r}, nil
	})
	var rts []*throttle.Transport
	for range 2 {
		store := redisstore.New(newClient(t, addr), redisstore.WithPrefix(pre))
		tr := throttle.New(base, throttle.WithStore(store),
			throttle.WithPolicy(throttle.Policy{Windows: []throttle.Window{{N: 10, Per: time.Minute}}}))
		t.Cleanup(func() { _ = tr.Close() })
		rts = append(rts, tr)
	}
	start := time.Now()
	for range 10 {
		if err := get(context.Background(), rts[0]); err != nil {
			t.Fatal(err)
		}
	}
	for _, tr := range rts {
		if err := tr.SetPolicy(throttle.Policy{Windows: []throttle.Window{{N: 20, Per: time.Minute}}}); err != nil {
			t.Fatal(err)
		}
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		refused int
	)
	for range 20 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			err := get(ctx, rts[1])
			if err != nil && !errors.Is(err, throttle.ErrWouldExceedDeadline) {
				t.Error(err)
			}
			mu.Lock()
			refused += map[bool]int{true: 1}[err != nil]
			mu.Unlock()
		})
	}
	wg.Wait()
	if got := mostWithin(log.since(start), time.Minute); got > 20 {
		t.Errorf("%d sent within a minute, against a window of 20 a minute", got)
	}
	if refused != 10 {
		t.Errorf("%d of the second's 20 refused for their deadline, want 10", refused)
	}
}

// TestASharedWindowCountsEachDepartureForItsOwnMargin: a window's
// departure booked through Redis counts for Per and the margin of the
// Transport that booked it (see throttle.WindowMargin), not of the one
// asking now: A's requests take 150 ms to reach the server (a round trip
// of 300 ms, its margin), B's 1 ms; A books the whole window of 10 a
// second, and B's next departure goes Per and A's margin after A's, so
// that A's slow requests and B's fast one never reach the server within
// one Per. Regression, found in review 46: the script counted every
// departure for the margin of the call asking now, B's few ms, and 11 of
// the window reached the server within one Per.
func TestASharedWindowCountsEachDepartureForItsOwnMargin(t *testing.T) {
	addr, pre := redisAddr(t), prefix(t)
	log := &timeLog{}
	server := func(way time.Duration) http.RoundTripper {
		return rtFunc(func(r *http.Request) (*http.Response, error) {
			time.Sleep(way)
			log.add()
			time.Sleep(way)
			return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: r}, nil
		})
	}
	const n, per = 10, time.Second
	transport := func(way time.Duration) *throttle.Transport {
		store := redisstore.New(newClient(t, addr), redisstore.WithPrefix(pre))
		tr := throttle.New(server(way), throttle.WithStore(store),
			throttle.WithPolicy(throttle.Policy{Windows: []throttle.Window{{N: n, Per: per}}}))
		t.Cleanup(func() { _ = tr.Close() })
		return tr
	}
	a, b := transport(150*time.Millisecond), transport(time.Millisecond)
	for range 2 { // each learns its round trip
		for _, tr := range []*throttle.Transport{a, b} {
			if err := get(context.Background(), tr); err != nil {
				t.Fatal(err)
			}
		}
	}
	time.Sleep(per + 500*time.Millisecond) // the window empties
	from := time.Now()
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if err := get(context.Background(), a); err != nil {
				t.Error(err)
			}
		})
	}
	for len(log.since(from)) < n && time.Since(from) < 5*time.Second { // A's are booked, and arrived
		time.Sleep(5 * time.Millisecond)
	}
	if err := get(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if got := mostWithin(log.since(from), per); got > n {
		t.Errorf("%d reached the server within %v, against a window of %d", got, per, n)
	}
}
