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

// The Redis keys a Store writes: they expire once idle, they share one
// cluster slot per partition key, and they never hold the partition key.

// scan returns every Redis key under prefix.
func scan(t *testing.T, c *redis.Client, prefix string) []string {
	t.Helper()
	keys, err := c.Keys(context.Background(), prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// book reserves n departures of key under p, sharing through s.
func book(t *testing.T, s *redisstore.Store, key string, p throttle.Policy, n int) {
	t.Helper()
	for i := range n {
		r, err := s.Reserve(context.Background(), key, p, 1, time.Hour)
		if err != nil || !r.OK || r.Fallback != nil {
			t.Fatalf("Reserve %d: %+v, %v", i, r, err)
		}
	}
}

// TestIdleKeysExpire: each Redis key of a partition key lives until its
// state stops mattering, and a margin (a second); then it is gone.
func TestIdleKeysExpire(t *testing.T) {
	s, c, pre := newStore(t, redisstore.FailClosed())
	ctx := context.Background()
	p := throttle.Policy{Rate: 10, Burst: 2, Windows: []throttle.Window{{N: 5, Per: 300 * time.Millisecond}}}
	book(t, s, "expiring", p, 3) // the last at 200 ms, tat at 300 ms; the window's newest ends at 500 ms
	if err := s.Slow(ctx, "paused", p, throttle.Slowdown{Pause: 400 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	keys := scan(t, c, pre)
	if len(keys) != 3 {
		t.Fatalf("Redis keys %v, want 3: a hash and a window of one key, the hash of the other", keys)
	}
	const margin = time.Second
	for _, k := range keys {
		ttl, err := c.PTTL(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		// The longest-lived state ends at 500 ms.
		if ttl <= margin || ttl > margin+500*time.Millisecond {
			t.Errorf("PTTL %s = %v, want in (%v, %v]", k, ttl, margin, margin+500*time.Millisecond)
		}
	}
	deadline := time.Now().Add(margin + 3*time.Second)
	for {
		n, err := c.Exists(ctx, keys...).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %v still there after %v", n, keys, margin+3*time.Second)
		}
		time.Sleep(50 * time.Millisecond) // polling Redis's clock, not waiting for ours
	}
}

// TestKeysShareSlot: every Redis key of a partition key hashes to one
// cluster slot, and neither the key names nor their values hold the
// partition key.
func TestKeysShareSlot(t *testing.T) {
	s, c, pre := newStore(t, redisstore.FailClosed())
	ctx := context.Background()
	const secret = "api.example.com authorization: Bearer sk_live_51HxQ7z9secret"
	p := throttle.Policy{Rate: 10, Burst: 5, Windows: []throttle.Window{
		{N: 5, Per: time.Second}, {N: 100, Per: time.Minute}, {N: 5000, Per: time.Hour},
	}}
	book(t, s, secret, p, 3)
	if err := s.Slow(ctx, secret, p, throttle.Slowdown{Pause: time.Second, Pace: 5}); err != nil {
		t.Fatal(err)
	}
	keys := scan(t, c, pre)
	if len(keys) != 2 {
		t.Fatalf("Redis keys %v, want 2: a hash and the windows' departures", keys)
	}
	slot := keySlot(keys[0])
	for _, k := range keys {
		if got := keySlot(k); got != slot {
			t.Errorf("%s in slot %d, %s in %d", keys[0], slot, k, got)
		}
		var values []string
		switch typ := c.Type(ctx, k).Val(); typ {
		case "hash":
			for f, v := range c.HGetAll(ctx, k).Val() {
				values = append(values, f, v)
			}
		case "zset":
			values = c.ZRange(ctx, k, 0, -1).Val()
		default:
			t.Fatalf("%s is a %s", k, typ)
		}
		for _, v := range append(values, k) {
			for _, part := range []string{secret, "sk_live", "example.com"} {
				if strings.Contains(v, part) {
					t.Errorf("%s holds %q in clear: %q", k, part, v)
				}
			}
		}
	}
}

// TestKeySlot checks keySlot against Redis Cluster's own figures
// (CLUSTER KEYSLOT, and the specification's example).
func TestKeySlot(t *testing.T) {
	for _, tc := range []struct {
		key  string
		slot int
	}{
		{"foo", 12182},
		{"somekey", 11058},
		{"123456789", 12739},           // the specification's check value of CRC16: 0x31C3
		{"{user1000}.following", 3443}, // a hash tag: "user1000"
		{"{user1000}.followers", 3443},
		{"foo{}{bar}", 8363}, // an empty tag: the whole key
		{"foo{{bar}}zap", 4015},
	} {
		if got := keySlot(tc.key); got != tc.slot {
			t.Errorf("keySlot(%q) = %d, want %d", tc.key, got, tc.slot)
		}
	}
}

// keySlot is the Redis Cluster slot of key: CRC16 (XMODEM) of its hash
// tag, or of the whole key without one, modulo 16384.
func keySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for _, b := range []byte(key) {
		crc ^= uint16(b) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % 16384
}

// Regression: a window keeps one member per departure, whatever its units.
// A departure of a million units once wrote a million members (1.5 s of
// Redis, blocking every client, and 120 MB).
func TestWindowMemberPerDeparture(t *testing.T) {
	s, c, pre := newStore(t, redisstore.FailClosed())
	ctx := context.Background()
	p := throttle.Policy{Windows: []throttle.Window{{N: 1_000_000, Per: time.Hour}}}
	for i, n := range []int{1_000_000, 1, 999_999} {
		r, err := s.Reserve(ctx, "costly", p, n, 2*time.Hour)
		if err != nil || !r.OK {
			t.Fatalf("Reserve %d of %d units: %+v, %v", i, n, r, err)
		}
		if i > 0 && r.Wait < 59*time.Minute {
			t.Fatalf("Reserve %d of %d units: wait %v, want an hour: the window holds a million", i, n, r.Wait)
		}
	}
	for _, k := range scan(t, c, pre) {
		if c.Type(ctx, k).Val() != "zset" {
			continue
		}
		// One member per departure, kept while it may count: the first
		// left when the second went, an hour after it.
		if n := c.ZCard(ctx, k).Val(); n != 2 {
			t.Errorf("ZCARD %s = %d, want 2: one member per departure that counts", k, n)
		}
	}
}

// A window's members count units from the oldest kept, in a double: they
// are numbered from 0 again before the count passes 2^52, and the waits go
// on as before. In a window of 2^50 units, departures of 2^48: four an
// hour.
func TestWindowUnitsRenumbered(t *testing.T) {
	if strconv.IntSize < 64 {
		t.Skip("a window of 2^50 units needs 64-bit ints")
	}
	s, c, pre := newStore(t, redisstore.FailClosed())
	ctx := context.Background()
	shift := 50 // not a constant: it would overflow int on 32-bit platforms
	p := throttle.Policy{Windows: []throttle.Window{{N: 1 << shift, Per: time.Hour}}}
	for i := range 24 { // past 2^52 units at the 17th
		r, err := s.Reserve(ctx, "renumbered", p, 1<<(shift-2), 10*time.Hour)
		if err != nil || !r.OK {
			t.Fatalf("Reserve %d: %+v, %v", i, r, err)
		}
		if want := time.Duration(i/4) * time.Hour; r.Wait < want-time.Second || r.Wait > want+time.Second {
			t.Fatalf("Reserve %d: wait %v, want %v", i, r.Wait, want)
		}
	}
	for _, k := range scan(t, c, pre) {
		if c.Type(ctx, k).Val() != "zset" {
			continue
		}
		for _, m := range c.ZRange(ctx, k, 0, -1).Val() {
			if len(m) < 17 || m[:17] > "4503599627370496:" { // 2^52
				t.Errorf("member %q of %s: want its count of units below 2^52", m, k)
			}
		}
	}
}

// TestKeysWrittenByOthersAreMended: a partition key whose Redis keys
// someone else overwrote (its hash a string, a window a list, a window
// holding a member not of the Store's) does not
// take the Store down: the other keys go on sharing, under FailClosed as
// under FailOpen, and the key itself works again at once, its state lost
// as after an expiry (regression, found in review: the error reply was
// taken for Redis being away, so every key booked alone, or failed, while
// the bad key never mended).
func TestKeysWrittenByOthersAreMended(t *testing.T) {
	p := throttle.Policy{Rate: 1000, Burst: 100, Windows: []throttle.Window{{N: 1000, Per: time.Second}}}
	ctx := context.Background()
	for _, spoil := range []struct {
		name string
		do   func(c *redis.Client, hash, win string) error
	}{
		{"hash-a-string", func(c *redis.Client, hash, _ string) error { return c.Set(ctx, hash, "garbage", 0).Err() }},
		{"window-a-list", func(c *redis.Client, _, win string) error { return c.RPush(ctx, win, "x").Err() }},
		{"window-member", func(c *redis.Client, _, win string) error {
			return c.ZAdd(ctx, win, redis.Z{Score: 1, Member: "not:a:member"}).Err()
		}},
	} {
		for _, closed := range []bool{false, true} {
			name := spoil.name + "/FailOpen"
			opt := redisstore.FailOpen(0.5)
			if closed {
				name, opt = spoil.name+"/FailClosed", redisstore.FailClosed()
			}
			t.Run(name, func(t *testing.T) {
				s, c, pre := newStore(t, opt)
				book(t, s, "bad", p, 1) // its keys exist; their names
				var hash, win string
				for _, k := range scan(t, c, pre) {
					if strings.HasSuffix(k, ":win") {
						win = k
					} else {
						hash = k
					}
				}
				if hash == "" || win == "" {
					t.Fatalf("Redis keys %v, want a hash and a window", scan(t, c, pre))
				}
				if err := c.Del(ctx, hash, win).Err(); err != nil {
					t.Fatal(err)
				}
				if err := spoil.do(c, hash, win); err != nil {
					t.Fatal(err)
				}
				r, err := s.Reserve(ctx, "bad", p, 1, time.Hour)
				if err != nil || !r.OK || r.Fallback != nil || r.Wait != 0 {
					t.Fatalf("the spoilt key: %+v, %v; want it booked at once through Redis", r, err)
				}
				book(t, s, "good", p, 5) // shared: no Fallback, no error
			})
		}
	}
}
