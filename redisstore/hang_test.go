//go:build unix

package redisstore_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/throttlehttp/throttle"
	"github.com/throttlehttp/throttle/redisstore"
)

// A Redis that hangs: stopped by a signal, which only Unix has.

// TestRedisHangs: a Redis that stops answering, rather than refusing
// connections (stopped with SIGSTOP: a partition, a stuck server), costs the
// call that finds it so its timeout and no more; the calls after it book
// alone at once. Once it answers again, the Store shares again.
func TestRedisHangs(t *testing.T) {
	srv := startServer(t)
	c := redis.NewClient(&redis.Options{Addr: srv.addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	const timeout = 100 * time.Millisecond
	s := redisstore.New(c, redisstore.WithTimeout(timeout), redisstore.FailOpen(0.5))
	p := throttle.Policy{Rate: 100, Burst: 10}
	ctx := context.Background()
	if r, err := s.Reserve(ctx, "hang", p, 1, time.Hour); err != nil || r.Fallback != nil {
		t.Fatalf("Reserve with Redis up: %+v, %v", r, err)
	}

	if err := srv.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = srv.cmd.Process.Signal(syscall.SIGCONT)
		}
	}
	t.Cleanup(resume)
	var took []time.Duration
	for range 20 {
		start := time.Now()
		r, err := s.Reserve(ctx, "hang", p, 1, time.Hour)
		took = append(took, time.Since(start))
		if err != nil || !errors.Is(r.Fallback, throttle.ErrStoreUnavailable) {
			t.Fatalf("Reserve with Redis stopped: %+v, %v; want booked alone", r, err)
		}
	}
	if took[0] < timeout || took[0] > timeout+250*time.Millisecond {
		t.Errorf("the call that found Redis stopped took %v, want its timeout, %v", took[0], timeout)
	}
	for i, d := range took[1:] {
		if d > timeout/2 {
			t.Errorf("call %d after it took %v: a timeout paid again", i+1, d)
		}
	}
	t.Logf("the first call took %v; the next %d at most %v", took[0].Round(time.Millisecond), len(took)-1, slices.Max(took[1:]))

	resume()
	back := time.Now()
	for {
		r, err := s.Reserve(ctx, "hang", p, 1, time.Hour)
		if err == nil && r.Fallback == nil {
			break
		}
		if time.Since(back) > 5*time.Second {
			t.Fatalf("5s after Redis went on, Reserve still gets %+v, %v", r, err)
		}
		time.Sleep(10 * time.Millisecond) // polling for the next trial
	}
	t.Logf("shared again %v after Redis went on", time.Since(back).Round(time.Millisecond))
}

// TestCanceledCallEndsAtOnce: a caller's context canceled while Redis does
// not answer (it has no deadline, which go-redis would turn into the
// socket's) ends the call at once, with the context's error, not at the
// Store's timeout (regression, found in review: it returned at the
// timeout, 2 s here).
func TestCanceledCallEndsAtOnce(t *testing.T) {
	srv := startServer(t)
	c := redis.NewClient(&redis.Options{Addr: srv.addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	s := redisstore.New(c, redisstore.WithTimeout(2*time.Second), redisstore.FailClosed())
	p := throttle.Policy{Rate: 100, Burst: 10}
	if _, err := s.Reserve(context.Background(), "cancel", p, 1, time.Hour); err != nil {
		t.Fatalf("Reserve with Redis up: %v", err)
	}
	if err := srv.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.cmd.Process.Signal(syscall.SIGCONT) })
	for _, call := range []struct {
		name string
		do   func(ctx context.Context) error
	}{
		{"Reserve", func(ctx context.Context) error { _, err := s.Reserve(ctx, "cancel", p, 1, time.Hour); return err }},
		{"Slow", func(ctx context.Context) error { return s.Slow(ctx, "cancel", p, throttle.Slowdown{Pace: 50}) }},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(100*time.Millisecond, cancel)
		start := time.Now()
		err := call.do(ctx)
		took := time.Since(start)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s canceled: %v, want context.Canceled", call.name, err)
		}
		if took > time.Second {
			t.Errorf("%s canceled at 100ms returned after %v", call.name, took)
		}
	}
}

