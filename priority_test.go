package throttle_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlehttp/throttle"
)

// sendAt sends a GET to url with the given priority, from a goroutine.
func sendAt(t *testing.T, wg *sync.WaitGroup, rt http.RoundTripper, url string, prio int) {
	wg.Go(func() {
		ctx := throttle.With(context.Background(), throttle.Priority(prio))
		assert.NoError(t, doCtx(t, ctx, rt, url))
	})
}

// Requests of higher priority go before the waiting requests of lower
// priority; among equals, first come, first served.
func TestPriorityReordersTheLine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := newRecorder()
		rt := throttle.New(base, throttle.WithPolicy(throttle.Policy{Rate: 10, Burst: 1}))
		defer rt.Close()
		var wg sync.WaitGroup
		for i := range 4 {
			sendAt(t, &wg, rt, fmt.Sprint("http://api.test/batch", i), 0)
			synctest.Wait()
		}
		sendAt(t, &wg, rt, "http://api.test/user0", 5)
		synctest.Wait()
		sendAt(t, &wg, rt, "http://api.test/user1", 5)
		synctest.Wait()
		sendAt(t, &wg, rt, "http://api.test/low", -1)
		synctest.Wait()
		wg.Wait()
		assert.Equal(t, []string{
			"http://api.test/batch0", // at once
			"http://api.test/user0", "http://api.test/user1",
			"http://api.test/batch1", "http://api.test/batch2", "http://api.test/batch3",
			"http://api.test/low",
		}, base.urls())
	})
}

// A steady stream of requests of higher priority, more than the pace can
// take, does not starve the rest: a waiting request gains a level each
// second, so requests two levels above it that arrive two seconds or more
// after it no longer go first.
func TestPriorityStarvesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := newRecorder()
		rt := throttle.New(base, throttle.WithPolicy(throttle.Policy{Rate: 10, Burst: 1}))
		defer rt.Close()
		var wg sync.WaitGroup
		stop := make(chan struct{})
		arrived := map[string]time.Duration{}
		var mu sync.Mutex
		wg.Go(func() { // 20 a second of priority 2: twice what the pace takes
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-time.After(50 * time.Millisecond):
				}
				url := fmt.Sprint("http://api.test/hi", i)
				mu.Lock()
				arrived[url] = time.Since(base.start)
				mu.Unlock()
				sendAt(t, &wg, rt, url, 2)
			}
		})
		time.Sleep(500*time.Millisecond + time.Millisecond)
		loArrived := time.Since(base.start)
		sendAt(t, &wg, rt, "http://api.test/lo", 0)
		time.Sleep(4 * time.Second)
		close(stop)
		wg.Wait()
		urls := base.urls()
		lo := -1
		for i, u := range urls {
			if u == "http://api.test/lo" {
				lo = i
			}
		}
		require.NotEqual(t, -1, lo, "the low-priority request was sent")
		passed := 0
		for _, u := range urls[:lo] {
			if a, ok := arrived[u]; ok && a > loArrived {
				passed++
				assert.Less(t, a, loArrived+2*time.Second, "%s arrived %v after it, and still went first", u, a-loArrived)
			}
		}
		assert.Greater(t, passed, 30, "the higher priority went first while it could")
	})
}

// With: "Options given again replace those of a parent context one by one,
// the later winning". A request whose own context gives a valid Cost or
// PartitionKey must not fail for the invalid one its parent context gave.
func TestWithTheLaterOptionWins(t *testing.T) {
	var mu sync.Mutex
	var keys []string
	rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
		return reply(r, http.StatusOK), nil
	}), throttle.WithEvents(func(e throttle.Event) {
		if e.Kind == throttle.EventAnswered {
			mu.Lock()
			keys = append(keys, e.Key)
			mu.Unlock()
		}
	}))
	defer rt.Close()
	for _, ctx := range []context.Context{
		throttle.With(throttle.With(context.Background(), throttle.Cost(0)), throttle.Cost(2)),
		throttle.With(throttle.With(context.Background(), throttle.PartitionKey("")), throttle.PartitionKey("tenant-7")),
		throttle.With(context.Background(), throttle.Cost(-1), throttle.NoRetry(), throttle.Cost(1)),
	} {
		resp, err := rt.RoundTrip(newReq(t, ctx, http.MethodGet, "http://api.test/"))
		if assert.NoError(t, err) {
			resp.Body.Close()
		}
	}
	assert.Equal(t, []string{"api.test", "tenant-7", "api.test"}, keys)
	assert.EqualValues(t, 4, rt.Stats().Total.Units, "the later Cost(2), then 1 and 1")

	// The last of its name still fails the request.
	ctx := throttle.With(throttle.With(context.Background(), throttle.Cost(2)), throttle.Cost(0))
	_, err := rt.RoundTrip(newReq(t, ctx, http.MethodGet, "http://api.test/"))
	require.ErrorIs(t, err, throttle.ErrInvalidRequestOption)
	assert.True(t, strings.Contains(err.Error(), "Cost: 0"), err.Error())
}

