package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlehttp/throttle/throttletest"
)

// TestBadFlagsStopBeforeTheFirstRequest guards issue 8, point 13: bad
// flags ran the whole job (-target notaurl: 1,000 identical errors) or
// were accepted (-queue -1, -queue without a rate). Each problem is one
// line with the program's name, the status 2, and nothing is sent.
func TestBadFlagsStopBeforeTheFirstRequest(t *testing.T) {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { requests.Add(1) }))
	defer srv.Close()
	for _, tc := range []struct {
		args string
		want []string // stderr, one line each, without the prefix
	}{
		{"-target notaurl -api-key k", []string{`-target "notaurl": want an http:// or https:// URL, like https://api.example.com/v1`}},
		{"-target ftp://example.com -api-key k", []string{`-target "ftp://example.com": want an http:// or https:// URL, like https://api.example.com/v1`}},
		{"-target http://[::1 -api-key k", []string{`-target "http://[::1": missing ']' in host`}},
		{"-target TARGET/#top -api-key k", []string{`-target "TARGET/…": a fragment (#…) is never sent`}},
		{"-target TARGET", []string{`-target needs an API key: give -api-key, or set $BULK_UPLOADER_API_KEY (-api-key "" sends none)`}},
		{"-api-key a\nb", []string{`-api-key: a control character cannot go in a header`}},
		{"-queue -1", []string{`-queue -1: want 0 (a token bucket) or more`}},
		{"-queue 5 -rate 0", []string{`-queue 5 needs -rate > 0: the queue releases one request every 1/rate`}},
		{"-queue 5", []string{`-queue 5 is shorter than -workers 16: a full queue refuses a record at once; want -queue 16 or more`}},
		{"-burst -5", []string{`-burst -5: a token bucket needs at least 1`}},
		{"-burst 5 -rate 0", []string{`-burst needs -rate > 0: unpaced, there is no bucket`}},
		{"-burst 5 -queue 30", []string{`-burst is for the token bucket: with -queue, requests go one every 1/rate`}},
		{"-rate NaN", []string{`-rate NaN: want requests per second, 0 or more (0: unpaced)`}},
		{"-rate -1", []string{`-rate -1: want requests per second, 0 or more (0: unpaced)`}},
		{"-rate Inf", []string{`-rate +Inf: want requests per second, 0 or more (0: unpaced)`}},
		{"-workers 0", []string{`-workers 0: want 1 to 10000`}},
		{"-workers 1000000", []string{`-workers 1000000: want 1 to 10000`}},
		{"-n -1", []string{`-n -1: want 0 to 10000000`}},
		{"-n 5 -in records.jsonl", []string{`-n and -in: give one (-n makes records up, -in reads them)`}},
		{"-method GET", []string{`-method "GET": want PUT or POST`}},
		{"-naive -rate 50", []string{`-naive does not pace: -rate, -burst, -queue and -redis do not apply`}},
		{"-redis 127.0.0.1:6379 -rate 0", []string{`-redis needs -rate > 0: an unpaced key has no quota to share`}},
		{"-redis nowhere", []string{`-redis "nowhere": want host:port, like 127.0.0.1:6379`}},
		{"records.jsonl", []string{`unexpected argument "records.jsonl": flags come first, and the input is given with -in`}},
		{"-burst x", []string{`invalid value "x" for flag -burst: parse error`}},
		{"-nope", []string{`flag provided but not defined: -nope`}},
		{"-workers 0 -queue -1 -burst -5 -target notaurl", []string{
			`-target "notaurl": want an http:// or https:// URL, like https://api.example.com/v1`,
			`-workers 0: want 1 to 10000`,
			`-queue -1: want 0 (a token bucket) or more`,
			`-burst -5: a token bucket needs at least 1`,
		}},
	} {
		t.Run(tc.args, func(t *testing.T) {
			var args []string
			for _, f := range strings.Split(tc.args, " ") {
				args = append(args, strings.ReplaceAll(f, "TARGET", srv.URL))
			}
			var out, errOut bytes.Buffer
			a := &app{stdout: &out, stderr: &errOut, demo: noDemo(t)}
			code := a.main(context.Background(), context.Background(), args)
			assert.Equal(t, 2, code)
			want := ""
			for _, l := range tc.want {
				want += "bulk-uploader: " + strings.ReplaceAll(l, "TARGET", srv.URL) + "\n"
			}
			assert.Equal(t, want, errOut.String())
			assert.Empty(t, out.String())
		})
	}
	assert.Zero(t, requests.Load())
}

// noDemo fails the test if the job starts.
func noDemo(t *testing.T) func(throttletest.Config) (string, *throttletest.API, http.RoundTripper, func()) {
	return func(cfg throttletest.Config) (string, *throttletest.API, http.RoundTripper, func()) {
		t.Error("the job started")
		api := throttletest.NewAPI(cfg)
		return "http://demo.test", api, api, func() {}
	}
}

func TestAPIKey(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  string
		want string
	}{
		{"demo by default", nil, "", "demo"},
		{"demo from the environment", nil, "secret", "secret"},
		{"a target, from the environment", []string{"-target", "https://api.example.com"}, "secret", "secret"},
		{"a target, from the flag", []string{"-target", "https://api.example.com", "-api-key", "k"}, "secret", "k"},
		{"a target, none on purpose", []string{"-target", "https://api.example.com", "-api-key", ""}, "secret", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &app{stderr: &bytes.Buffer{}, getenv: func(k string) string {
				return map[string]string{apiKeyEnv: tc.env}[k]
			}}
			o, err := a.parse(tc.args)
			require.NoError(t, err)
			assert.Equal(t, tc.want, o.apiKey)
		})
	}
}

// TestUsageMatchesTheREADME checks -h: status 0, every flag listed, and
// every flag named in the README's account of the uploader.
func TestUsageMatchesTheREADME(t *testing.T) {
	var errOut bytes.Buffer
	a := &app{stdout: &bytes.Buffer{}, stderr: &errOut, demo: noDemo(t)}
	require.Equal(t, 0, a.main(context.Background(), context.Background(), []string{"-h"}))
	usage := errOut.String()
	assert.True(t, strings.HasPrefix(usage, "Usage: bulk-uploader [flags]\n"))
	flags := regexp.MustCompile(`(?m)^  -([a-z-]+)`).FindAllStringSubmatch(usage, -1)
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	var names []string
	for _, f := range flags {
		names = append(names, f[1])
		assert.Contains(t, string(readme), "`-"+f[1], "the README names -%s", f[1])
	}
	assert.ElementsMatch(t, []string{"n", "in", "target", "api-key", "method", "workers", "rate", "burst", "queue", "journal", "json", "naive", "redis", "serve"}, names)
}
