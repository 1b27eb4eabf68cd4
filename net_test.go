package throttle_test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlehttp/throttle"
)

// TestRetriesReuseConnections runs on real loopback sockets: throttled
// answers with bodies are drained and closed, so every retry goes over the
// connection already open instead of dialing a new one. (429s: their retries
// spend no retry budget.)
func TestRetriesReuseConnections(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1)%4 != 0 {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(strings.Repeat("busy ", 200))) // 1000 bytes to drain
			return
		}
		_, _ = w.Write([]byte("ok"))
	}))
	var mu sync.Mutex
	conns := 0
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			mu.Lock()
			conns++
			mu.Unlock()
		}
	}
	srv.Start()
	defer srv.Close()

	base := &http.Transport{MaxIdleConnsPerHost: 1}
	defer base.CloseIdleConnections()
	rt := throttle.New(base, throttle.WithRetry(throttle.Retry{InitialDelay: time.Millisecond, MaxDelay: time.Millisecond}))
	defer rt.Close()
	client := &http.Client{Transport: rt}
	for range 5 {
		resp, err := client.Get(srv.URL)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	assert.EqualValues(t, 20, hits.Load(), "three retries per request")
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, 1, conns, "one connection for all 20 attempts")
}
