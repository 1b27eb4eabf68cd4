package throttle

import (
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlehttp/throttle/throttletest"
)

// The mirror's own count of a log of recent requests holds what the
// server's figures say our requests cost, not what they were charged.
func TestMirrorRecountsByTheFigure(t *testing.T) {
	m := told{limit: 100, period: time.Second}
	m.took(time.Second, 0, 0, 5)
	m.took(2*time.Second, 0, 5, 2)
	m.recount(time.Second, 5, 1)   // charged 5, cost 1
	m.recount(2*time.Second, 2, 4) // charged 2, cost 4
	m.recount(3*time.Second, 1, 3) // never kept: nothing to correct
	for _, c := range []struct {
		from, to time.Duration
		want     int
	}{{0, time.Second, 1}, {time.Second, 2 * time.Second, 4}, {2 * time.Second, 3 * time.Second, 0}} {
		if got := m.sentBetween(c.from, c.to); got != c.want {
			t.Errorf("sent in (%v, %v]: %d, want %d", c.from, c.to, got, c.want)
		}
	}
}

// Regression: the mirror's wait for a bucket saturates. Two attempts of a
// billion units on their way, at a measured refill of one unit per 20 s,
// once made a wait past time.Duration's range: negative, and the next
// request went at once. As counted, that bucket never holds a request
// again until a reading (see
// TestBucketShortOfTheHeadWakesItOnlyWhenSomethingChanges): the next
// waits for their answers and, should those carry no reading, for the
// bucket to be taken for spent, 200 s (its depth at its rate) after its
// level was read. A wait at its rate alone, a bucket of 10 empty at a
// unit per 3e11 s, is one of centuries, saturated.
func TestMirrorWaitSaturates(t *testing.T) {
	m := told{on: true, kind: kindBucket, rate: 0.05, limit: 10, depth: 10, level: 10, levelAt: time.Second}
	now := 2 * time.Second
	m.took(now, 0, 0, maxCost)
	m.took(now, 0, maxCost, maxCost)
	if got := m.lowerBound(now, 2*maxCost, 2*maxCost, 0, 1); got != holdsForAnswer {
		t.Errorf("with two billion units on their way, lowerBound = %v, want their answers", got)
	}
	if got, want := m.lowerBound(now, 2*maxCost, 0, 0, 1), m.levelAt+200*time.Second; got != want {
		t.Errorf("answered without a reading, lowerBound = %v, want %v: the bucket taken for spent", got, want)
	}
	m = told{on: true, kind: kindBucket, rate: 1.0 / 3e11, limit: 10, depth: 10, levelAt: time.Second}
	if got := m.lowerBound(now, 0, 0, 0, 1); got == holdsForAnswer || got < now+200*365*24*time.Hour {
		t.Errorf("lowerBound = %v, want a wait of centuries (saturated), not %v", got, time.Duration(math.MaxInt64))
	}
}

// A kind not yet known is held to what a log of recent requests would hold
// once a reset passed with no reading since: X-RateLimit-Reset cannot tell
// a log from a window, and a log gives back only what aged (regression: at
// the first reset the mirror held the whole limit again, the waiting
// requests went at once, were refused, and the key paused a second).
func TestUnknownKindIsHeldToALogAfterTheReset(t *testing.T) {
	m := told{}
	const n = 200
	var adm uint64
	// The first window, spread over its first half second: each request
	// answered 1 ms after it was sent, Remaining one less each time, the
	// reset a second away in whole seconds, as a log of 200 a second says.
	for i := range n {
		sent := time.Duration(i) * 2500 * time.Microsecond
		m.took(sent, 0, 0, 1)
		adm++
		q := Quota{Limit: n, Remaining: n - 1 - i, Reset: time.Second,
			HasLimit: true, HasRemaining: true, HasReset: true}
		m.read(q, sent+time.Millisecond, sent, adm, adm, 0, 1, true, true)
	}
	if m.kind != kindUnknown {
		t.Fatalf("kind %v, want still unknown", m.kind)
	}
	now := time.Second + 5*time.Millisecond // past the first reading's reset
	if at := m.lowerBound(now, adm, 0, 10, 1); at <= now {
		t.Errorf("11 requests may go at once after the reset (at %v): a log gives back only what aged", at)
	}
	logHolds := float64(n - m.answeredBetween(now-time.Second, now))
	if got := m.tokens(now, 0); got > logHolds {
		t.Errorf("after the reset the mirror holds %.0f, more than a log would (%.0f)", got, logHolds)
	}
}

