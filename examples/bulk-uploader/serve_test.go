package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestServe: -serve runs the demo API on a socket until Ctrl-C, and then
// says what it saw, its own quota enforced.
func TestServe(t *testing.T) {
	stop, interrupt := context.WithCancel(context.Background())
	defer interrupt()
	errR, errW := io.Pipe()
	var out bytes.Buffer
	a := &app{stdout: &out, stderr: errW}
	code := make(chan int, 1)
	go func() {
		code <- a.main(stop, context.Background(), []string{"-serve", "127.0.0.1:0", "-json"})
		errW.Close()
	}()
	line, err := bufio.NewReader(errR).ReadString('\n')
	require.NoError(t, err)
	go func() { _, _ = io.Copy(io.Discard, errR) }()
	_, url, ok := strings.Cut(line, " at ")
	require.True(t, ok, line)
	url, _, _ = strings.Cut(url, ";")

	// Forty at once: the burst of 10 goes, and most of the rest are
	// refused. (Sent one after another, twenty were all accepted on a
	// loaded machine, -race: at 10 ms a request the bucket refills as
	// fast as they come.)
	const n = 40
	var (
		mu       sync.Mutex
		statuses = map[int]int{}
		wg       sync.WaitGroup
	)
	for i := range n {
		wg.Go(func() {
			req, err := http.NewRequest(http.MethodPut, fmt.Sprintf("%s/records/r%d", url, i), strings.NewReader(`{}`))
			if !assert.NoError(t, err) {
				return
			}
			req.Header.Set("X-API-Key", "demo")
			resp, err := http.DefaultClient.Do(req)
			if !assert.NoError(t, err) {
				return
			}
			resp.Body.Close()
			mu.Lock()
			statuses[resp.StatusCode]++
			mu.Unlock()
		})
	}
	wg.Wait()
	http.DefaultClient.CloseIdleConnections()
	interrupt()
	require.Equal(t, 0, <-code)
	var s server
	require.NoError(t, json.Unmarshal(out.Bytes(), &s), out.String())
	assert.EqualValues(t, n, s.Requests)
	assert.EqualValues(t, statuses[http.StatusTooManyRequests], s.Throttled)
	assert.Positive(t, s.Throttled)
	assert.EqualValues(t, n-s.Throttled, s.Accepted)
}

// TestServeFlags: -serve takes no job flags.
func TestServeFlags(t *testing.T) {
	var errOut bytes.Buffer
	a := &app{stdout: io.Discard, stderr: &errOut}
	code := a.main(context.Background(), context.Background(), []string{"-serve", "127.0.0.1:0", "-n", "5", "-rate", "3"})
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut.String(), "-n does not apply")
	assert.Contains(t, errOut.String(), "-rate does not apply")
}
