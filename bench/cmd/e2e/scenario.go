package main

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/throttlehttp/throttle"
	"github.com/throttlehttp/throttle/throttletest"
	"golang.org/x/time/rate"
)

// A quota is the server's limit in one scenario: a bucket (Rate, Burst: a token
// bucket's depth, or a leaky bucket's places, the one served and those that
// wait) or a window of N requests per Per (fixed, sliding log or sliding
// counter).
type quota struct {
	algo  throttletest.Algorithm
	rate  float64 // token bucket: requests per second
	burst int     // token bucket: depth
	n     int     // windows: requests per Per
	per   time.Duration
	// halveAfter > 0: a token bucket whose rate halves this long after the
	// run's first request (halving.go); 0: the quota never changes.
	halveAfter time.Duration
	// shares > 1: a sliding counter told to one of shares processes
	// (share): its N-1 per Per over shares; 0 means 1.
	shares int
}

func (q quota) isBucket() bool {
	return q.algo == throttletest.TokenBucket || q.algo == throttletest.LeakyBucket
}

// isCounter reports whether the quota is a sliding counter, which admits N
// at once but only N-1 per Per for ever (throttletest's doc): its estimate
// counts the window before's requests too.
func (q quota) isCounter() bool { return q.algo == throttletest.SlidingCounter }

// counterRate is what a sliding counter admits for ever, N-1 per Per, per
// second, over the processes that share it.
func (q quota) counterRate() float64 {
	return float64(q.n-1) / q.per.Seconds() / float64(max(q.shares, 1))
}

func (q quota) String() string {
	if q.algo == throttletest.LeakyBucket {
		return fmt.Sprintf("%s %g/s, %d waiting at most", q.algo, q.rate, max(q.burst-1, 0))
	}
	if q.isBucket() {
		return fmt.Sprintf("%s %g/s burst %d", q.algo, q.rate, q.burst)
	}
	return fmt.Sprintf("%s %d per %s", q.algo, q.n, q.per)
}

// limit is the quota as the fake server applies it.
func (q quota) limit() throttletest.Limit {
	if q.algo == throttletest.LeakyBucket {
		return throttletest.Limit{Algorithm: q.algo, Rate: q.rate, Queue: max(q.burst-1, 0)}
	}
	if q.isBucket() {
		return throttletest.Limit{Algorithm: q.algo, Rate: q.rate, Burst: q.burst}
	}
	return throttletest.Limit{Algorithm: q.algo, N: q.n, Per: q.per}
}

// policy is the throttle Policy for the quota, its rate (or window count)
// multiplied by scale: 1 is "configured to the quota", 1.25 is 25% above it.
func (q quota) policy(scale float64) throttle.Policy {
	if q.isBucket() {
		return throttle.Policy{Rate: rate.Limit(q.rate * scale), Burst: q.burst}
	}
	if q.isCounter() {
		return throttle.Policy{Rate: rate.Limit(q.counterRate() * scale), Burst: 1}
	}
	n := int(math.Round(float64(q.n) * scale))
	return throttle.Policy{Windows: []throttle.Window{{N: n, Per: q.per}}}
}

// limiter is the x/time/rate limiter a go-retryablehttp user would set to the
// quota. A bucket maps one to one. A window of N per Per becomes N/Per per second
// with a burst of 1: a burst of N would send up to 2N in the first Per, which
// neither a fixed window nor a sliding log allows. A sliding counter's is N-1
// per Per, with a burst of 1.
func (q quota) limiter() *rate.Limiter {
	if q.isBucket() {
		return rate.NewLimiter(rate.Limit(q.rate), q.burst)
	}
	if q.isCounter() {
		return rate.NewLimiter(rate.Limit(q.counterRate()), 1)
	}
	return rate.NewLimiter(rate.Limit(float64(q.n)/q.per.Seconds()), 1)
}

// ideal is the shortest time in which the quota admits records requests,
// counted from the first request to the last:
//
//   - a token bucket starts full: burst go at once, the rest one every 1/rate,
//     so (records - burst) / rate;
//   - a window of N per Per: N go at once, then N more each Per, so
//     (ceil(records/N) - 1) * Per. A fixed window aligned to the clock may let a
//     greedy client finish up to one Per sooner, depending on where in its
//     window the run starts; the formula counts the sliding-log (worst) case;
//   - a sliding counter: N at once, then N-1 each Per, so
//     (records - N) / (N-1) * Per;
//   - a token bucket whose rate halves: see halvingIdeal.
func (q quota) ideal(records int) time.Duration {
	if q.isBucket() && q.halveAfter > 0 {
		return q.halvingIdeal(records)
	}
	if q.isBucket() {
		d := float64(max(records-q.burst, 0)) / q.rate
		return time.Duration(d * float64(time.Second))
	}
	if q.isCounter() && q.n > 1 {
		return time.Duration(float64(max(records-q.n, 0)) / float64(q.n-1) * float64(q.per))
	}
	windows := (records + q.n - 1) / q.n
	return time.Duration(max(windows-1, 0)) * q.per
}

