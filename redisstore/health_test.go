package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/throttlehttp/throttle"
)

// TestHealth: while Redis answers, every call asks it; once it has not,
// one call about each second asks it again (the trial), one at a time, and
// an answer to the trial makes every call ask it again.
func TestHealth(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var h health
		ctx := context.Background()
		gone := errors.New("connection refused")
		type step struct {
			name     string
			after    time.Duration // from the step before
			wantAsk  bool
			wantDown bool
			answer   error // when it asks: the call's error (nil: answered)
			skip     bool  // when it asks: the call is still running
		}
		steps := []step{
			{name: "up: asks", wantAsk: true},
			{name: "up: asks, fails", wantAsk: true, answer: gone},
			{name: "just failed: alone", wantDown: true},
			{name: "0.9s on: alone", after: 900 * time.Millisecond, wantDown: true},
			{name: "1s on: the trial, still running", after: 100 * time.Millisecond, wantAsk: true, wantDown: true, skip: true},
			{name: "during the trial: alone", wantDown: true},
		}
		var trial error // the running trial's down
		for _, s := range steps {
			time.Sleep(s.after)
			ask, down := h.ask(time.Now(), false)
			if ask != s.wantAsk || (down != nil) != s.wantDown {
				t.Fatalf("%s: ask %v, down %v; want ask %v, down %v", s.name, ask, down, s.wantAsk, s.wantDown)
			}
			if ask && s.skip {
				trial = down
				continue
			}
			if ask {
				_ = h.answered(ctx, s.answer, down, time.Second)
			}
		}
		// The trial fails: alone for another second.
		err := h.answered(ctx, gone, trial, time.Second)
		if !errors.Is(err, throttle.ErrStoreUnavailable) || !errors.Is(err, gone) {
			t.Fatalf("answered a failed trial: %v, want it wrapping ErrStoreUnavailable and the cause", err)
		}
		if ask, _ := h.ask(time.Now(), false); ask {
			t.Fatal("asks again at once after a failed trial")
		}
		time.Sleep(retryEvery)
		ask, down := h.ask(time.Now(), false)
		if !ask || down == nil {
			t.Fatalf("a second after a failed trial: ask %v, down %v; want the next trial", ask, down)
		}
		// The caller gives up during the trial: no news of Redis, and the
		// next call may try at once.
		canceled, cancel := context.WithCancel(ctx)
		cancel()
		if err := h.answered(canceled, context.Canceled, down, time.Second); !errors.Is(err, context.Canceled) {
			t.Fatalf("answered a canceled trial: %v, want context.Canceled", err)
		}
		ask, down = h.ask(time.Now(), false)
		if !ask || down == nil {
			t.Fatalf("after a canceled trial: ask %v, down %v; want another trial", ask, down)
		}
		// Redis answers the trial: every call asks it again.
		if err := h.answered(ctx, nil, down, time.Second); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if ask, down := h.ask(time.Now(), false); !ask || down != nil {
				t.Fatalf("after an answered trial: ask %v, down %v; want every call to ask", ask, down)
			}
		}
	})
}

// TestHealthOfShortCalls: a call cut short for its caller that gets no
// answer does not take Redis for away, but holds calls as short back: one
// of them about each second asks Redis again (the trial), one at a time,
// and an answer to the trial lets them all ask again; calls bounded by the
// timeout ask all along (regression, found in review 45: with 100 ms
// deadlines, a hanging Redis was asked by 10 requests of 10).
func TestHealthOfShortCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var h health
		ctx := context.Background()
		late := fmt.Errorf("%w: no answer within 75ms", throttle.ErrStoreUnavailable)
		if ask, down := h.ask(time.Now(), true); !ask || down != nil {
			t.Fatalf("up, a short call: ask %v, down %v; want it to ask", ask, down)
		}
		h.abandon(nil, late, time.Now())
		if ask, down := h.ask(time.Now(), true); ask || down != late {
			t.Fatalf("after a short call without an answer, a short call: ask %v, down %v; want alone, for it", ask, down)
		}
		ask, down := h.ask(time.Now(), false)
		if !ask || down != nil {
			t.Fatalf("after a short call without an answer, a full call: ask %v, down %v; want it to ask", ask, down)
		}
		if err := h.answered(ctx, nil, down, time.Second); err != nil {
			t.Fatal(err)
		}
		if ask, _ := h.ask(time.Now(), true); ask {
			t.Fatal("a full call's answer let short calls ask again at once")
		}
		time.Sleep(retryEvery)
		ask, down = h.ask(time.Now(), true)
		if !ask || down == nil {
			t.Fatalf("a second on, a short call: ask %v, down %v; want the trial", ask, down)
		}
		if ask, _ := h.ask(time.Now(), true); ask {
			t.Fatal("during the trial, another short call asks too")
		}
		if err := h.answered(ctx, nil, down, time.Second); err != nil {
			t.Fatal(err)
		}
		if ask, down := h.ask(time.Now(), true); !ask || down != nil {
			t.Fatalf("after an answered trial, a short call: ask %v, down %v; want it to ask", ask, down)
		}
	})
}

