package throttle

import (
	"slices"
	"sort"
	"time"
)

// This file holds runLog, the record a window keeps of what counts in it:
// one run per attempt answered (a window's log) or per departure booked
// (MemoryStore's), each of any number of units, so that its memory is
// bounded by the runs within a window, not by their units.

// runLog is runs of units in time order, the oldest first, each with the
// units of every run before it: the units of runs[i] are runs[i].cum less
// runs[i-1].cum (base for runs[head]). runs[head:] are kept; those before
// no longer count, and their room is given back once most of it is free.
type runLog struct {
	runs []winRun
	head int
	base int64
}

// winRun is one run of units: its time, and the units of it and of every
// run before it.
type winRun struct {
	at  time.Duration
	cum int64
}

// units is the units of the runs kept.
func (l *runLog) units() int64 {
	if l.head == len(l.runs) {
		return 0
	}
	return l.runs[len(l.runs)-1].cum - l.base
}

// last is the time of the latest run kept, and whether one is.
func (l *runLog) last() (time.Duration, bool) {
	if l.head == len(l.runs) {
		return 0, false
	}
	return l.runs[len(l.runs)-1].at, true
}

// add logs units at at, in time order: after the runs at or before it
// (a run read a moment apart from another, out of order, moves the later
// ones up by its units).
func (l *runLog) add(at time.Duration, units int64) {
	if units <= 0 {
		return
	}
	if n := len(l.runs); n == l.head || l.runs[n-1].at <= at { // the latest: most often
		prev := l.base
		if n > l.head {
			prev = l.runs[n-1].cum
		}
		l.runs = append(l.runs, winRun{at: at, cum: prev + units})
		return
	}
	i := len(l.runs)
	for i > l.head && l.runs[i-1].at > at {
		i--
	}
	prev := l.base
	if i > l.head {
		prev = l.runs[i-1].cum
	}
	l.runs = slices.Insert(l.runs, i, winRun{at: at, cum: prev + units})
	for k := i + 1; k < len(l.runs); k++ {
		l.runs[k].cum += units
	}
}

// ageOut is the time of the run that holds the k-th oldest unit kept
// (1 <= k <= units()): once the runs up to it no longer count, k units
// have left.
func (l *runLog) ageOut(k int64) time.Duration {
	live := l.runs[l.head:]
	if live[0].cum-l.base >= k { // the oldest: most often
		return live[0].at
	}
	i := sort.Search(len(live), func(i int) bool { return live[i].cum-l.base >= k })
	return live[i].at
}

// after is the units of the runs later than t.
func (l *runLog) after(t time.Duration) int64 {
	live := l.runs[l.head:]
	i := sort.Search(len(live), func(i int) bool { return live[i].at > t })
	if i == len(live) {
		return 0
	}
	before := l.base
	if i > 0 {
		before = live[i-1].cum
	}
	return live[len(live)-1].cum - before
}

// prune lets go of the runs at or before old, which no longer count.
func (l *runLog) prune(old time.Duration) {
	if l.head < len(l.runs) && l.runs[l.head].at <= old {
		l.drop(old)
	}
}

func (l *runLog) drop(old time.Duration) {
	for l.head < len(l.runs) && l.runs[l.head].at <= old {
		l.base = l.runs[l.head].cum
		l.head++
	}
	if l.head < 16 || 2*l.head < len(l.runs) {
		return
	}
	live := l.runs[l.head:]
	if cap(l.runs) >= 256 && 8*len(live) <= cap(l.runs) {
		l.runs = make([]winRun, len(live), 2*len(live))
	} else {
		l.runs = l.runs[:len(live)]
	}
	for i, r := range live { // moved down (or out), counted from 0 again
		l.runs[i] = winRun{at: r.at, cum: r.cum - l.base}
	}
	l.head, l.base = 0, 0
}

// clone returns a copy of the runs kept.
func (l *runLog) clone() runLog {
	live := l.runs[l.head:]
	c := runLog{runs: make([]winRun, len(live))}
	for i, r := range live {
		c.runs[i] = winRun{at: r.at, cum: r.cum - l.base}
	}
	return c
}
