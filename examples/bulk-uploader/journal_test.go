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
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlehttp/throttle/throttletest"
)

// recs makes records from bodies, with ids from their "id" fields.
func recs(t *testing.T, bodies ...string) []record {
	t.Helper()
	r, err := readAll(strings.NewReader(strings.Join(bodies, "\n")))
	require.NoError(t, err)
	return r
}

func ids(rs []record) []string {
	var s []string
	for _, r := range rs {
		s = append(s, r.id)
	}
	return s
}

func TestJournalSkipsWhatWasUploaded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal")
	first := recs(t, `{"id":"a"}`, `{"id":"b"}`, `{"id":"c"}`, `{"id":"dup"}`, `{"id":"dup"}`)
	j, err := openJournal(path, "")
	require.NoError(t, err)
	assert.False(t, j.torn)
	require.NoError(t, j.append(entryFor(result{rec: first[0], sent: true, status: 200})))
	require.NoError(t, j.append(entryFor(result{rec: first[1], sent: true, status: 400, err: fmt.Errorf("400 Bad Request")})))
	require.NoError(t, j.append(entryFor(result{rec: first[3], sent: true, status: 201})))
	require.NoError(t, j.close())

	// The same input, with b and c untouched and a edited since.
	again := recs(t, `{"id":"a", "fixed":true}`, `{"id":"b"}`, `{"id":"c"}`, `{"id":"dup"}`, `{"id":"dup"}`)
	again = append(again, first[0])
	j, err = openJournal(path, "")
	require.NoError(t, err)
	defer j.close()
	rest, skipped := j.skip(again)
	assert.Equal(t, 2, skipped, "a as it was, and one of the two identical dups")
	assert.Equal(t, []string{"a", "b", "c", "dup"}, ids(rest), "a edited, b failed, c never sent, the second dup")
}

func TestJournalDropsATornLastLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal")
	rs := recs(t, `{"id":"a"}`, `{"id":"b"}`, `{"id":"c"}`)
	whole, err := json.Marshal(entryFor(result{rec: rs[0], sent: true, status: 200}))
	require.NoError(t, err)
	torn, err := json.Marshal(entryFor(result{rec: rs[1], sent: true, status: 200}))
	require.NoError(t, err)
	for _, cut := range []int{1, len(torn) / 2, len(torn)} { // the last: all but its "\n"
		t.Run(fmt.Sprint(cut), func(t *testing.T) {
			require.NoError(t, os.WriteFile(path, append(append(whole, '\n'), torn[:cut]...), 0o600))
			j, err := openJournal(path, "")
			require.NoError(t, err)
			assert.True(t, j.torn)
			require.NoError(t, j.append(entryFor(result{rec: rs[2], sent: true, status: 200})))
			require.NoError(t, j.close())

			j, err = openJournal(path, "")
			require.NoError(t, err)
			defer j.close()
			assert.False(t, j.torn, "cut back before the append")
			rest, skipped := j.skip(rs)
			assert.Equal(t, 2, skipped)
			assert.Equal(t, []string{"b"}, ids(rest), "the torn line's record is sent again")
		})
	}
}

func TestJournalRefusesWhatIsNotAJournal(t *testing.T) {
	dir := t.TempDir()
	entry := `{"id":"a","sha256":"` + strings.Repeat("ab", 32) + `","uploaded":true}` + "\n"
	input := filepath.Join(dir, "records.jsonl")
	require.NoError(t, os.WriteFile(input, []byte("{\"id\":\"a\"}\n"), 0o600))
	for _, tc := range []struct {
		name, content, err string
	}{
		{"records", "{\"id\":\"a\"}\n{\"id\":\"b\"}\n", "line 1 is not a journal entry: is this the right file?"},
		{"garbage in the middle", entry + "garbage\n" + entry, "line 2 is not a journal entry"},
		{"a short hash", `{"id":"a","sha256":"abab","uploaded":true}` + "\n", "line 1 is not a journal entry"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name)
			require.NoError(t, os.WriteFile(path, []byte(tc.content), 0o600))
			_, err := openJournal(path, "")
			assert.ErrorContains(t, err, "journal "+path+": "+tc.err)
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, tc.content, string(b), "left as it was")
		})
	}
	_, err := openJournal(input, input)
	assert.ErrorContains(t, err, "is the input file (-in)")
	_, err = openJournal(dir, "")
	assert.ErrorContains(t, err, "journal "+dir+": is a directory")
}

func TestJournalAppendsConcurrently(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal")
	j, err := openJournal(path, "")
	require.NoError(t, err)
	rs := generate(200)
	var wg sync.WaitGroup
	for _, r := range rs {
		wg.Go(func() { assert.NoError(t, j.append(entryFor(result{rec: r, sent: true, status: 200}))) })
	}
	wg.Wait()
	require.NoError(t, j.close())
	j, err = openJournal(path, "")
	require.NoError(t, err)
	defer j.close()
	rest, skipped := j.skip(rs)
	assert.Equal(t, 200, skipped)
	assert.Empty(t, rest)
}

func TestJournalFailureIsSticky(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal")
	j, err := openJournal(path, "")
	require.NoError(t, err)
	rs := generate(2)
	require.NoError(t, j.f.Close()) // as a disk that fails
	assert.ErrorContains(t, j.append(entryFor(result{rec: rs[0], sent: true})), "journal "+path+": ")
	assert.ErrorContains(t, j.append(entryFor(result{rec: rs[1], sent: true})), "journal "+path+": ")
}