// A log verdict is overturned by a reading a log could not give: Remaining
// near the limit while ours answered within the window's length, less a
// round trip at each end, were all still counted in it. Refusals never
// overturn a log (it only ever sends less), so a bucket taken for one
// stayed held to the limit a window for ever. A log told by a window
// refused after its reset is kept, whatever the readings say.
func TestLogVerdictIsOverturnedByALevelNoLogHolds(t *testing.T) {
	for _, c := range []struct {
		name     string
		r        int  // Remaining read at 2 s
		refused  bool // the log verdict came from a refusal after a reset
		wantKind quotaKind
	}{
		{"bucket", 19, false, kindUnknown},
		{"log", 20 - 10 - 1, false, kindLog},
		{"refused", 19, true, kindLog},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := told{on: true, kind: kindLog, logRefused: c.refused, limit: 20, depth: 20,
				longest: time.Second, rtt: 100 * time.Millisecond}
			// Ten of ours answered from 1.2 s to 1.65 s: within the window
			// of a reading at 2 s, a round trip away from either end.
			for i := range 10 {
				m.accepted(1200*time.Millisecond+time.Duration(i)*50*time.Millisecond, 1)
			}
			q := Quota{Limit: 20, Remaining: c.r, Reset: time.Second, HasLimit: true, HasRemaining: true, HasReset: true}
			m.read(q, 2*time.Second, 2*time.Second-time.Millisecond, 11, 11, 0, 1, true, true)
			if m.kind != c.wantKind {
				t.Errorf("kind %d after Remaining %d, want %d", m.kind, c.r, c.wantKind)
			}
		})
	}
}

// A window that others spend too, of which nothing was read since its
// reset (the key was paused across it by a whole-second Retry-After), is
// not sent to near its end: the others had all of it to spend. The key
// waits for the next reset; with half the window to go, or no others ever
// seen, it sends (regression: a key refused near a window's end woke at
// the same point of every window, found each spent, and its request gave
// up after eight refusals).
func TestWindowNotReadSinceItsResetIsLeftToOthersNearItsEnd(t *testing.T) {
	const reset = 11003 * time.Millisecond // the next reset known when the key was refused
	for _, c := range []struct {
		name   string
		kind   quotaKind
		others time.Duration // when others were last seen spending it; 0: never
		now    time.Duration
		wait   bool
	}{
		{"window", kindWindow, 9 * time.Second, reset + time.Second - 37*time.Millisecond, true},
		{"unknown", kindUnknown, 9 * time.Second, reset + time.Second - 37*time.Millisecond, true},
		{"half a window to go", kindWindow, 9 * time.Second, reset + time.Second/2, false},
		{"alone", kindWindow, 0, reset + time.Second - 37*time.Millisecond, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			// A window of 100 a second, its length told (RateLimit-Policy w),
			// spent when the key was refused at 10.967 s, 36 ms before its
			// reset, and paused a second.
			m := told{on: true, kind: c.kind, limit: 100, depth: 100, period: time.Second, longest: time.Second,
				coarse: true, othersSeen: c.others, left: 0, leftAt: 10967 * time.Millisecond, resetAt: reset,
				leftAdm: 500, leftSeen: 500, sent: 500, lastAdm: 500}
			at := m.lowerBound(c.now, 500, 0, 0, 1)
			if c.wait && at != reset+time.Second {
				t.Errorf("at %v goes at %v, want the next reset, %v", c.now, at, reset+time.Second)
			}
			if !c.wait && at >= reset+time.Second {
				t.Errorf("at %v waits for the next reset (%v)", c.now, at)
			}
		})
	}
}

