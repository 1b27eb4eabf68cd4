package main

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/throttlehttp/throttle/throttletest"
	"golang.org/x/time/rate"
)

func TestIdeal(t *testing.T) {
	bucket := quota{algo: throttletest.TokenBucket, rate: 200, burst: 10}
	window := quota{algo: throttletest.SlidingLog, n: 200, per: time.Second}
	halving := quota{algo: throttletest.TokenBucket, rate: 200, burst: 20, halveAfter: 5 * time.Second}
	tests := []struct {
		name    string
		q       quota
		records int
		want    time.Duration
	}{
		{"bucket", bucket, 2000, 9950 * time.Millisecond},
		{"bucket within the burst", bucket, 5, 0},
		{"window, whole windows", window, 2000, 9 * time.Second},
		{"window, a part window", window, 2001, 10 * time.Second},
		{"window, one window", window, 200, 0},
		{"noisy bucket", quota{algo: throttletest.TokenBucket, rate: 100, burst: 5}, 2000, 19950 * time.Millisecond},
		{"minute window", quota{algo: throttletest.SlidingLog, n: 1000, per: time.Minute}, 2000, time.Minute},
		// 20 + 200·5 = 1,020 by 5 s; then 2,980 at 100/s.
		{"halving after 5s", halving, 4000, 34800 * time.Millisecond},
		{"halving after the last", halving, 1020, 5 * time.Second},
		{"halving before the last", halving, 1021, 5010 * time.Millisecond},
		{"halving, all in the burst", halving, 20, 0},
		// One served and one waiting at once, then 200 a second.
		{"leaky", quota{algo: throttletest.LeakyBucket, rate: 200, burst: 2}, 2002, 10 * time.Second},
		// 100 at once, then 99 a second.
		{"counter", quota{algo: throttletest.SlidingCounter, n: 100, per: time.Second}, 4000, 3900 * time.Second / 99},
		{"counter, one window", quota{algo: throttletest.SlidingCounter, n: 100, per: time.Second}, 100, 0},
	}
	for _, tt := range tests {
		if got := tt.q.ideal(tt.records); got != tt.want {
			t.Errorf("%s: ideal(%d) = %s, want %s", tt.name, tt.records, got, tt.want)
		}
	}
}

func TestPolicyScale(t *testing.T) {
	window := quota{algo: throttletest.FixedWindow, n: 200, per: time.Second}
	if got := window.policy(1.25).Windows[0].N; got != 250 {
		t.Errorf("window N ×1.25 = %d, want 250", got)
	}
	bucket := quota{algo: throttletest.TokenBucket, rate: 200, burst: 10}
	if p := bucket.policy(1.25); p.Rate != 250 || p.Burst != 10 {
		t.Errorf("bucket ×1.25 = %v/%d, want 250/10", p.Rate, p.Burst)
	}
	for _, sc := range scenarios() {
		for _, scale := range []float64{1, 1.25} {
			if err := sc.quota.policy(scale).Validate(); err != nil {
				t.Errorf("%s ×%g: %v", sc.name, scale, err)
			}
		}
	}
}

func TestPick(t *testing.T) {
	for filter, want := range map[string]int{
		"":             73,
		"bucket,date":  4,
		"seconds,date": 6, // the quiet six
		"noisy":        12,
		"jitter":       2,
		"bucket":       2,
		"fixed":        4,
		"sliding":      2,
		"untold":       55,
		"untold-real":  28,
		"untold-log":   3,
		"distant":      9,
		"halving":      3,
		"2procs":       8,
		"xrl":          20,
	} {
		if got := len(pickScenarios(filter)); got != want {
			t.Errorf("%q: %d scenarios, want %d", filter, got, want)
		}
	}
	for _, sc := range pickScenarios("seconds,date") {
		if sc.noisy() {
			t.Errorf("%s: noisy", sc.name)
		}
	}
	rs, err := pickRows("1, 6")
	if err != nil || len(rs) != 2 || rs[0].id != 1 || rs[1].id != 6 {
		t.Errorf("rows 1,6: %v, %v", rs, err)
	}
	if _, err := pickRows("10"); err == nil {
		t.Error("row 10: no error")
	}
}

