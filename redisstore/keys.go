package redisstore

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"

	"github.com/throttlehttp/throttle"
)

// This file holds the names of a partition key's Redis keys: its hash, and
// one sorted set per Window, all under one hash tag made of a digest of the
// partition key, never of the key itself.

// tag is the hash tag of key: "{" and the first 16 bytes of its SHA-256 in
// hexadecimal, and "}". A partition key may hold a credential (an API
// token, through throttle.KeyByHeader or a key function of one's own); its
// digest names it in Redis without revealing it. Redis Cluster hashes only
// what is between the braces, so every Redis key of one partition key falls
// in one slot, as a script's keys must.
func tag(key string) string {
	sum := sha256.Sum256([]byte(key))
	var b [2 + 2*16]byte
	b[0] = '{'
	hex.Encode(b[1:], sum[:16])
	b[len(b)-1] = '}'
	return string(b[:])
}

// keys returns the Redis keys of key under p: its hash first
// ("throttle:{…}"), then the sorted set of each of p's Windows
// ("throttle:{…}:win:5000:3600000000000", N and Per in nanoseconds).
func (s *Store) keys(key string, p throttle.Policy) []string {
	base := s.cfg.prefix + tag(key)
	out := make([]string, 1, 1+len(p.Windows))
	out[0] = base
	for _, w := range p.Windows {
		out = append(out, base+":win:"+strconv.Itoa(w.N)+":"+strconv.FormatInt(int64(w.Per), 10))
	}
	return out
}
