package bench

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/hashicorp/go-retryablehttp"
	"golang.org/x/time/rate"

	"github.com/throttlehttp/throttle"
)

// What each RoundTripper adds to a call, measured over the same base: one
// that answers at once, as net/http would with an empty 200. The peers and
// throttle are measured in one run, so that their rows compare.
//
//	cd bench && go test -run '^$' -bench Overhead -benchmem -count 8 . > overhead.txt
//	go run golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da -col /rt overhead.txt

// noop is the base: it answers 200 at once. Like net/http's Transport, it
// hands out a response whose fields are set afresh on every call, with a
// body the caller reads and closes; unlike it, it reuses the one response
// and the one body, so that it allocates nothing: the rows count only what
// the RoundTripper on top of it allocates. It is for one goroutine at a time.
type noop struct {
	resp http.Response
	hdr  http.Header
	body emptyBody
	n    int // calls: a base that does something
}

// emptyBody is a response body with nothing to read, as an empty 200's is.
type emptyBody struct{ closed bool }

func (b *emptyBody) Read([]byte) (int, error) { return 0, io.EOF }
func (b *emptyBody) Close() error             { b.closed = true; return nil }

func (n *noop) RoundTrip(req *http.Request) (*http.Response, error) {
	n.n++
	n.body.closed = false
	n.resp = http.Response{
		Status: "200 OK", StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: n.hdr, Body: &n.body, ContentLength: -1, Request: req,
	}
	return &n.resp, nil
}

func newNoop() *noop { return &noop{hdr: http.Header{"Content-Type": {"application/json"}}} }

// waitRT is the wrapper most would write with x/time/rate: Wait, then send.
type waitRT struct {
	lim  *rate.Limiter
	base http.RoundTripper
}

func (w waitRT) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := w.lim.Wait(req.Context()); err != nil {
		return nil, err
	}
	return w.base.RoundTrip(req)
}

// spare paces at the fastest rate Policy.Validate allows with a deep bucket:
// every call finds a token.
var spare = throttle.Policy{Rate: 1e9, Burst: 1 << 30}

// BenchmarkOverhead calls each RoundTripper as http.Client would, and reads
// and closes each body as its caller would.
func BenchmarkOverhead(b *testing.B) {
	rts := []struct {
		name string
		make func(http.RoundTripper) http.RoundTripper
	}{
		{"base", func(base http.RoundTripper) http.RoundTripper { return base }},
		{"x-time-rate-wait", func(base http.RoundTripper) http.RoundTripper {
			return waitRT{lim: rate.NewLimiter(rate.Limit(spare.Rate), spare.Burst), base: base}
		}},
		{"retryablehttp", func(base http.RoundTripper) http.RoundTripper {
			c := retryablehttp.NewClient()
			c.HTTPClient.Transport = base
			c.Logger = nil
			return &retryablehttp.RoundTripper{Client: c}
		}},
		{"throttle-unpaced", func(base http.RoundTripper) http.RoundTripper { return throttle.New(base) }},
		{"throttle-paced", func(base http.RoundTripper) http.RoundTripper {
			return throttle.New(base, throttle.WithPolicy(spare))
		}},
		{"throttle-window-inflight", func(base http.RoundTripper) http.RoundTripper {
			p := spare
			// At most 100 a microsecond, which no call here reaches; the
			// window is checked and logged on every call all the same.
			p.Windows = []throttle.Window{{N: 100, Per: time.Microsecond}}
			p.MaxInFlight = 64
			return throttle.New(base, throttle.WithPolicy(p))
		}},
	}
	for _, rt := range rts {
		b.Run("rt="+rt.name, func(b *testing.B) {
			base := newNoop()
			t := rt.make(base)
			if c, ok := t.(io.Closer); ok {
				defer c.Close()
			}
			req, err := http.NewRequest(http.MethodGet, "http://api.example.com/v1/items", nil)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				resp, err := t.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := resp.Body.Read(nil); err != io.EOF {
					b.Fatalf("Read: %v, want io.EOF", err)
				}
				resp.Body.Close()
			}
			if base.n < b.N || !base.body.closed {
				b.Fatalf("the base answered %d of %d calls", base.n, b.N)
			}
		})
	}
}
