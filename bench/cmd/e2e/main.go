// Command e2e runs the uploader's job end to end: records PUTs by a pool of
// workers, through each client under test, against a throttletest server with a
// quota on a loopback socket, and prints what the server saw as Markdown tables.
//
//	cd bench && go run ./cmd/e2e                   # every scenario
//	cd bench && go run ./cmd/e2e -scenario noisy   # the noisy set only
//	cd bench && go run ./cmd/e2e -scenario untold  # throttle told no Policy, paced by the headers
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
	records := flag.Int("records", 0, "records per run, each one PUT; 0: 4000 for the untold scenarios, 2000 for the others")
	workers := flag.Int("workers", 16, "worker goroutines sending records")
	scenarioFilter := flag.String("scenario", "", "comma-separated scenario names or substrings (e.g. bucket,date; noisy for the noisy set, untold for the untold set); empty: all")
	rowFilter := flag.String("rows", "", "comma-separated row numbers (e.g. 1,2,6); empty: all, or 1,6 for the noisy scenarios, 7,6 for the untold ones")
	runsFlag := flag.Int("runs", 0, "runs of each scenario and row, the worst reported; 0: 3 for the noisy and untold scenarios, 1 for the quiet ones")
	jitter := flag.String("jitter", "", "arrival jitter of every scenario picked, in place of its own (e.g. 20ms, or 0 for none); empty: each scenario's own")
	rowTimeout := flag.Duration("row-timeout", 15*time.Minute, "longest run of one row in one scenario; records left then fail")
	asJSON := flag.Bool("json", false, "print the results as JSON lines, one per run, instead of Markdown")
	flag.Parse()
	if *records < 0 || *workers < 1 || *rowTimeout <= 0 || *runsFlag < 0 {
		fmt.Fprintln(os.Stderr, "e2e: -workers and -row-timeout must be positive, -records and -runs at least 0")
		os.Exit(2)
	}
	scs := pickScenarios(*scenarioFilter)
	if *jitter != "" {
		d, err := time.ParseDuration(*jitter)
		if err != nil || d < 0 {
			fmt.Fprintln(os.Stderr, "e2e: bad -jitter:", *jitter)
			os.Exit(2)
		}
		for i := range scs {
			scs[i].noise.arrivalJitter = d
		}
	}
	rws, err := pickRows(*rowFilter)
	if err != nil || len(scs) == 0 || len(rws) == 0 {
		fmt.Fprintln(os.Stderr, "e2e: nothing to run:", err)
		os.Exit(2)
	}

	start := time.Now()
	byScenario := map[string][]runs{}
	enc := json.NewEncoder(os.Stdout)
	recordsOf := func(sc scenario) int {
		if *records > 0 {
			return *records
		}
		return sc.defaultRecords()
	}
	if !*asJSON {
		fmt.Printf("## throttle end to end: %s, %d workers\n\n", recordsHeading(scs, recordsOf), *workers)
	}
	var quiet, noisy, untold []scenario
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
				r := run(sc, rw, recordsOf(sc), *workers, *rowTimeout, int64(i))
				r.Run = i + 1
				fmt.Fprintln(os.Stderr, progress(sc, r))
				rs[j] = append(rs[j], r)
				if *asJSON {
					_ = enc.Encode(r)
				}
			}
		}
		byScenario[sc.name] = rs
		switch sc.set {
		case noisySet:
			noisy = append(noisy, sc)
		case untoldSet:
			untold = append(untold, sc)
		default:
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
			printTargetTable(os.Stdout, "Targets of the noisy scenarios", 1, byScenario, noisy)
		}
		if len(untold) > 0 {
			printUntoldSummary(os.Stdout, byScenario, untold)
			printTargetTable(os.Stdout, "Targets of the untold scenarios", 7, byScenario, untold)
		}
		fmt.Printf("Total runtime: %s\n", secs(time.Since(start)))
	}
}

// recordsHeading says how many records each run sends: one number when every
// scenario picked sends the same.
func recordsHeading(scs []scenario, recordsOf func(scenario) int) string {
	for _, sc := range scs[1:] {
		if recordsOf(sc) != recordsOf(scs[0]) {
			return "records as each table says"
		}
	}
	return fmt.Sprintf("%d records", recordsOf(scs[0]))
}

// progress is one run's line on standard error.
func progress(sc scenario, r result) string {
	line := fmt.Sprintf("%s (%.3f × ideal), %d ok, %d failed, %d 429s", secs(r.Wall), r.overIdeal(), r.OK, r.Failed, r.Throttled)
	switch sc.set {
	case noisySet:
		line += fmt.Sprintf(", %d 503s, %d in outage, %.3f sent/record", r.Unavailable, r.Outage, r.sentPerRecord())
	case untoldSet:
		line += fmt.Sprintf(", %.3f sent/record", r.sentPerRecord())
	}
	if len(r.ProcessWalls) > 1 {
		line += ", processes done at " + processWalls(r.ProcessWalls)
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