// TestShortDeadlinesGoAlone: while Redis does not answer, a FailOpen
// Store's Reserve whose caller can wait less than the Store's timeout books
// alone once three quarters of what it can wait have passed, rather than
// fail with the caller's deadline (regression, found in review: every such
// request failed, and Redis was never taken for away). FailClosed fails
// it, with the caller's deadline.
func TestShortDeadlinesGoAlone(t *testing.T) {
	srv := startServer(t)
	c := redis.NewClient(&redis.Options{Addr: srv.addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	open := redisstore.New(c, redisstore.WithTimeout(time.Second), redisstore.FailOpen(0.5))
	closed := redisstore.New(c, redisstore.WithTimeout(time.Second), redisstore.FailClosed())
	p := throttle.Policy{Rate: 100, Burst: 10}
	if _, err := open.Reserve(context.Background(), "short", p, 1, time.Hour); err != nil {
		t.Fatalf("Reserve with Redis up: %v", err)
	}
	if err := srv.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.cmd.Process.Signal(syscall.SIGCONT) })
	for i := range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		start := time.Now()
		r, err := open.Reserve(ctx, "short", p, 1, 100*time.Millisecond)
		took := time.Since(start)
		cancel()
		if err != nil || !r.OK || !errors.Is(r.Fallback, throttle.ErrStoreUnavailable) {
			t.Fatalf("FailOpen, call %d: %+v, %v; want booked alone", i, r, err)
		}
		if took > 90*time.Millisecond {
			t.Errorf("FailOpen, call %d took %v: no time left to send", i, took)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := closed.Reserve(ctx, "short", p, 1, 100*time.Millisecond)
	if took := time.Since(start); !errors.Is(err, throttle.ErrStoreUnavailable) || took > 90*time.Millisecond {
		t.Errorf("FailClosed: %v after %v, want ErrStoreUnavailable before the caller's deadline", err, took)
	}
}

// TestAHangingRedisFailsFailClosedRequestsAtOnce: under FailClosed, while
// Redis hangs, requests whose deadlines are shorter than the Store's
// timeout fail with ErrStoreUnavailable, and once one found Redis hanging
// the next ones fail at once, as FailOpen's go alone at once (regression,
// found in review: each waited out its whole deadline, 100 ms, and failed
// with it, never with ErrStoreUnavailable, and Redis was never taken for
// away).
func TestAHangingRedisFailsFailClosedRequestsAtOnce(t *testing.T) {
	send := shortRequestsToAHangingRedis(t, redisstore.FailClosed())
	for i := range 6 {
		took, err := send()
		if !errors.Is(err, throttle.ErrStoreUnavailable) {
			t.Errorf("request %d: %v after %v, want ErrStoreUnavailable", i, err, took)
		}
		if i > 0 && took > 50*time.Millisecond {
			t.Errorf("request %d took %v: Redis was known to hang", i, took) // the first may wait for it
		}
	}
}

// shortRequestsToAHangingRedis starts a Redis of the test's own, makes a
// Transport that shares through it with a Store of the options given (the
// default timeout, 200 ms), sends one request while Redis answers, then
// stops Redis (SIGSTOP: it hangs, connections open) and returns a function
// that sends one request with a deadline of 100 ms and says how long it
// took and its error.
func shortRequestsToAHangingRedis(t *testing.T, opts ...redisstore.Option) func() (time.Duration, error) {
	t.Helper()
	srv := startServer(t)
	c := redis.NewClient(&redis.Options{Addr: srv.addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	tr := throttle.New(okBase(), throttle.WithStore(redisstore.New(c, opts...)),
		throttle.WithPolicy(throttle.Policy{Rate: 1000, Burst: 100}))
	t.Cleanup(func() { _ = tr.Close() })
	send := func() (time.Duration, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://api.test/", nil)
		start := time.Now()
		resp, err := tr.RoundTrip(req)
		if err == nil {
			_ = resp.Body.Close()
		}
		return time.Since(start), err
	}
	if _, err := send(); err != nil {
		t.Fatal(err)
	}
	if err := srv.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.cmd.Process.Signal(syscall.SIGCONT) })
	return send
}

// okBase is a base RoundTripper that answers every request 200 at once.
func okBase() rtFunc {
	return rtFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: r}, nil
	})
}