func TestNoisyScenarios(t *testing.T) {
	all := rows()
	for _, sc := range pickScenarios("noisy") {
		if !sc.noisy() || len(sc.targets) == 0 {
			t.Errorf("%s: noise %v, %d targets", sc.name, sc.noise, len(sc.targets))
		}
		if sc.defaultRuns() != 3 {
			t.Errorf("%s: %d runs, want 3", sc.name, sc.defaultRuns())
		}
		if rs := sc.defaultRows(all); len(rs) != 2 || rs[0].id != 1 || rs[1].id != 6 {
			t.Errorf("%s: rows %v, want 1 and 6", sc.name, rs)
		}
		if n := sc.config(2000, 0); n.ArrivalJitter == 0 && n.Unavailable == 0 && n.Refused == 0 && len(n.Outages) == 0 {
			t.Errorf("%s: a server without noise", sc.name)
		}
	}
	for _, sc := range pickScenarios("seconds,date") {
		if sc.defaultRuns() != 1 || len(sc.defaultRows(all)) != 6 {
			t.Errorf("%s: %d runs, %d rows; want 1 and 6", sc.name, sc.defaultRuns(), len(sc.defaultRows(all)))
		}
	}
}

func TestNoisyConfig(t *testing.T) {
	sc := pickScenarios("noisy-outage")[0]
	cfg := sc.config(2000, 2)
	if len(cfg.Outages) != 1 {
		t.Fatalf("outages: %v", cfg.Outages)
	}
	o := cfg.Outages[0]
	if o.Start != 9975*time.Millisecond || o.Duration != 5*time.Second || o.RetryAfter != 2*time.Second {
		t.Errorf("outage %+v, want 5s from 9.975s (half of 19.95s), Retry-After 2s", o)
	}
	if cfg.Seed != 2 || cfg.Latency != time.Millisecond {
		t.Errorf("seed %d, latency %s", cfg.Seed, cfg.Latency)
	}
	cfg = pickScenarios("noisy-503")[0].config(2000, 0)
	if cfg.Unavailable != 0.02 || cfg.UnavailableRetryAfter != time.Second || cfg.Latency != 20*time.Millisecond {
		t.Errorf("noisy-503: %+v", cfg)
	}
}

func TestWorstRun(t *testing.T) {
	rs := runs{
		{Run: 1, Wall: 10 * time.Second},
		{Run: 2, Wall: 12 * time.Second},
		{Run: 3, Wall: 11 * time.Second},
	}
	if got := rs.worst().Run; got != 2 {
		t.Errorf("worst: run %d, want 2, the longest", got)
	}
	rs[2].Failed = 1
	if got := rs.worst().Run; got != 3 {
		t.Errorf("worst: run %d, want 3, the one that failed a record", got)
	}
	wall := func(r result) float64 { return r.Wall.Seconds() }
	if got := rs.worstOf(wall); got != 12 {
		t.Errorf("worstOf wall = %g, want 12", got)
	}
	if got := rs.worstOf(func(result) float64 { return math.NaN() }); !math.IsNaN(got) {
		t.Errorf("worstOf NaN = %g", got)
	}
	if got := (runs{}).worstOf(wall); !math.IsNaN(got) {
		t.Errorf("worstOf no run = %g", got)
	}
}

