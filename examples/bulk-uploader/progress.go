package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
)

// How the run shows its progress on stderr: a bar redrawn in place on a
// terminal; elsewhere (a log file, a pipe, CI) a plain line now and then,
// since a redrawn bar leaves kilobytes of carriage returns in a file.

type progressMode int

const (
	progressNone  progressMode = iota // tests
	progressBar                       // a terminal
	progressLines                     // anything else
)

// A plain line is printed at each tenth of the records and whenever
// lineEvery has passed since the last one, records done or not (see
// lifeSigns), so a slow run still shows signs of life.
const lineEvery = 10 * time.Second

// progressFor is the mode for f: a bar if f is a terminal (a character
// device), else plain lines.
func progressFor(f *os.File) progressMode {
	if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		return progressBar
	}
	return progressLines
}

// progress is told of each record done, from any goroutine.
type progress interface {
	add(now time.Time, throttled int64)
	finish(now time.Time, interrupted bool)
}

func newProgress(mode progressMode, w io.Writer, total int, now time.Time) progress {
	switch {
	case total == 0:
		return noProgress{}
	case mode == progressBar:
		return &barProgress{bar: progressbar.NewOptions(total,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription("uploading"),
			progressbar.OptionShowCount(),
			progressbar.OptionShowIts(),
			progressbar.OptionSetItsString("records"),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionSetWidth(30),
			progressbar.OptionShowElapsedTimeOnFinish(),
		)}
	case mode == progressLines:
		p := &lineProgress{w: w, total: total, start: now, last: now, quit: make(chan struct{}), ended: make(chan struct{})}
		go p.lifeSigns()
		return p
	}
	return noProgress{}
}

type noProgress struct{}

func (noProgress) add(time.Time, int64)   {}
func (noProgress) finish(time.Time, bool) {}

type barProgress struct{ bar *progressbar.ProgressBar }

func (p *barProgress) add(_ time.Time, throttled int64) {
	p.bar.Describe(fmt.Sprintf("uploading (429s: %d)", throttled))
	_ = p.bar.Add(1)
}

func (p *barProgress) finish(_ time.Time, interrupted bool) {
	if interrupted {
		_ = p.bar.Exit() // leave the bar where it stopped
		return
	}
	_ = p.bar.Finish()
}

// lineProgress prints lines like
//
//	bulk-uploader: 300/1000 records done (30%), 0 429s, 3s
type lineProgress struct {
	w     io.Writer
	total int
	start time.Time

	mu        sync.Mutex
	done      int
	throttled int64
	last      time.Time // of the last line
	printed   int       // records done at the last line

	quit, ended chan struct{} // finish stops lifeSigns, which then closes ended
}

// lifeSigns prints a line whenever lineEvery has passed since the last one,
// records done or not: a run held by a slow pace or a long pause prints
// nothing from add (found in review: 20 s without a line at 0.05 records a
// second, where the doc promised one every 10 s at least).
func (p *lineProgress) lifeSigns() {
	defer close(p.ended)
	t := time.NewTimer(lineEvery)
	defer t.Stop()
	for {
		select {
		case <-p.quit:
			return
		case <-t.C:
		}
		p.mu.Lock()
		now := time.Now()
		if now.Sub(p.last) >= lineEvery {
			p.line(now)
		}
		t.Reset(p.last.Add(lineEvery).Sub(now))
		p.mu.Unlock()
	}
}

func (p *lineProgress) add(now time.Time, throttled int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done++
	p.throttled = max(p.throttled, throttled)
	if p.done*10/p.total > p.printed*10/p.total || now.Sub(p.last) >= lineEvery {
		p.line(now)
	}
}

func (p *lineProgress) finish(now time.Time, _ bool) {
	close(p.quit)
	<-p.ended
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done != p.printed {
		p.line(now)
	}
}

func (p *lineProgress) line(now time.Time) {
	fmt.Fprintf(p.w, "%s: %d/%d records done (%d%%), %d 429s, %v\n",
		name, p.done, p.total, p.done*100/p.total, p.throttled, now.Sub(p.start).Round(100*time.Millisecond))
	p.last, p.printed = now, p.done
}
