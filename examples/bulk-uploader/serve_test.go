package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
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

	// Twenty at once: the burst of 10 goes, the rest are refused.
	statuses := map[int]int{}
	for i := range 20 {
		req, err := http.NewRequest(http.MethodPut, url+"/records/r"+string(rune('a'+i)), strings.NewReader(`{}`))
		require.NoError(t, err)
		req.Header.Set("X-API-Key", "demo")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		statuses[resp.StatusCode]++
	}
	http.DefaultClient.CloseIdleConnections()
	interrupt()
	require.Equal(t, 0, <-code)
	var s server
	require.NoError(t, json.Unmarshal(out.Bytes(), &s), out.String())
	assert.EqualValues(t, 20, s.Requests)
	assert.EqualValues(t, statuses[http.StatusTooManyRequests], s.Throttled)
	assert.Positive(t, s.Throttled)
	assert.EqualValues(t, 20-s.Throttled, s.Accepted)
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