// TestAHangingRedisIsAskedAboutOnceASecond: while Redis hangs, requests
// whose deadlines are shorter than the Store's timeout ask it about once a
// second, as requests with longer ones do; the others book alone at once
// (regression, found in review 45: with 100 ms deadlines and the default
// 200 ms timeout, 10 of 10 requests each waited 75 ms for a Redis known to
// hang, since a call cut short for its caller never took Redis for away).
func TestAHangingRedisIsAskedAboutOnceASecond(t *testing.T) {
	send := shortRequestsToAHangingRedis(t)
	slow := 0
	for range 10 {
		took, err := send()
		if err != nil {
			t.Fatalf("request: %v", err)
		}
		if took > 50*time.Millisecond {
			slow++
		}
	}
	if slow > 2 {
		t.Errorf("%d of 10 requests waited for a Redis known to hang (>50ms each): it is asked on every request", slow)
	}
}

// TestABookingAloneAfterTheDeadlineFailsAtOnce: once Redis gave no answer,
// a departure alone that would fall after the request's deadline fails the
// request at once with ErrWouldExceedDeadline, as any wait known to end
// after it, and the Store books none later than maxWait from the start of
// its call (regression, found in review 45: booked alone with the wait
// allowed before the 200 ms call to Redis, it departed some 100 ms after a
// 700 ms deadline; the request slept until that deadline and failed after
// 701 ms with context.DeadlineExceeded, spending a token of the share).
func TestABookingAloneAfterTheDeadlineFailsAtOnce(t *testing.T) {
	srv := startServer(t)
	c := redis.NewClient(&redis.Options{Addr: srv.addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	store := redisstore.New(c, redisstore.WithTimeout(200*time.Millisecond), redisstore.FailOpen(0.5))
	tr := throttle.New(okBase(), throttle.WithStore(store),
		throttle.WithPolicy(throttle.Policy{Rate: 10, Burst: 10}))
	t.Cleanup(func() { _ = tr.Close() })
	if err := srv.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.cmd.Process.Signal(syscall.SIGCONT) })
	// Alone, at half the quota (5/s, a bucket of 5 starting empty), 4 units
	// go 600 ms after the call that found Redis away: ~800 ms after the start.
	ctx, cancel := context.WithTimeout(throttle.With(context.Background(), throttle.Cost(4)), 700*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://api.test/", nil)
	start := time.Now()
	resp, err := tr.RoundTrip(req)
	took := time.Since(start)
	if resp != nil {
		_ = resp.Body.Close()
	}
	if !errors.Is(err, throttle.ErrWouldExceedDeadline) || took > 400*time.Millisecond {
		t.Errorf("got %v after %v; want ErrWouldExceedDeadline once the Store answered (~200ms)", err, took)
	}

	// The Store itself books alone no departure later than maxWait from
	// the start of its call: what the call to Redis took comes off.
	fresh := redisstore.New(c, redisstore.WithTimeout(200*time.Millisecond), redisstore.FailOpen(0.5))
	start = time.Now()
	r, err := fresh.Reserve(context.Background(), "api.test", throttle.Policy{Rate: 10, Burst: 10}, 4, 700*time.Millisecond)
	if err != nil || r.OK && time.Since(start)+r.Wait > 700*time.Millisecond {
		t.Errorf("Reserve alone with 700ms to wait: %+v, %v after %v; want no departure after 700ms", r, err, time.Since(start))
	}
}
