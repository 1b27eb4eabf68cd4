package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/throttlehttp/throttle/throttletest"
)

// A headerForm is how the server tells its quota on every answer, 2xx
// included (throttletest.Config.HeadersOnSuccess), if at all.
type headerForm int

const (
	noHeaders          headerForm = iota // none: a 429 says only Retry-After
	xRateLimit                           // X-RateLimit-Limit, -Remaining and -Reset
	ietfHeaders                          // RateLimit and RateLimit-Policy (draft-ietf-httpapi-ratelimit-headers)
	xRateLimitRefusals                   // X-RateLimit-* on 429s only, as many APIs send them
)

// apply sets the headers on cfg.
func (h headerForm) apply(cfg *throttletest.Config) {
	cfg.XRateLimit = h == xRateLimit || h == xRateLimitRefusals
	cfg.IETF = h == ietfHeaders
	cfg.HeadersOnSuccess = h == xRateLimit || h == ietfHeaders
}

func (h headerForm) String() string {
	switch h {
	case xRateLimit:
		return "X-RateLimit-* on every answer"
	case ietfHeaders:
		return "RateLimit + RateLimit-Policy (IETF) on every answer"
	case xRateLimitRefusals:
		return "X-RateLimit-* on 429s only"
	}
	return "none (429 + Retry-After only)"
}

// suffix ends the scenario's name.
func (h headerForm) suffix() string {
	switch h {
	case xRateLimit:
		return "xrl"
	case ietfHeaders:
		return "ietf"
	}
	return "none"
}

// untoldJitter is the untold scenarios' noise: a random delay before the
// quota counts a request, as in the noisy windows, so that requests sent in
// one order may be counted in another and the headers' Remaining does not
// simply count down.
const untoldJitter = 2 * time.Millisecond

// farLatency is the least delay of an answer in the distant scenarios, and
// the most added to it at random: answers come 30-60 ms after the request.
const farLatency = 30 * time.Millisecond

// untoldScenarios are the scenarios in which throttle is told no Policy
// (row 7) and can pace only from what the server's answers say, beside
// go-retryablehttp + x/time/rate told the quota (row 6). Each quota comes
// with the headers in either form, then without them: four steady quotas,
// a token bucket whose rate halves mid-run (halving.go) and a token bucket
// shared by two processes (procs.go). The names all start with "untold", so
// -scenario untold picks exactly these; no other word of theirs is in
// another scenario's name, so the filters of the other sets pick what they
// did.
func untoldScenarios() []scenario {
	bucket := quota{algo: throttletest.TokenBucket, rate: 200, burst: 20}
	fixed := quota{algo: throttletest.FixedWindow, n: 100, per: time.Second}
	sliding := quota{algo: throttletest.SlidingLog, n: 200, per: time.Second}
	quotas := []struct {
		name   string
		quota  quota
		hosts  int
		halves bool
		procs  int
		far    bool
	}{
		{name: "tokens", quota: bucket},
		{name: "window", quota: fixed},
		{name: "log", quota: sliding},
		{name: "4hosts", quota: bucket, hosts: 4},
		{name: "halving", quota: bucket, halves: true},
		{name: "2procs", quota: bucket, procs: 2},
		// Far away: answers 30-60 ms after the request, so that the
		// requests on the way are about as many as the bucket holds.
		{name: "distant-tokens", quota: bucket, far: true},
		{name: "distant-window", quota: fixed, far: true},
		{name: "distant-log", quota: sliding, far: true},
	}
	out := realScenarios(bucket, fixed, sliding)
	for _, q := range quotas {
		for _, h := range []headerForm{xRateLimit, ietfHeaders, noHeaders} {
			n := noise{arrivalJitter: untoldJitter}
			if q.far {
				n.latency, n.latencyJitter = farLatency, farLatency
			}
			out = append(out, scenario{
				name:    "untold-" + q.name + "-" + h.suffix(),
				set:     untoldSet,
				quota:   q.quota,
				hosts:   q.hosts,
				halves:  q.halves,
				procs:   q.procs,
				headers: h,
				noise:   n,
				rows:    []int{7, 6},
				targets: untoldTargets(h, q.halves, q.procs),
			})
		}
	}
	return out
}

