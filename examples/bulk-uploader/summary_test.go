package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlehttp/throttle/throttletest"
)

// The summary splits the time waited by what was waited for, from the
// transport's own EventWaited: the parts add up to the total its Stats
// count.
func TestSummarySaysWhatWasWaitedFor(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		waits []string // the limits waited for
		maybe string   // and one that may be
	}{
		{"within the quota: the rate alone", []string{"-n", "200"}, []string{"rate"}, ""},
		// The first 429s are collisions, which cut the pace; the key
		// pauses only once they dominate its recent answers.
		{"above it: 429s cut the pace, and may pause the key", []string{"-n", "200", "-rate", "200", "-burst", "20"}, []string{"rate"}, "pause"},
		{"a queue", []string{"-n", "200", "-queue", "50"}, []string{"queue"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, s, _ := runApp(t, "", tc.args...)
			require.Equal(t, 0, code)
			var limits []string
			sum := 0.0
			for l, secs := range s.WaitByLimit {
				sum += secs
				if l == tc.maybe {
					continue
				}
				assert.Positive(t, secs, l)
				limits = append(limits, l)
			}
			assert.ElementsMatch(t, tc.waits, limits)
			assert.InDelta(t, s.WaitSecs, sum, 1e-6, "the parts add up to the whole")
		})
	}
}

func TestNothingWaitedSaysNothing(t *testing.T) {
	code, s, _ := runApp(t, "", "-n", "5")
	require.Equal(t, 0, code)
	assert.Nil(t, s.WaitByLimit, "a burst of 10 sends 5 at once")
	var out bytes.Buffer
	s.print(&out, false)
	assert.NotContains(t, out.String(), "waited")
}

func TestWaitedLine(t *testing.T) {
	tests := []struct {
		secs  map[string]float64
		total float64 // Stats' WaitTime: the waits that got their turn, and those that did not
		want  string
	}{
		{map[string]float64{"rate": 12.3}, 12.3, "12.30s for the rate"},
		{map[string]float64{"pause": 4, "rate": 12.3, "window": 0.5}, 16.8, "12.30s for the rate, 4.00s for the pause, 0.50s for the window"},
		{map[string]float64{"queue": 1, "line": 1}, 2, "1.00s for the line, 1.00s for the queue"},
		// Waits that ended without their turn (cancelled, timed out) are
		// in the total, not in the split (found in review: "time waiting
		// 31.34s" above "waited 9.03s for the rate").
		{map[string]float64{"rate": 9.03}, 31.34, "9.03s for the rate, 22.31s without their turn"},
		{nil, 2, "2.00s without their turn"},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, byLimit(tc.secs, tc.total))
		var out bytes.Buffer
		(&summary{WaitByLimit: tc.secs, WaitSecs: tc.total}).print(&out, false)
		assert.Contains(t, out.String(), "  waited          "+tc.want+"\n")
	}
}

// A run that uploaded nothing claims neither a ratio to the ideal nor that
// nothing was wasted (found in review: -n 0 said both).
func TestNothingUploadedClaimsNothing(t *testing.T) {
	code, s, _ := runApp(t, "", "-n", "0")
	require.Equal(t, 0, code)
	var out bytes.Buffer
	s.print(&out, false)
	assert.NotContains(t, out.String(), "nothing wasted")
	assert.NotContains(t, out.String(), "ideal for the quota")
	assert.Contains(t, out.String(), "0 uploaded")
}

// Records that the transport refused at once with throttle.ErrPaused (the
// API paused the key for an hour, longer than the longest Retry-After
// honoured) were never sent: the summary counts and lists them as not
// sent, with why, not as failed, and does not say the run was interrupted
// (found in review: they were listed as failed).
func TestPausedRecordsAreNotSent(t *testing.T) {
	var code int
	var out, text bytes.Buffer
	var requests atomic.Int64
	synctest.Test(t, func(t *testing.T) {
		paused := answering(&requests, http.StatusTooManyRequests, http.Header{"Retry-After": {"3600"}})
		a := &app{stdout: &out, stderr: io.Discard, demo: paused}
		code = a.main(context.Background(), context.Background(), []string{"-json", "-n", "20", "-workers", "1"})
	})
	var s summary
	require.NoError(t, json.Unmarshal(out.Bytes(), &s), out.String())
	assert.EqualValues(t, requests.Load(), s.Failed, "only the records sent failed: each got its 429")
	assert.EqualValues(t, s.Failed, s.Attempts)
	assert.Equal(t, 20-s.Failed, s.NotSent, "the others were refused unsent")
	assert.Positive(t, s.NotSent)
	assert.Zero(t, s.Uploaded)
	for _, f := range s.FailedList {
		assert.Contains(t, f.Error, "429", f.ID)
	}
	require.Len(t, s.NotSentList, s.NotSent)
	for _, f := range s.NotSentList {
		assert.Contains(t, f.Error, "paused", f.ID)
	}
	assert.Equal(t, 1, code, "records left unsent without an interrupt: the run did not succeed")
	s.print(&text, false)
	assert.Contains(t, text.String(), fmt.Sprintf("%d failed, %d not sent", s.Failed, s.NotSent))
	assert.NotContains(t, text.String(), "interrupted")
}

// Records whose first attempt a second Ctrl-C cancelled while it waited
// its turn were not sent, not failed (found in review: only ErrPaused's
// refusals were told so): the summary lists them with why, and counts no
// attempt for them.
func TestCancelledWaitsAreNotSent(t *testing.T) {
	var code int
	var out, errs bytes.Buffer
	var requests atomic.Int64
	synctest.Test(t, func(t *testing.T) {
		ok := answering(&requests, http.StatusOK, nil)
		stop, stopNow := context.WithCancel(context.Background())
		abort, abortNow := context.WithCancel(context.Background())
		go func() {
			time.Sleep(2500 * time.Millisecond) // two Ctrl-Cs, records waiting their turn
			stopNow()
			abortNow()
		}()
		a := &app{stdout: &out, stderr: &errs, demo: ok}
		code = a.main(stop, abort, []string{"-json", "-n", "40", "-workers", "4", "-rate", "1", "-burst", "1"})
	})
	var s summary
	require.NoError(t, json.Unmarshal(out.Bytes(), &s), errs.String())
	assert.EqualValues(t, requests.Load(), s.Uploaded, "what was sent was uploaded")
	assert.Zero(t, s.Failed)
	assert.Equal(t, 40-s.Uploaded, s.NotSent)
	require.NotEmpty(t, s.NotSentList, "the workers' waiting records were refused unsent")
	for _, f := range s.NotSentList {
		assert.Contains(t, f.Error, "context canceled", f.ID)
	}
	assert.Equal(t, 130, code, "interrupted")
}

// answering is a demo API (see app.demo) that answers every request with
// status and header, counting the requests in n.
func answering(n *atomic.Int64, status int, header http.Header) func(throttletest.Config) (string, *throttletest.API, http.RoundTripper, func()) {
	return func(throttletest.Config) (string, *throttletest.API, http.RoundTripper, func()) {
		return "http://demo.test", nil, rtFunc(func(r *http.Request) (*http.Response, error) {
			n.Add(1)
			return &http.Response{StatusCode: status, Status: fmt.Sprint(status, " ", http.StatusText(status)),
				Header: header, Body: http.NoBody, Request: r}, nil
		}), func() {}
	}
}
