package throttle

import (
	"math"
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

// exact is what a log of limit per window length surely holds at now: the
// limit less our requests that may still count in it, having reached the
// server up to a round trip after they were sent. Without a length, or
// counts kept, it is the limit.
func (m *told) exact(now time.Duration) float64 {
	p := m.length()
	if p <= 0 || p > maxCounting || m.limit > maxCounted {
		return float64(m.limit)
	}
	return float64(m.limit - m.sentBetween(now-p-m.rtt, now))
}

// aged is when n more of our requests will have left a log of the window's
// length.
func (m *told) aged(now time.Duration, n float64) time.Duration {
	p := m.length()
	i := sort.Search(len(m.sends), func(i int) bool { return m.sends[i] > now-p-m.rtt })
	if x := i + int(math.Ceil(n)) - 1; x >= 0 && x < len(m.sends) {
		return max(now, m.sends[x]+p+m.rtt+1)
	}
	return now + max(p, time.Millisecond)
}

// refused forgets our admission at sent: the server refused it, so it
// does not count in a log of the requests it accepted.
func (m *told) refused(sent time.Duration) {
	i := sort.Search(len(m.sends), func(i int) bool { return m.sends[i] >= sent })
	if i < len(m.sends) && m.sends[i] == sent {
		m.sends = append(m.sends[:i], m.sends[i+1:]...)
	}
}
