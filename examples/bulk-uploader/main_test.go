package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/throttlehttp/throttle/throttletest"
)

// childArgs, in the environment, makes the test binary run as the program
// itself, with these arguments (a JSON array): see startChild.
const childArgs = "BULK_UPLOADER_TEST_CHILD_ARGS"

func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv(childArgs); ok {
		var a []string
		if err := json.Unmarshal([]byte(args), &a); err != nil {
			fmt.Fprintln(os.Stderr, childArgs+":", err)
			os.Exit(3)
		}
		os.Args = append([]string{name}, a...)
		main() // exits
	}
	goleak.VerifyTestMain(m)
}

// inProcess serves the demo API without sockets, inside the test's bubble.
func inProcess(cfg throttletest.Config) (string, *throttletest.API, http.RoundTripper, func()) {
	api := throttletest.NewAPI(cfg)
	return "http://demo.test", api, api, func() {}
}

// runApp runs the program with args in a synctest bubble and returns its
// exit status and the JSON summary.
func runApp(t *testing.T, stdin string, args ...string) (int, summary, string) {
	t.Helper()
	var code int
	var out, errOut bytes.Buffer
	synctest.Test(t, func(t *testing.T) {
		a := &app{stdin: strings.NewReader(stdin), stdout: &out, stderr: &errOut, demo: inProcess}
		code = a.main(context.Background(), context.Background(), append([]string{"-json"}, args...))
	})
	var s summary
	require.NoError(t, json.Unmarshal(out.Bytes(), &s), "stdout: %s\nstderr: %s", out.String(), errOut.String())
	return code, s, errOut.String()
}

func TestDefaultJobWastesNothing(t *testing.T) {
	code, s, _ := runApp(t, "", "-n", "500")
	assert.Equal(t, 0, code)
	assert.Equal(t, 500, s.Uploaded)
	assert.EqualValues(t, 500, s.Attempts, "one request per record")
	assert.Zero(t, s.Throttled)
	require.NotNil(t, s.Server)
	assert.EqualValues(t, 500, s.Server.Requests)
	assert.InDelta(t, s.IdealSecs, s.WallSecs, 0.05, "as fast as the quota allows")
}

func TestRecordsFromFileAreReplayedFromDisk(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "records.jsonl")
	var lines []string
	for i := range 40 {
		lines = append(lines, fmt.Sprintf(`{"id": "r%d", "payload": %q}`, i, strings.Repeat("x", i)))
	}
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n\n"), 0o600))
	// 200/s against the demo's 100/s: 429s, pauses and retries, every
	// retry reading its body again from the file.
	code, s, _ := runApp(t, "", "-in", path, "-rate", "200", "-burst", "20")
	assert.Equal(t, 0, code)
	assert.Equal(t, 40, s.Uploaded)
	assert.Positive(t, s.Throttled)
	assert.Equal(t, s.Throttled, s.Retries, "every 429 retried")
	assert.EqualValues(t, 40+s.Retries, s.Attempts)
}

func TestRecordsFromStdin(t *testing.T) {
	code, s, _ := runApp(t, "{\"id\": 7}\n{\"id\": 8}\n{\"name\": \"no id\"}\n", "-in", "-", "-method", "POST")
	assert.Equal(t, 0, code)
	assert.Equal(t, 3, s.Uploaded)
}

func TestBadInputIsRefused(t *testing.T) {
	var out, errOut bytes.Buffer
	a := &app{stdin: strings.NewReader("{\"id\": 1}\nnot json\n"), stdout: &out, stderr: &errOut, demo: inProcess}
	assert.Equal(t, 2, a.main(context.Background(), context.Background(), []string{"-in", "-"}))
	assert.Contains(t, errOut.String(), "line 2: not a JSON object")
	errOut.Reset()
	assert.Equal(t, 2, a.main(context.Background(), context.Background(), []string{"-rate", "5", "-burst", "0"}))
	assert.Equal(t, "bulk-uploader: -burst 0: a token bucket needs at least 1\n", errOut.String())
}

func TestFailedRecordsAreListedAndExitNonZero(t *testing.T) {
	// Without an API key the demo API answers 401 to every record.
	code, s, _ := runApp(t, "", "-n", "3", "-api-key", "")
	assert.Equal(t, 1, code)
	assert.Equal(t, 3, s.Failed)
	require.Len(t, s.FailedList, 3)
	assert.Contains(t, s.FailedList[0].Error, "401")
}

func TestInterruptAccountsForEveryRecord(t *testing.T) {
	var code int
	var out bytes.Buffer
	synctest.Test(t, func(t *testing.T) {
		stop, cancel := context.WithCancel(context.Background())
		time.AfterFunc(2*time.Second, cancel) // Ctrl-C after 2s of a 10s job
		a := &app{stdout: &out, stderr: io.Discard, demo: inProcess}
		code = a.main(stop, context.Background(), []string{"-json", "-n", "1000"})
	})
	var s summary
	require.NoError(t, json.Unmarshal(out.Bytes(), &s))
	assert.Equal(t, 130, code)
	assert.Zero(t, s.Failed, "the records under way finished")
	assert.Positive(t, s.NotSent)
	assert.Equal(t, 1000, s.Uploaded+s.Failed+s.NotSent, "no record unaccounted for")
	assert.EqualValues(t, s.Uploaded, s.Server.Accepted)
}

// rtFunc is a RoundTripper made of a function.
type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestNaiveClientStorms(t *testing.T) {
	var code int
	var out bytes.Buffer
	synctest.Test(t, func(t *testing.T) {
		// A network round trip of 1ms: without it, resending at once would
		// spin in a bubble whose clock never moves.
		withRTT := func(cfg throttletest.Config) (string, *throttletest.API, http.RoundTripper, func()) {
			api := throttletest.NewAPI(cfg)
			return "http://demo.test", api, rtFunc(func(r *http.Request) (*http.Response, error) {
				time.Sleep(time.Millisecond)
				return api.RoundTrip(r)
			}), func() {}
		}
		a := &app{stdout: &out, stderr: io.Discard, demo: withRTT}
		code = a.main(context.Background(), context.Background(), []string{"-json", "-n", "300", "-naive"})
	})
	var s summary
	require.NoError(t, json.Unmarshal(out.Bytes(), &s))
	// A record can starve for its 1000 attempts in the scramble; then it
	// fails, and says so.
	assert.Equal(t, 300, s.Uploaded+s.Failed)
	assert.Equal(t, map[bool]int{true: 1, false: 0}[s.Failed > 0], code)
	assert.Greater(t, s.PerRecord, 2.0, "resending at once on 429 wastes requests")
	assert.EqualValues(t, s.Server.Requests, s.Attempts)
}
