package redisstore_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/throttlehttp/throttle"
	"github.com/throttlehttp/throttle/redisstore"
)

// A Redis that goes away: a redis-server of the test's own, killed mid-run
// and started again.

// server is a redis-server process on a loopback port.
type server struct {
	t    *testing.T
	path string
	addr string
	args []string // more arguments of redis-server
	cmd  *exec.Cmd
}

// startServer starts a redis-server on a free loopback port, without
// persistence, with args, and waits until it answers. It is killed when the
// test ends.
func startServer(t *testing.T, args ...string) *server {
	t.Helper()
	s := &server{t: t, path: redisServer(t), addr: freeAddr(t), args: args}
	s.start()
	t.Cleanup(s.kill)
	return s
}

// freeAddr returns a free loopback address whose port plus 10000 is free
// too: a cluster node listens there for its peers.
func freeAddr(t *testing.T) string {
	t.Helper()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if port+10000 > 65535 {
			continue
		}
		if bus, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port+10000)); err == nil {
			_ = bus.Close()
			return fmt.Sprintf("127.0.0.1:%d", port)
		}
	}
	t.Fatal("no free loopback port p with p+10000 free")
	return ""
}

// start starts the server (again), and waits until it answers PING.
func (s *server) start() {
	s.t.Helper()
	_, port, _ := net.SplitHostPort(s.addr)
	args := append([]string{"--port", port, "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning"}, s.args...)
	s.cmd = exec.Command(s.path, args...)
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("redis-server: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !s.answers() {
		if time.Now().After(deadline) {
			s.t.Fatalf("redis-server on %s does not answer after 10s", s.addr)
		}
		time.Sleep(10 * time.Millisecond) // a process starting
	}
}

// answers reports whether the server answers PING.
func (s *server) answers() bool {
	c, err := net.DialTimeout("tcp", s.addr, 100*time.Millisecond)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && line == "+PONG\r\n"
}

