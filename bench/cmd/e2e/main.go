// Command e2e runs the uploader's job end to end: records PUTs by a pool of
// workers, through each client under test, against a throttletest server with a
// quota on a loopback socket, and prints what the server saw as Markdown tables.
//
//	cd bench && go run ./cmd/e2e                   # every scenario
//	cd bench && go run ./cmd/e2e -scenario noisy   # the noisy set only
//
// See bench/README.md for the scenarios, the rows and the ideal times.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

func main() {
	records := flag.Int("records", 2000, "records per run, each one PUT")
	workers := flag.Int("workers", 16, "worker goroutines sending records")
	scenarioFilter := flag.String("scenario", "", "comma-separated scenario names or substrings (e.g. bucket,date; noisy for the noisy set); empty: all")
	rowFilter := flag.String("rows", "", "comma-separated row numbers (e.g. 1,2,6); empty: all, or 1,6 for the noisy scenarios")
	runsFlag := flag.Int("runs", 0, "runs of each scenario and row, the worst reported; 0: 3 for the noisy scenarios, 1 for the quiet ones")
	rowTimeout := flag.Duration("row-timeout", 15*time.Minute, "longest run of one row in one scenario; records left then fail")
	asJSON := flag.Bool("json", false, "print the results as JSON lines, one per run, instead of Markdown")
	flag.Parse()
	if *records < 1 || *workers < 1 || *rowTimeout <= 0 || *runsFlag < 0 {
		fmt.Fprintln(os.Stderr, "e2e: -records, -workers and -row-timeout must be positive, -runs at least 0")
		os.Exit(2)
	}
	scs := pickScenarios(*scenarioFilter)
	rws, err := pickRows(*rowFilter)
	if err != nil || len(scs) == 0 || len(rws) == 0 {
		fmt.Fprintln(os.Stderr, "e2e: nothing to run:", err)
		os.Exit(2)
	}

	start := time.Now()
	byScenario := map[string][]runs{}
	enc := json.NewEncoder(os.Stdout)
	if !*asJSON {
		fmt.Printf("## throttle end to end: %d records, %d workers\n\n", *records, *workers)
	}
	var quiet, noisy []scenario
	for _, sc := range scs {
		n := *runsFlag
		if n == 0 {
			n = sc.defaultRuns()
		}
		scRows := rws
		if *rowFilter == "" {
			scRows = sc.defaultRows(rws)
		}
		rs := make([]runs, len(scRows))
		for i := range n {
			for j, rw := range scRows {
				fmt.Fprintf(os.Stderr, "%-21s row %d %-32s ", sc.name, rw.id, rw.name)
				if n > 1 {
					fmt.Fprintf(os.Stderr, "run %d/%d ", i+1, n)
				}
				r := run(sc, rw, *records, *workers, *rowTimeout, int64(i))
				r.Run = i + 1
				fmt.Fprintln(os.Stderr, progress(sc, r))
				rs[j] = append(rs[j], r)
				if *asJSON {
					_ = enc.Encode(r)
				}
			}
		}
		byScenario[sc.name] = rs
		if sc.noisy() {
			noisy = append(noisy, sc)
		} else {
			quiet = append(quiet, sc)
		}
		if !*asJSON {
			printTable(os.Stdout, sc, worstOfEach(rs), n)
		}
	}
	if !*asJSON {
		if len(quiet) > 0 {
			worst := map[string][]result{}
			for _, sc := range quiet {
				worst[sc.name] = worstOfEach(byScenario[sc.name])
			}
			printTargets(os.Stdout, worst, quiet)
		}
		if len(noisy) > 0 {
			printNoisyTargets(os.Stdout, byScenario, noisy)
		}
		fmt.Printf("Total runtime: %s\n", secs(time.Since(start)))
	}
}

// progress is one run's line on standard error.
func progress(sc scenario, r result) string {
	line := fmt.Sprintf("%s (%.3f × ideal), %d ok, %d failed, %d 429s", secs(r.Wall), r.overIdeal(), r.OK, r.Failed, r.Throttled)
	if sc.noisy() {
		line += fmt.Sprintf(", %d 503s, %d in outage, %.3f sent/record", r.Unavailable, r.Outage, r.sentPerRecord())
	}
	return line
}

// pickScenarios returns the scenarios whose name contains any of the
// comma-separated words of filter; all of them for an empty filter.
func pickScenarios(filter string) []scenario {
	all := scenarios()
	if filter == "" {
		return all
	}
	var out []scenario
	for _, sc := range all {
		for w := range strings.SplitSeq(filter, ",") {
			if w = strings.TrimSpace(w); w != "" && strings.Contains(sc.name, w) {
				out = append(out, sc)
				break
			}
		}
	}
	return out
}

// pickRows returns the rows numbered in the comma-separated filter; all of them
// for an empty filter.
func pickRows(filter string) ([]row, error) {
	all := rows()
	if filter == "" {
		return all, nil
	}
	var ids []int
	for w := range strings.SplitSeq(filter, ",") {
		id, err := strconv.Atoi(strings.TrimSpace(w))
		if err != nil || id < 1 || id > len(all) {
			return nil, fmt.Errorf("bad row %q (want 1 to %d)", w, len(all))
		}
		ids = append(ids, id)
	}
	var out []row
	for _, rw := range all {
		if slices.Contains(ids, rw.id) {
			out = append(out, rw)
		}
	}
	return out, nil
}
