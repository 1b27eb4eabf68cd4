package redisstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/throttlehttp/throttle"
)

// A 429 that cut the pace (10/s to 8/s) and paused the key an hour: 2.1 s
// later, once the pace has climbed back, the Store still says the pause
// holds the next departure, so that the Transport fails it with ErrPaused
// rather than sleep the hour. Regression, found in review: the departure
// came 0.19 s past the pause's end, beyond the half turn Paused allowed.
func TestAPauseSharedThroughRedisHoldsAfterThePaceClimbed(t *testing.T) {
	s, _, _ := newStore(t)
	p := throttle.Policy{Rate: 10, Burst: 10}
	if err := s.Slow(context.Background(), "k", p, throttle.Slowdown{Pause: time.Hour, Pace: 8}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2100 * time.Millisecond) // the cut pace climbs a tenth of Rate a second: back at 10/s after 2 s
	r, err := s.Reserve(context.Background(), "k", p, 1, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Paused {
		t.Fatalf("Reserve 2.1 s into an hour's pause: %+v; want Paused (the departure goes %v after the pause's end)", r, r.Wait-time.Hour+2100*time.Millisecond)
	}
}

// A pause of an hour, met by one process and shared through Redis, fails
// the first request of each of three other processes at once with
// ErrPaused; none is sent. Regression, found in review: the first was
// booked at the pause's end before it failed, and the next two slept.
func TestALongPauseFailsEveryOtherProcessAtOnce(t *testing.T) {
	others, sent := meetAnHoursPause(t)
	for i, who := range []string{"b", "c", "d"} {
		if err := askPaused(others(), who, time.Second); !errors.Is(err, throttle.ErrPaused) {
			t.Errorf("process %d (%s): %v, want ErrPaused", i+1, who, err)
		}
	}
	close(sent)
	for who := range sent {
		t.Errorf("%s's request was sent within the pause", who)
	}
}

// A Policy that validates, Rate 1e-305 (one
// request in far more than the longest time.Duration) and Burst 3, lets
// two departures go at once and then none within an hour, as a
// MemoryStore does; reserve.lua's 1e6/r overflowed to inf, and inf - inf
// let every departure go at once.
func TestATinyRateStillPaces(t *testing.T) {
	s, _, _ := newStore(t)
	p := throttle.Policy{Rate: 1e-305, Burst: 3}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		r, err := s.Reserve(context.Background(), "tiny", p, 1, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if want := i < 2; r.OK != want {
			t.Errorf("departure %d: %+v, want booked %v", i, r, want)
		}
	}
}
