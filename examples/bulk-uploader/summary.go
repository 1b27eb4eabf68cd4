package main

import (
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// summary is what the job did, as printed at the end (and with -json).
type summary struct {
	Client     string  `json:"client"` // "throttle" or "naive"
	Target     string  `json:"target"`
	Records    int     `json:"records"`
	Uploaded   int     `json:"uploaded"`
	Failed     int     `json:"failed"`
	NotSent    int     `json:"not_sent"`
	Attempts   int64   `json:"attempts"`
	PerRecord  float64 `json:"attempts_per_record"`
	Throttled  int64   `json:"throttled_429"`
	Retries    int64   `json:"retries"`
	WaitSecs   float64 `json:"wait_seconds"` // summed over records
	WallSecs   float64 `json:"wall_seconds"`
	IdealSecs  float64 `json:"ideal_seconds"`
	Server     *server `json:"server,omitempty"` // the embedded API's own counts
	FailedList []fail  `json:"failed_records,omitempty"`
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

func (s *summary) count(results []result) {
	s.Records = len(results)
	for _, r := range results {
		switch {
		case !r.sent:
			s.NotSent++
		case r.ok():
			s.Uploaded++
		default:
			s.Failed++
			s.FailedList = append(s.FailedList, fail{ID: r.rec.id, Line: r.rec.line, Error: r.err.Error()})
		}
	}
	if sent := s.Uploaded + s.Failed; sent > 0 {
		s.PerRecord = float64(s.Attempts) / float64(sent)
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
	p("records", "%d uploaded, %d failed, %d not sent", s.Uploaded, s.Failed, s.NotSent)
	p("attempts sent", "%d (%.3f per record)", s.Attempts, s.PerRecord)
	p("429s", "%d", s.Throttled)
	p("retries", "%d", s.Retries)
	p("time waiting", "%.2fs (summed over records: pacing and pauses)", s.WaitSecs)
	if s.IdealSecs > 0 {
		p("wall time", "%.2fs (ideal for the quota %.2fs: %.2f×)", s.WallSecs, s.IdealSecs, s.WallSecs/s.IdealSecs)
	} else {
		p("wall time", "%.2fs", s.WallSecs)
	}
	if s.Server != nil {
		p("server saw", "%d requests, %d accepted, %d answered 429, at most %d accepted in any second",
			s.Server.Requests, s.Server.Accepted, s.Server.Throttled, s.Server.PeakPerSecond)
	}
	if wasted := s.Attempts - int64(s.Uploaded+s.Failed); wasted == 0 && s.Failed == 0 && s.NotSent == 0 {
		fmt.Fprintln(w, "  nothing wasted: one request per record, every record uploaded")
	} else if wasted > 0 {
		fmt.Fprintf(w, "  %d requests beyond one per record\n", wasted)
	}
	if len(s.FailedList) > 0 {
		fmt.Fprintf(w, "\nfailed records:\n")
		for _, f := range s.FailedList {
			if f.Line > 0 {
				fmt.Fprintf(w, "  %s (line %d): %s\n", f.ID, f.Line, f.Error)
			} else {
				fmt.Fprintf(w, "  %s: %s\n", f.ID, f.Error)
			}
		}
	}
	if s.NotSent > 0 {
		fmt.Fprintf(w, "\ninterrupted: %d records were not sent\n", s.NotSent)
	}
}
