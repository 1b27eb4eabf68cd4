package throttle_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/throttlehttp/throttle"
)

func Example() {
	client := &http.Client{Transport: throttle.New(http.DefaultTransport,
		throttle.WithPolicy(throttle.Policy{Rate: 10, Burst: 5}), // every host: 10/s, bursts of 5
		throttle.WithHostPolicy("api.github.com", throttle.Policy{Rate: 1.3, Burst: 50,
			Windows: []throttle.Window{{N: 5000, Per: time.Hour}}}),
	)}
	_ = client // client.Get(...) now waits for its turn
}

func ExampleWithKey() {
	// One bucket per API key rather than per host. The key is a digest of
	// the header: tokens never reach errors, events, Stats or logs.
	rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
		return reply(r, http.StatusOK), nil
	}),
		throttle.WithPolicy(throttle.Policy{Rate: 5, Burst: 1}),
		throttle.WithKey(throttle.KeyByHeader("X-API-Key")))
	defer rt.Close()
	for _, token := range []string{"tok_live_alice_0123456789", "tok_live_bob_9876543210"} {
		req, _ := http.NewRequest(http.MethodGet, "https://api.example.com/v1/items", nil)
		req.Header.Set("X-API-Key", token)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
	}
	for key := range rt.Stats().Keys {
		fmt.Println(strings.Contains(key, "tok_live"), strings.HasPrefix(key, "api.example.com x-api-key:"))
	}
	// Output:
	// false true
	// false true
}

func ExamplePolicy_Validate() {
	p := throttle.Policy{Rate: 10} // a token bucket needs a Burst
	fmt.Println(p.Validate())
	// Output: throttle: invalid configuration: Policy: Burst 0 with Rate 10: a token bucket needs Burst >= 1
}

func ExampleWithEvents() {
	// A fake server that throttles the first request, with a Retry-After of
	// 0, which says nothing of when the quota gives back: the key pauses a
	// second, as for a refusal that states no wait.
	first := true
	base := rtFunc(func(r *http.Request) (*http.Response, error) {
		if first {
			first = false
			return reply(r, http.StatusTooManyRequests, "Retry-After", "0"), nil
		}
		return reply(r, http.StatusOK), nil
	})
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == "time" || a.Key == "until" || a.Key == "delay" {
				return slog.Attr{} // keep the output deterministic
			}
			return a
		},
	}))
	rt := throttle.New(base, throttle.WithRetry(throttle.Retry{InitialDelay: time.Millisecond}),
		throttle.WithEvents(func(e throttle.Event) {
			if e.Kind != throttle.EventWaited && e.Kind != throttle.EventAnswered { // one per attempt: counted, not logged
				logger.Info("throttle", "event", e)
			}
		}))
	defer rt.Close()
	req, _ := http.NewRequest(http.MethodPut, "https://api.example.com/items/1", strings.NewReader("{}"))
	resp, err := rt.RoundTrip(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode)
	// Output:
	// level=INFO msg=throttle event.kind=throttled event.key=api.example.com event.method=PUT event.url=https://api.example.com/items/1 event.attempt=1 event.status=429
	// level=INFO msg=throttle event.kind=paused event.key=api.example.com event.method=PUT event.url=https://api.example.com/items/1 event.attempt=1 event.status=429 event.source=Retry-After event.reason=quota
	// level=INFO msg=throttle event.kind=retry event.key=api.example.com event.method=PUT event.url=https://api.example.com/items/1 event.attempt=1 event.status=429
	// 200
}

// A body read from a file is made replayable by GetBody, so it can be retried
// without being held in memory.
func ExampleRetry_replayableFileBody() {
	f, _ := os.CreateTemp("", "record")
	defer os.Remove(f.Name())
	_, _ = f.WriteString(`{"id": 1}`)
	f.Close()

	open := func() (io.ReadCloser, error) { return os.Open(f.Name()) }
	body, _ := open()
	req, _ := http.NewRequest(http.MethodPost, "https://api.example.com/records", body)
	req.GetBody = open // each retry reopens the file
	req.Header.Set("Idempotency-Key", "record-1")

	replay, _ := req.GetBody()
	var buf bytes.Buffer
	_, _ = io.Copy(&buf, replay)
	replay.Close()
	body.Close()
	fmt.Println(buf.String())
	// Output: {"id": 1}
}

// A service that runs a batch and serves users on one API key: the users'
// requests carry a priority, and go before the batch's waiting requests.
func ExamplePriority() {
	var mu sync.Mutex
	var order []string
	api := rtFunc(func(r *http.Request) (*http.Response, error) {
		mu.Lock()
		order = append(order, r.Header.Get("X-Who"))
		mu.Unlock()
		return reply(r, http.StatusOK), nil
	})
	rt := throttle.New(api, throttle.WithPolicy(throttle.Policy{Rate: 10, Burst: 1}))
	defer rt.Close()
	send := func(ctx context.Context, who string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://api.example.com/v1/items", nil)
		req.Header.Set("X-Who", who)
		if resp, err := rt.RoundTrip(req); err == nil {
			resp.Body.Close()
		}
	}
	send(context.Background(), "batch") // takes the token: the next waits 100 ms
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() { send(context.Background(), "batch") })
	}
	wg.Go(func() { send(throttle.With(context.Background(), throttle.Priority(1)), "user") })
	wg.Wait()
	fmt.Println(strings.Join(order, ", "))
	// Output: batch, user, batch, batch, batch
}

// A GraphQL API that charges each query its points, as GitHub's does
// (5,000 points an hour): each query is charged the points estimated
// before sending, and corrected by what the answer says it cost.
func ExampleCost() {
	// A fake API: every query costs 1 point, said in a header.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Query-Cost", "1")
		_, _ = io.WriteString(w, `{"data":{"viewer":{"login":"octocat"}}}`)
	}))
	defer srv.Close()
	base := &http.Transport{}
	defer base.CloseIdleConnections()

	tr := throttle.New(base,
		throttle.WithPolicy(throttle.Policy{Windows: []throttle.Window{{N: 5000, Per: time.Hour}}}),
		throttle.WithCost(throttle.CostHeader("X-Query-Cost")))
	defer tr.Close()
	client := &http.Client{Transport: tr}
	query := func(ctx context.Context, points int) error {
		ctx = throttle.With(ctx, throttle.Cost(points)) // the estimate
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/graphql",
			strings.NewReader(`{"query":"{ viewer { login } }"}`))
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}

	for range 3 {
		if err := query(context.Background(), 50); err != nil {
			panic(err)
		}
	}
	fmt.Println("points charged:", tr.Stats().Total.Units) // 1 each, as the server said

	// 3 + 4998 points would pass the hour's 5,000: the query would wait
	// for the first ones to age out, past its deadline, so it fails at once.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := query(ctx, 4998)
	fmt.Println(errors.Is(err, throttle.ErrWouldExceedDeadline))

	// More than the window can ever hold.
	err = query(context.Background(), 6000)
	fmt.Println(errors.Is(err, throttle.ErrCostTooLarge))
	// Output:
	// points charged: 3
	// true
	// true
}
