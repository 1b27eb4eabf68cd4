// Command priority measures interactive requests mixed into a saturating
// batch on one API key (issue 12): a batch of records sent by 16 workers as
// fast as the quota allows, and one interactive request a second. With
// throttle the interactive ones carry throttle.Priority and go before the
// batch's waiting requests; the peer, go-retryablehttp with an x/time/rate
// limiter set at the same quota, serves them in turn with the batch.
//
//	cd bench && go run ./cmd/priority
//
// It prints, for each client, how long the interactive requests waited for
// their turn (in slots of the pace, 1/rate: the median and the worst) and
// the batch's time over its ideal.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-retryablehttp"
	"golang.org/x/time/rate"

	"github.com/throttlehttp/throttle"
	"github.com/throttlehttp/throttle/throttletest"
)

const (
	quotaRate  = 100 // requests a second
	quotaBurst = 10
)

func main() {
	records := flag.Int("records", 2000, "batch records")
	workers := flag.Int("workers", 16, "batch workers")
	runs := flag.Int("runs", 3, "runs of each client; the worst is reported")
	flag.Parse()
	fmt.Printf("| client | interactive wait, median · worst (slots of %v) | batch / ideal |\n|---|---|---|\n", time.Second/quotaRate)
	for _, c := range []struct {
		name string
		make func(base http.RoundTripper) (send func(context.Context, *http.Request, bool) (*http.Response, error), closeFn func())
	}{
		{"throttle, interactive at Priority(1)", throttleClient},
		{"go-retryablehttp + x/time/rate", peerClient},
	} {
		var worstMed, worstMax, worstRatio float64
		for range *runs {
			med, mx, ratio := run(c.make, *records, *workers)
			worstMed, worstMax, worstRatio = max(worstMed, med), max(worstMax, mx), max(worstRatio, ratio)
		}
		fmt.Printf("| %s | %.1f · %.1f | %.3f× |\n", c.name, worstMed, worstMax, worstRatio)
	}
}

// run sends the batch and the interactive requests once and returns the
// interactive waits' median and worst, in slots, and the batch's time over
// its ideal.
func run(mk func(http.RoundTripper) (func(context.Context, *http.Request, bool) (*http.Response, error), func()),
	records, workers int) (med, worst, ratio float64) {
	srv := throttletest.NewServer(throttletest.Config{
		Limits:        []throttletest.Limit{{Algorithm: throttletest.TokenBucket, Rate: quotaRate, Burst: quotaBurst}},
		ArrivalJitter: 2 * time.Millisecond,
	})
	defer srv.Close()
	base := &http.Transport{MaxIdleConnsPerHost: 64}
	defer base.CloseIdleConnections()
	var (
		mu    sync.Mutex
		sent  = map[*http.Request]time.Time{} // when each interactive request left
		waits []float64
	)
	timing := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if req.Header.Get("X-Interactive") != "" {
			mu.Lock()
			sent[req] = time.Now()
			mu.Unlock()
		}
		return base.RoundTrip(req)
	})
	send, closeFn := mk(timing)
	defer closeFn()

	put := func(i int, interactive bool) {
		req, _ := http.NewRequest(http.MethodPut, fmt.Sprint(srv.URL, "/records/", i), bytes.NewReader([]byte(`{}`)))
		req.Header.Set("X-API-Key", "bench")
		if interactive {
			req.Header.Set("X-Interactive", "1")
		}
		start := time.Now()
		resp, err := send(context.Background(), req, interactive)
		if err != nil {
			fmt.Fprintln(os.Stderr, "priority:", err)
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if interactive {
			mu.Lock()
			for r, at := range sent { // the attempt that left last: the one answered
				waits = append(waits, float64(at.Sub(start))/float64(time.Second/quotaRate))
				delete(sent, r)
			}
			mu.Unlock()
		}
	}

	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				put(i, false)
			}
		})
	}
	done := make(chan struct{})
	var iwg sync.WaitGroup
	iwg.Go(func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			case <-tick.C:
				put(1_000_000+i, true)
			}
		}
	})
	start := time.Now()
	for i := range records {
		next <- i
	}
	close(next)
	wg.Wait()
	took := time.Since(start)
	close(done)
	iwg.Wait()

	interactive := len(waits)
	ideal := time.Duration(float64(records+interactive-quotaBurst) / quotaRate * float64(time.Second))
	slices.Sort(waits)
	if len(waits) > 0 {
		med, worst = waits[len(waits)/2], waits[len(waits)-1]
	}
	return med, worst, took.Seconds() / ideal.Seconds()
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// throttleClient paces at the quota; interactive requests carry Priority(1).
func throttleClient(base http.RoundTripper) (func(context.Context, *http.Request, bool) (*http.Response, error), func()) {
	rt := throttle.New(base, throttle.WithPolicy(throttle.Policy{Rate: quotaRate, Burst: quotaBurst}))
	return func(ctx context.Context, req *http.Request, interactive bool) (*http.Response, error) {
		if interactive {
			ctx = throttle.With(ctx, throttle.Priority(1))
		}
		return rt.RoundTrip(req.WithContext(ctx))
	}, func() { rt.Close() }
}

// peerClient is go-retryablehttp whose every attempt waits on one
// x/time/rate limiter at the quota.
func peerClient(base http.RoundTripper) (func(context.Context, *http.Request, bool) (*http.Response, error), func()) {
	lim := rate.NewLimiter(quotaRate, quotaBurst)
	c := retryablehttp.NewClient()
	c.Logger = nil
	c.HTTPClient = &http.Client{Transport: roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if err := lim.Wait(req.Context()); err != nil {
			return nil, err
		}
		return base.RoundTrip(req)
	})}
	return func(ctx context.Context, req *http.Request, _ bool) (*http.Response, error) {
		rreq, err := retryablehttp.FromRequest(req.WithContext(ctx))
		if err != nil {
			return nil, err
		}
		return c.Do(rreq)
	}, func() {}
}