// realScenarios are untold scenarios in the ways real APIs differ from the
// steady ones: quota headers on 429s only; 429s without Retry-After or
// headers; Retry-After as an HTTP-date without headers (names end in
// "gmt": "date" would be picked by the quiet set's filters); random 503s (2%, Retry-After: 1 s) behind quota headers on every
// answer; two processes on one key of a fixed window or a log told by
// headers, which the steady rows have only for a token bucket; a sliding
// counter (Cloudflare's, and many a Redis limiter's), told by either form of
// headers, and shared by two processes, told by IETF fields; a leaky bucket of 200 a second with one place to wait (nginx's
// limit_req with burst=1), whose X-RateLimit-* say 2 remain at most, alone
// and shared by two processes; a small token bucket far away (100 a second,
// 5 deep, answers 40-60 ms after the request: about as many on their way as
// it holds), told by X-RateLimit-*; a fast, shallow token bucket (1,000 a
// second, 5 deep: 5 ms of its rate) told nothing; a bucket of one (100 a
// second, one deep: an API that takes one request per turn, as a client
// that sends one at a time meets it with -workers 1) told nothing; the small bucket told
// nothing, behind a gateway that refuses 1% of requests at random (429,
// Retry-After: 1, counted by no quota), and 3%; and 3% in front of a fixed
// window told by X-RateLimit-*, a log told by IETF fields and the small
// bucket told by X-RateLimit-* on every answer, or on the server's own 429s
// only (the gateway's 429s carry none: the server that counts never saw
// them); and the small bucket told by X-RateLimit-* on every answer behind
// a gateway that refuses every request for 50 ms every 4 s (a blip, as in
// noisy-429-blips), without them, and the fixed window told so behind
// blips of 100 ms, whose refusals dominate; and a deep, slow token bucket
// (Twitch's: 800 a minute, 800 deep), told by X-RateLimit-* whose Reset is
// the time until it is full, behind random 503s (run it with -records
// 1500: 4,000 take 4 minutes a row). Their names
// start with "untold-real", and they run first, so that -scenario
// untold-real picks them and the steady rows keep their order.
func realScenarios(bucket, fixed, sliding quota) []scenario {
	counter := quota{algo: throttletest.SlidingCounter, n: 100, per: time.Second}
	leaky := quota{algo: throttletest.LeakyBucket, rate: 200, burst: 2} // one served, one waiting
	unavailable := noise{arrivalJitter: untoldJitter, unavailable: 0.02, unavailableRetryAfter: time.Second}
	plain := noise{arrivalJitter: untoldJitter}
	small := quota{algo: throttletest.TokenBucket, rate: 100, burst: 5}
	shallow := quota{algo: throttletest.TokenBucket, rate: 1000, burst: 5}
	onedeep := quota{algo: throttletest.TokenBucket, rate: 100, burst: 1}
	randomly := noise{arrivalJitter: untoldJitter, refused: 0.01}
	heavily := noise{arrivalJitter: untoldJitter, refused: 0.03}
	blips := noise{arrivalJitter: untoldJitter, blip: 50 * time.Millisecond, blipEvery: 4 * time.Second}
	longBlips := noise{arrivalJitter: untoldJitter, blip: 100 * time.Millisecond, blipEvery: 4 * time.Second}
	away := noise{arrivalJitter: untoldJitter, latency: 40 * time.Millisecond, latencyJitter: 20 * time.Millisecond}
	deep := quota{algo: throttletest.TokenBucket, rate: 800.0 / 60, burst: 800} // Twitch's: 800 a minute, its Reset the time until full
	all := []scenario{
		{name: "untold-real-deep-tokens-xrl", quota: deep, headers: xRateLimit, noise: unavailable},
		{name: "untold-real-tokens-onrefusals", quota: bucket, headers: xRateLimitRefusals, noise: plain},
		{name: "untold-real-window-onrefusals", quota: fixed, headers: xRateLimitRefusals, noise: plain},
		{name: "untold-real-tokens-noretryafter", quota: bucket, headers: noHeaders, noRetryAfter: true, noise: plain},
		{name: "untold-real-window-noretryafter", quota: fixed, headers: noHeaders, noRetryAfter: true, noise: plain},
		{name: "untold-real-tokens-gmt", quota: bucket, headers: noHeaders, date: true, noise: plain},
		{name: "untold-real-window-gmt", quota: fixed, headers: noHeaders, date: true, noise: plain},
		{name: "untold-real-window-503", quota: fixed, headers: xRateLimit, noise: unavailable},
		{name: "untold-real-log-503", quota: sliding, headers: ietfHeaders, noise: unavailable},
		{name: "untold-real-2procs-window-xrl", quota: fixed, headers: xRateLimit, noise: plain, procs: 2},
		{name: "untold-real-2procs-window-ietf", quota: fixed, headers: ietfHeaders, noise: plain, procs: 2},
		{name: "untold-real-2procs-log-ietf", quota: sliding, headers: ietfHeaders, noise: plain, procs: 2},
		{name: "untold-real-counter-xrl", quota: counter, headers: xRateLimit, noise: plain},
		{name: "untold-real-counter-ietf", quota: counter, headers: ietfHeaders, noise: plain},
		{name: "untold-real-2procs-counter-ietf", quota: counter, headers: ietfHeaders, noise: plain, procs: 2},
		{name: "untold-real-leaky-xrl", quota: leaky, headers: xRateLimit, noise: plain},
		{name: "untold-real-2procs-leaky-xrl", quota: leaky, headers: xRateLimit, noise: plain, procs: 2},
		{name: "untold-real-smallaway-xrl", quota: small, headers: xRateLimit, noise: away},
		{name: "untold-real-shallow-none", quota: shallow, headers: noHeaders, noise: plain},
		{name: "untold-real-onedeep-none", quota: onedeep, headers: noHeaders, noise: plain},
		{name: "untold-real-random429-none", quota: small, headers: noHeaders, noise: randomly},
		{name: "untold-real-random429-heavy-none", quota: small, headers: noHeaders, noise: heavily},
		{name: "untold-real-random429-heavy-window-xrl", quota: fixed, headers: xRateLimit, noise: heavily},
		{name: "untold-real-random429-heavy-log-ietf", quota: sliding, headers: ietfHeaders, noise: heavily},
		{name: "untold-real-random429-heavy-tokens-xrl", quota: small, headers: xRateLimit, noise: heavily},
		{name: "untold-real-random429-heavy-tokens-onrefusals", quota: small, headers: xRateLimitRefusals, noise: heavily},
		{name: "untold-real-blips-tokens-xrl", quota: small, headers: xRateLimit, noise: blips},
		{name: "untold-real-longblips-window-xrl", quota: fixed, headers: xRateLimit, noise: longBlips},
	}
	for i := range all {
		sc := &all[i]
		sc.set, sc.rows = untoldSet, []int{7, 6}
		sc.targets = untoldTargets(sc.headers, false, sc.procs)
		if sc.noise.refused > 0 || sc.noise.blip > 0 {
			// Random 429s, and a blip's, count in no quota: the share of
			// 429s is the noise's; what counts is the time beside the
			// peer.
			sc.targets = []target{everyRecord(), wallOverIdeal(1.15), wallVsPeer()}
		}
	}
	return all
}