// TestShareOf: alone, a process keeps share of each quota, at least one.
func TestShareOf(t *testing.T) {
	for _, tc := range []struct {
		name  string
		p     throttle.Policy
		share float64
		want  throttle.Policy
	}{
		{"bucket", throttle.Policy{Rate: 10, Burst: 8}, 0.25, throttle.Policy{Rate: 2.5, Burst: 2}},
		{"small burst", throttle.Policy{Rate: 10, Burst: 2}, 0.25, throttle.Policy{Rate: 2.5, Burst: 1}},
		{"queue", throttle.Policy{Rate: 4, Queue: 100}, 0.5, throttle.Policy{Rate: 2, Queue: 100}},
		{"windows", throttle.Policy{Windows: []throttle.Window{{N: 5000, Per: time.Hour}, {N: 2, Per: time.Second}}}, 0.25,
			throttle.Policy{Windows: []throttle.Window{{N: 1250, Per: time.Hour}, {N: 1, Per: time.Second}}}},
		{"whole", throttle.Policy{Rate: 3, Burst: 3, MaxInFlight: 4}, 1, throttle.Policy{Rate: 3, Burst: 3, MaxInFlight: 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := shareOf(tc.p, tc.share)
			if got.Rate != tc.want.Rate || got.Burst != tc.want.Burst || got.Queue != tc.want.Queue ||
				got.MaxInFlight != tc.want.MaxInFlight || len(got.Windows) != len(tc.want.Windows) {
				t.Fatalf("shareOf(%+v, %v) = %+v, want %+v", tc.p, tc.share, got, tc.want)
			}
			for i := range got.Windows {
				if got.Windows[i] != tc.want.Windows[i] {
					t.Fatalf("shareOf(%+v, %v) = %+v, want %+v", tc.p, tc.share, got, tc.want)
				}
			}
		})
	}
}

// replyErr is an error reply of Redis, as go-redis gives it.
type replyErr string

func (e replyErr) Error() string { return string(e) }
func (replyErr) RedisError()     {}

// TestHealthOfErrorReplies: an error reply about the call alone says Redis
// answered, and keeps it shared (ends a trial as an answer does); one that
// says Redis cannot serve any call takes it for away.
func TestHealthOfErrorReplies(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		reply string
		away  bool
	}{
		{"WRONGTYPE Operation against a key holding the wrong kind of value", false},
		{"ERR user_script:1: attempt to perform arithmetic on a nil value", false},
		{"LOADING Redis is loading the dataset in memory", true},
		{"READONLY You can't write against a read only replica.", true},
		{"CLUSTERDOWN The cluster is down", true},
		{"BUSY Redis is busy running a script.", true},
		{"NOAUTH Authentication required.", true},
	} {
		var h health
		err := h.answered(ctx, fmt.Errorf("script: %w", replyErr(tt.reply)), nil, time.Second)
		if !errors.Is(err, throttle.ErrStoreUnavailable) {
			t.Errorf("%q: %v, want it wrapping ErrStoreUnavailable", tt.reply, err)
		}
		if _, down := h.ask(time.Now(), false); (down != nil) != tt.away {
			t.Errorf("%q: Redis taken for away: %v, want %v", tt.reply, down != nil, tt.away)
		}
	}
}

// TestNoAnswerSaysWhy: a call without an answer says why when the client's
// latest dial failed during the call, and only then; a dial that timed out
// is told, but the error does not match context.DeadlineExceeded (it is
// not the caller's deadline).
func TestNoAnswerSaysWhy(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}
	timedOut := &net.OpError{Op: "dial", Net: "tcp", Err: context.DeadlineExceeded}
	for _, tt := range []struct {
		name     string
		dial     error
		dialAt   time.Duration // from the call's start
		wantWhy  bool
		wantWrap bool // errors.As finds the dial's *net.OpError
	}{
		{"refused during the call", refused, time.Millisecond, true, true},
		{"refused before the call", refused, -time.Millisecond, false, false},
		{"connected during the call", nil, time.Millisecond, false, false},
		{"dial timed out during the call", timedOut, time.Millisecond, true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			d := dials{err: tt.dial, at: start.Add(tt.dialAt)}
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // the call's context ended: no answer
			var h health
			err := h.answered(context.Background(), d.why(ctx, context.DeadlineExceeded, start), nil, time.Second)
			if !errors.Is(err, throttle.ErrStoreUnavailable) || errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("%v: want it wrapping ErrStoreUnavailable, not context.DeadlineExceeded", err)
			}
			if why := tt.dial != nil && strings.Contains(err.Error(), tt.dial.Error()); why != tt.wantWhy {
				t.Errorf("%v: says why %v, want %v", err, why, tt.wantWhy)
			}
			var op *net.OpError
			if wrap := errors.As(err, &op); wrap != tt.wantWrap {
				t.Errorf("%v: wraps the dial's error %v, want %v", err, wrap, tt.wantWrap)
			}
		})
	}
}

// Stores made with one client share one hook of it (go-redis cannot take
// a hook off): a Store is freed with nothing of its own held by the client
// (found in review: a hook per Store kept 2,000 Stores alive, and made New
// 37 times slower).
func TestStoresOfOneClientShareOneHook(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	defer c.Close()
	a, b := New(c), New(c)
	assert.Same(t, a.dials, b.dials, "one hook for the client")
	var freed atomic.Int64
	const n = 100
	for range n {
		runtime.AddCleanup(New(c), func(f *atomic.Int64) { f.Add(1) }, &freed)
	}
	for i := 0; i < 1000 && freed.Load() < n; i++ {
		runtime.GC()
		runtime.Gosched()
	}
	assert.EqualValues(t, n, freed.Load(), "the Stores were freed")
	runtime.KeepAlive(a)
	runtime.KeepAlive(b)
}
