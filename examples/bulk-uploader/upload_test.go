package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestIDsAreOnePathSegment guards issue 8, point 12: ids went into the URL
// unescaped, so "a b?c#d" became a path and a query, and "x/../../y" a
// path to /y. Through a real server, each id must arrive as the last
// segment of the path, escaped, and decode to itself.
func TestIDsAreOnePathSegment(t *testing.T) {
	for _, tc := range []struct{ id, path string }{
		{"a b?c#d", "/v1/records/a%20b%3Fc%23d"},
		{"x/../../y", "/v1/records/x%2F..%2F..%2Fy"},
		{"%2F", "/v1/records/%252F"},
		{"été", "/v1/records/%C3%A9t%C3%A9"},
		{"a;b,c&d=e+f", "/v1/records/a%3Bb%2Cc&d=e+f"},
		{"...", "/v1/records/..."},
		{"\x00\n", "/v1/records/%00%0A"},
	} {
		t.Run(tc.id, func(t *testing.T) {
			var mu sync.Mutex
			type got struct{ requestURI, path, key string }
			var seen []got
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				defer mu.Unlock()
				seen = append(seen, got{r.RequestURI, r.URL.Path, r.Header.Get("Idempotency-Key")})
			}))
			defer srv.Close()
			line, err := json.Marshal(map[string]string{"id": tc.id})
			require.NoError(t, err)
			in := filepath.Join(t.TempDir(), "records.jsonl")
			require.NoError(t, os.WriteFile(in, append(line, '\n'), 0o600))

			var out, errOut bytes.Buffer
			a := &app{stdout: &out, stderr: &errOut}
			code := a.main(context.Background(), context.Background(),
				[]string{"-in", in, "-target", srv.URL + "/v1/", "-api-key", "k", "-rate", "0"})
			require.Equal(t, 0, code, "stdout: %s\nstderr: %s", out.String(), errOut.String())
			mu.Lock()
			defer mu.Unlock()
			require.Len(t, seen, 1)
			assert.Equal(t, tc.path, seen[0].requestURI, "the exact request target sent")
			assert.Equal(t, "/v1/records/"+tc.id, seen[0].path, "decoded, the id itself")
			sum := sha256.Sum256(line)
			assert.Equal(t, "record-"+strings.TrimPrefix(tc.path, "/v1/records/")+"-"+hex.EncodeToString(sum[:8]), seen[0].key)
		})
	}
}

func TestRecordURL(t *testing.T) {
	for _, tc := range []struct{ target, id, want string }{
		{"https://api.example.com", "1", "https://api.example.com/records/1"},
		{"https://api.example.com/", "1", "https://api.example.com/records/1"},
		{"https://api.example.com/v1", "a/b", "https://api.example.com/v1/records/a%2Fb"},
		{"https://api.example.com/a%2Fb/", "c d", "https://api.example.com/a%2Fb/records/c%20d"},
		{"https://api.example.com/v1?version=2", "x?y", "https://api.example.com/v1/records/x%3Fy?version=2"},
	} {
		u, err := url.Parse(tc.target)
		require.NoError(t, err)
		assert.Equal(t, tc.want, recordURL(u, tc.id), "%s + %s", tc.target, tc.id)
	}
}

func TestDotSegmentIDsAreRefused(t *testing.T) {
	for _, id := range []string{`"."`, `".."`} {
		_, err := recordID([]byte(`{"id": `+id+`}`), 3)
		assert.ErrorContains(t, err, "line 3: id "+id+" cannot be a URL path segment")
	}
}

// The query of -target, which may hold the API's key (-api-key ""), is
// shown nowhere: not in the summary's target, not in a record's error,
// which the summary lists and the journal keeps (regression, found in
// review: both carried it in full, from url.Error and Redacted, which
// hides a password only).
func TestTheTargetsQueryIsShownNowhere(t *testing.T) {
	target, err := url.Parse("https://user:pass@api.example.com/v1?api_key=SECRET#frag")
	require.NoError(t, err)
	assert.Equal(t, "https://api.example.com/v1", shownURL(target))
	refused := errors.New("connection refused")
	client := &http.Client{Transport: rtFunc(func(*http.Request) (*http.Response, error) { return nil, refused })}
	res := uploadWith(client, http.MethodPut, target, "")(context.Background(), record{id: "1", body: func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader("{}")), nil }, size: 2})
	require.Error(t, res.err)
	assert.NotContains(t, res.err.Error(), "SECRET")
	assert.NotContains(t, res.err.Error(), "pass")
	assert.Contains(t, res.err.Error(), "https://api.example.com/v1/records/1")
	assert.ErrorIs(t, res.err, refused, "the cause is kept")
}
