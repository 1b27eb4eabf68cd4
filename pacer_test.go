package throttle_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"

	"github.com/throttlehttp/throttle"
	"github.com/throttlehttp/throttle/throttletest"
)

// launch starts n requests to url, one after the other in arrival order,
// and waits for all of them.
func launch(t *testing.T, rt *throttle.Transport, n int, url string) []error {
	t.Helper()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = do(t, rt, fmt.Sprintf("%s?i=%d", url, i))
		}()
		synctest.Wait() // request i is in line before i+1 arrives
	}
	wg.Wait()
	return errs
}

func TestTokenBucketBurstThenRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		rt := throttle.New(rec, throttle.WithPolicy(throttle.Policy{Rate: 10, Burst: 4}))
		defer rt.Close()
		for _, err := range launch(t, rt, 7, "http://api.example.com/") {
			require.NoError(t, err)
		}
		// Burst-1 at once (one token in reserve), then one every 1/Rate.
		assert.Equal(t, []time.Duration{0, 0, 0, ms(100), ms(200), ms(300), ms(400)}, rec.times())

		time.Sleep(time.Second) // the bucket refills up to Burst-1, no more
		start := time.Since(rec.start)
		for _, err := range launch(t, rt, 4, "http://api.example.com/") {
			require.NoError(t, err)
		}
		got := rec.times()[7:]
		for i, want := range []time.Duration{0, 0, 0, ms(100)} {
			assert.Equal(t, want, got[i]-start, "request %d after the refill", i)
		}
		st := rt.Stats().Keys["api.example.com"]
		assert.EqualValues(t, 11, st.Requests)
		assert.EqualValues(t, 11, st.Attempts)
		assert.EqualValues(t, 5, st.Waited)
		assert.Equal(t, ms(100+200+300+400+100), st.WaitTime)
		assert.EqualValues(t, 10, st.Rate)
	})
}

func TestTokenReserveAbsorbsLatencyJitter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The server's bucket: 10/s, depth 3, its clock started by the first
		// request to arrive. The requests of the first burst pay 30ms for
		// dialing their connections; the later ones arrive after 1ms, so to
		// the server they look 29ms early.
		api := throttletest.NewAPI(throttletest.Config{Limits: []throttletest.Limit{
			{Algorithm: throttletest.TokenBucket, Rate: 10, Burst: 3}}})
		start := time.Now()
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			if time.Since(start) == 0 {
				time.Sleep(30 * time.Millisecond)
			} else {
				time.Sleep(time.Millisecond)
			}
			return api.RoundTrip(r)
		})
		rt := throttle.New(base, throttle.WithPolicy(throttle.Policy{Rate: 10, Burst: 3}))
		defer rt.Close()
		var wg sync.WaitGroup
		for range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req := newReq(t, context.Background(), http.MethodGet, "http://api.test/")
				req.Header.Set("X-API-Key", "k")
				resp, err := rt.RoundTrip(req)
				require.NoError(t, err)
				resp.Body.Close()
			}()
		}
		wg.Wait()
		assert.Zero(t, api.Stats().Total.Throttled)
		assert.EqualValues(t, 20, api.Stats().Total.Requests)
	})
}

func TestTokenBucketKeepsArrivalOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		rt := throttle.New(rec, throttle.WithPolicy(throttle.Policy{Rate: 5, Burst: 1}))
		defer rt.Close()
		launch(t, rt, 6, "http://a.test/")
		for i, u := range rec.urls() {
			assert.Equal(t, fmt.Sprintf("http://a.test/?i=%d", i), u)
		}
	})
}

