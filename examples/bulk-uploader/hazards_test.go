package main

// What the world does to an upload, each found in review (session 52): a
// target that redirects, input from a pipe, a record edited between runs
// whose server keeps Idempotency-Keys, and secrets in a refused flag.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlehttp/throttle/throttletest"
)

// redirectingAPI is a demo API (see app.demo) that answers each PUT of a
// record with status and a Location made by to, and every other request
// (the GET a followed 301 becomes, a PUT replayed after a 307) with 200.
// It records every request it sees.
type redirectingAPI struct {
	status int
	to     func(*http.Request) string

	mu   sync.Mutex
	seen []seenRequest
}

type seenRequest struct {
	method, url, apiKey string
	body                string
}

func (a *redirectingAPI) demo(throttletest.Config) (string, *throttletest.API, http.RoundTripper, func()) {
	return "http://demo.test", nil, rtFunc(func(r *http.Request) (*http.Response, error) {
		var body []byte
		if r.Body != nil {
			body, _ = io.ReadAll(r.Body)
			r.Body.Close()
		}
		a.mu.Lock()
		a.seen = append(a.seen, seenRequest{r.Method, r.URL.String(), r.Header.Get("X-API-Key"), string(body)})
		a.mu.Unlock()
		resp := &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Header: http.Header{}, Body: http.NoBody, Request: r}
		if r.URL.Host == "demo.test" && r.Method == http.MethodPut {
			resp.StatusCode, resp.Status = a.status, fmt.Sprint(a.status, " ", http.StatusText(a.status))
			resp.Header.Set("Location", a.to(r))
		}
		return resp, nil
	}), func() {}
}

// A PUT answered with a redirect was not uploaded: http.Client follows a
// 301/302 of a PUT with a GET, without the body, and the uploader counted
// that GET's 200 as the record uploaded, journaled it as uploaded (a
// rerun skips it for good) and exited 0. An http:// target that redirects
// to https:// (the commonest redirect there is) loses every record so.
func TestARedirectedRecordIsNotUploaded(t *testing.T) {
	api := &redirectingAPI{status: http.StatusMovedPermanently, to: func(r *http.Request) string {
		return "https://www.demo.test" + r.URL.Path
	}}
	var code int
	var out, errOut bytes.Buffer
	journal := t.TempDir() + "/journal"
	synctest.Test(t, func(t *testing.T) {
		a := &app{stdout: &out, stderr: &errOut, demo: api.demo}
		code = a.main(context.Background(), context.Background(), []string{"-json", "-n", "3", "-journal", journal})
	})
	var s summary
	require.NoError(t, json.Unmarshal(out.Bytes(), &s), "stdout: %s\nstderr: %s", out.String(), errOut.String())
	api.mu.Lock()
	defer api.mu.Unlock()
	stored := 0
	for _, r := range api.seen {
		if r.method == http.MethodPut && r.body != "" && !strings.HasPrefix(r.url, "http://demo.test") {
			stored++
		}
	}
	t.Logf("requests seen: %+v", api.seen)
	require.Zero(t, stored, "no record reached the server whose PUT was redirected")
	assert.Zero(t, s.Uploaded, "no record was uploaded: each PUT got a 301 and was never sent where it pointed")
	assert.Equal(t, 3, s.Failed+s.NotSent)
	assert.NotEqual(t, 0, code, "not every record went")
	assert.Empty(t, journaled(t, journal), "the journal lists none as uploaded: a rerun must send them")
}

// The API key went to whatever host a 307 pointed at: http.Client forwards
// every header but Authorization, Cookie and WWW-Authenticate across
// hosts, and X-API-Key is none of those.
func TestTheAPIKeyDoesNotFollowARedirect(t *testing.T) {
	api := &redirectingAPI{status: http.StatusTemporaryRedirect, to: func(r *http.Request) string {
		return "https://elsewhere.example" + r.URL.Path
	}}
	var out, errOut bytes.Buffer
	synctest.Test(t, func(t *testing.T) {
		a := &app{stdout: &out, stderr: &errOut, demo: api.demo}
		a.main(context.Background(), context.Background(), []string{"-json", "-n", "2", "-api-key", "SECRET-KEY"})
	})
	api.mu.Lock()
	defer api.mu.Unlock()
	for _, r := range api.seen {
		if !strings.HasPrefix(r.url, "http://demo.test/") {
			assert.NotEqual(t, "SECRET-KEY", r.apiKey, "the API key sent to %s %s", r.method, r.url)
		}
	}
}

