package redisstore_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/throttlehttp/throttle/redisstore"
	"go.uber.org/goleak"
)

// The tests talk to a real Redis: the one at REDIS_ADDR (scripts/test.sh
// starts one), and, for the outage test, a redis-server of their own.

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// requireRedis reports why Redis cannot be tested: the test fails under
// THROTTLE_REQUIRE_REDIS=1 (scripts/test.sh), and skips otherwise.
func requireRedis(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("THROTTLE_REQUIRE_REDIS") == "1" {
		t.Fatalf("%s, and THROTTLE_REQUIRE_REDIS=1", why)
	}
	t.Skipf("%s: run scripts/test.sh, or set REDIS_ADDR to a Redis to test against", why)
}

// redisAddr is the address of the Redis to test against.
func redisAddr(t testing.TB) string {
	t.Helper()
	addr := os.Getenv("REDIS_ADDR")
	if addr == "" {
		requireRedis(t, "REDIS_ADDR is not set")
	}
	return addr
}

// redisServer is the path of redis-server, for tests that start their own.
func redisServer(t testing.TB) string {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		requireRedis(t, "no redis-server in PATH")
	}
	return path
}

// newClient returns a client of the Redis at addr, closed when the test
// ends. Its context deadlines bound its calls (as the package doc asks).
func newClient(t testing.TB, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("Redis at %s: %v", addr, err)
	}
	return c
}

var prefixes atomic.Int64

// prefix returns a prefix no other test of this run uses: tests share one
// Redis and never one key.
func prefix(t testing.TB) string {
	return fmt.Sprintf("test:%d:%d:", os.Getpid(), prefixes.Add(1))
}

// newStore returns a Store on the test's Redis under a prefix of its own.
func newStore(t testing.TB, opts ...redisstore.Option) (*redisstore.Store, *redis.Client, string) {
	t.Helper()
	c := newClient(t, redisAddr(t))
	p := prefix(t)
	return redisstore.New(c, append([]redisstore.Option{redisstore.WithPrefix(p)}, opts...)...), c, p
}
