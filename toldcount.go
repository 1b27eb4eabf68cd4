package throttle

import (
	"math"
	"slices"
	"sort"
	"time"
)

// This file keeps the key's own count of its requests for the mirror of a
// server's quota (told.go): when each was admitted, over about a window's
// length, to tell a log of recent requests from a bucket by what comes back
// (a log gives back what reached it a window's length before), and to count
// a log exactly.

// length is the window length of a log of requests: the RateLimit-Policy w,
// else the longest reset seen, in whole seconds; 0 if unknown.
func (m *told) length() time.Duration {
	if m.period > 0 {
		return m.period
	}
	return m.longest
}

// sentBetween counts our admissions in (from, to].
func (m *told) sentBetween(from, to time.Duration) int {
	if to <= from {
		return 0
	}
	after := func(t time.Duration) int {
		return sort.Search(len(m.sends), func(i int) bool { return m.sends[i] > t })
	}
	return after(to) - after(from)
}

// echoes is the most a log of recent requests may have given back of
// ours between from and to: what reached it a window's length before,
// within a round trip.
func (m *told) echoes(from, to time.Duration) int {
	p := m.length()
	if p <= 0 {
		return 0
	}
	return m.sentBetween(from-p-m.rtt, to-p+m.rtt)
}

// surelyEchoed is the least a log of recent requests has given back of
// ours between from and to: what reached it a window's length before,
// whenever within a round trip of its sending.
func (m *told) surelyEchoed(from, to time.Duration) int {
	p := m.length()
	if p <= 0 {
		return 0
	}
	return m.sentBetween(from-p, to-p-m.rtt)
}

// exact is what a log of limit per window length surely holds at now, with
// inflight of our requests on their way: the limit less those, and less
// ours answered within a window's length. The server counted each before
// it answered, so it has forgotten each by then, whatever the network and
// the server's own delays. Without a length, or counts kept, it is the
// limit.
func (m *told) exact(now time.Duration, inflight int64) float64 {
	p := m.length()
	if p <= 0 || p > maxCounting || m.limit > maxCounted {
		return float64(m.limit)
	}
	return float64(int64(m.limit) - inflight - int64(m.answeredBetween(now-p, now)))
}

// aged is when n more of our answered requests will have left a log of the
// window's length.
func (m *told) aged(now time.Duration, n float64) time.Duration {
	p := m.length()
	i := sort.Search(len(m.answers), func(i int) bool { return m.answers[i] > now-p })
	if x := i + int(math.Ceil(n)) - 1; x >= 0 && x < len(m.answers) {
		return max(now, m.answers[x]+p+1)
	}
	return now + max(p, time.Millisecond) // or when an answer comes
}

// logPause is how long a refusal at now that asks for wait, stated in
// whole seconds, pauses a key that mirrors a log of recent requests: no
// longer than until the oldest of ours the log still holds has left it.
// The log gives back each request a window's length after it reached the
// server, and its oldest, whoever sent it, leaves no later than ours: it
// gives back by then, while the server's wait, rounded up to a whole
// second, may end up to a second later. The mirror holds the key from
// there as usual. Never shorter than what surely remains of the wait (the
// wait less a second), and not twice within two windows' length:
// refusals that keep coming say others take what the log gives back, and
// they pause the key for all the server asks (regression: two transports
// on a log of 200 a second told by headers each paused a whole second at
// a refusal though the log gave back 0.3 s to 0.9 s into it, and took
// 1.13x the ideal of both jobs on average in the model, 1.11x now; with
// three, cut short at every refusal, one key was refused again at each
// wake and the 429s doubled).
func (m *told) logPause(now, wait time.Duration) time.Duration {
	p := m.length()
	if m.kind != kindLog || p <= 0 || m.cutShort != 0 && now-m.cutShort < max(coarseWait, 2*p) {
		return wait
	}
	if d := m.aged(now, 1) - now; d < wait {
		m.cutShort = now
		return max(d, wait-time.Second)
	}
	return wait
}

// answeredBetween counts our accepted answers in (from, to].
func (m *told) answeredBetween(from, to time.Duration) int {
	if to <= from {
		return 0
	}
	after := func(t time.Duration) int {
		return sort.Search(len(m.answers), func(i int) bool { return m.answers[i] > t })
	}
	return after(to) - after(from)
}

// accepted records an answer the server accepted, at now, for a log's
// exact count: n of them, for a request of cost n.
func (m *told) accepted(now time.Duration, n int) {
	if m.limit > maxCounted || m.length() > maxCounting {
		return
	}
	m.answers = keep(m.answers, now-m.length()-time.Second)
	i := len(m.answers)
	for i > 0 && m.answers[i-1] > now {
		i-- // answers are read in about the order they come
	}
	n = min(n, maxCounted+1) // more can never count
	m.answers = append(m.answers, make([]time.Duration, n)...)
	copy(m.answers[i+n:], m.answers[i:])
	for j := i; j < i+n; j++ {
		m.answers[j] = now
	}
}

// keep drops the times at or before old from ts, sorted, when they are half
// of it or more (so that each is moved about once).
func keep(ts []time.Duration, old time.Duration) []time.Duration {
	n := 0
	for n < len(ts) && ts[n] <= old {
		n++
	}
	if n > 0 && n >= len(ts)/2 {
		ts = append(ts[:0], ts[n:]...)
	}
	return ts
}

// newest keeps the newest 2·(maxCounted+1) times of ts, sorted, once it
// holds twice as many: more within a window and a round trip before it
// (what read and echoes count) can never count, and a window's length
// taken from a mistaken or hostile reset of years (see told.long: a first
// reading is taken as it is) never trims them by age. (Found in review:
// keeping maxCounted+1, a log of 10,000 a minute missed up to 15 of its
// sends of the round trip before the window right after a trim.)
func newest(ts []time.Duration) []time.Duration {
	if keep := 2 * (maxCounted + 1); len(ts) > 2*keep {
		ts = append(ts[:0], ts[len(ts)-keep:]...)
	}
	return ts
}

// recount corrects our admission at sent, charged units, to what the
// server's figure says it cost (see WithCost): a log of recent requests
// holds the figure. Times not kept are not added.
func (m *told) recount(sent time.Duration, charged, figure int) {
	switch {
	case figure < charged:
		m.forget(sent, charged-figure)
	case figure > charged:
		i := sort.Search(len(m.sends), func(i int) bool { return m.sends[i] > sent })
		if i > 0 && m.sends[i-1] == sent {
			more := min(figure-charged, maxCounted+1) // more can never count
			m.sends = newest(slices.Insert(m.sends, i, slices.Repeat([]time.Duration{sent}, more)...))
		}
	}
}

// forget forgets n units of our admission at sent: the server refused
// it, so it does not count in a log of the requests it accepted, or its
// figure says it cost less.
func (m *told) forget(sent time.Duration, n int) {
	i := sort.Search(len(m.sends), func(i int) bool { return m.sends[i] >= sent })
	j := i
	for j < len(m.sends) && j-i < n && m.sends[j] == sent {
		j++
	}
	m.sends = append(m.sends[:i], m.sends[j:]...)
}
