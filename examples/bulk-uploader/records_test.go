package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlehttp/throttle/throttletest"
)

// lines is the input of the record tests: CRLF and LF lines, blank lines
// of both kinds, a "\r" inside a record, a 1 MiB record and a last line
// without a terminator. want is each record's exact body, by id.
func lines() (input string, want map[string]string) {
	big := `{"id":"big","blob":"` + strings.Repeat("x", 1<<20) + `"}`
	input = "{\"id\":\"a\",\"v\":1}\r\n" +
		"\r\n" +
		"  {\"id\":\"b\"}  \r\n" +
		"{\"id\":\"c\",\r\"v\":3}\n" +
		"   \n" +
		"\n" +
		big + "\r\n" +
		"{\"id\":\"d\",\"v\":\"\\r\\n\"}\n" +
		"{\"id\":\"last\"}\r"
	return input, map[string]string{
		"a":    `{"id":"a","v":1}`,
		"b":    `  {"id":"b"}  `,
		"c":    "{\"id\":\"c\",\r\"v\":3}",
		"big":  big,
		"d":    `{"id":"d","v":"\r\n"}`,
		"last": "{\"id\":\"last\"}\r",
	}
}

func TestRecordsAreLinesWithoutTheirTerminator(t *testing.T) {
	input, want := lines()
	path := filepath.Join(t.TempDir(), "records.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(input), 0o600))
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	fromFile, err := readFile(f)
	require.NoError(t, err)
	fromStdin, err := readAll(strings.NewReader(input))
	require.NoError(t, err)

	for name, recs := range map[string][]record{"file": fromFile, "stdin": fromStdin} {
		require.Len(t, recs, len(want), name)
		for _, r := range recs {
			b := readBody(t, r)
			assert.EqualValues(t, len(b), r.size, "%s: record %s", name, r.id)
			sameBytes(t, want[r.id], string(b), "%s: record %s", name, r.id)
		}
		assert.Equal(t, []int{1, 3, 4, 7, 8, 9}, lineNumbers(recs), name)
	}
}

// TestEveryByteReachesTheServer guards issue 8, point 11: with CRLF each
// record after the first was read one byte off per line. Every attempt,
// retries after a 429 included, must carry the record's exact bytes.
func TestEveryByteReachesTheServer(t *testing.T) {
	input, want := lines()
	path := filepath.Join(t.TempDir(), "records.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(input), 0o600))
	for _, in := range []string{path, "-"} {
		t.Run(map[bool]string{true: "stdin", false: "file"}[in == "-"], func(t *testing.T) {
			var mu sync.Mutex
			got := map[string][]string{} // every body received, by path
			var code int
			var out, errOut bytes.Buffer
			synctest.Test(t, func(t *testing.T) {
				recording := func(cfg throttletest.Config) (string, *throttletest.API, http.RoundTripper, func()) {
					// A bucket of one: the client's burst of 10 gets 429s.
					cfg.Limits = []throttletest.Limit{{Algorithm: throttletest.TokenBucket, Rate: 100, Burst: 1}}
					api := throttletest.NewAPI(cfg)
					return "http://demo.test", api, rtFunc(func(r *http.Request) (*http.Response, error) {
						b, err := io.ReadAll(r.Body)
						r.Body.Close()
						if err != nil {
							return nil, err
						}
						mu.Lock()
						got[r.URL.Path] = append(got[r.URL.Path], string(b))
						mu.Unlock()
						r = r.Clone(r.Context())
						r.Body = io.NopCloser(bytes.NewReader(b))
						return api.RoundTrip(r)
					}), func() {}
				}
				a := &app{stdin: strings.NewReader(input), stdout: &out, stderr: &errOut, demo: recording}
				code = a.main(context.Background(), context.Background(), []string{"-in", in, "-rate", "1000", "-burst", "10", "-workers", "6"})
			})
			require.Equal(t, 0, code, "stderr: %s", errOut.String())
			assert.Contains(t, out.String(), "6 uploaded, 0 failed")
			assert.Len(t, got, len(want))
			retried := false
			for id, body := range want {
				bodies := got["/records/"+id]
				require.NotEmpty(t, bodies, "record %s never reached the server", id)
				retried = retried || len(bodies) > 1
				for i, b := range bodies {
					sameBytes(t, body, b, "record %s, attempt %d", id, i+1)
				}
			}
			assert.True(t, retried, "some record was sent again after a 429")
		})
	}
}

func TestBadRecordsAreRefused(t *testing.T) {
	for _, tc := range []struct {
		name, input, err string
	}{
		{"not json", "{\"id\": 1}\r\nnot json\r\n", "stdin: line 2: not a JSON object"},
		{"an array", "[1, 2]\n", "line 1: not a JSON object"},
		{"null", "null\n", "line 1: not a JSON object"},
		{"an object id", "{\"id\": 1}\n\n{\"id\": {\"a\": 1}}\n", `line 3: id {"a": 1}: want a string or a number`},
		{"too long", "{}\n" + strings.Repeat(" ", maxLine), "stdin: line 2: longer than 16 MiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := readAll(strings.NewReader(tc.input))
			assert.ErrorContains(t, err, tc.err)
		})
	}
}

func TestRecordIDs(t *testing.T) {
	for _, tc := range []struct{ line, id string }{
		{`{"id": "r1"}`, "r1"},
		{`{"id": 42}`, "42"},
		{`{"id": -1.5e3}`, "-1.5e3"},
		{`{"id": ""}`, "7"},
		{`{"id": null}`, "7"},
		{`{"name": "no id"}`, "7"},
		{`{"id": "a b?c#d"}`, "a b?c#d"},
	} {
		id, err := recordID([]byte(tc.line), 7)
		require.NoError(t, err, tc.line)
		assert.Equal(t, tc.id, id, tc.line)
	}
}

// FuzzScanRecords checks that every record is exactly its line's content,
// read at its own offset, whatever the line endings.
func FuzzScanRecords(f *testing.F) {
	input, _ := lines()
	for _, s := range []string{input, "{}\r\n{}\n{}", "\r\n\r\n{\"id\":1}\r\r\n", "{}\r", "\n\n\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, input string) {
		// As readFile does, each body a section of the input at its offset.
		in := strings.NewReader(input)
		recs, err := scanRecords(in, "fuzz", func(content []byte, off int64) func() (io.ReadCloser, error) {
			n := int64(len(content))
			return func() (io.ReadCloser, error) { return sectionCloser{io.NewSectionReader(in, off, n)}, nil }
		})
		if err != nil {
			return // refused as a whole: nothing is sent
		}
		lines := strings.Split(input, "\n")
		blank := 0
		for _, l := range lines {
			if strings.TrimSpace(l) == "" {
				blank++
			}
		}
		assert.Len(t, recs, len(lines)-blank, "one record per line that is not blank")
		for _, r := range recs {
			want := lines[r.line-1]
			if r.line < len(lines) {
				want = strings.TrimSuffix(want, "\r")
			}
			sameBytes(t, want, string(readBody(t, r)), "line %d", r.line)
		}
	})
}

// sameBytes asserts got == want, showing where they part rather than
// a megabyte of each.
func sameBytes(t *testing.T, want, got string, msgAndArgs ...any) {
	t.Helper()
	if got == want {
		return
	}
	i := 0
	for i < len(want) && i < len(got) && want[i] == got[i] {
		i++
	}
	excerpt := func(s string) string { return s[i:min(len(s), i+20)] }
	assert.Fail(t, fmt.Sprintf("bodies differ at byte %d of %d (got %d): want %q…, got %q…",
		i, len(want), len(got), excerpt(want), excerpt(got)), msgAndArgs...)
}

func readBody(t *testing.T, r record) []byte {
	t.Helper()
	rc, err := r.body()
	require.NoError(t, err)
	defer rc.Close()
	b, err := io.ReadAll(rc)
	require.NoError(t, err)
	return b
}

func lineNumbers(recs []record) []int {
	var n []int
	for _, r := range recs {
		n = append(n, r.line)
	}
	return n
}