// A window of known length that others spend too is told again when the
// first reading after its reset, within a quarter of its length of the
// reset, shows less than half of it back (a sliding counter); read later,
// others may have spent most of it, and it stays a window (regression: a
// key paused across a reset read it late, found less than half, took it
// for no window, and tried beyond the mirror at every window, refused each
// time).
func TestSharedWindowReadLateAfterItsResetStaysAWindow(t *testing.T) {
	for _, c := range []struct {
		name  string
		after time.Duration // from the reset to the reading
		want  quotaKind
	}{
		{"early", 100 * time.Millisecond, kindUnknown},
		{"late", 600 * time.Millisecond, kindWindow},
	} {
		t.Run(c.name, func(t *testing.T) {
			const reset = 10 * time.Second
			m := told{on: true, kind: kindWindow, limit: 100, depth: 100, period: time.Second, longest: time.Second,
				coarse: true, othersSeen: 9 * time.Second, left: 0, leftAt: reset - 30*time.Millisecond, resetAt: reset,
				leftAdm: 500, leftSeen: 500, sent: 500, lastAdm: 500}
			now := reset + c.after
			m.rollover(now, 500)
			m.took(now-time.Millisecond, 0, 0, 1)
			// 20 left, one of them ours: others spent 79 since the reset.
			q := Quota{Limit: 100, Remaining: 20, Reset: time.Second, Window: time.Second,
				HasLimit: true, HasRemaining: true, HasReset: true}
			m.read(q, now, now-time.Millisecond, 501, 501, 0, 1, true, true)
			if m.kind != c.want {
				t.Errorf("kind %v after 20 remain %v after the reset, want %v", m.kind, c.after, c.want)
			}
		})
	}
}

// A short window told by X-RateLimit-* (no length stated), which others
// spend too, keeps its phase:
// once its reset passed, the next is due a window's length later, and a
// refusal read near the window's end, whose reset in whole seconds is up
// to a second late, does not move it. A key refused there and paused a
// second then waits for the next reset, which others spending the window
// leave it, instead of sending at the same point of every window
// (regression: refused at the same point of 8 to 14 windows in a row).
func TestShortWindowResetIsDueAWindowLengthAfterTheLast(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	m := told{on: true, kind: kindWindow, limit: 100, depth: 100, longest: time.Second, coarse: true,
		othersSeen: ms(10900), left: 3, leftAt: ms(10950), resetAt: ms(11003),
		leftAdm: 500, leftSeen: 500, sent: 500, lastAdm: 500}
	// Refused at 11.99 s, whose reading says 0 remain and a reset 1 s
	// away (rounded up from 13 ms).
	now := ms(11990)
	m.rollover(now, 500)
	m.took(now-time.Millisecond, 0, 0, 1)
	refused := Quota{Limit: 100, Remaining: 0, Reset: time.Second, HasLimit: true, HasRemaining: true, HasReset: true}
	m.read(refused, now, now-time.Millisecond, 501, 501, 0, 1, false, true)
	if m.resetAt != ms(12003) {
		t.Errorf("next reset %v, want 12.003s: a window's length after the last", m.resetAt)
	}
	// The pause ends a second later, 13 ms before the window after.
	now = ms(12990)
	if at := m.lowerBound(now, 501, 0, 0, 1); at != ms(13003) {
		t.Errorf("at %v the key goes at %v, want the next reset, 13.003s", now, at)
	}
}

