package main

import "math"

// runs are the runs of one row in one scenario, in order.
type runs []result

// worst returns the run the table reports: the one with the most failed records,
// then the longest wall time, which is the largest wall / ideal (every run of a
// row has the same ideal). Empty runs give the zero result.
func (rs runs) worst() result {
	var w result
	for i, r := range rs {
		if i == 0 || r.Failed > w.Failed || r.Failed == w.Failed && r.Wall > w.Wall {
			w = r
		}
	}
	return w
}

// worstOf returns the largest figure f over the runs, or NaN if a run's is NaN
// or there is no run.
func (rs runs) worstOf(f func(result) float64) float64 {
	if len(rs) == 0 {
		return math.NaN()
	}
	w := math.Inf(-1)
	for _, r := range rs {
		v := f(r)
		if math.IsNaN(v) {
			return math.NaN()
		}
		w = max(w, v)
	}
	return w
}

// rowRuns returns the runs of row id among rs; nil if that row did not run.
func rowRuns(rs []runs, id int) runs {
	for _, r := range rs {
		if len(r) > 0 && r[0].Row == id {
			return r
		}
	}
	return nil
}

// worstOfEach returns each row's worst run, in the order of rs.
func worstOfEach(rs []runs) []result {
	out := make([]result, 0, len(rs))
	for _, r := range rs {
		if len(r) > 0 {
			out = append(out, r.worst())
		}
	}
	return out
}
