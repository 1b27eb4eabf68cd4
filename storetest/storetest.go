// Package storetest holds the tests every [throttle.Store] must pass: one
// meaning of a shared quota, whatever keeps it. Run them from a test of your
// Store:
//
//	func TestStore(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) throttle.Store { return newStore(t) }, storetest.RealClock)
//	}
//
// The tests read the waits a Store books, on the Store's own clock; they
// never sleep. A Store whose clock is real (Redis) is read within a slack
// of the exact figure, on a scale that keeps it small (RealClock):
// bookings made one after another take a little time.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/throttlehttp/throttle"
)

// Clock says how the suite reads a Store's clock.
type Clock struct {
	// Scale makes every time of the suite Scale times longer, and every
	// rate Scale times slower, so that on a real clock its figures stay
	// large beside the time a booking takes. 0: 1.
	Scale float64
	// Slack is how far a wait may be from the exact figure, after
	// scaling. 0: exact, as on synctest's clock.
	Slack time.Duration
}

// RealClock is the Clock for a Store on a real clock, reached over a
// network (Redis): the suite's times 5 times longer, each wait within
// 100 ms, what a loaded machine may take between two bookings.
var RealClock = Clock{Scale: 5, Slack: 100 * time.Millisecond}

func (c Clock) scale() float64 {
	if c.Scale <= 0 {
		return 1
	}
	return c.Scale
}

// d is d scaled.
func (c Clock) d(d time.Duration) time.Duration { return time.Duration(float64(d) * c.scale()) }

// ms is n milliseconds, scaled.
func (c Clock) ms(n int) time.Duration { return c.d(time.Duration(n) * time.Millisecond) }

// rate is r per second, scaled.
func (c Clock) rate(r float64) rate.Limit { return rate.Limit(r / c.scale()) }

// A Test is one test of the suite.
type Test struct {
	Name string
	Fn   func(*testing.T, throttle.Store, Clock)
}

// Tests is the suite. Run runs it; run each test yourself to wrap it (in a
// synctest bubble, for a Store on Go's clock).
var Tests = []Test{
	{"Bucket", testBucket},
	{"Queue", testQueue},
	{"Window", testWindow},
	{"WindowAndRate", testWindowAndRate},
	{"BucketCost", testBucketCost},
	{"BucketCostBeyondDepth", testBucketCostBeyondDepth},
	{"QueueCost", testQueueCost},
	{"WindowCost", testWindowCost},
	{"WindowAcrossAChange", testWindowAcrossAChange},
	{"WindowMargin", testWindowMargin},
	{"MaxWait", testMaxWait},
	{"WaitSaturates", testWaitSaturates},
	{"Pause", testPause},
	{"PauseCost", testPauseCost},
	{"AskOnly", testAskOnly},
	{"PaceCut", testPaceCut},
	{"KeysApart", testKeysApart},
	{"Concurrent", testConcurrent},
	{"Canceled", testCanceled},
}

// Run runs every test of the suite against stores made by newStore, one per
// test, reading their clock as c says. Each test uses its own keys.
func Run(t *testing.T, newStore func(t *testing.T) throttle.Store, c Clock) {
	for _, tc := range Tests {
		t.Run(tc.Name, func(t *testing.T) { tc.Fn(t, newStore(t), c) })
	}
}

var never = time.Duration(math.MaxInt64)

// waits books n departures of key under p, of one unit each, and returns
// their waits.
func waits(t *testing.T, s throttle.Store, key string, p throttle.Policy, n int) []time.Duration {
	t.Helper()
	costs := make([]int, n)
	for i := range costs {
		costs[i] = 1
	}
	return costly(t, s, key, p, costs...)
}

// costly books departures of key under p, of the units given, and returns
// their waits.
func costly(t *testing.T, s throttle.Store, key string, p throttle.Policy, units ...int) []time.Duration {
	t.Helper()
	out := make([]time.Duration, len(units))
	for i := range out {
		r, err := s.Reserve(context.Background(), key, p, units[i], never)
		if err != nil {
			t.Fatalf("Reserve %d: %v", i, err)
		}
		if !r.OK {
			t.Fatalf("Reserve %d: not booked with no bound on the wait (wait %v)", i, r.Wait)
		}
		out[i] = r.Wait
	}
	return out
}