// TestInterruptedRunResumes runs the default job in-process, stops it as
// Ctrl-C does, and runs it again with the same journal: the second run
// sends exactly the records the first did not upload.
func TestInterruptedRunResumes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal")
	var mu sync.Mutex
	accepted := map[string]int{} // by path, over both runs
	run := func(stopAfter time.Duration) (int, string) {
		var code int
		var out, errOut bytes.Buffer
		synctest.Test(t, func(t *testing.T) {
			counting := countingDemo(throttletest.NewAPI, &mu, accepted)
			stop, cancel := context.WithCancel(context.Background())
			defer cancel()
			if stopAfter > 0 {
				time.AfterFunc(stopAfter, cancel)
			}
			a := &app{stdout: &out, stderr: &errOut, demo: counting}
			code = a.main(stop, context.Background(), []string{"-n", "300", "-journal", path})
		})
		return code, out.String() + errOut.String()
	}

	code, out := run(time.Second)
	assert.Equal(t, 130, code)
	assert.Regexp(t, `records +\d+ uploaded, 0 failed, \d+ not sent`, out)
	assert.Contains(t, out, "run the same command again: the journal "+path+" skips the ")
	first := len(accepted)
	require.Positive(t, first)
	require.Less(t, first, 300)

	code, out = run(0)
	assert.Equal(t, 0, code, out)
	assert.Contains(t, out, fmt.Sprintf("%d uploaded, 0 failed, 0 not sent", 300-first))
	assert.Contains(t, out, fmt.Sprintf("skipped         %d uploaded before (journal %s)", first, path))
	assert.Len(t, accepted, 300)
	for p, n := range accepted {
		assert.Equal(t, 1, n, "%s accepted once", p)
	}
}

// TestJournalFailureStopsTheRun: a record uploaded but not journaled would
// be sent again on resume, so the first failure to write stops the run.
func TestJournalFailureStopsTheRun(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal")
	synctest.Test(t, func(t *testing.T) {
		a := &app{stdout: io.Discard, stderr: io.Discard, demo: inProcess}
		o, err := a.parse([]string{"-n", "200", "-workers", "4", "-journal", path})
		require.NoError(t, err)
		j, err := openJournal(path, "")
		require.NoError(t, err)
		require.NoError(t, j.f.Close()) // as a disk that fails
		s := a.upload(context.Background(), context.Background(), o, generate(200), j)
		assert.Contains(t, s.JournalError, "journal "+path+": ")
		assert.LessOrEqual(t, s.Uploaded+s.Failed, 4, "only the records under way when it failed")
		assert.Equal(t, 200, s.Uploaded+s.Failed+s.NotSent)
		var out bytes.Buffer
		s.print(&out, false)
		assert.Contains(t, out.String(), "stopped: journal "+path+": ")
		assert.Contains(t, out.String(), "once the journal can be written")
	})
}

// The same command started twice with one journal (a second terminal, a
// cron job that overlaps the one before) uploads every record once: the
// second run is told the journal is in use, and exits 2. (Found in review:
// each read the journal before the other wrote, and 50 records were
// uploaded twice, both runs saying nothing was wasted.)
func TestAJournalInUseByAnotherRunIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal")
	var mu sync.Mutex
	accepted := map[string]int{} // by path, over both runs
	var codes [2]int
	var outs [2]bytes.Buffer
	synctest.Test(t, func(t *testing.T) {
		api := throttletest.NewAPI(demoQuota)
		shared := countingDemo(func(throttletest.Config) *throttletest.API { return api }, &mu, accepted)
		var wg sync.WaitGroup
		for i := range 2 {
			wg.Go(func() {
				a := &app{stdout: &outs[i], stderr: &outs[i], demo: shared}
				codes[i] = a.main(context.Background(), context.Background(), []string{"-n", "50", "-journal", path})
			})
		}
		wg.Wait()
	})
	twice := 0
	for _, n := range accepted {
		if n > 1 {
			twice++
		}
	}
	assert.Len(t, accepted, 50)
	assert.Zero(t, twice, "records uploaded twice; exit codes %v\nrun 1:\n%s\nrun 2:\n%s", codes, outs[0].String(), outs[1].String())
	assert.ElementsMatch(t, []int{0, 2}, codes[:], "one run uploads, the other is refused")
	assert.Contains(t, outs[0].String()+outs[1].String(), "journal "+path+": in use by another run")
}

// countingDemo is a demo API for app.demo, made by newAPI, that counts in
// accepted, under mu, the uploads it accepts, by path.
func countingDemo(newAPI func(throttletest.Config) *throttletest.API, mu *sync.Mutex, accepted map[string]int) func(throttletest.Config) (string, *throttletest.API, http.RoundTripper, func()) {
	return func(cfg throttletest.Config) (string, *throttletest.API, http.RoundTripper, func()) {
		api := newAPI(cfg)
		return "http://demo.test", api, rtFunc(func(r *http.Request) (*http.Response, error) {
			resp, err := api.RoundTrip(r)
			if err == nil && resp.StatusCode == http.StatusOK {
				mu.Lock()
				accepted[r.URL.Path]++
				mu.Unlock()
			}
			return resp, err
		}), func() {}
	}
}