// A -target or -redis that is refused is printed back whole, the key in
// its query, the password in its user info with it: a CI log keeps what
// the summary and the journal take care never to show (shownURL).
func TestARefusedTargetShowsNoSecret(t *testing.T) {
	for _, args := range [][]string{
		{"-target", "api.example.com/v1?api_key=SECRET", "-api-key", ""},             // the scheme forgotten
		{"-target", "https://api.example.com/v1?api_key=SECRET#top", "-api-key", ""}, // a fragment
		{"-target", "https://user:SECRET@api example.com/v1", "-api-key", "k"},       // a typo in the host
		{"-target", "user:SECRET@api.example.com/v1", "-api-key", "k"},               // no scheme, user info
		{"-rate", "10", "-redis", "redis://:SECRET@cache.internal:6379"},             // a Redis URL, as $REDIS_URL holds it
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			var out, errOut bytes.Buffer
			a := &app{stdout: &out, stderr: &errOut, demo: inProcess}
			code := a.main(context.Background(), context.Background(), args)
			assert.Equal(t, 2, code, errOut.String())
			assert.Equal(t, 1, strings.Count(errOut.String(), "\n"), "one line: %s", errOut.String())
			assert.NotContains(t, errOut.String(), "SECRET")
		})
	}
}

// -in FILE where FILE is a pipe (-in /dev/stdin, -in <(zcat records.gz),
// a FIFO) was accepted and indexed, then every record failed at upload:
// its body is read with ReadAt, which a pipe refuses ("illegal seek"), and
// each record was retried for ~40 s first. -in - works on the same input.
func TestInputFromAPipe(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("opens a pipe by its /dev/fd name")
	}
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	_, err = w.WriteString("{\"id\":\"a\"}\n{\"id\":\"b\"}\n")
	require.NoError(t, err)
	require.NoError(t, w.Close())
	path := fmt.Sprintf("/dev/fd/%d", r.Fd())

	code, s, stderr := runApp(t, "", "-in", path)
	if code == 2 {
		return // refused before the first request, as bad input is: fine too
	}
	assert.Equal(t, 0, code, stderr)
	assert.Equal(t, 2, s.Uploaded, "failed: %+v", s.FailedList)
	assert.EqualValues(t, 2, s.Attempts)
}

// idempotentAPI keeps Idempotency-Key as the IETF draft has it
// (draft-ietf-httpapi-idempotency-key-header, §2.6-2.7), as Stripe and
// others do: a key is one request's; the same key with another payload is
// refused with 422, the same key with the same payload gets the stored
// answer. The first request of each key is answered with first.
type idempotentAPI struct {
	first int

	mu     sync.Mutex
	bodies map[string]string // key → payload
	stored map[string]string // path → payload of the last 2xx
}

func (a *idempotentAPI) demo(throttletest.Config) (string, *throttletest.API, http.RoundTripper, func()) {
	return "http://demo.test", nil, rtFunc(func(r *http.Request) (*http.Response, error) {
		body, _ := io.ReadAll(r.Body)
		r.Body.Close()
		a.mu.Lock()
		defer a.mu.Unlock()
		status := a.first
		key := r.Header.Get("Idempotency-Key")
		switch prev, seen := a.bodies[key]; {
		case !seen:
			a.bodies[key] = string(body)
		case prev != string(body):
			status = http.StatusUnprocessableEntity
		}
		if status/100 == 2 {
			a.stored[r.URL.Path] = string(body)
		}
		return &http.Response{StatusCode: status, Status: fmt.Sprint(status, " ", http.StatusText(status)),
			Header: http.Header{}, Body: http.NoBody, Request: r}, nil
	}), func() {}
}

// The journal's doc: "a record edited since (to fix what made it fail) is
// sent again". It is, with the Idempotency-Key of the record as it was,
// "record-ID": to an API that keeps the key (the first run's upload failed
// after the API took it, a 500), the same key with another payload is a
// misuse, refused with 422, and the fixed record can never be uploaded.
func TestAnEditedRecordGetsAKeyOfItsOwn(t *testing.T) {
	dir := t.TempDir()
	in, journal := dir+"/records.jsonl", dir+"/journal"
	api := &idempotentAPI{first: http.StatusInternalServerError, bodies: map[string]string{}, stored: map[string]string{}}
	run := func(records string) (int, summary) {
		require.NoError(t, os.WriteFile(in, []byte(records), 0o600))
		var code int
		var out, errOut bytes.Buffer
		synctest.Test(t, func(t *testing.T) {
			a := &app{stdout: &out, stderr: &errOut, demo: api.demo}
			code = a.main(context.Background(), context.Background(), []string{"-json", "-in", in, "-journal", journal})
		})
		var s summary
		require.NoError(t, json.Unmarshal(out.Bytes(), &s), "stdout: %s\nstderr: %s", out.String(), errOut.String())
		return code, s
	}
	code, s := run(`{"id":"a","qty":-1}` + "\n")
	require.Equal(t, 1, code)
	require.Equal(t, 1, s.Failed, "the first run failed it: 500")

	api.mu.Lock()
	api.first = http.StatusOK
	api.mu.Unlock()
	code, s = run(`{"id":"a","qty":1}` + "\n") // fixed
	assert.Equal(t, 0, code, "failed: %+v", s.FailedList)
	assert.Equal(t, 1, s.Uploaded)
	api.mu.Lock()
	defer api.mu.Unlock()
	assert.Equal(t, `{"id":"a","qty":1}`, api.stored["/records/a"], "the fixed record is on the server")
}
