package redisstore_test

import (
	"testing"

	"github.com/throttlehttp/throttle"
	"github.com/throttlehttp/throttle/redisstore"
	"github.com/throttlehttp/throttle/storetest"
)

// TestStore holds the Redis store to the meaning every Store shares
// (package storetest), on the Redis server's clock (storetest.RealClock).
func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) throttle.Store {
		s, _, _ := newStore(t, redisstore.FailClosed()) // no local fallback to pass in Redis's stead
		return s
	}, storetest.RealClock)
}