// A scenario is a server configuration: a quota, the form of Retry-After and,
// for the noisy scenarios, the noise and the targets (see noise.go); for the
// untold scenarios, the quota headers and the hosts (see untold.go).
type scenario struct {
	name  string
	set   set
	quota quota
	date  bool // Retry-After as an HTTP-date, else whole seconds
	// noRetryAfter: 429s and 503s carry no Retry-After (nor, without
	// headers, anything else that says when to come back).
	noRetryAfter bool

	noise   noise      // zero for the six quiet scenarios
	headers headerForm // the quota headers on every answer; none for the quiet and noisy sets
	hosts   int        // servers, each with the quota, the records spread over them in turn; 0 means 1
	halves  bool       // the token bucket's rate halves at half the unchanged quota's ideal time (halving.go)
	procs   int        // processes on one key, each its own client, sharing the job (procs.go); 0 means 1
	rows    []int      // the rows run unless -rows says otherwise; nil: all
	targets []target   // the targets, checked on row 1 (noisy) or row 7 (untold) beside row 6
}

// A set is a group of scenarios reported together.
type set int

const (
	quietSet  set = iota // the six quiet scenarios, with the targets of printTargets
	noisySet             // noise on the quota, each with its targets (noise.go)
	untoldSet            // throttle told nothing but the server's headers (untold.go)
)

// noisy reports whether the scenario is one of the noisy set, reported with its
// own targets.
func (s scenario) noisy() bool { return s.set == noisySet }

// defaultRuns is how many times each row runs unless -runs says otherwise: three
// for the noisy and untold scenarios, where luck varies, and once for the quiet
// ones, as their table has always been measured.
func (s scenario) defaultRuns() int {
	if s.set != quietSet {
		return 3
	}
	return 1
}

// defaultRecords is how many records a run sends unless -records says
// otherwise: 4,000 for the untold scenarios, whose client must first learn
// the quota from the headers, 2,000 for the others.
func (s scenario) defaultRecords() int {
	if s.set == untoldSet {
		return 4000
	}
	return 2000
}

// hostCount is the number of servers, at least 1.
func (s scenario) hostCount() int { return max(s.hosts, 1) }

// perHost is the most records one host gets, the records dealt to the hosts
// in turn.
func (s scenario) perHost(records int) int {
	n := s.hostCount()
	return (records + n - 1) / n
}

// quotaOf is the quota of a run of records requests: the scenario's, with the
// time at which its rate halves, if it does (half the ideal time of the
// unchanged quota, so that about half the records go at each rate).
func (s scenario) quotaOf(records int) quota {
	q := s.quota
	if s.halves {
		q.halveAfter = q.ideal(s.perHost(records)) / 2
	}
	return q
}

// told is what a client told the quota is told in a run of records requests:
// its process's share of the quota of the run (see procs.go).
func (s scenario) told(records int) quota {
	return s.quotaOf(records).share(s.procCount())
}

// ideal is the shortest time in which the quota admits records requests,
// spread over the hosts in turn: the host with the most records sets it. The
// processes that share one key share its quota: their ideal is the one of
// their combined job.
func (s scenario) ideal(records int) time.Duration {
	return s.quotaOf(records).ideal(s.perHost(records))
}

// quotaString describes the quota, and the hosts that each have one, and the
// processes that share it.
func (s scenario) quotaString() string {
	q := s.quota.String()
	if s.halves {
		q += fmt.Sprintf(", then %g/s from half its ideal", s.quota.rate/2)
	}
	if s.hostCount() > 1 {
		q = fmt.Sprintf("%d hosts, each %s", s.hostCount(), q)
	}
	if s.procCount() > 1 {
		q += fmt.Sprintf(", shared by %d processes on one key", s.procCount())
	}
	return q
}

// config is the server of one run of records requests (each host has one);
// seed seeds its random draws (the noise), so each run of a row meets
// different luck and the rows of one run the same.
func (s scenario) config(records int, seed int64) throttletest.Config {
	cfg := throttletest.Config{Limits: []throttletest.Limit{s.quotaOf(records).limit()}, Seed: seed}
	switch {
	case s.date:
		cfg.RetryAfter = throttletest.RetryAfterDate
	case s.noRetryAfter:
		cfg.RetryAfter = throttletest.RetryAfterNone
	}
	s.headers.apply(&cfg)
	s.noise.apply(&cfg, s.ideal(records))
	return cfg
}

func (s scenario) retryAfter() string {
	switch {
	case s.date:
		return "HTTP-date"
	case s.noRetryAfter:
		return "none"
	}
	return "seconds"
}

// scenarios are the server configurations of the benchmark: the six quiet ones,
// then the noisy ones, then the untold ones.
func scenarios() []scenario {
	bucket := quota{algo: throttletest.TokenBucket, rate: 200, burst: 10}
	fixed := quota{algo: throttletest.FixedWindow, n: 200, per: time.Second}
	sliding := quota{algo: throttletest.SlidingLog, n: 200, per: time.Second}
	six := []int{1, 2, 3, 4, 5, 6} // row 7 is row 3 again
	quiet := []scenario{
		{name: "bucket-seconds", quota: bucket, rows: six},
		{name: "bucket-date", quota: bucket, date: true, rows: six},
		{name: "fixed-seconds", quota: fixed, rows: six},
		{name: "fixed-date", quota: fixed, date: true, rows: six},
		{name: "sliding-seconds", quota: sliding, rows: six},
		{name: "sliding-date", quota: sliding, date: true, rows: six},
	}
	return slices.Concat(quiet, noisyScenarios(), untoldScenarios())
}

// defaultRows returns the rows of all that the scenario runs when -rows is not
// given: its own rows, in its order, or all of them.
func (s scenario) defaultRows(all []row) []row {
	if s.rows == nil {
		return all
	}
	var out []row
	for _, id := range s.rows {
		if i := slices.IndexFunc(all, func(rw row) bool { return rw.id == id }); i >= 0 {
			out = append(out, all[i])
		}
	}
	return out
}