func TestLeakyBucket(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		rt := throttle.New(rec, throttle.WithPolicy(throttle.Policy{Rate: 10, Queue: 3}))
		defer rt.Close()
		// One goes at once, three wait, the fifth finds the queue full.
		errs := launch(t, rt, 5, "http://q.test/")
		for i := range 4 {
			require.NoError(t, errs[i])
		}
		require.ErrorIs(t, errs[4], throttle.ErrQueueFull)
		assert.Contains(t, errs[4].Error(), `key "q.test"`)
		assert.Equal(t, []time.Duration{0, ms(100), ms(200), ms(300)}, rec.times())
		for i, u := range rec.urls() {
			assert.Equal(t, fmt.Sprintf("http://q.test/?i=%d", i), u, "strict FIFO")
		}
		assert.EqualValues(t, 1, rt.Stats().Keys["q.test"].RefusedQueueFull)

		// Idle again for a while: the next is released at once, and never
		// two closer than 1/Rate, even when a burst arrives.
		time.Sleep(time.Second)
		base := time.Since(rec.start)
		launch(t, rt, 3, "http://q.test/")
		got := rec.times()[4:]
		assert.Equal(t, []time.Duration{base, base + ms(100), base + ms(200)}, got)
	})
}

func TestLeakyBucketCancelledWaiterLeavesNoHole(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		rt := throttle.New(rec, throttle.WithPolicy(throttle.Policy{Rate: 10, Queue: 5}))
		defer rt.Close()
		require.NoError(t, do(t, rt, "http://q.test/first")) // t=0; next release at 100ms

		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		errs := make([]error, 3)
		for i := range 3 {
			c := context.Background()
			if i == 0 {
				c = ctx
			}
			wg.Add(1)
			go func() { defer wg.Done(); errs[i] = doCtx(t, c, rt, fmt.Sprintf("http://q.test/%d", i)) }()
			synctest.Wait()
		}
		assert.Equal(t, 3, rt.Stats().Keys["q.test"].Queued)
		time.Sleep(ms(50))
		cancel() // the head leaves; the others move up
		wg.Wait()
		require.ErrorIs(t, errs[0], context.Canceled)
		require.NoError(t, errs[1])
		require.NoError(t, errs[2])
		assert.Equal(t, []time.Duration{0, ms(100), ms(200)}, rec.times())
		assert.Equal(t, []string{"http://q.test/first", "http://q.test/1", "http://q.test/2"}, rec.urls())
		assert.EqualValues(t, 1, rt.Stats().Keys["q.test"].Canceled)
	})
}

func TestWindowsAreExact(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		rt := throttle.New(rec, throttle.WithPolicy(throttle.Policy{
			Windows: []throttle.Window{{N: 3, Per: time.Second}, {N: 5, Per: 10 * time.Second}},
		}))
		defer rt.Close()
		time.Sleep(ms(900))
		rec.start = time.Now().Add(-ms(900))
		launch(t, rt, 7, "http://w.test/")
		// 3 at 0.9s; 2 more at 1.9s (the answers came back at once; the
		// 5-per-10s window is then full); then none before 10.9s, when the
		// first three expire from it.
		want := []time.Duration{ms(900), ms(900), ms(900), ms(1900), ms(1900), ms(10900), ms(10900)}
		assert.Equal(t, want, rec.times())
		assertWindow(t, rec.times(), 3, time.Second)
		assertWindow(t, rec.times(), 5, 10*time.Second)
	})
}

// assertWindow checks that no interval of length per holds more than n sends.
func assertWindow(t *testing.T, ts []time.Duration, n int, per time.Duration) {
	t.Helper()
	for i := range ts {
		count := 0
		for j := i; j < len(ts) && ts[j]-ts[i] < per; j++ {
			count++
		}
		assert.LessOrEqual(t, count, n, "sends in [%v, %v)", ts[i], ts[i]+per)
	}
}

func TestWindowWithBucketTakesNothingWhileWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		rt := throttle.New(rec, throttle.WithPolicy(throttle.Policy{
			Rate: 1, Burst: 3, Windows: []throttle.Window{{N: 2, Per: 10 * time.Second}},
		}))
		defer rt.Close()
		launch(t, rt, 4, "http://wb.test/")
		// The window holds the 3rd until 10s; the bucket, full again by
		// then, lets the 3rd and the 4th go together.
		assert.Equal(t, []time.Duration{0, 0, ms(10000), ms(10000)}, rec.times())
	})
}

func TestMaxInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var mu sync.Mutex
		inFlight, peak := 0, 0
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			inFlight++
			peak = max(peak, inFlight)
			mu.Unlock()
			<-release
			return reply(r, http.StatusOK), nil
		})
		rt := throttle.New(base, throttle.WithPolicy(throttle.Policy{MaxInFlight: 2}))
		defer rt.Close()
		bodies := make(chan io.Closer, 3)
		for i := range 3 {
			go func() {
				resp, err := rt.RoundTrip(newReq(t, context.Background(), http.MethodGet, fmt.Sprint("http://f.test/", i)))
				require.NoError(t, err)
				mu.Lock()
				inFlight--
				mu.Unlock()
				bodies <- resp.Body
			}()
		}
		synctest.Wait()
		assert.Equal(t, 2, inFlight, "the third waits for a slot")
		release <- struct{}{}
		release <- struct{}{}
		synctest.Wait()
		assert.Equal(t, 0, inFlight, "the third still waits: bodies are open")
		(<-bodies).Close()
		synctest.Wait()
		assert.Equal(t, 1, inFlight, "a closed body frees its slot")
		close(release)
		(<-bodies).Close()
		(<-bodies).Close()
		assert.Equal(t, 2, peak)
	})
}

func TestWindowCountsFromAnswersAbsorbsLatencyJitter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The server counts arrivals in a sliding log, 10 per second. The
		// first batch pays 5ms for dialing; later requests arrive after 1ms.
		api := throttletest.NewAPI(throttletest.Config{Limits: []throttletest.Limit{
			{Algorithm: throttletest.SlidingLog, N: 10, Per: time.Second}}})
		start := time.Now()
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			if time.Since(start) == 0 {
				time.Sleep(5 * time.Millisecond)
			} else {
				time.Sleep(time.Millisecond)
			}
			return api.RoundTrip(r)
		})
		rt := throttle.New(base, throttle.WithPolicy(throttle.Policy{Windows: []throttle.Window{{N: 10, Per: time.Second}}}))
		defer rt.Close()
		took := job(t, rt, 50)
		assert.Zero(t, api.Stats().Total.Throttled)
		assert.LessOrEqual(t, took, 4*time.Second+ms(10), "5 windows of 10, each a round trip longer")
	})
}

func TestWindowAboveQuotaSettles(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := throttletest.NewAPI(throttletest.Config{Limits: []throttletest.Limit{
			{Algorithm: throttletest.SlidingLog, N: 100, Per: time.Second}}})
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			time.Sleep(time.Millisecond)
			return api.RoundTrip(r)
		})
		rt := throttle.New(base, throttle.WithPolicy(throttle.Policy{Windows: []throttle.Window{{N: 125, Per: time.Second}}}))
		defer rt.Close()
		took := job(t, rt, 1000)
		st := api.Stats().Total
		assert.EqualValues(t, 1000, st.Accepted)
		assert.LessOrEqual(t, float64(st.Requests)/1000, 1.05)
		assert.Less(t, took, 12*time.Second, "within 1.2x the ideal 9s")
	})
}

