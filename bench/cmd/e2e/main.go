// Command e2e runs the uploader's job end to end: records PUTs by a pool of
// workers, through each client under test, against a throttletest server with a
// quota on a loopback socket, and prints what the server saw as Markdown tables.
//
//	cd bench && go run ./cmd/e2e
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
	scenarioFilter := flag.String("scenario", "", "comma-separated scenario names or substrings (e.g. bucket,date); empty: all")
	rowFilter := flag.String("rows", "", "comma-separated row numbers (e.g. 1,2,6); empty: all")
	rowTimeout := flag.Duration("row-timeout", 15*time.Minute, "longest run of one row in one scenario; records left then fail")
	asJSON := flag.Bool("json", false, "print the results as JSON lines instead of Markdown")
	flag.Parse()
	if *records < 1 || *workers < 1 || *rowTimeout <= 0 {
		fmt.Fprintln(os.Stderr, "e2e: -records, -workers and -row-timeout must be positive")
		os.Exit(2)
	}
	scs := pickScenarios(*scenarioFilter)
	rws, err := pickRows(*rowFilter)
	if err != nil || len(scs) == 0 || len(rws) == 0 {
		fmt.Fprintln(os.Stderr, "e2e: nothing to run:", err)
		os.Exit(2)
	}

	start := time.Now()
	byScenario := map[string][]result{}
	enc := json.NewEncoder(os.Stdout)
	if !*asJSON {
		fmt.Printf("## throttle end to end: %d records, %d workers\n\n", *records, *workers)
	}
	for _, sc := range scs {
		for _, rw := range rws {
			fmt.Fprintf(os.Stderr, "%-16s row %d %-32s ", sc.name, rw.id, rw.name)
			r := run(sc, rw, *records, *workers, *rowTimeout)
			fmt.Fprintf(os.Stderr, "%s, %d ok, %d failed, %d 429s\n", secs(r.Wall), r.OK, r.Failed, r.Throttled)
			byScenario[sc.name] = append(byScenario[sc.name], r)
			if *asJSON {
				_ = enc.Encode(r)
			}
		}
		if !*asJSON {
			printTable(os.Stdout, sc, byScenario[sc.name])
		}
	}
	if !*asJSON {
		printTargets(os.Stdout, byScenario, scs)
		fmt.Printf("Total runtime: %s\n", secs(time.Since(start)))
	}
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
