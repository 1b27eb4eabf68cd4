package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestProgressMode(t *testing.T) {
	file, err := os.Create(filepath.Join(t.TempDir(), "log"))
	require.NoError(t, err)
	defer file.Close()
	assert.Equal(t, progressLines, progressFor(file), "a log file")
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	defer w.Close()
	assert.Equal(t, progressLines, progressFor(w), "a pipe")
	if runtime.GOOS != "windows" {
		null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
		require.NoError(t, err)
		defer null.Close()
		assert.Equal(t, progressBar, progressFor(null), "a character device, as a terminal is")
	}
}

func TestPlainProgressLines(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var out bytes.Buffer
	p := newProgress(progressLines, &out, 40, t0)
	at := func(d time.Duration, throttled int64) { p.add(t0.Add(d), throttled) }
	at(100*time.Millisecond, 0) // 1
	at(200*time.Millisecond, 0) // 2
	at(300*time.Millisecond, 1) // 3
	at(400*time.Millisecond, 1) // 4: a tenth
	at(15*time.Second, 2)       // 5: 10s since the last line
	at(15*time.Second, 2)       // 6
	at(15*time.Second, 2)       // 7
	p.finish(t0.Add(16*time.Second), true)
	assert.Equal(t, ""+
		"bulk-uploader: 4/40 records done (10%), 1 429s, 400ms\n"+
		"bulk-uploader: 5/40 records done (12%), 2 429s, 15s\n"+
		"bulk-uploader: 7/40 records done (17%), 2 429s, 16s\n",
		out.String())
}

// TestProgressOffATerminalIsPlainLines guards issue 8, point 15: with
// stderr not a terminal, the bar's carriage-return updates filled a log
// file with 20 KB. The default job prints one plain line per tenth.
func TestProgressOffATerminalIsPlainLines(t *testing.T) {
	var errOut bytes.Buffer
	synctest.Test(t, func(t *testing.T) {
		a := &app{stdout: io.Discard, stderr: &errOut, progress: progressLines, demo: inProcess}
		require.Equal(t, 0, a.main(context.Background(), context.Background(), nil))
	})
	log := errOut.String()
	assert.NotContains(t, log, "\r")
	lines := strings.Split(strings.TrimSuffix(log, "\n"), "\n")
	require.Len(t, lines, 10, log)
	for i, l := range lines {
		assert.True(t, strings.HasPrefix(l, "bulk-uploader: "+[]string{
			"100", "200", "300", "400", "500", "600", "700", "800", "900", "1000"}[i]+"/1000 records done"), l)
	}
	assert.Less(t, len(log), 1000)
}

// stampedWriter notes when each line was written (the bubble's clock).
type stampedWriter struct {
	mu    sync.Mutex
	at    []time.Time
	lines []string
}

func (w *stampedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, l := range strings.SplitAfter(string(p), "\n") {
		if l != "" {
			w.at, w.lines = append(w.at, time.Now()), append(w.lines, strings.TrimSuffix(l, "\n"))
		}
	}
	return len(p), nil
}

// A slow run prints a plain line at least every lineEvery, records done or
// not (regression, found in review: at 0.05 records a second, a line came
// only as each record was done, 20 s apart).
func TestPlainProgressAtLeastEveryTenSeconds(t *testing.T) {
	w := &stampedWriter{}
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		a := &app{stdout: io.Discard, stderr: w, progress: progressLines, demo: inProcess}
		require.Equal(t, 0, a.main(context.Background(), context.Background(), []string{"-n", "3", "-rate", "0.05", "-burst", "1"}))
		prev := start
		for i, at := range w.at {
			assert.LessOrEqual(t, at.Sub(prev), lineEvery, "line %d %q came %v after the one before", i, w.lines[i], at.Sub(prev))
			prev = at
		}
		assert.Greater(t, len(w.lines), 4, "a line every 10 s of a 40 s run, and one per record: %q", w.lines)
	})
}