// A wait behind more units than a window's N is known to take a Per for
// each N of them: a window of 2 a second, spent at 0; four requests wait
// in line (two go at 1 s, two at 2 s); a fifth's turn is at 3 s, and with
// a deadline at 2.5 s it must fail at once with ErrWouldExceedDeadline.
// nextAt bounded any wait behind more than N units by one Per, so it
// waited 2 s, until it was the head, and failed then. One with a deadline
// at 3.5 s is kept and goes at 3 s. (Regression, found in review.)
func TestADeadlineBehindMoreThanAWindowFailsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		rt := throttle.New(rec, throttle.WithPolicy(throttle.Policy{Windows: []throttle.Window{{N: 2, Per: time.Second}}}))
		defer rt.Close()
		start := time.Now()
		require.NoError(t, do(t, rt, "http://w.test/0"))
		require.NoError(t, do(t, rt, "http://w.test/1")) // the window is spent until 1 s
		var wg sync.WaitGroup
		for range 4 { // two go at 1 s, two at 2 s
			wg.Go(func() { assert.NoError(t, do(t, rt, "http://w.test/ahead")) })
			synctest.Wait()
		}
		ctx, cancel := context.WithDeadline(context.Background(), start.Add(2500*time.Millisecond))
		defer cancel()
		err := doCtx(t, ctx, rt, "http://w.test/late")
		took := time.Since(start)
		t.Logf("err after %v: %v", took, err)
		assert.ErrorIs(t, err, throttle.ErrWouldExceedDeadline)
		assert.Zero(t, took, "failed at once")
		// One whose deadline its turn meets is kept, and goes at 3 s.
		ctx, cancel = context.WithDeadline(context.Background(), start.Add(3500*time.Millisecond))
		defer cancel()
		assert.NoError(t, doCtx(t, ctx, rt, "http://w.test/in-time"))
		wg.Wait()
		assert.Equal(t, []time.Duration{0, 0, time.Second, time.Second, 2 * time.Second, 2 * time.Second, 3 * time.Second}, rec.times())
	})
}

// The bound of a wait behind others in a window steps back only from units
// the window admitted: a figure of WithCost larger than N, 50 of a window
// of 10 a second, ages out whole at once. Behind it and one waiter, a
// request with a deadline at 1.5 s goes at 1 s (not refused for 5 s: a
// guard of TestADeadlineBehindMoreThanAWindowFailsAtOnce's fix).
func TestADeadlineBehindALargeFigureIsKept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		base := rtFunc(func(req *http.Request) (*http.Response, error) {
			_, _ = rec.RoundTrip(req)
			if req.URL.Path == "/big" {
				return reply(req, http.StatusOK, "X-Cost", "50"), nil
			}
			return reply(req, http.StatusOK), nil
		})
		rt := throttle.New(base, throttle.WithPolicy(throttle.Policy{Windows: []throttle.Window{{N: 10, Per: time.Second}}}),
			throttle.WithCost(throttle.CostHeader("X-Cost")))
		defer rt.Close()
		start := time.Now()
		require.NoError(t, do(t, rt, "http://w.test/big")) // counts 50 until 1 s
		var wg sync.WaitGroup
		wg.Go(func() { assert.NoError(t, do(t, rt, "http://w.test/ahead")) })
		synctest.Wait()
		ctx, cancel := context.WithDeadline(context.Background(), start.Add(1500*time.Millisecond))
		defer cancel()
		assert.NoError(t, doCtx(t, ctx, rt, "http://w.test/in-time"))
		wg.Wait()
		assert.Equal(t, []time.Duration{0, time.Second, time.Second}, rec.times())
	})
}

