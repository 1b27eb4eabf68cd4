package main

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// printTable writes one scenario's results, each row's worst of n runs, as a
// Markdown table. A table says the scenario's noise, if any. A noisy
// scenario's table has two more columns: the random 503s and the requests
// that reached the server during the outage. An untold scenario's says the
// quota headers, as any other's that has them, and the 429s' share of the
// requests.
func printTable(w io.Writer, sc scenario, rs []result, n int) {
	if len(rs) == 0 {
		return
	}
	fmt.Fprintf(w, "### %s: %s, Retry-After as %s", sc.name, sc.quotaString(), sc.retryAfter())
	if sc.set == untoldSet || sc.headers != noHeaders {
		fmt.Fprintf(w, "; quota headers: %s", sc.headers)
	}
	if sc.noise != (noise{}) {
		fmt.Fprintf(w, "; noise: %s", sc.noise)
	}
	records := rs[0].Records
	fmt.Fprintf(w, "; %d records", records)
	if h := sc.hostCount(); h > 1 {
		fmt.Fprintf(w, " (%d per host at most)", sc.perHost(records))
	}
	if n := sc.procCount(); n > 1 {
		fmt.Fprintf(w, " (%d per process at most, with %d of the %d workers)", part(records, n, 0), part(rs[0].Workers, n, 0), rs[0].Workers)
	}
	fmt.Fprintf(w, ", ideal %s", secs(rs[0].Ideal))
	if q := sc.quotaOf(records); q.halveAfter > 0 {
		fmt.Fprintf(w, " (the rate halves at %s)", secs(q.halveAfter))
	}
	if n > 1 {
		fmt.Fprintf(w, "; worst of %d runs", n)
	}
	fmt.Fprint(w, "\n\n")
	if sc.noisy() {
		fmt.Fprintln(w, "| # | client | OK / failed | sent / record | 429s | 503s | in outage | wall | wall / ideal | peak / s | pauses |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|")
	} else if sc.set == untoldSet {
		fmt.Fprintln(w, "| # | client | OK / failed | sent / record | 429s (share) | wall | wall / ideal | peak / s (of a host) | pauses |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
	} else {
		fmt.Fprintln(w, "| # | client | OK / failed | sent / record | 429s | wall | wall / ideal | peak / s | pauses |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
	}
	for _, r := range rs {
		pauses := "–"
		if r.Pauses >= 0 {
			pauses = fmt.Sprint(r.Pauses)
		}
		throttled := fmt.Sprint(r.Throttled)
		if sc.set == untoldSet {
			throttled = throttledCell(r)
		}
		fmt.Fprintf(w, "| %d | %s | %d / %d | %.3f | %s |", r.Row, r.Client, r.OK, r.Failed, r.sentPerRecord(), throttled)
		if sc.noisy() {
			outage := "–"
			if sc.noise.outage > 0 {
				outage = fmt.Sprint(r.Outage)
			}
			fmt.Fprintf(w, " %d | %s |", r.Unavailable, outage)
		}
		fmt.Fprintf(w, " %s | %.2f | %d | %s |\n", secs(r.Wall), r.overIdeal(), r.Peak, pauses)
	}
	fmt.Fprintln(w)
	for _, r := range rs {
		if r.Pauses >= 0 && len(r.ThrottledAt) > 0 {
			fmt.Fprintf(w, "- row %d: %s\n", r.Row, timeline(r.ThrottledAt, r.Throttled))
		}
		if len(r.ProcessWalls) > 1 {
			fmt.Fprintf(w, "- row %d: the processes finished at %s\n", r.Row, processWalls(r.ProcessWalls))
		}
		if r.FirstError != "" {
			fmt.Fprintf(w, "- row %d, first failure: %s\n", r.Row, r.FirstError)
		}
	}
	fmt.Fprintln(w)
}

// timeline says when the first 429s arrived, from the start of the run.
func timeline(at []time.Duration, total int64) string {
	const shown = 8
	var b strings.Builder
	b.WriteString("429s at")
	for i, d := range at[:min(len(at), shown)] {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, " %.3fs", d.Seconds())
	}
	if int64(len(at)) < total || len(at) > shown {
		fmt.Fprintf(&b, " … (%d in all)", total)
	}
	return b.String()
}

func secs(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }

// The targets the library must reach, checked per scenario.
const (
	atQuotaSent  = 1.001 // throttle at the quota: sent per record at most
	aboveSent    = 1.05  // throttle 25% above: sent per record at most
	aboveWall    = 1.2   // throttle 25% above: wall over ideal at most
	noPaceSent   = 1.5   // throttle, no pace: sent per record at most
	noPaceFaster = 3.0   // throttle, no pace: at least this much faster than go-retryablehttp defaults

	// wallNoise is the margin within which two wall times count as equal: runs
	// of the same client differ by about that much from scheduling alone.
	wallNoise = 0.01
)

// printTargets writes, per quiet scenario, whether each target passes. A peer counts as
// "best" only if it got every record through; the row-1 comparisons are against
// the fewest 429s and the shortest wall time of any such peer, the latter within
// wallNoise.
func printTargets(w io.Writer, byScenario map[string][]result, order []scenario) {
	fmt.Fprintln(w, "### Targets")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| scenario | 1: sent/rec ≤ 1.001 | 1: 429s ≤ best peer | 1: wall ≤ best peer (±1%) | 2: sent/rec ≤ 1.05 | 2: wall ≤ 1.2 × ideal | 3: sent/rec ≤ 1.5 | 3: ≥ 3× faster than row 5 |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, sc := range order {
		rs := byScenario[sc.name]
		if len(rs) == 0 {
			continue
		}
		get := func(id int) (result, bool) {
			for _, r := range rs {
				if r.Row == id {
					return r, true
				}
			}
			return result{}, false
		}
		var cells []string
		r1, ok1 := get(1)
		best429, bestWall, has := bestPeers(rs)
		cells = append(cells,
			check(ok1, func() (bool, string) {
				return r1.sentPerRecord() <= atQuotaSent, fmt.Sprintf("%.4f", r1.sentPerRecord())
			}),
			check(ok1 && has, func() (bool, string) {
				return r1.Throttled <= best429.Throttled,
					fmt.Sprintf("%d vs %d (row %d)", r1.Throttled, best429.Throttled, best429.Row)
			}),
			check(ok1 && has, func() (bool, string) {
				return r1.Wall.Seconds() <= bestWall.Wall.Seconds()*(1+wallNoise),
					fmt.Sprintf("%.3fs vs %.3fs (row %d)", r1.Wall.Seconds(), bestWall.Wall.Seconds(), bestWall.Row)
			}))
		r2, ok2 := get(2)
		cells = append(cells,
			check(ok2, func() (bool, string) {
				return r2.sentPerRecord() <= aboveSent, fmt.Sprintf("%.4f", r2.sentPerRecord())
			}),
			check(ok2, func() (bool, string) {
				return r2.overIdeal() <= aboveWall, fmt.Sprintf("%.3f", r2.overIdeal())
			}))
		r3, ok3 := get(3)
		r5, ok5 := get(5)
		cells = append(cells,
			check(ok3, func() (bool, string) {
				return r3.sentPerRecord() <= noPaceSent, fmt.Sprintf("%.3f", r3.sentPerRecord())
			}),
			check(ok3 && ok5, func() (bool, string) {
				x := r5.Wall.Seconds() / r3.Wall.Seconds()
				return x >= noPaceFaster, fmt.Sprintf("%.1f×", x)
			}))
		fmt.Fprintf(w, "| %s | %s |\n", sc.name, strings.Join(cells, " | "))
	}
	fmt.Fprintln(w)
}

// bestPeers returns the peers with the fewest 429s and the shortest wall time
// among those that got every record through.
func bestPeers(rs []result) (fewest429, fastest result, ok bool) {
	for _, r := range rs {
		if r.Row < 4 || r.Row > 6 || r.Failed > 0 { // rows 4-6: the peers at the quota
			continue
		}
		if !ok || r.Throttled < fewest429.Throttled {
			fewest429 = r
		}
		if !ok || r.Wall < fastest.Wall {
			fastest = r
		}
		ok = true
	}
	return fewest429, fastest, ok
}

// check formats one target cell: "n/a" when the rows it needs did not run.
func check(have bool, f func() (bool, string)) string {
	if !have {
		return "n/a"
	}
	pass, v := f()
	if pass {
		return "pass " + v
	}
	return "**FAIL** " + v
}
