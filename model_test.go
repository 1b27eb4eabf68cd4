package throttle_test

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/throttlehttp/throttle/throttletest"
)

// TestModel is the synctest model of two processes on one API key, which
// the README and the notes quote: two transports, neither told of the
// other, each with half of a job of 4,000 records and half of 16 workers,
// as bench/cmd/e2e's two-process rows, on each kind of quota, told by each
// form of quota headers and by none, over many seeds. It runs only when
// asked, for it measures rather than checks (it checks only that every
// record was uploaded), and prints one line a run in the benchmark format
// (the time over the ideal, the 429s, and when the first job ended over
// the whole: 1 when both ended together), so that two versions compare
// with benchstat; the log has each scenario's mean, 90th percentile and
// worst, and how many runs gave each job a fair share. A fixed window's
// runs each start at their own point of the server's second (seed·379 ms
// into it, modulo a second), as jobs meet a real server's windows: one
// that starts just after a reset finds its count and its pauses where a
// job that starts late does not, which a model whose jobs all began with
// a window hid (two transports told nothing took 25 429s a run then, 43
// at a random point):
//
//	THROTTLE_MODEL=400 go test -run TestModel -v . | grep ^BenchmarkModel > new.txt
//	go run golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da old.txt new.txt
//
// THROTTLE_MODEL is the runs of each scenario (seeds 0 to N-1), and
// THROTTLE_MODEL_ONLY, if set, keeps the scenarios whose names hold it. A
// run takes about 50 ms. Runs of one seed differ from one execution to the
// next (the goroutines' order), and a few in a hundred go far worse than
// the rest: compare hundreds of runs, not tens.
//
// THROTTLE_MODEL_REAL=1 runs the same jobs in real time, outside the
// bubble: each run takes the 20-40 s of its ideal, its timers wake a little
// late and its goroutines run in the machine's order, as nothing in the
// bubble does. Two transports on a log told by IETF fields took 1.25x the
// ideal in 4 runs so, 1.11x in the bubble, as bench/cmd/e2e shows on
// loopback (1.24x): the gap is real time's, not the sockets'. A window's
// runs meet the server's second wherever the real clock is, and their
// ideal is the aligned one's.
func TestModel(t *testing.T) {
	runs, _ := strconv.Atoi(os.Getenv("THROTTLE_MODEL"))
	if runs <= 0 {
		t.Skip("THROTTLE_MODEL=N runs each scenario N times")
	}
	only := os.Getenv("THROTTLE_MODEL_ONLY")
	realTime := os.Getenv("THROTTLE_MODEL_REAL") != ""
	quotas := []struct {
		name  string
		limit throttletest.Limit
		ideal time.Duration // of 4,000 records: the first burst or window at once, the rest at the rate
	}{
		{"bucket", quotaBucket, 19900 * time.Millisecond},
		{"window", quotaWindow, 39 * time.Second},
		{"log", quotaLog, 19 * time.Second},
	}
	for _, quota := range quotas {
		for _, told := range []string{"xrl", "ietf", "none"} {
			name := quota.name + "-" + told
			if !strings.Contains(name, only) {
				continue
			}
			q := sharedQuota{name: name, limit: quota.limit, ietf: told == "ietf", none: told == "none",
				ideal: quota.ideal, records: 2000, workers: 8, realTime: realTime}
			t.Run(name, func(t *testing.T) {
				var took []float64
				var refused int64
				fair := 0
				for seed := range int64(runs) {
					ideal := q.ideal
					if quota.limit.Algorithm == throttletest.FixedWindow && !realTime {
						// A server's windows begin on its own clock's
						// seconds, not at the jobs' start: each run
						// starts at its seed's point of one, whose
						// rest, and with it the ideal, is shorter.
						q.late = time.Duration(seed*379%1000) * time.Millisecond
						ideal -= q.late
					}
					var r sharedRun
					t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
						r = runSharedQuota(t, q, seed)
						assert.Zero(t, r.failed, "every record uploaded")
					})
					x, first := r.took.Seconds()/ideal.Seconds(), slices.Min(r.ended).Seconds()/r.took.Seconds()
					fmt.Printf("BenchmarkModel/%s 1 %.4f x-ideal %d 429s %.4f first-end/whole\n", name, x, r.refused, first)
					took, refused = append(took, x), refused+r.refused
					if r.fair() {
						fair++
					}
				}
				slices.Sort(took)
				var sum float64
				for _, x := range took {
					sum += x
				}
				t.Logf("%s: mean %.3fx the ideal, p90 %.3fx, worst %.3fx; %.1f 429s a run; %d of %d fair",
					name, sum/float64(runs), took[runs*9/10], took[runs-1], float64(refused)/float64(runs), fair, runs)
			})
		}
	}
}
