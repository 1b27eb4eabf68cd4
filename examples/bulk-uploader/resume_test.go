package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// gatedAPI accepts the first `open` requests of a run at once, then holds
// every later one until the test releases them (or the client goes away),
// so that a run can be stopped at a known point: once `workers` requests
// are held, every worker is in one, so every record accepted before has
// had its journal line written. It records what it accepted, and when.
type gatedAPI struct {
	open, workers int

	mu       sync.Mutex
	run      int                 // 1, 2, ...
	accepted map[string][]int    // record id → the runs that accepted it
	bodies   map[string][]string // record id → the bodies accepted
	inRun    int                 // accepted in this run
	held     int
	heldAll  chan struct{} // closed when `workers` requests are held
	release  chan struct{} // closed to let the held requests go
	acceptOK bool          // held requests, released, are accepted
	gateless bool          // accept everything at once
}

func newGatedAPI(open, workers int) *gatedAPI {
	return &gatedAPI{open: open, workers: workers, run: 1, accepted: map[string][]int{}, bodies: map[string][]string{},
		heldAll: make(chan struct{}), release: make(chan struct{})}
}

func (g *gatedAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	id := strings.TrimPrefix(r.URL.Path, "/records/")
	g.mu.Lock()
	if g.gateless || g.inRun < g.open {
		g.accept(id, body)
		g.mu.Unlock()
		return
	}
	g.held++
	if g.held == g.workers {
		close(g.heldAll)
	}
	g.mu.Unlock()
	select {
	case <-g.release:
	case <-r.Context().Done():
		return // the client is gone: not accepted
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.acceptOK || r.Context().Err() != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	g.accept(id, body)
}

// accept records the acceptance of id; the 200 follows.
func (g *gatedAPI) accept(id string, body []byte) {
	g.inRun++
	g.accepted[id] = append(g.accepted[id], g.run)
	g.bodies[id] = append(g.bodies[id], string(body))
}

func (g *gatedAPI) acceptedIn(run int) map[string]bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	ids := map[string]bool{}
	for id, runs := range g.accepted {
		for _, r := range runs {
			if r == run {
				ids[id] = true
			}
		}
	}
	return ids
}

// child is the program running as a process of its own.
type child struct {
	cmd         *exec.Cmd
	stdout      bytes.Buffer
	stderr      bytes.Buffer // complete once wait returns
	interrupted chan struct{}
	done        chan struct{}
}

// startChild runs the test binary as the program (see TestMain) with args.
func startChild(t *testing.T, args ...string) *child {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	a, err := json.Marshal(args)
	require.NoError(t, err)
	c := &child{interrupted: make(chan struct{}), done: make(chan struct{})}
	c.cmd = exec.Command(exe)
	// A binary built with -race sleeps a second before it exits, unless told.
	c.cmd.Env = append(os.Environ(), childArgs+"="+string(a), "GORACE="+os.Getenv("GORACE")+" atexit_sleep_ms=0")
	c.cmd.Stdout = &c.stdout
	stderr, err := c.cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, c.cmd.Start())
	go func() {
		defer close(c.done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			c.stderr.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "interrupted: stopping") {
				close(c.interrupted)
			}
		}
	}()
	return c
}

// wait waits for the process and returns its exit status (-1: killed).
func (c *child) wait(t *testing.T) int {
	t.Helper()
	<-c.done // the pipe is read to its end before Wait closes it
	err := c.cmd.Wait()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		require.NoError(t, err)
	}
	return c.cmd.ProcessState.ExitCode()
}