// A request that ends without an answer (its deadline passed while it was on
// its way, 400 ms from the server) may reach the server after the error:
// it counts in the windows until Per after a round trip's bound past its
// end. Regression, found in review: counted from the error, the next
// request went 600 ms before a window of 1 a second had passed at the
// server, which saw two within it.
func TestAWindowCountsARequestCancelledOnItsWay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var mu sync.Mutex
		var arrivals []time.Duration
		arrive := func() {
			mu.Lock()
			arrivals = append(arrivals, time.Since(start))
			mu.Unlock()
		}
		n := 0
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			n++
			first := n == 1
			mu.Unlock()
			if first {
				// On its way: 400 ms to the server, whatever the client does.
				time.AfterFunc(400*time.Millisecond, arrive)
				<-r.Context().Done()
				return nil, r.Context().Err()
			}
			arrive()
			return reply(r, http.StatusOK), nil
		})
		rt := throttle.New(base, throttle.WithPolicy(throttle.Policy{
			Windows: []throttle.Window{{N: 1, Per: time.Second}}}))
		defer rt.Close()

		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		require.Error(t, doCtx(t, ctx, rt, "http://api.example.com/a"))
		require.NoError(t, do(t, rt, "http://api.example.com/b"))
		time.Sleep(time.Second)

		mu.Lock()
		defer mu.Unlock()
		require.Len(t, arrivals, 2)
		assert.GreaterOrEqual(t, arrivals[1]-arrivals[0], time.Second,
			"the server saw the two requests at %v and %v: 2 within a window of 1 a second", arrivals[0], arrivals[1])
	})
}

// One slow answer (the server's work: a report built for 10 s, the
// request there in a millisecond like every other) is not network jitter:
// a key paced at 10 a second keeps sending. Regression, found in review:
// the sample set rttvar to a quarter of 10 s, the reserve of a Burst of 50
// grew to 48 at once, the answer charged the bucket 47 of them, and
// nothing went for 4.8 s (the job 31.8 s where 27.1 s was ideal); the
// reserve, which never shrinks, kept the burst at 2 for good.
func TestOneSlowAnswerDoesNotHaltTheKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var mu sync.Mutex
		var sends []time.Duration
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			sends = append(sends, time.Since(start))
			i := len(sends)
			mu.Unlock()
			if i == 60 {
				time.Sleep(10 * time.Second) // the server's work, not the network's
			} else {
				time.Sleep(20 * time.Millisecond)
			}
			return reply(r, http.StatusOK), nil
		})
		rt := throttle.New(base, throttle.WithPolicy(throttle.Policy{Rate: 10, Burst: 50}))
		defer rt.Close()
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range 40 {
					assert.NoError(t, do(t, rt, "http://api.example.com/"))
				}
			})
		}
		wg.Wait()
		gap, at := time.Duration(0), time.Duration(0)
		for i := 1; i < len(sends); i++ {
			if d := sends[i] - sends[i-1]; d > gap {
				gap, at = d, sends[i-1]
			}
		}
		assert.LessOrEqual(t, gap, time.Second, "nothing sent for %v from %v (paced at 10 a second)", gap, at)
	})
}

// A request that ends without an answer long after it was sent (it hung
// until its 10 s deadline, at the server 1 ms after its sending) counts in
// its windows until Per after a round trip's bound past its sending, not
// past its end. Regression, found in review: on a server taking 3 s over
// its answers, counted from the error, it held a window of 1 a second 4 s
// past its deadline.
func TestARequestEndedLongAfterItsSendingCountsFromItsBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			time.Sleep(time.Millisecond)
			switch r.URL.Path {
			case "/hang":
				<-r.Context().Done()
				return nil, r.Context().Err()
			case "/slow":
				time.Sleep(3 * time.Second)
			}
			time.Sleep(time.Millisecond)
			return reply(r, http.StatusOK), nil
		})
		rt := throttle.New(base, throttle.WithPolicy(throttle.Policy{
			Windows: []throttle.Window{{N: 1, Per: time.Second}}}))
		defer rt.Close()
		for range 10 { // round trips of 3 s: the bound is 3 s
			require.NoError(t, do(t, rt, "http://api.example.com/slow"))
		}
		time.Sleep(time.Minute)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.Error(t, doCtx(t, ctx, rt, "http://api.example.com/hang"))
		start := time.Now()
		require.NoError(t, do(t, rt, "http://api.example.com/fast"))
		assert.LessOrEqual(t, time.Since(start), time.Second+2*time.Millisecond,
			"the next request, after one sent 10 s before and at the server since 1 ms")
	})
}

