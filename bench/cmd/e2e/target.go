package main

import (
	"fmt"
	"io"
	"math"
	"time"
)

// A target is one goal of a noisy or untold scenario, checked on throttle (row
// 1, at the quota, in the noisy ones; row 7, told no Policy, in the untold
// ones) beside the peer, go-retryablehttp + x/time/rate told the quota (row
// 6), measured in the same invocation. Both sides are judged by their worst
// run: a target holds only if it held in every run.
type target struct {
	what string
	// value is one run's figure; larger is worse. NaN means the run cannot tell
	// (a wall over an ideal time of zero).
	value func(r result) float64
	// limit is the most that throttle's worst value may be, given the peer's worst
	// value (NaN when the peer did not run) and one of throttle's runs. NaN: the
	// target cannot be checked.
	limit func(peer float64, r result) float64
	// show formats a value.
	show func(v float64) string
	// showLimit prints the limit beside the verdict, for a limit that what cannot
	// state (it depends on the peer or on the run).
	showLimit bool
}

func constant(x float64) func(float64, result) float64 {
	return func(float64, result) float64 { return x }
}

func format(verb string) func(float64) string {
	return func(v float64) string { return fmt.Sprintf(verb, v) }
}

// everyRecord: no record failed.
func everyRecord() target {
	return target{
		what:  "every record done",
		value: func(r result) float64 { return float64(r.Failed) },
		limit: constant(0),
		show:  format("%.0f failed"),
	}
}

// wallOverIdeal: wall ≤ x × ideal.
func wallOverIdeal(x float64) target {
	return target{
		what: fmt.Sprintf("wall ≤ %g × ideal", x),
		value: func(r result) float64 {
			if r.Ideal <= 0 {
				return math.NaN()
			}
			return r.overIdeal()
		},
		limit: constant(x),
		show:  format("%.3f × ideal"),
	}
}

// wallOverIdealPlus: wall ≤ ideal + d.
func wallOverIdealPlus(d time.Duration) target {
	return target{
		what:  fmt.Sprintf("wall ≤ ideal + %s", d),
		value: func(r result) float64 { return (r.Wall - r.Ideal).Seconds() },
		limit: constant(d.Seconds()),
		show:  format("ideal + %.2fs"),
	}
}

// wallVsPeer: wall no longer than the peer's, within wallNoise.
func wallVsPeer() target {
	return target{
		what:      "wall ≤ the peer's (±1%)",
		value:     func(r result) float64 { return r.Wall.Seconds() },
		limit:     func(peer float64, _ result) float64 { return peer * (1 + wallNoise) },
		show:      format("%.2fs"),
		showLimit: true,
	}
}

// throttledShare: at most share of the requests answered 429.
func throttledShare(share float64) target {
	return target{
		what: fmt.Sprintf("429s ≤ %g%% of requests", share*100),
		value: func(r result) float64 {
			if r.Sent == 0 {
				return 0
			}
			return float64(r.Throttled) / float64(r.Sent)
		},
		limit: constant(share),
		show:  func(v float64) string { return fmt.Sprintf("%.2f%%", v*100) },
	}
}

// no429s: the server sent no 429.
func no429s() target {
	return target{
		what:  "no 429",
		value: func(r result) float64 { return float64(r.Throttled) },
		limit: constant(0),
		show:  format("%.0f 429s"),
	}
}

// inOutagePerWorker: at most n requests per worker reached the server during
// the outage.
func inOutagePerWorker(n int) target {
	return target{
		what:      fmt.Sprintf("≤ %d requests per worker during the outage", n),
		value:     func(r result) float64 { return float64(r.Outage) },
		limit:     func(_ float64, r result) float64 { return float64(n * r.Workers) },
		show:      format("%.0f"),
		showLimit: true,
	}
}

// check judges t on throttle's runs beside the peer's and returns the two cells.
func (t target) check(self, peer runs) (selfCell, peerCell string) {
	show := func(v float64) string {
		if math.IsNaN(v) {
			return "n/a"
		}
		return t.show(v)
	}
	pv := math.NaN()
	peerCell = "–"
	if len(peer) > 0 {
		pv = peer.worstOf(t.value)
		peerCell = show(pv)
	}
	if len(self) == 0 {
		return "n/a", peerCell
	}
	v, lim := self.worstOf(t.value), t.limit(pv, self[0])
	cell := show(v)
	if t.showLimit {
		cell += " (limit " + show(lim) + ")"
	}
	switch {
	case math.IsNaN(v) || math.IsNaN(lim):
		return "n/a " + cell, peerCell
	case v <= lim:
		return "pass " + cell, peerCell
	default:
		return "**FAIL** " + cell, peerCell
	}
}

// printTargetTable writes, for each scenario, one line per target: row self
// judged (1 in the noisy scenarios, 7 in the untold ones), row 6 (the peer)
// beside it, each by the worst figure of its runs.
func printTargetTable(w io.Writer, heading string, self int, byScenario map[string][]runs, order []scenario) {
	fmt.Fprintf(w, "### %s (the worst figure of the runs)\n\n", heading)
	fmt.Fprintf(w, "| scenario | target | %d: %s | %d: %s (peer) |\n", self, rowName(self), peerRow, rowName(peerRow))
	fmt.Fprintln(w, "|---|---|---|---|")
	for _, sc := range order {
		rs := byScenario[sc.name]
		if len(rs) == 0 {
			continue
		}
		mine, peer := rowRuns(rs, self), rowRuns(rs, peerRow)
		for _, t := range sc.targets {
			s, p := t.check(mine, peer)
			fmt.Fprintf(w, "| %s | %s | %s | %s |\n", sc.name, t.what, s, p)
		}
	}
	fmt.Fprintln(w)
}

// peerRow is the peer the targets' tables show beside throttle:
// go-retryablehttp + x/time/rate, told the quota.
const peerRow = 6

// rowName is the name of row id.
func rowName(id int) string {
	for _, rw := range rows() {
		if rw.id == id {
			return rw.name
		}
	}
	return fmt.Sprintf("row %d", id)
}