// await fails the test if ch is not closed within a generous minute: a
// bound on a hang, not a measure of time.
func await(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(time.Minute):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// TestKilledRunResumes guards issue 8, point 14 with a real process: a run
// killed (SIGKILL) or interrupted (SIGINT) mid-way is run again with the
// same journal; every record reaches the server, and none that the server
// accepted before the stop is sent again.
func TestKilledRunResumes(t *testing.T) {
	const n, open, workers = 50, 10, 4
	for _, tc := range []struct {
		sig        os.Signal
		firstCode  int
		firstTaken int // records the first run got accepted
	}{
		{os.Kill, -1, open},                 // the held ones die with the process
		{os.Interrupt, 130, open + workers}, // the held ones finish
	} {
		t.Run(tc.sig.String(), func(t *testing.T) {
			if tc.sig == os.Interrupt && runtime.GOOS == "windows" {
				t.Skip("no SIGINT to send on Windows")
			}
			dir := t.TempDir()
			in, journalPath := filepath.Join(dir, "records.jsonl"), filepath.Join(dir, "journal")
			want := map[string]string{}
			var input strings.Builder
			for i := range n {
				line := fmt.Sprintf(`{"id":"r%d","data":%q}`, i, strings.Repeat("x", i))
				want[fmt.Sprintf("r%d", i)] = line
				input.WriteString(line + "\r\n")
			}
			require.NoError(t, os.WriteFile(in, []byte(input.String()), 0o600))
			api := newGatedAPI(open, workers)
			api.acceptOK = tc.sig == os.Interrupt
			srv := httptest.NewServer(api)
			defer srv.Close()
			var once sync.Once
			release := func() { once.Do(func() { close(api.release) }) }
			defer release()
			args := []string{"-in", in, "-target", srv.URL, "-api-key", "k", "-rate", "0",
				"-workers", fmt.Sprint(workers), "-journal", journalPath, "-json"}

			first := startChild(t, args...)
			await(t, api.heldAll, "every worker to be held")
			require.NoError(t, first.cmd.Process.Signal(tc.sig))
			if tc.sig == os.Interrupt {
				await(t, first.interrupted, "the program to take the interrupt")
				release()
			}
			assert.Equal(t, tc.firstCode, first.wait(t), "stderr: %s", first.stderr.String())
			release()
			takenFirst := api.acceptedIn(1)
			require.Len(t, takenFirst, tc.firstTaken)
			assert.Equal(t, takenFirst, journaled(t, journalPath), "the journal lists what the server accepted")
			if tc.sig == os.Interrupt {
				var s summary
				require.NoError(t, json.Unmarshal(first.stdout.Bytes(), &s), first.stdout.String())
				assert.Equal(t, summary{Uploaded: open + workers, NotSent: n - open - workers}, summary{Uploaded: s.Uploaded, NotSent: s.NotSent})
			} else {
				// As if it died writing a line, too.
				f, err := os.OpenFile(journalPath, os.O_WRONLY|os.O_APPEND, 0)
				require.NoError(t, err)
				_, err = f.WriteString(`{"id":"r4`)
				require.NoError(t, err)
				require.NoError(t, f.Close())
			}

			api.mu.Lock()
			api.run, api.inRun, api.gateless = 2, 0, true
			api.mu.Unlock()
			second := startChild(t, args...)
			require.Equal(t, 0, second.wait(t), "stderr: %s", second.stderr.String())
			if tc.sig == os.Kill {
				assert.Contains(t, second.stderr.String(), "dropped its unfinished last line")
			}
			var s summary
			require.NoError(t, json.Unmarshal(second.stdout.Bytes(), &s), second.stdout.String())
			assert.Equal(t, tc.firstTaken, s.Skipped)
			assert.Equal(t, n-tc.firstTaken, s.Uploaded)

			api.mu.Lock()
			defer api.mu.Unlock()
			assert.Len(t, api.accepted, n, "every record reached the server")
			for id, runs := range api.accepted {
				assert.Len(t, runs, 1, "%s accepted once, not sent again after", id)
				for _, b := range api.bodies[id] {
					assert.Equal(t, want[id], b, id)
				}
			}
		})
	}
}

// journaled returns the ids the journal at path lists as uploaded.
func journaled(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	ids := map[string]bool{}
	for line := range strings.Lines(string(b)) {
		var e entry
		require.NoError(t, json.Unmarshal([]byte(line), &e), line)
		if e.Uploaded {
			ids[e.ID] = true
		}
	}
	return ids
}