// Every time the mirror tells the head of a bucket's line to wake at is one
// at which something changes: the head goes, or the bucket is taken for
// spent. A bucket that, as counted, can never hold what the head needs
// (its depth, less ours sent since its level was read) waits for the time
// it is taken for spent, not for the time its rate would give, which gave
// the same answer at every turn (regression, found in review: at rates
// measured from huge Remaining figures, the head woke every nanosecond for
// a second, 1e9 times; at a sane rate, a bucket whose headers stopped woke
// its head about every 30 ms for a second). Each short case fails on the
// old code without spinning: the loop stops at the fourth wake-up (the
// slow bucket, woken 3 times, not 2, went half a second late). With ours
// on their way, the head waits for their answers.
func TestBucketShortOfTheHeadWakesItOnlyWhenSomethingChanges(t *testing.T) {
	for _, c := range []struct {
		name        string
		depth       int
		level, rate float64
		unread      uint64 // ours sent since the level was read
		wakes       int    // before the head goes
		spent       bool   // short of what the head needs: taken for spent first
	}{
		{"3 deep, 2.6e9 a second", 3, 2, 2.6e9, 2, 2, true},
		{"3 deep, 6.6e9 a second", 3, 2, 6.5639116816e9, 2, 2, true},
		{"1 deep, 9e17 a second", 1, 1, 9e17, 1, 2, true},
		{"1 deep, 1.4e12 a second", 1, 0.5, 1.4e12, 1, 2, true},
		{"20 deep, its headers stopped", 20, 3, 100, 20, 2, true},
		{"10 deep, 0.5 a second", 10, 2, 0.5, 10, 2, true},
		{"not short: its rate's time", 5, 0, 100, 0, 1, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			const levelAt, adm = time.Second, 100
			m := told{on: true, kind: kindBucket, limit: c.depth, depth: c.depth, level: c.level, levelAt: levelAt,
				rate: c.rate, sent: adm, leftSent: adm - c.unread, left: int(c.level)}
			if at := m.lowerBound(levelAt, adm, 1, 0, 1); c.spent && at != holdsForAnswer {
				t.Errorf("with one of ours on its way, wakes at %v, want when its answer comes", at)
			}
			now, wakes := levelAt, 0
			for ; ; wakes++ {
				at := m.lowerBound(now, adm, 0, 0, 1)
				if at <= now {
					break // the head goes
				}
				if wakes == 3 {
					t.Fatalf("woken 3 times, the last at %v, and still held: each wake-up gave the same answer", now-levelAt)
				}
				now = at
			}
			if wakes != c.wakes {
				t.Errorf("the head went after %d wake-ups, want %d", wakes, c.wakes)
			}
			if spent := m.levelAt > levelAt; spent != c.spent {
				t.Errorf("taken for spent: %v, want %v", spent, c.spent)
			}
			t.Logf("the head went %v after the level was read", now-levelAt)
		})
	}
}

// Only a bucket's reset, the time until it is full, places the quota's end
// later with each request it takes: a fixed window's stays put, a log's
// moves no later than the answers come, and a sliding counter's moves a
// window's length at its windows' ends, which fits no one rate of refill
// (see endMoved). Each reading here is of one request, 5 ms on its way,
// on a quota of 10, its reset in whole seconds.
func TestOnlyABucketsEndMovesLaterAsItsCountFalls(t *testing.T) {
	type reading struct {
		sent      time.Duration
		remaining int
		reset     time.Duration
	}
	s := time.Second
	for _, c := range []struct {
		name     string
		readings []reading
		want     quotaKind
	}{
		{"bucket of 0.1 a second, four at once", []reading{{s, 9, 10 * s}, {s, 8, 20 * s}, {s, 7, 30 * s}, {s, 6, 40 * s}}, kindBucket},
		{"answered out of order", []reading{{s, 7, 30 * s}, {s, 9, 10 * s}}, kindBucket},
		{"fixed window of 10 a minute", []reading{{s, 9, 60 * s}, {s, 8, 60 * s}, {20 * s, 7, 41 * s}, {40 * s, 6, 21 * s}}, kindUnknown},
		{"log of 10 a minute, one every 5 s", []reading{{s, 9, 60 * s}, {5 * s, 8, 60 * s}, {10 * s, 7, 60 * s}, {15 * s, 6, 60 * s}}, kindUnknown},
		{"sliding counter of 10 a minute, across its window's end", []reading{{59 * s, 4, 61 * s}, {60500 * time.Millisecond, 3, 120 * s}}, kindUnknown},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := told{}
			for i, r := range c.readings {
				adm := uint64(i + 1)
				m.took(r.sent, adm, 0, 1)
				q := Quota{Limit: 10, Remaining: r.remaining, Reset: r.reset, HasLimit: true, HasRemaining: true, HasReset: true}
				m.read(q, r.sent+5*time.Millisecond, r.sent, adm, adm, 0, 1, true, true)
			}
			if m.kind != c.want {
				t.Errorf("kind %v, want %v", m.kind, c.want)
			}
			if c.want == kindBucket && math.Abs(m.rate-0.1) > 0.01 {
				t.Errorf("rate %.3f a second, want 0.1", m.rate)
			}
		})
	}
}