func TestTargetCheck(t *testing.T) {
	ideal := 10 * time.Second
	at := func(wall time.Duration) result {
		return result{Row: 1, Wall: wall, Ideal: ideal, Records: 100, Workers: 16, Sent: 100}
	}
	tests := []struct {
		name       string
		target     target
		self, peer runs
		want       string // the start of row 1's cell
	}{
		{"ideal, every run within", wallOverIdeal(1.1), runs{at(10500 * time.Millisecond), at(11 * time.Second)}, nil, "pass 1.100"},
		{"ideal, one run over", wallOverIdeal(1.1), runs{at(10 * time.Second), at(11200 * time.Millisecond)}, nil, "**FAIL** 1.120"},
		{"ideal zero", wallOverIdeal(1.1), runs{{Wall: time.Second}}, nil, "n/a n/a"},
		{"peer, within 1%", wallVsPeer(), runs{at(10100 * time.Millisecond)}, runs{at(10 * time.Second)}, "pass 10.10s (limit 10.10s)"},
		{"peer, slower", wallVsPeer(), runs{at(10200 * time.Millisecond)}, runs{at(9 * time.Second), at(10 * time.Second)}, "**FAIL** 10.20s (limit 10.10s)"},
		{"peer, absent", wallVsPeer(), runs{at(10 * time.Second)}, nil, "n/a 10.00s (limit n/a)"},
		{"per worker", inOutagePerWorker(3), runs{{Workers: 16, Outage: 48}}, nil, "pass 48 (limit 48)"},
		{"per worker, over", inOutagePerWorker(3), runs{{Workers: 16, Outage: 49}}, nil, "**FAIL** 49 (limit 48)"},
		{"429 share", throttledShare(0.002), runs{{Sent: 1000, Throttled: 3}}, nil, "**FAIL** 0.30%"},
		{"every record", everyRecord(), runs{{}, {Failed: 2}}, nil, "**FAIL** 2 failed"},
		{"ideal plus", wallOverIdealPlus(7 * time.Second), runs{at(16 * time.Second)}, nil, "pass ideal + 6.00s"},
		{"row 1 absent", no429s(), nil, runs{{Throttled: 5}}, "n/a"},
	}
	for _, tt := range tests {
		got, _ := tt.target.check(tt.self, tt.peer)
		if !strings.HasPrefix(got, tt.want) {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
	if _, p := no429s().check(nil, runs{{Throttled: 5}, {Throttled: 2}}); p != "5 429s" {
		t.Errorf("peer cell %q, want the worst run's 5 429s", p)
	}
}

// The quiet tables keep the form of the README's table when run once.
func TestQuietTableHeading(t *testing.T) {
	sc := pickScenarios("bucket-seconds")[0]
	r := result{Row: 1, Client: "c", Records: 2000, Ideal: 9950 * time.Millisecond, Pauses: -1}
	var b bytes.Buffer
	printTable(&b, sc, []result{r}, 1)
	want := "### bucket-seconds: token-bucket 200/s burst 10, Retry-After as seconds; 2000 records, ideal 9.95s\n\n" +
		"| # | client | OK / failed | sent / record | 429s | wall | wall / ideal | peak / s | pauses |\n"
	if !strings.HasPrefix(b.String(), want) {
		t.Errorf("got\n%s\nwant it to start with\n%s", b.String(), want)
	}
	b.Reset()
	printTable(&b, pickScenarios("noisy-outage")[0], []result{r}, 3)
	if s := b.String(); !strings.Contains(s, "; worst of 3 runs\n") || !strings.Contains(s, "| 503s | in outage |") {
		t.Errorf("noisy table:\n%s", s)
	}
}

func TestUntoldScenarios(t *testing.T) {
	all := rows()
	forms := map[headerForm]int{}
	for _, sc := range pickScenarios("untold") {
		if sc.set != untoldSet || sc.noisy() {
			t.Errorf("%s: set %d", sc.name, sc.set)
		}
		if sc.defaultRuns() != 3 || sc.defaultRecords() != 4000 {
			t.Errorf("%s: %d runs of %d records, want 3 of 4000", sc.name, sc.defaultRuns(), sc.defaultRecords())
		}
		if rs := sc.defaultRows(all); len(rs) != 2 || rs[0].id != 7 || rs[1].id != 6 {
			t.Errorf("%s: rows %v, want 7 then 6", sc.name, rs)
		}
		cfg := sc.config(4000, 0)
		if cfg.ArrivalJitter == 0 {
			t.Errorf("%s: no noise", sc.name)
		}
		want := sc.headers == xRateLimit || sc.headers == ietfHeaders
		x := sc.headers == xRateLimit || sc.headers == xRateLimitRefusals
		if cfg.HeadersOnSuccess != want || cfg.XRateLimit != x || cfg.IETF != (sc.headers == ietfHeaders) {
			t.Errorf("%s: headers %v: %+v", sc.name, sc.headers, cfg)
		}
		forms[sc.headers]++
		if len(sc.targets) == 0 {
			t.Errorf("%s: no target", sc.name)
		}
	}
	if forms[xRateLimit] != 20 || forms[ietfHeaders] != 15 || forms[noHeaders] != 17 || forms[xRateLimitRefusals] != 3 {
		t.Errorf("header forms %v, want 20, 15, 17 and 3", forms)
	}
	for _, sc := range pickScenarios("untold-real") {
		cfg := sc.config(4000, 0)
		noisy := cfg.Unavailable > 0 || cfg.Refused > 0 || len(cfg.Outages) > 0 || cfg.RetryAfter == throttletest.RetryAfterNone || cfg.RetryAfter == throttletest.RetryAfterDate || sc.headers == xRateLimitRefusals || sc.procs > 1 || sc.quota.isCounter() || sc.quota.algo == throttletest.LeakyBucket || cfg.Latency > 0 || float64(sc.quota.burst) <= sc.quota.rate/100
		if !noisy {
			t.Errorf("%s: nothing of a real API's", sc.name)
		}
	}
	for _, sc := range pickScenarios("distant") {
		if cfg := sc.config(4000, 0); cfg.Latency != farLatency || cfg.LatencyJitter != farLatency {
			t.Errorf("%s: latency %v + up to %v, want 30 ms + up to 30 ms", sc.name, cfg.Latency, cfg.LatencyJitter)
		}
	}
	for _, sc := range scenarios() {
		if sc.set != untoldSet && sc.config(2000, 0).HeadersOnSuccess != strings.HasSuffix(sc.name, "-xrl") {
			t.Errorf("%s: quota headers outside the untold set, but for a name that says so", sc.name)
		}
		if sc.set == quietSet && len(sc.defaultRows(all)) != 6 {
			t.Errorf("%s: %d rows, want the six", sc.name, len(sc.defaultRows(all)))
		}
	}
}

func TestHosts(t *testing.T) {
	sc := pickScenarios("untold-4hosts-xrl")[0]
	if sc.hostCount() != 4 || sc.quotaString() != "4 hosts, each token-bucket 200/s burst 20" {
		t.Errorf("%d hosts, %q", sc.hostCount(), sc.quotaString())
	}
	// 1,000 records a host, 20 in the burst, the rest at 200/s.
	if got := sc.ideal(4000); got != 4900*time.Millisecond {
		t.Errorf("ideal(4000) = %s, want 4.9s", got)
	}
	if got := sc.ideal(4001); got != 4905*time.Millisecond {
		t.Errorf("ideal(4001) = %s, want 4.905s (1,001 on the first host)", got)
	}
	if got := pickScenarios("untold-tokens-xrl")[0].ideal(4000); got != 19900*time.Millisecond {
		t.Errorf("one host: ideal(4000) = %s, want 19.9s", got)
	}
}

// The peer keeps a limiter per host: each host has the quota.
func TestLimiterPerHost(t *testing.T) {
	l := &limited{quota: quota{algo: throttletest.TokenBucket, rate: 200, burst: 20}, lims: map[string]*rate.Limiter{}}
	now := time.Now()
	a, b := l.limiter("127.0.0.1:1", now), l.limiter("127.0.0.1:2", now)
	if a == b || l.limiter("127.0.0.1:1", now) != a {
		t.Error("want one limiter per host, kept")
	}
	if a.Burst() != 20 || a.Limit() != 200 {
		t.Errorf("limiter %v/%d, want 200/20", a.Limit(), a.Burst())
	}
}

func TestUntoldTables(t *testing.T) {
	sc := pickScenarios("untold-4hosts-ietf")[0]
	r7 := result{Row: 7, Client: "throttle, no Policy", Records: 4000, Sent: 4020, Throttled: 20, Wall: 4900 * time.Millisecond, Ideal: 4900 * time.Millisecond, Pauses: 1}
	r6 := result{Row: 6, Client: "go-retryablehttp + x/time/rate", Records: 4000, Sent: 4000, Failed: 2, Wall: 9800 * time.Millisecond, Ideal: 4900 * time.Millisecond, Pauses: -1}
	var b bytes.Buffer
	printTable(&b, sc, []result{r7, r6}, 3)
	want := "### untold-4hosts-ietf: 4 hosts, each token-bucket 200/s burst 20, Retry-After as seconds; " +
		"quota headers: RateLimit + RateLimit-Policy (IETF) on every answer; noise: arrival jitter 0–2ms; " +
		"4000 records (1000 per host at most), ideal 4.90s; worst of 3 runs\n"
	if s := b.String(); !strings.HasPrefix(s, want) || !strings.Contains(s, "| 20 (0.50%) |") {
		t.Errorf("got\n%s\nwant it to start with\n%s\nand show 20 (0.50%%)", s, want)
	}
	b.Reset()
	printUntoldSummary(&b, map[string][]runs{sc.name: {{r7}, {r6}}}, []scenario{sc})
	for _, want := range []string{
		"| scenario | quota | quota headers | 7: throttle, no Policy | 6: go-retryablehttp + x/time/rate |",
		"| 1.005 · 20 (0.50%) · 1.00× | 1.000 · 0 (0.00%) · 2.00× (2 failed) |",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("summary:\n%s\nwant %q", b.String(), want)
		}
	}
}

// Issue 9's targets, on row 7 beside row 6.
func TestUntoldTargets(t *testing.T) {
	whats := func(name string) string {
		var ws []string
		for _, tg := range pickScenarios(name)[0].targets {
			ws = append(ws, tg.what)
		}
		return strings.Join(ws, "; ")
	}
	for name, want := range map[string]string{
		"untold-log-xrl":      "every record done; wall ≤ 1.05 × ideal; 429s ≤ 0.3% of requests",
		"untold-window-ietf":  "every record done; wall ≤ 1.05 × ideal; 429s ≤ 0.3% of requests",
		"untold-tokens-none":  "every record done; wall ≤ 1.15 × ideal; 429s ≤ 0.5% of requests",
		"untold-halving-xrl":  "every record done; wall ≤ 1.1 × ideal",
		"untold-halving-none": "every record done; wall ≤ 1.1 × ideal",
		"untold-2procs-ietf":  "every record done; wall ≤ 1.1 × ideal; 429s ≤ 0.3% of requests",
		"untold-2procs-none":  "every record done; wall ≤ 1.1 × ideal; 429s ≤ 0.5% of requests",
	} {
		if got := whats(name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	sc := pickScenarios("untold-2procs-xrl")[0]
	r7 := result{Row: 7, Records: 4000, Sent: 4010, Throttled: 10, Wall: 21 * time.Second, Ideal: 19900 * time.Millisecond}
	r6 := result{Row: 6, Records: 4000, Sent: 4000, Wall: 20 * time.Second, Ideal: 19900 * time.Millisecond}
	var b bytes.Buffer
	printTargetTable(&b, "Targets of the untold scenarios", 7, map[string][]runs{sc.name: {{r7}, {r6}}}, []scenario{sc})
	for _, want := range []string{
		"| scenario | target | 7: throttle, no Policy | 6: go-retryablehttp + x/time/rate (peer) |",
		"| untold-2procs-xrl | wall ≤ 1.1 × ideal | pass 1.055 × ideal | 1.005 × ideal |",
		"| untold-2procs-xrl | 429s ≤ 0.3% of requests | pass 0.25% | 0.00% |",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("targets:\n%s\nwant %q", b.String(), want)
		}
	}
}

// A table of two processes says how the job was split, and when each
// finished; one of a quota that halves says when.
func TestUntoldTableHeadings(t *testing.T) {
	r := result{Row: 7, Client: "c", Records: 4000, Workers: 16, Ideal: 19900 * time.Millisecond, Pauses: 0,
		ProcessWalls: []time.Duration{19 * time.Second, 20 * time.Second}}
	var b bytes.Buffer
	printTable(&b, pickScenarios("untold-2procs-none")[0], []result{r}, 3)
	for _, want := range []string{
		"### untold-2procs-none: token-bucket 200/s burst 20, shared by 2 processes on one key, Retry-After as seconds;",
		"; 4000 records (2000 per process at most, with 8 of the 16 workers), ideal 19.90s; worst of 3 runs\n",
		"- row 7: the processes finished at 19.00s and 20.00s\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table:\n%s\nwant %q", b.String(), want)
		}
	}
	b.Reset()
	r.Ideal, r.ProcessWalls = 29850*time.Millisecond, nil
	printTable(&b, pickScenarios("untold-halving-ietf")[0], []result{r}, 3)
	want := "### untold-halving-ietf: token-bucket 200/s burst 20, then 100/s from half its ideal, Retry-After as seconds;"
	if s := b.String(); !strings.HasPrefix(s, want) || !strings.Contains(s, "; 4000 records, ideal 29.85s (the rate halves at 9.95s); worst of 3 runs\n") {
		t.Errorf("table:\n%s\nwant it to start with %q and say when the rate halves", s, want)
	}
}

// A leaky bucket's burst is its places: the one served and those that wait.
func TestLeakyLimit(t *testing.T) {
	l := quota{algo: throttletest.LeakyBucket, rate: 200, burst: 2}.limit()
	if l.Algorithm != throttletest.LeakyBucket || l.Rate != 200 || l.Queue != 1 {
		t.Errorf("limit %+v, want a leaky bucket of 200/s with 1 place to wait", l)
	}
	if s := (quota{algo: throttletest.LeakyBucket, rate: 200, burst: 2}).String(); s != "leaky-bucket 200/s, 1 waiting at most" {
		t.Errorf("String() = %q", s)
	}
}
