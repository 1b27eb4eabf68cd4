package redisstore_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/throttlehttp/throttle"
	"github.com/throttlehttp/throttle/redisstore"
)

// A pause told to the Store while Redis is away (a 429 with Retry-After:
// 3600 met during a blip) holds the Store's bookings alone, and once Redis
// answers again, the Store tells it what remains: that Store, and every
// other process's, still hold the hour's pause (regression, found in
// review: both booked the key at once, the pause lost to all but the
// Transport that met it).
func TestAPauseToldAloneHoldsOnceRedisIsBack(t *testing.T) {
	srv := startServer(t)
	c := redis.NewClient(&redis.Options{Addr: srv.addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	p := throttle.Policy{Rate: 10, Burst: 1}
	a := redisstore.New(c, redisstore.WithTimeout(200*time.Millisecond)) // this process
	b := redisstore.New(c, redisstore.WithTimeout(200*time.Millisecond)) // another process
	if r, err := a.Reserve(ctx, "k", p, 1, time.Hour); err != nil || r.Fallback != nil {
		t.Fatalf("Reserve with Redis up: %+v, %v", r, err)
	}

	srv.kill()
	err := a.Slow(ctx, "k", p, throttle.Slowdown{Pause: time.Hour})
	if !errors.Is(err, throttle.ErrStoreUnavailable) {
		t.Fatalf("Slow with Redis gone: %v, want ErrStoreUnavailable", err)
	}
	if r, err := a.Reserve(ctx, "k", p, 1, 5*time.Minute); err != nil || !r.Paused || r.Wait < 59*time.Minute {
		t.Fatalf("Reserve alone after the Slow: %+v, %v; want paused an hour", r, err)
	}

	srv.start()
	// Another process asks, as its requests come; this one asks nothing (its
	// Transport waits the hour out on its own, without asking the Store).
	var r throttle.Reservation
	for deadline := time.Now().Add(3 * time.Second); !r.Paused && time.Now().Before(deadline); {
		r, err = b.Reserve(ctx, "k", p, 1, 5*time.Minute) // as a Transport asks first: MaxRetryAfter
		if err != nil || r.Fallback != nil {
			t.Fatalf("another process's Store, Redis back: %+v, %v", r, err)
		}
		time.Sleep(50 * time.Millisecond) // its requests, 20 a second
	}
	if !r.Paused || r.Wait < 59*time.Minute {
		t.Errorf("another process's Store, 3s after Redis came back: %+v; want the hour's pause to hold", r)
	}
	if r, err := a.Reserve(ctx, "k", p, 1, 5*time.Minute); err != nil || !r.Paused || r.Wait < 59*time.Minute {
		t.Errorf("the Store told the pause, Redis back: %+v, %v; want the hour's pause to hold", r, err)
	}
}

// Process A meets a 429 with Retry-After: 3600 while Redis is away; once
// Redis is back, process B's requests fail at once with ErrPaused, as they
// would had A met it with Redis up (regression, found in review: they went
// to the server, into the hour's pause).
func TestProcessesHoldAPauseMetDuringAnOutage(t *testing.T) {
	srv := startServer(t)
	var fromB atomic.Int64
	server := func(who string) http.RoundTripper {
		return rtFunc(func(r *http.Request) (*http.Response, error) {
			if who == "B" {
				fromB.Add(1)
			}
			h := http.Header{"Retry-After": {"3600"}}
			return &http.Response{StatusCode: 429, Header: h, Body: http.NoBody, Request: r}, nil
		})
	}
	p := throttle.Policy{Rate: 10, Burst: 4}
	process := func(who string) *http.Client {
		c := redis.NewClient(&redis.Options{Addr: srv.addr, ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = c.Close() })
		tr := throttle.New(server(who), throttle.WithStore(redisstore.New(c)), throttle.WithPolicy(p))
		t.Cleanup(func() { _ = tr.Close() })
		return &http.Client{Transport: tr}
	}
	a, b := process("A"), process("B")
	get := func(c *http.Client) error {
		req, _ := http.NewRequest("GET", "http://api.test/items", nil)
		resp, err := c.Do(req)
		if err == nil {
			_ = resp.Body.Close()
		}
		return err
	}

	srv.kill()
	if err := get(a); err != nil { // booked alone, answered 429: A pauses the key an hour
		t.Fatalf("A with Redis gone: %v, want its 429", err)
	}
	srv.start()
	time.Sleep(1500 * time.Millisecond) // Redis back, and the Stores' next trial (about each second) past

	var wg sync.WaitGroup
	for range 4 { // B's workers
		wg.Go(func() {
			if err := get(b); !errors.Is(err, throttle.ErrPaused) {
				t.Errorf("B, Redis back: %v; want ErrPaused (A's hour)", err)
			}
		})
	}
	wg.Wait()
	if n := fromB.Load(); n > 0 {
		t.Errorf("%d of B's requests reached the server within the hour's pause A met, want none", n)
	}
}
