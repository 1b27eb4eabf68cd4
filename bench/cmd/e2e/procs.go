package main

import "time"

// Several processes on one key (scenario.procs > 1) are as many clients of
// one row, each built on its own http.Transport, neither told of the other,
// that share one server and one API key: process p sends the records i with
// i mod procs = p, with its share of the workers. The job is done when the
// last of them is; its ideal is the one of the combined job, on the one
// quota.
//
// A client told the quota is told its process's share (quota.share): that is
// how processes that know the quota and know they share it are configured.

// procCount is the number of processes on the key, at least 1.
func (s scenario) procCount() int { return max(s.procs, 1) }

// share is the quota told to one of n processes that split it: a bucket's
// rate and depth, or a window's count, over n (at least 1 request).
func (q quota) share(n int) quota {
	if n <= 1 {
		return q
	}
	if q.isCounter() {
		// What it admits for ever is N-1 per Per, not N: N/n each
		// would tell the n processes n-1 per Per less than that.
		q.shares = n
		return q
	}
	q.rate /= float64(n)
	q.burst = max(q.burst/n, 1)
	q.n = max(q.n/n, 1)
	return q
}

// part is how many of total things (records, workers) part p of n gets: the
// same for all, the first total mod n one more.
func part(total, n, p int) int {
	k := total / n
	if p < total%n {
		k++
	}
	return k
}

// processWalls formats when each process finished its part, from the start
// of the run: "19.85s and 19.90s".
func processWalls(walls []time.Duration) string {
	s := ""
	for i, d := range walls {
		switch {
		case i == 0:
		case i == len(walls)-1:
			s += " and "
		default:
			s += ", "
		}
		s += secs(d)
	}
	return s
}