// kill kills the server, if it runs, and waits for it to end.
func (s *server) kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// TestRedisGoneAndBack: while Redis is killed, a FailOpen Store books alone
// at its share, at once (without a timeout per request), and a FailClosed
// Store fails at once with ErrStoreUnavailable; once Redis is back, both
// share through it again by themselves. No call outlasts its timeout.
func TestRedisGoneAndBack(t *testing.T) {
	srv := startServer(t)
	c := redis.NewClient(&redis.Options{Addr: srv.addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	const timeout = 200 * time.Millisecond
	open := redisstore.New(c, redisstore.WithTimeout(timeout), redisstore.FailOpen(0.5))
	closed := redisstore.New(c, redisstore.WithTimeout(timeout), redisstore.FailClosed())
	p := throttle.Policy{Rate: 100, Queue: 1000} // one every 10 ms; alone at half: every 20 ms

	var slowest time.Duration // the longest call
	reserve := func(s *redisstore.Store, key string) (throttle.Reservation, time.Time, error) {
		t.Helper()
		start := time.Now()
		r, err := s.Reserve(context.Background(), key, p, 1, time.Hour)
		slowest = max(slowest, time.Since(start))
		return r, start.Add(r.Wait), err
	}
	for _, s := range []*redisstore.Store{open, closed} {
		if r, _, err := reserve(s, "before"); err != nil || r.Fallback != nil {
			t.Fatalf("Reserve with Redis up: %+v, %v", r, err)
		}
	}

	srv.kill()
	t.Log("redis-server killed")

	// FailOpen: alone at half the rate; one call may wait for Redis, not
	// each.
	start := time.Now()
	var deps []time.Time
	for i := range 40 {
		r, dep, err := reserve(open, "alone")
		if err != nil || !r.OK || !errors.Is(r.Fallback, throttle.ErrStoreUnavailable) {
			t.Fatalf("FailOpen Reserve %d with Redis gone: %+v, %v; want booked alone, Fallback ErrStoreUnavailable", i, r, err)
		}
		deps = append(deps, dep)
	}
	if took := time.Since(start); took > 2*timeout {
		t.Errorf("40 FailOpen Reserves with Redis gone took %v: a timeout (%v) paid per request", took, timeout)
	}
	for i := 1; i < len(deps); i++ {
		if gap := deps[i].Sub(deps[i-1]); gap < 20*time.Millisecond-time.Millisecond {
			t.Fatalf("departures %d and %d booked alone %v apart, want 20ms (half of 100/s)", i-1, i, gap)
		}
	}
	err := open.Slow(context.Background(), "alone-paused", p, throttle.Slowdown{Pause: time.Second})
	if !errors.Is(err, throttle.ErrStoreUnavailable) {
		t.Errorf("FailOpen Slow with Redis gone: %v, want ErrStoreUnavailable", err)
	}
	if r, _, _ := reserve(open, "alone-paused"); !r.Paused || r.Wait < 900*time.Millisecond {
		t.Errorf("FailOpen Reserve after a Slow alone: %+v, want paused about 1s", r)
	}

	// FailClosed: fails at once.
	start = time.Now()
	for i := range 40 {
		if r, _, err := reserve(closed, "closed"); !errors.Is(err, throttle.ErrStoreUnavailable) {
			t.Fatalf("FailClosed Reserve %d with Redis gone: %+v, %v; want ErrStoreUnavailable", i, r, err)
		}
	}
	if took := time.Since(start); took > 2*timeout {
		t.Errorf("40 FailClosed Reserves with Redis gone took %v: a timeout (%v) paid per request", took, timeout)
	}

	srv.start()
	t.Log("redis-server started again")

	// Both share again, by themselves: the next trial (within a second)
	// finds Redis.
	back := time.Now()
	for _, s := range []*redisstore.Store{open, closed} {
		for {
			r, _, err := reserve(s, "after")
			if err == nil && r.Fallback == nil {
				break
			}
			if time.Since(back) > 5*time.Second {
				t.Fatalf("5s after Redis came back, Reserve still gets %+v, %v", r, err)
			}
			time.Sleep(10 * time.Millisecond) // polling for the next trial
		}
	}
	t.Logf("shared again %v after the restart", time.Since(back).Round(time.Millisecond))
	if keys, err := c.Keys(context.Background(), redisstore.DefaultPrefix+"*").Result(); err != nil || len(keys) == 0 {
		t.Errorf("Redis keys after the restart: %v, %v; want the key booked there", keys, err)
	}
	if slowest > timeout+250*time.Millisecond {
		t.Errorf("the slowest call took %v, more than the timeout (%v) and a margin", slowest, timeout)
	}
	t.Logf("the slowest call took %v", slowest.Round(time.Millisecond))
}

// TestAloneBucketStartsEmpty: a FailOpen Store that books alone starts
// each key's bucket empty, not full: one departure at once, then one every
// 1/Rate of its share, however deep the bucket (regression, found in
// review: a process that went alone sent a burst of its share of the
// bucket at once, into a bucket the processes had drained, and the server
// refused it).
func TestAloneBucketStartsEmpty(t *testing.T) {
	srv := startServer(t)
	c := redis.NewClient(&redis.Options{Addr: srv.addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	s := redisstore.New(c, redisstore.WithTimeout(200*time.Millisecond), redisstore.FailOpen(0.5))
	p := throttle.Policy{Rate: 100, Burst: 21} // alone at half: 50/s, 10 deep
	if r, err := s.Reserve(context.Background(), "drained", p, 1, time.Hour); err != nil || r.Fallback != nil {
		t.Fatalf("Reserve with Redis up: %+v, %v", r, err)
	}
	srv.kill()
	start := time.Now()
	var waits []time.Duration
	for range 4 {
		r, err := s.Reserve(context.Background(), "drained", p, 1, time.Hour)
		if err != nil || r.Fallback == nil || !r.OK {
			t.Fatalf("Reserve with Redis gone: %+v, %v; want booked alone", r, err)
		}
		waits = append(waits, time.Since(start)+r.Wait)
	}
	for i := 1; i < len(waits); i++ {
		if gap := waits[i] - waits[i-1]; gap < 15*time.Millisecond {
			t.Fatalf("departures alone at %v: a burst, want one every 20 ms", waits)
		}
	}
}
