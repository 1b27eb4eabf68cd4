package redisstore_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/throttlehttp/throttle"
	"github.com/throttlehttp/throttle/redisstore"
)

// TestOneRoundTrip: once Redis knows the scripts, each Reserve and each Slow
// is one EVALSHA, and nothing else (counted by Redis: INFO commandstats).
func TestOneRoundTrip(t *testing.T) {
	s, c, _ := newStore(t, redisstore.FailClosed())
	ctx := context.Background()
	p := throttle.Policy{Rate: 1000, Burst: 10, Windows: []throttle.Window{{N: 50, Per: time.Second}}}
	book(t, s, "roundtrip", p, 1) // loads the script: EVALSHA, NOSCRIPT, EVAL the first time
	if err := s.Slow(ctx, "roundtrip", p, throttle.Slowdown{Pace: 900}); err != nil {
		t.Fatal(err)
	}
	if err := c.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	const reserves, slows = 100, 10
	book(t, s, "roundtrip", p, reserves)
	for range slows {
		if err := s.Slow(ctx, "roundtrip", p, throttle.Slowdown{Pace: 800}); err != nil {
			t.Fatal(err)
		}
	}
	calls := commandCalls(t, c)
	if got := calls["evalsha"]; got != reserves+slows {
		t.Errorf("%d EVALSHA for %d Reserve and %d Slow, want %d; all: %v", got, reserves, slows, reserves+slows, calls)
	}
	// The rest are the scripts' own commands, and this test's.
	inScript := map[string]bool{"type": true, "time": true, "hmget": true, "hset": true, "pexpire": true,
		"zrange": true, "zcard": true, "zadd": true, "zremrangebyscore": true, "del": true,
		"info": true, "config|resetstat": true}
	for cmd, n := range calls {
		if cmd != "evalsha" && !inScript[cmd] {
			t.Errorf("%d calls of %s: not one of the scripts' commands", n, cmd)
		}
	}
	// A window of departures of one unit costs a Reserve three reads at
	// most: its oldest member, its newest, and the one whose units make
	// room (the oldest).
	if got := calls["zrange"]; got > 3*reserves {
		t.Errorf("%d ZRANGE for %d Reserve, want 3 each at most", got, reserves)
	}
	if got := calls["time"]; got != reserves+slows {
		t.Errorf("%d TIME, want one per decision: %d", got, reserves+slows)
	}
}

// commandCalls returns how many times each command ran since the last
// CONFIG RESETSTAT, by name ("evalsha", "config|resetstat").
func commandCalls(t *testing.T, c *redis.Client) map[string]int {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]int{}
	for line := range strings.Lines(info) {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		name, isCmd := strings.CutPrefix(name, "cmdstat_")
		if !ok || !isCmd {
			continue
		}
		for field := range strings.SplitSeq(rest, ",") {
			if v, ok := strings.CutPrefix(field, "calls="); ok {
				n, err := strconv.Atoi(v)
				if err != nil {
					t.Fatalf("INFO commandstats: %q", line)
				}
				calls[name] = n
			}
		}
	}
	return calls
}
