package redisstore_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/throttlehttp/throttle"
	"github.com/throttlehttp/throttle/redisstore"
)

// A Redis that refuses connections: nothing listens on its port.

// TestRefusedSaysWhy: a FailClosed Store whose Redis refuses connections
// fails Reserve, Slow and the Transport's request with an error that says
// why (the dial's error, "connection refused", which errors.As finds),
// still wrapping ErrStoreUnavailable, and holding neither the partition key
// nor the password of the Redis URL (regression, found in review: go-redis
// retries the dial for longer than the Store's timeout and only logs why,
// so the request got "no answer from Redis within 200ms").
func TestRefusedSaysWhy(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close() // nothing listens there now: connection refused
	const password = "s3cret-redis-password"
	opt, err := redis.ParseURL("redis://worker:" + password + "@" + addr + "/0")
	if err != nil {
		t.Fatal(err)
	}
	opt.ContextTimeoutEnabled = true
	opt.DialTimeout = 50 * time.Millisecond
	c := redis.NewClient(opt)
	t.Cleanup(func() { _ = c.Close() })
	s := redisstore.New(c, redisstore.WithTimeout(50*time.Millisecond), redisstore.FailClosed())
	p := throttle.Policy{Rate: 100, Burst: 10}
	const key = "sk_live_4f9c2e7a1b3d5f60" // a partition key that is an API token
	tr := throttle.New(http.DefaultTransport, throttle.WithStore(s), throttle.WithPolicy(p),
		throttle.WithKey(func(req *http.Request) string { return req.Header.Get("Authorization") }))
	t.Cleanup(func() { _ = tr.Close() })
	ctx := context.Background()

	for _, call := range []struct {
		name string
		do   func() error
	}{
		{"Reserve, the call that finds Redis away", func() error {
			_, err := s.Reserve(ctx, key, p, 1, time.Hour)
			return err
		}},
		{"Reserve, while Redis is away", func() error {
			_, err := s.Reserve(ctx, key, p, 1, time.Hour)
			return err
		}},
		{"Slow", func() error { return s.Slow(ctx, key, p, throttle.Slowdown{Pause: time.Second}) }},
		{"request", func() error {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", key)
			resp, err := tr.RoundTrip(req)
			if err == nil {
				_ = resp.Body.Close()
			}
			return err
		}},
	} {
		err := call.do()
		t.Logf("%s: %v", call.name, err)
		var dial *net.OpError
		switch {
		case !errors.Is(err, throttle.ErrStoreUnavailable):
			t.Errorf("%s: %v, want it wrapping ErrStoreUnavailable", call.name, err)
		case !errors.As(err, &dial) || dial.Op != "dial":
			t.Errorf("%s: %v, want it wrapping the dial's *net.OpError", call.name, err)
		case !strings.Contains(err.Error(), dial.Error()):
			t.Errorf("%s: %q does not say why: %q", call.name, err, dial)
		}
		if err != nil && (strings.Contains(err.Error(), key) || strings.Contains(err.Error(), password)) {
			t.Errorf("%s: %q holds the partition key or the Redis password", call.name, err)
		}
	}
}