// tallResetRun runs 4 workers of each requests each through a Transport
// without a Policy against a quota of 100 a second (a bucket 10 deep, or
// a log) told by X-RateLimit-* on every answer, whose answer number at
// says its reset is in 2033, once. It returns the key's mirror and Stats.
func tallResetRun(t *testing.T, alg throttletest.Algorithm, at int64, each int) (m *told, st KeyStats) {
	synctest.Test(t, func(t *testing.T) {
		api := throttletest.NewAPI(throttletest.Config{Limits: []throttletest.Limit{{Algorithm: alg, N: 100, Per: time.Second, Rate: 100, Burst: 10}},
			XRateLimit: true, HeadersOnSuccess: true})
		var n atomic.Int64
		rt := New(roundTripFunc(func(r *http.Request) (*http.Response, error) {
			resp, err := api.RoundTrip(r)
			if err == nil && n.Add(1) == at {
				resp.Header.Set("X-RateLimit-Reset", "2000000000")
			}
			return resp, err
		}))
		defer rt.Close()
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range each {
					req, _ := http.NewRequest(http.MethodGet, "http://a.test/", nil)
					req.Header.Set("X-API-Key", "k")
					if resp, err := rt.RoundTrip(req); assert.NoError(t, err) {
						resp.Body.Close()
					}
				}
			})
		}
		wg.Wait()
		st = rt.Stats().Keys["a.test"]
		ks := rt.cfg.def.cur.Load().keys.load("a.test")
		ks.mu.Lock()
		defer ks.mu.Unlock()
		m = ks.mirror()
	})
	return m, st
}

// One reset of years among a server's readings of a second is not its
// window's length (found in review: the length was years for good, the
// record of our requests never trimmed, 39,999 kept after 40,000 requests
// to a bucket, and a log of 100 a second drew 498 429s where it draws
// none).
func TestOneTallResetIsNotTheWindowsLength(t *testing.T) {
	for _, alg := range []throttletest.Algorithm{throttletest.TokenBucket, throttletest.SlidingLog} {
		t.Run(alg.String(), func(t *testing.T) {
			m, st := tallResetRun(t, alg, 50, 10000)
			require.NotNil(t, m)
			assert.LessOrEqual(t, m.longest, 2*time.Second)
			assert.Less(t, len(m.sends), 1000)
			assert.LessOrEqual(t, st.Throttled, int64(20))
		})
	}
}

// A first reading of years is taken as it is (nothing says it is wrong
// yet), but the record of our requests stays bounded: it kept all 60,000.
func TestATallFirstResetKeepsTheRecordBounded(t *testing.T) {
	m, _ := tallResetRun(t, throttletest.TokenBucket, 1, 15000)
	require.NotNil(t, m)
	assert.LessOrEqual(t, len(m.sends), 4*(maxCounted+1))
}

// A reset far longer than the longest seen is taken when the reading after
// agrees: a window of an hour first read in its last second.
func TestATallResetIsTakenWhenTheNextAgrees(t *testing.T) {
	var m told
	for _, c := range []struct{ reset, longest time.Duration }{
		{time.Second, time.Second},
		{time.Hour, time.Second}, // one reading: not yet
		{time.Hour - time.Second, time.Hour - time.Second},
		{time.Hour, time.Hour},
		{time.Second, time.Hour},
	} {
		m.long(c.reset)
		assert.Equal(t, c.longest, m.longest, "after a reset of %v", c.reset)
	}
	m = told{}
	for _, r := range []time.Duration{time.Second, 100 * 365 * 24 * time.Hour, time.Second, 2 * time.Second} {
		m.long(r)
	}
	assert.Equal(t, 2*time.Second, m.longest, "one tall reading between short ones")
}