// near fails unless every wait is within c.Slack of want (the wait of
// departure i).
func near(t *testing.T, c Clock, got []time.Duration, want func(i int) time.Duration) {
	t.Helper()
	for i, g := range got {
		if w := want(i); g < w-c.Slack || g > w+c.Slack {
			t.Errorf("departure %d: wait %v, want %v (±%v); all: %v", i, g, w, c.Slack, got)
			return
		}
	}
}

// testBucket: a bucket of Rate 10 and Burst 5 lets 4 go at once (one token
// is held in reserve), then one every 100 ms.
func testBucket(t *testing.T, s throttle.Store, c Clock) {
	got := waits(t, s, "bucket", throttle.Policy{Rate: c.rate(10), Burst: 5}, 8)
	near(t, c, got, func(i int) time.Duration { return c.ms(100 * max(0, i-3)) })
}

// testQueue: a leaky bucket releases one every 1/Rate, the first at once.
func testQueue(t *testing.T, s throttle.Store, c Clock) {
	got := waits(t, s, "queue", throttle.Policy{Rate: c.rate(10), Queue: 100}, 5)
	near(t, c, got, func(i int) time.Duration { return c.ms(100 * i) })
}

// testWindow: at most N in any interval of length Per.
func testWindow(t *testing.T, s throttle.Store, c Clock) {
	p := throttle.Policy{Windows: []throttle.Window{{N: 3, Per: c.d(time.Second)}}}
	got := waits(t, s, "window", p, 7)
	near(t, c, got, func(i int) time.Duration { return c.d(time.Second * time.Duration(i/3)) })
}

// testWindowAndRate: a window and a bucket both hold: the later of the two.
func testWindowAndRate(t *testing.T, s throttle.Store, c Clock) {
	p := throttle.Policy{Rate: c.rate(10), Burst: 1, Windows: []throttle.Window{{N: 3, Per: c.d(time.Second)}}}
	got := waits(t, s, "window+rate", p, 5)
	near(t, c, got, func(i int) time.Duration { return c.ms([]int{0, 100, 200, 1000, 1100}[i]) })
}

// testBucketCost: a departure of n units takes n tokens: a bucket of depth
// 5 (Burst 6) at 10/s lets 5 units go at once, the next 5 after 500 ms,
// then 1 after 100 ms more, and 2 after 200 ms more.
func testBucketCost(t *testing.T, s throttle.Store, c Clock) {
	got := costly(t, s, "bucket-cost", throttle.Policy{Rate: c.rate(10), Burst: 6}, 5, 5, 1, 2)
	near(t, c, got, func(i int) time.Duration { return c.ms([]int{0, 500, 600, 800}[i]) })
}

// testBucketCostBeyondDepth: a departure of more units than the bucket
// holds (as a Transport asks when its own reserve against jitter has grown)
// goes when the bucket is full, and leaves it owing the rest: a bucket of
// depth 2 at 10/s, 4 units at once, and the next unit 300 ms later.
func testBucketCostBeyondDepth(t *testing.T, s throttle.Store, c Clock) {
	got := costly(t, s, "bucket-cost-deep", throttle.Policy{Rate: c.rate(10), Burst: 3}, 4, 1)
	near(t, c, got, func(i int) time.Duration { return c.ms([]int{0, 300}[i]) })
}

// testQueueCost: a leaky bucket releases a departure of n units at its
// turn, and the next one n/Rate after it.
func testQueueCost(t *testing.T, s throttle.Store, c Clock) {
	got := costly(t, s, "queue-cost", throttle.Policy{Rate: c.rate(10), Queue: 100}, 3, 1, 4, 1)
	near(t, c, got, func(i int) time.Duration { return c.ms([]int{0, 300, 400, 800}[i]) })
}

