package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// summary is what the job did, as printed at the end (and with -json).
type summary struct {
	Client string `json:"client"` // "throttle" or "naive"
	Target string `json:"target"`
	// SharedVia is the Redis the quota is shared through (-redis).
	SharedVia string `json:"shared_via_redis,omitempty"`
	// StoreAlone counts the times Redis stopped answering, and the
	// uploader paced alone at a share of the quota.
	StoreAlone int64 `json:"redis_unavailable,omitempty"`
	Records    int   `json:"records"`
	Uploaded   int   `json:"uploaded"`
	Failed     int   `json:"failed"`
	NotSent    int   `json:"not_sent"`
	// NotSentList lists the records of NotSent that the transport
	// refused unsent, with why (the key paused for longer than the
	// longest Retry-After honoured); the others were not started, the
	// run being interrupted.
	NotSentList []fail `json:"not_sent_records,omitempty"`
	Skipped     int    `json:"skipped,omitempty"` // uploaded before, per the journal
	Journal     string `json:"journal,omitempty"`
	// JournalError is why the journal could not be written; the run
	// stopped there.
	JournalError string  `json:"journal_error,omitempty"`
	Attempts     int64   `json:"attempts"`
	PerRecord    float64 `json:"attempts_per_record"`
	Throttled    int64   `json:"throttled_429"`
	Retries      int64   `json:"retries"`
	WaitSecs     float64 `json:"wait_seconds"` // summed over records
	// WaitByLimit splits the time attempts waited for their turn by what
	// they waited for last: "rate", "queue", "window", "pause", "probe",
	// "ramp", "line"… (throttle.Limit's names).
	WaitByLimit map[string]float64 `json:"wait_seconds_by_limit,omitempty"`
	WallSecs    float64            `json:"wall_seconds"`
	IdealSecs   float64            `json:"ideal_seconds"`
	Server      *server            `json:"server,omitempty"` // the embedded API's own counts
	FailedList  []fail             `json:"failed_records,omitempty"`
}

type server struct {
	Requests      int64 `json:"requests"`
	Accepted      int64 `json:"accepted"`
	Throttled     int64 `json:"throttled_429"`
	PeakPerSecond int64 `json:"peak_accepted_per_second"`
}

type fail struct {
	ID    string `json:"id"`
	Line  int    `json:"line,omitempty"`
	Error string `json:"error"`
}

// ideal is the least time the quota allows for n records: the burst at
// once, then one every 1/rate.
func ideal(n, burst int, rate float64) time.Duration {
	if rate <= 0 || n <= burst {
		return 0
	}
	return time.Duration(float64(n-burst) / rate * float64(time.Second))
}

// count counts the records by outcome.
func (s *summary) count(results []result) {
	s.Records = len(results) + s.Skipped
	for _, r := range results {
		switch {
		case !r.sent:
			s.NotSent++
			if r.err != nil {
				s.NotSentList = append(s.NotSentList, fail{ID: r.rec.id, Line: r.rec.line, Error: r.err.Error()})
			}
		case r.ok():
			s.Uploaded++
		default:
			s.Failed++
			s.FailedList = append(s.FailedList, fail{ID: r.rec.id, Line: r.rec.line, Error: r.err.Error()})
		}
	}
}