// burstAfter runs, on a key paced at r a second with a Burst of 50, one
// request at a time answered in each of rtts, then, 20 s later (the bucket
// whole again), 40 requests at once answered in 20 ms; it returns how many
// of the 40 the server saw within the first 100 ms.
func burstAfter(t *testing.T, r rate.Limit, rtts ...time.Duration) int {
	var seen, n atomic.Int64
	var burstAt atomic.Int64
	start := time.Now()
	base := rtFunc(func(req *http.Request) (*http.Response, error) {
		if b := burstAt.Load(); b != 0 && time.Since(start) <= time.Duration(b)+100*time.Millisecond {
			seen.Add(1)
		}
		if i := int(n.Add(1)) - 1; i < len(rtts) {
			time.Sleep(rtts[i])
		} else {
			time.Sleep(20 * time.Millisecond)
		}
		return reply(req, http.StatusOK), nil
	})
	tr := throttle.New(base, throttle.WithPolicy(throttle.Policy{Rate: r, Burst: 50}))
	defer tr.Close()
	for range rtts {
		require.NoError(t, do(t, tr, "http://api.example/item"))
	}
	time.Sleep(20 * time.Second)
	burstAt.Store(int64(time.Since(start)))
	var wg sync.WaitGroup
	for range 40 {
		wg.Go(func() { assert.NoError(t, do(t, tr, "http://api.example/item")) })
	}
	wg.Wait()
	return int(seen.Load())
}

// slowAt is n round trips of 20 ms but the i-th (from 0), of slow.
func slowAt(n, i int, slow time.Duration) []time.Duration {
	rtts := make([]time.Duration, n)
	for k := range rtts {
		rtts[k] = 20 * time.Millisecond
	}
	rtts[i] = slow
	return rtts
}

// One slow answer among a key's first round trips is clipped as it is
// after 8 (see latency.observe): the reserve against jitter stays small,
// and a bucket of 50 lets 40 through at once after it. (Regression, found
// in review: the slow answer second of all took the reserve to Burst-2
// for good, and 3 of the 40 went at once, the rest at 10 a second.)
func TestASlowAnswerAmongTheFirstDoesNotShrinkTheBurst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		late := burstAfter(t, 10, slowAt(9, 8, 10*time.Second)...)  // the slow answer the 9th: clipped
		early := burstAfter(t, 10, slowAt(2, 1, 10*time.Second)...) // the slow answer the 2nd
		t.Logf("requests of 40 the server saw in the first 100 ms: slow answer 9th %d, 2nd %d", late, early)
		assert.GreaterOrEqual(t, late, 40)
		assert.GreaterOrEqual(t, early, 40, "one slow answer among the first 8 shrank the usable Burst of 50")
	})
}

// A slow answer first of all, followed by one under half of it, is taken
// for the outlier, as a slow second one is clipped
// (TestASlowAnswerAmongTheFirstDoesNotShrinkTheBurst): a key's first
// answer is the one most often slow (a new connection's DNS, TCP and TLS;
// a report the job asks for first). (Regression, found in review: taken
// whole, it sized the reserve against jitter from the gap to the second,
// for good: a first answer of 10 s let 3 of 40 go at once.)
func TestASlowFirstAnswerDoesNotShrinkTheBurst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		warm := burstAfter(t, 10, slowAt(9, 0, 20*time.Millisecond)...)
		report := burstAfter(t, 10, slowAt(9, 0, 10*time.Second)...)
		tls := burstAfter(t, 100, slowAt(9, 0, 300*time.Millisecond)...)
		t.Logf("of 40 at once, in the first 100 ms: at 10/s, first answer 20 ms %d, 10 s %d; at 100/s, first answer 300 ms %d",
			warm, report, tls)
		assert.GreaterOrEqual(t, warm, 40)
		assert.GreaterOrEqual(t, report, 40, "a first answer of 10 s shrank the usable Burst of 50")
	})
}