// testWindowCost: at most N units in any interval of length Per: 3 and 2
// at once in a window of 5, the 4 and a 1 a window later, the next 1 when
// the 4 has aged out, the 5 a window after that, the 2 a window after the 5.
func testWindowCost(t *testing.T, s throttle.Store, c Clock) {
	p := throttle.Policy{Windows: []throttle.Window{{N: 5, Per: c.d(time.Second)}}}
	got := costly(t, s, "window-cost", p, 3, 2, 4, 1, 1, 5, 2)
	near(t, c, got, func(i int) time.Duration { return c.d(time.Second * time.Duration([]int{0, 0, 1, 1, 2, 3, 4}[i])) })
}

// testWindowAcrossAChange: a key's windows count its departures whatever
// the Windows they were booked under (a Policy replaced in every
// Transport): after 3 of a window of 3 a second, a window of 5 a second
// lets 2 more go at once and the next a second later, one of 2 a second
// lets the next go a second later, and one of 3 every 2 seconds 2 seconds
// later.
func testWindowAcrossAChange(t *testing.T, s throttle.Store, c Clock) {
	per := c.d(time.Second)
	for _, tc := range []struct {
		to   throttle.Window
		want []time.Duration
	}{
		{throttle.Window{N: 5, Per: per}, []time.Duration{0, 0, per}},
		{throttle.Window{N: 2, Per: per}, []time.Duration{per}},
		{throttle.Window{N: 3, Per: 2 * per}, []time.Duration{2 * per}},
	} {
		key := "window-change " + tc.to.String()
		waits(t, s, key, throttle.Policy{Windows: []throttle.Window{{N: 3, Per: per}}}, 3)
		got := waits(t, s, key, throttle.Policy{Windows: []throttle.Window{tc.to}}, len(tc.want))
		near(t, c, got, func(i int) time.Duration { return tc.want[i] })
	}
}

// testWindowMargin: a window's departure counts for Per and the
// WindowMargin of the call that booked it, whatever the margin of the call
// asking now: in a window of 2 a second, after one booked with no margin
// and one with 300 ms, the next two, asked with none, go a second and
// 1.3 s later; after two booked with none, the next, asked with a margin
// of 300 ms, a second later.
func testWindowMargin(t *testing.T, s throttle.Store, c Clock) {
	p := throttle.Policy{Windows: []throttle.Window{{N: 2, Per: c.d(time.Second)}}}
	for _, tc := range []struct {
		key     string
		margins []int // ms, of each call
		want    []int // ms
	}{
		{"margin booked", []int{0, 300, 0, 0}, []int{0, 0, 1000, 1300}},
		{"margin asking", []int{0, 0, 300}, []int{0, 0, 1000}},
	} {
		got := make([]time.Duration, len(tc.margins))
		for i, m := range tc.margins {
			ctx := throttle.ContextWithWindowMargin(context.Background(), c.ms(m))
			r, err := s.Reserve(ctx, tc.key, p, 1, never)
			if err != nil || !r.OK {
				t.Fatalf("%s: Reserve %d: %+v, %v", tc.key, i, r, err)
			}
			got[i] = r.Wait
		}
		near(t, c, got, func(i int) time.Duration { return c.ms(tc.want[i]) })
	}
}

// testMaxWait: a departure later than maxWait is not booked: asking again
// finds the same one.
func testMaxWait(t *testing.T, s throttle.Store, c Clock) {
	p := throttle.Policy{Rate: c.rate(10), Queue: 10}
	waits(t, s, "maxwait", p, 3) // 0, 100 ms, 200 ms: the next is at 300 ms
	for range 3 {
		r, err := s.Reserve(context.Background(), "maxwait", p, 1, c.ms(100))
		if err != nil {
			t.Fatal(err)
		}
		if r.OK || r.Wait < c.ms(300)-c.Slack || r.Wait > c.ms(300)+c.Slack {
			t.Fatalf("Reserve with maxWait %v: %+v, want not booked, wait %v", c.ms(100), r, c.ms(300))
		}
	}
	got := waits(t, s, "maxwait", p, 1)
	near(t, c, got, func(int) time.Duration { return c.ms(300) })
}

