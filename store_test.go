package throttle_test

import (
	"testing"
	"testing/synctest"

	"github.com/throttlehttp/throttle"
	"github.com/throttlehttp/throttle/storetest"
)

// TestMemoryStore holds MemoryStore to the meaning every Store shares, on
// synctest's clock: exactly.
func TestMemoryStore(t *testing.T) {
	for _, tc := range storetest.Tests {
		t.Run(tc.Name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { tc.Fn(t, throttle.NewMemoryStore()) })
		})
	}
}