// untoldTargets are issue 9's targets for throttle told no Policy, by the
// quota headers and the quota: with headers, wall ≤ 1.05 × ideal and 429s ≤
// 0.3 % of the requests; without, 1.15 × and 0.5 %; a quota whose rate
// halves, 1.10 × the ideal of the changed quota; two processes, 1.10 × the
// ideal of their combined job, and "under the quota together" read as the
// 429s' share of the headers' form.
func untoldTargets(h headerForm, halves bool, procs int) []target {
	wall, share := 1.05, 0.003
	if h == noHeaders || h == xRateLimitRefusals { // refusals tell it all
		wall, share = 1.15, 0.005
	}
	switch {
	case halves:
		return []target{everyRecord(), wallOverIdeal(1.10)}
	case procs > 1:
		return []target{everyRecord(), wallOverIdeal(1.10), throttledShare(share)}
	}
	return []target{everyRecord(), wallOverIdeal(wall), throttledShare(share)}
}

// throttledCell is a run's 429s, and their share of the requests.
func throttledCell(r result) string {
	share := 0.0
	if r.Sent > 0 {
		share = float64(r.Throttled) / float64(r.Sent) * 100
	}
	return fmt.Sprintf("%d (%.2f%%)", r.Throttled, share)
}

// summaryCell is a row's worst run in one cell: sent per record · 429s (share)
// · wall over ideal, as the README's tables have them.
func summaryCell(r result) string {
	cell := fmt.Sprintf("%.3f · %s · %.2f×", r.sentPerRecord(), throttledCell(r), r.overIdeal())
	if r.Failed > 0 {
		cell += fmt.Sprintf(" (%d failed)", r.Failed)
	}
	return cell
}

// printUntoldSummary writes the untold scenarios in one table, a line per
// scenario and a column per row, each row's worst run.
func printUntoldSummary(w io.Writer, byScenario map[string][]runs, order []scenario) {
	var cols []result // a run of each row, for its number and name
	for _, sc := range order {
		for _, r := range worstOfEach(byScenario[sc.name]) {
			if !containsRow(cols, r.Row) {
				cols = append(cols, r)
			}
		}
	}
	if len(cols) == 0 {
		return
	}
	fmt.Fprintln(w, "### Not told the quota: each row's worst run (sent / record · 429s (share of requests) · wall / ideal)")
	fmt.Fprintln(w)
	fmt.Fprint(w, "| scenario | quota | quota headers |")
	for _, c := range cols {
		fmt.Fprintf(w, " %d: %s |", c.Row, c.Client)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "|---|---|---|"+strings.Repeat("---|", len(cols)))
	for _, sc := range order {
		rs := worstOfEach(byScenario[sc.name])
		if len(rs) == 0 {
			continue
		}
		fmt.Fprintf(w, "| %s | %s | %s |", sc.name, sc.quotaString(), sc.headers)
		for _, c := range cols {
			cell := "–"
			for _, r := range rs {
				if r.Row == c.Row {
					cell = summaryCell(r)
				}
			}
			fmt.Fprintf(w, " %s |", cell)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
}

func containsRow(rs []result, id int) bool {
	for _, r := range rs {
		if r.Row == id {
			return true
		}
	}
	return false
}
