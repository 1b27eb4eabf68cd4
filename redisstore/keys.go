package redisstore

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/throttlehttp/throttle"
)

// This file holds the names of a partition key's Redis keys: its hash, and
// the sorted set of its windows' departures, both under one hash tag made
// of a digest of the partition key, never of the key itself.

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

// keys returns the Redis keys of key under p: its hash ("throttle:{…}"),
// then, if p has Windows, the sorted set of their departures
// ("throttle:{…}:win"). The set is named by neither N nor Per, which are
// passed on every call: its windows keep counting what they logged when
// they change (found in review 46: named by both, "…:win:10:60000000000",
// a window grown from 10 to 20 a minute in every process started empty,
// and 30 went within a minute).
func (s *Store) keys(key string, p throttle.Policy) []string {
	base := s.cfg.prefix + tag(key)
	if len(p.Windows) == 0 {
		return []string{base}
	}
	return []string{base, base + ":win"}
}