// testWaitSaturates: a wait beyond time.Duration's range (some 292 years)
// is the longest Duration, never one that wrapped negative: a leaky bucket
// at 0.1/s books a billion units at once, and the next billion 317 years
// later. Asked with a shorter maxWait, the Store says as much and books
// nothing; asked without a bound, it books the departure. A Store that
// keeps its state for as long as it matters keeps it as long as it can.
func testWaitSaturates(t *testing.T, s throttle.Store, c Clock) {
	p := throttle.Policy{Rate: c.rate(0.1), Queue: 10}
	got := costly(t, s, "saturates", p, 1_000_000_000)
	near(t, c, got, func(int) time.Duration { return 0 })
	r, err := s.Reserve(context.Background(), "saturates", p, 1_000_000_000, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if r.OK || r.Wait != never {
		t.Fatalf("Reserve with maxWait 1h: %+v, want not booked, wait %v", r, never)
	}
	if got := costly(t, s, "saturates", p, 1_000_000_000); got[0] != never {
		t.Fatalf("Reserve with no bound: wait %v, want %v", got[0], never)
	}
	// A bucket whole again only long after the end of time: still booked,
	// the next departure as late as a wait can say.
	p = throttle.Policy{Rate: c.rate(1e-12), Burst: 2}
	got = costly(t, s, "saturates slower", p, 1_000_000_000, 1)
	near(t, c, got[:1], func(int) time.Duration { return 0 })
	if got[1] != never {
		t.Fatalf("after a departure of 1e9 units at 1e-12/s: wait %v, want %v", got[1], never)
	}
}

// testPause: no departure within a pause; after it, one every 1/Rate, not
// the bucket's burst; Paused says the pause held it.
func testPause(t *testing.T, s throttle.Store, c Clock) {
	p := throttle.Policy{Rate: c.rate(10), Burst: 10}
	if err := s.Slow(context.Background(), "pause", p, throttle.Slowdown{Pause: c.ms(2000)}); err != nil {
		t.Fatal(err)
	}
	r, err := s.Reserve(context.Background(), "pause", p, 1, never)
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK || !r.Paused || r.Wait < c.ms(2000)-c.Slack || r.Wait > c.ms(2000)+c.Slack {
		t.Fatalf("first Reserve in a %v pause: %+v, want booked, paused, wait %v", c.ms(2000), r, c.ms(2000))
	}
	got := waits(t, s, "pause", p, 3)
	near(t, c, got, func(i int) time.Duration { return c.ms(2000 + 100*(i+1)) })
	// A shorter pause does not shorten it.
	if err := s.Slow(context.Background(), "pause", p, throttle.Slowdown{Pause: c.ms(1000)}); err != nil {
		t.Fatal(err)
	}
	got = waits(t, s, "pause", p, 1)
	near(t, c, got, func(int) time.Duration { return c.ms(2400) })
}

// testPauseCost: a departure of n units after a pause goes when the bucket,
// left one token at the pause's end, holds n: a pause holds it all the
// same, and Paused says so (found in review t9: it did not for n > 1, and
// a Transport slept out a pause longer than it honours, where a departure
// of one unit failed at once).
func testPauseCost(t *testing.T, s throttle.Store, c Clock) {
	p := throttle.Policy{Rate: c.rate(10), Burst: 10}
	for i, n := range []int{2, 5, 9, 20} {
		key := fmt.Sprint("pause cost ", i)
		if err := s.Slow(context.Background(), key, p, throttle.Slowdown{Pause: c.ms(2000)}); err != nil {
			t.Fatal(err)
		}
		r, err := s.Reserve(context.Background(), key, p, n, c.ms(1000))
		if err != nil {
			t.Fatal(err)
		}
		want := c.ms(2000 + 100*(min(n, 9)-1))
		if r.OK || !r.Paused || r.Wait < want-c.Slack || r.Wait > want+c.Slack {
			t.Fatalf("Reserve of %d units in a %v pause, maxWait %v: %+v, want not booked, paused, wait %v", n, c.ms(2000), c.ms(1000), r, want)
		}
	}
}

// testAskOnly: a maxWait below 0 books nothing, even a departure free at
// once: a Transport asks so when the wait alone is news (the end of a pause
// that refuses a costly request; see Reservation.Paused).
func testAskOnly(t *testing.T, s throttle.Store, c Clock) {
	p := throttle.Policy{Rate: c.rate(10), Burst: 2}
	r, err := s.Reserve(context.Background(), "ask only", p, 1, -time.Microsecond)
	if err != nil {
		t.Fatal(err)
	}
	if r.OK || r.Wait != 0 {
		t.Fatalf("Reserve with maxWait -1us: %+v, want not booked, wait 0", r)
	}
	r, err = s.Reserve(context.Background(), "ask only", p, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK || r.Wait > c.Slack {
		t.Fatalf("Reserve of the whole Burst after it: %+v, want booked at once: nothing was booked before", r)
	}
}

// testPaceCut: a cut pace holds for every departure, and climbs back by a
// tenth of Rate per second.
func testPaceCut(t *testing.T, s throttle.Store, c Clock) {
	p := throttle.Policy{Rate: c.rate(10), Queue: 100}
	if err := s.Slow(context.Background(), "cut", p, throttle.Slowdown{Pace: c.rate(5)}); err != nil {
		t.Fatal(err)
	}
	// At half the pace, climbing a tenth of it each second: the gaps are
	// twice as long, and shrink slowly.
	got := waits(t, s, "cut", p, 3)
	near(t, c, got, func(i int) time.Duration { return c.ms(200 * i) })
	// A cut above the pace now changes nothing.
	if err := s.Slow(context.Background(), "cut", p, throttle.Slowdown{Pace: c.rate(20)}); err != nil {
		t.Fatal(err)
	}
	got = waits(t, s, "cut", p, 1)
	near(t, c, got, func(int) time.Duration { return c.ms(600) })
}

// testKeysApart: keys share nothing.
func testKeysApart(t *testing.T, s throttle.Store, c Clock) {
	p := throttle.Policy{Rate: c.rate(1), Burst: 2}
	for _, key := range []string{"a", "b", "c"} {
		got := waits(t, s, "apart "+key, p, 1)
		near(t, c, got, func(int) time.Duration { return 0 })
	}
	if err := s.Slow(context.Background(), "apart a", p, throttle.Slowdown{Pause: time.Minute}); err != nil {
		t.Fatal(err)
	}
	got := waits(t, s, "apart b", p, 1)
	near(t, c, got, func(int) time.Duration { return c.ms(1000) })
}

// testConcurrent: bookings from many goroutines at once are as many
// distinct departures, one per interval.
func testConcurrent(t *testing.T, s throttle.Store, c Clock) {
	const workers, each = 8, 25
	p := throttle.Policy{Rate: c.rate(100), Queue: 1000}
	var (
		mu  sync.Mutex
		all []time.Duration
		wg  sync.WaitGroup
	)
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for range each {
				r, err := s.Reserve(context.Background(), "concurrent", p, 1, never)
				if err != nil || !r.OK {
					t.Errorf("Reserve: %+v, %v", r, err)
					return
				}
				at := time.Since(start) + r.Wait
				mu.Lock()
				all = append(all, at)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	if len(all) != workers*each {
		t.Fatalf("%d departures, want %d", len(all), workers*each)
	}
	// 200 departures at 100 a (scaled) second: in any second, at most 100,
	// and what the slack lets in.
	extra := int(c.Slack / c.ms(10))
	for i := 0; i+100+extra < len(all); i++ {
		if span := all[i+100+extra] - all[i]; span < c.ms(1000) {
			t.Fatalf("departures %d to %d within %v: more than 100 in %v", i, i+100+extra, span, c.ms(1000))
		}
	}
}

// testCanceled: a Store honours its context.
func testCanceled(t *testing.T, s throttle.Store, _ Clock) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.Reserve(ctx, "canceled", throttle.Policy{Rate: 1, Burst: 1}, 1, never)
	if !errors.Is(err, context.Canceled) && !errors.Is(err, throttle.ErrStoreUnavailable) {
		t.Fatalf("Reserve with a canceled context: %v, want context.Canceled", err)
	}
}