// A request of higher priority that joins the line ahead of a waiting one
// puts that one's turn later: when it now comes after the waiter's
// deadline, the waiter fails then with ErrWouldExceedDeadline, as at its
// arrival (and as after a change of Policy), not at its deadline with the
// context's error.
func TestAWaiterPassedByPriorityFailsWhenItsTurnPassesTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		rt := throttle.New(rec, throttle.WithPolicy(throttle.Policy{Rate: 1, Queue: 10}))
		defer rt.Close()
		require.NoError(t, do(t, rt, "http://api.example.com/first")) // at once: the next turn is at 1 s

		start := time.Now()
		var failedAt time.Duration
		var werr error
		var wg sync.WaitGroup
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
			defer cancel()
			werr = doCtx(t, ctx, rt, "http://api.example.com/batch") // its turn at 1 s: it waits
			failedAt = time.Since(start)
		})
		synctest.Wait()
		time.Sleep(100 * time.Millisecond)
		wg.Go(func() { // goes first, at 1 s: the batch request's turn is now 2 s
			ctx := throttle.With(context.Background(), throttle.Priority(5))
			assert.NoError(t, doCtx(t, ctx, rt, "http://api.example.com/user"))
		})
		synctest.Wait()
		wg.Wait()
		require.Error(t, werr)
		assert.ErrorIs(t, werr, throttle.ErrWouldExceedDeadline)
		assert.Equal(t, 100*time.Millisecond, failedAt, "fails when passed, not at its deadline: %v", werr)
	})
}

// Priorities beyond 2^53 age as the others do: a request of p+2 passes
// one of p only if it came less than 2 s after it (found in review: at
// 2^60, where a float64's step is 256 levels, it passed one that had
// waited 10 s, and would have for about 2 minutes).
func TestAHugePriorityStillAges(t *testing.T) {
	for _, p := range []int{127, 1<<60 + 127} {
		synctest.Test(t, func(t *testing.T) {
			base := newRecorder()
			rt := throttle.New(base, throttle.WithPolicy(throttle.Policy{Rate: 0.05, Burst: 1})) // one every 20 s
			defer rt.Close()
			var wg sync.WaitGroup
			sendAt(t, &wg, rt, "http://api.test/first", 0) // at once
			synctest.Wait()
			sendAt(t, &wg, rt, "http://api.test/old", p) // waits for 20 s
			synctest.Wait()
			time.Sleep(10 * time.Second)
			sendAt(t, &wg, rt, "http://api.test/new", p+2) // 10 s later: 2 levels above, 10 below by now
			synctest.Wait()
			wg.Wait()
			assert.Equal(t, []string{"http://api.test/first", "http://api.test/old", "http://api.test/new"}, base.urls(), "Priority(%d)", p)
		})
	}
}

// Equal priorities are ordered by arrival, as the others are by aging: a
// request whose key took a slow WithKey lookup reaches its line after
// later ones of its priority, and goes before them (found in review:
// ordered by its place given at its key among its equals, and by arrival
// among the others, the line was no order, and a request of priority 7
// was passed by one of 0 that came 5 s before it).
func TestAPriorityRequestIsNotPassedBehindASlowKeyLookup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := newRecorder()
		rt := throttle.New(base,
			throttle.WithPolicy(throttle.Policy{Rate: 0.05, Burst: 1}), // one every 20 s
			throttle.WithKey(func(req *http.Request) string {
				if strings.HasSuffix(req.URL.Path, "/slowkey") {
					time.Sleep(10 * time.Second) // a slow lookup of the tenant
				}
				return "api"
			}))
		defer rt.Close()
		var wg sync.WaitGroup
		sendAt(t, &wg, rt, "http://api.test/first", 0) // at 0: takes the burst
		synctest.Wait()
		sendAt(t, &wg, rt, "http://api.test/slowkey", 0) // at 0, in line at 10 s
		synctest.Wait()
		time.Sleep(5 * time.Second)
		sendAt(t, &wg, rt, "http://api.test/r1", 0) // at 5 s
		synctest.Wait()
		time.Sleep(5*time.Second + time.Millisecond)
		sendAt(t, &wg, rt, "http://api.test/w", 7) // at 10.001 s: 7 levels above r1, 5 s younger
		synctest.Wait()
		wg.Wait()
		urls := base.urls()
		iw, ir := -1, -1
		for i, u := range urls {
			switch u {
			case "http://api.test/w":
				iw = i
			case "http://api.test/r1":
				ir = i
			}
		}
		assert.Less(t, iw, ir, "w (priority 7, at 10 s) goes before r1 (priority 0, at 5 s)")
	})
}