func (s *summary) print(w io.Writer, asJSON bool) {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(s)
		return
	}
	p := func(label, format string, args ...any) {
		fmt.Fprintf(w, "  %-15s "+format+"\n", append([]any{label}, args...)...)
	}
	fmt.Fprintf(w, "\n%s upload to %s\n", s.Client, s.Target)
	if s.SharedVia != "" {
		alone := ""
		if s.StoreAlone > 0 {
			alone = fmt.Sprintf("; Redis stopped answering (%d×): paced alone at a quarter of the quota meanwhile", s.StoreAlone)
		}
		p("quota", "shared through Redis at %s with the other uploaders%s", s.SharedVia, alone)
	}
	p("records", "%d uploaded, %d failed, %d not sent", s.Uploaded, s.Failed, s.NotSent)
	if s.Skipped > 0 {
		p("skipped", "%d uploaded before (journal %s)", s.Skipped, s.Journal)
	}
	p("attempts sent", "%d (%.3f per record)", s.Attempts, s.PerRecord)
	p("429s", "%d", s.Throttled)
	p("retries", "%d", s.Retries)
	p("time waiting", "%.2fs (summed over records: pacing and pauses)", s.WaitSecs)
	if len(s.WaitByLimit) > 0 || s.WaitSecs >= 0.005 {
		p("waited", "%s", byLimit(s.WaitByLimit, s.WaitSecs))
	}
	if s.IdealSecs > 0 && s.Uploaded > 0 {
		shared := ""
		if s.SharedVia != "" {
			shared = ", were its records alone"
		}
		p("wall time", "%.2fs (ideal for the quota%s %.2fs: %.2f×)", s.WallSecs, shared, s.IdealSecs, s.WallSecs/s.IdealSecs)
	} else {
		p("wall time", "%.2fs", s.WallSecs)
	}
	if s.Server != nil {
		p("server saw", "%d requests, %d accepted, %d answered 429, at most %d accepted in any second",
			s.Server.Requests, s.Server.Accepted, s.Server.Throttled, s.Server.PeakPerSecond)
	}
	if wasted := s.Attempts - int64(s.Uploaded+s.Failed); wasted == 0 && s.Failed == 0 && s.NotSent == 0 && s.Uploaded > 0 {
		fmt.Fprintln(w, "  nothing wasted: one request per record, every record uploaded")
	} else if wasted > 0 {
		fmt.Fprintf(w, "  %d requests beyond one per record\n", wasted)
	}
	s.printLeft(w)
}

// byLimit says the time waited for each limit, the longest first: "12.30s
// for the rate, 4.00s for the pause", from the waits that got their turn
// (EventWaited); and what the total of all waits, Stats' WaitTime, holds
// beyond them, the waits that ended without their turn (a request
// cancelled, timed out, refused at its deadline): "3.00s without their
// turn" (found in review: the two lines did not add up).
func byLimit(secs map[string]float64, total float64) string {
	limits := make([]string, 0, len(secs))
	for l := range secs {
		limits = append(limits, l)
	}
	sort.Slice(limits, func(i, j int) bool {
		if secs[limits[i]] != secs[limits[j]] {
			return secs[limits[i]] > secs[limits[j]]
		}
		return limits[i] < limits[j]
	})
	parts := make([]string, len(limits), len(limits)+1)
	for i, l := range limits {
		parts[i] = fmt.Sprintf("%.2fs for the %s", secs[l], l)
		total -= secs[l]
	}
	if total >= 0.005 {
		parts = append(parts, fmt.Sprintf("%.2fs without their turn", total))
	}
	return strings.Join(parts, ", ")
}

// printLeft lists what was not uploaded, and says how to send it.
func (s *summary) printLeft(w io.Writer) {
	printList(w, "failed records", s.FailedList)
	printList(w, "records not sent, refused before any attempt left", s.NotSentList)
	if s.JournalError != "" {
		fmt.Fprintf(w, "\nstopped: %s\n", s.JournalError)
	}
	if interrupted := s.NotSent - len(s.NotSentList); interrupted > 0 {
		fmt.Fprintf(w, "\ninterrupted: %d records were not sent\n", interrupted)
	}
	switch left := s.Failed + s.NotSent; {
	case left > 0 && s.JournalError != "":
		fmt.Fprintf(w, "to send the %d records not uploaded, run the same command again once the journal can be written: those uploaded since its last line go again too\n", left)
	case left > 0 && s.Journal != "":
		fmt.Fprintf(w, "to send the %d records not uploaded, run the same command again: the journal %s skips the %d uploaded\n",
			left, s.Journal, s.Uploaded+s.Skipped)
	case s.NotSent > 0:
		fmt.Fprintln(w, "without -journal a new run sends every record again: with -journal FILE, a stopped run can be resumed")
	}
}

// printList prints the records of list, with their errors, under title.
func printList(w io.Writer, title string, list []fail) {
	if len(list) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%s:\n", title)
	for _, f := range list {
		if f.Line > 0 {
			fmt.Fprintf(w, "  %s (line %d): %s\n", f.ID, f.Line, f.Error)
		} else {
			fmt.Fprintf(w, "  %s: %s\n", f.ID, f.Error)
		}
	}
}
