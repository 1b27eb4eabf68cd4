package throttle

import (
	"math"
	"math/bits"
	"time"

	"golang.org/x/time/rate"
)

// The pace adapts to what the server says, in proportion to the evidence.
//
// An episode begins with a quota signal (see pause.go) to an attempt sent
// after the last episode began, other than a probe; answers to attempts that
// were already on their way belong to the episode before and change nothing
// (they may still extend the pause). Each episode reacts at most once, by
// the first rule that applies:
//
//  1. Proven lower. The answers the server accepted since the key last
//     resumed (or began), less one Burst (its bucket may have been full),
//     over that time, are a rate the server surely bears. They are evidence
//     once counted over at least a second and ten Bursts' worth of the pace,
//     while the key sent at its pace. When they show less than 0.9 of the
//     pace, and the server refused more than a tenth of the answers to
//     what the key sent since (a pace climbing back after a cut sent less
//     than it is now, and refusals at random take a share whatever the
//     pace: neither proves anything), the quota is proven lower: the pace,
//     and its ceiling, go there.
//  2. Did not help. A cut by a tenth or more is a test: when the next
//     episode comes at a pace no faster, after no more than 1.1 times the
//     answers accepted before that cut, slowing down changed nothing. Twice
//     in a row (one unlucky run proves little), and it is the server that
//     refuses whatever the pace (one request in twenty, say): the ceiling
//     goes back to where the first of the two cuts began, and for 30
//     seconds episodes only pause the key, as the server asks. Against a
//     real quota a slower pace lengthens the run of accepted answers before
//     the next refusal, by more than that unless it is several times the
//     quota: then each pause refills the server's bucket and the pace
//     drains it at once, whatever a fifth less of it. So an episode is
//     not counted as one that slowing down did not help when the one
//     before refused more than one attempt (those on their way when it
//     began: the count was spent, which refusals at random seldom show),
//     or when it came after no more answers than twice what a resume
//     lets go at once (the probe and a Burst).
//  3. Recurring. An episode within 10 seconds of the one before. When the
//     refusals are dense (5 of the key's last 100 answers, or 3 of the
//     last 20, counting only answers since the last cut by this rule or
//     rule 1: each answer is evidence for one cut), and twice as frequent
//     as the key's share of refusals lately or more (5% at least), at odds
//     of e^6 to 1 (a CUSUM test), they are the pace's
//     doing: it goes to 0.8 of itself, or lower to what the share of
//     answers accepted says the server bears (a pace several times the
//     quota), or to half of itself when the server took no more than a
//     resume lets go at once; its ceiling to 0.95 of it, or that share,
//     proven. (Found in review: the same three refusals were counted again
//     at each refusal after them, each cutting again; one request in 33
//     refused at random took a configured pace to a fifth of the quota;
//     then, three in twenty, which come at that share at one refusal in
//     nine, cut it by a fifth and proved its ceiling lower: 2.2x the ideal
//     on average in the model, 2.2-4.0x on loopback where go-retryablehttp
//     + x/time/rate took 1.03-1.07x. And in review, a share lately of up
//     to a tenth, or one counted from the first answers only, let a Policy
//     twice its quota count its own refusals as noise: 2,066 429s where 30
//     were.) The share lately counts only answers shown to be noise: those
//     of a trial that found refusals as often at a lower ceiling (below),
//     and those before rule 2 found slowing down did not help, about the
//     last 500 of them, older ones weighing less; until they tell, it is
//     taken as one refusal in 50, over 256 answers. A share over a
//     twentieth counts as a twentieth. (Found in review: counted over every
//     answer, the pace's own refusals, steady at a few percent under a
//     quota stepping down, two clients on one quota or the network's
//     jitter, were in the share they were judged against, and a key took up
//     to twice the 429s before it cut; and the first 256 answers, judged by
//     the counts alone, took chance clusters for the pace's: one request in
//     33 refused at random took a configured pace to 1.5-2.8x the ideal.)
//     Sparse ones, which a server also sends at random whatever the pace
//     (a gateway's, another tenant's collision), are tried: the ceiling
//     goes a twentieth lower while the answers after it tell, at odds of
//     20 to 1, whether refusals fell to a third of their share at the
//     ceiling before, or came as often. Collisions that keep coming, as
//     when the network's jitter exceeds what the server's bucket absorbs,
//     or a pace a little over the quota, fall: the lower ceiling is
//     proven, and the next sparse refusal tries another twentieth.
//     Refusals twice as often as before or more are still the pace's
//     (the share before was counted while it climbed back, the server's
//     bucket fuller: found in review, a Policy 7% over the quota was
//     taken for noise, 62 refusals where there were 5): the next trial
//     begins from the lower ceiling.
//     Refusals at random come as often: the ceiling goes back (to where
//     trials that helped, one after the other, began, when they come as
//     often as before the first), and for 30 s sparse refusals change
//     nothing but the refused request's wait. Refusals dense within a
//     trial end it, as dense, once twice the trial's base is likelier for
//     them, at odds of 20 to 1, than the base (counted, where fewer than
//     100 answers at the ceiling tell it, with the prior's one in 50 over
//     100 answers, see begin: a chance cluster among a few dozen is no
//     proof; and a trial stops at a refusal: three in its first 60
//     answers come one trial in three where one request in 33 is
//     refused at random), or the key paused since the
//     last cut (a pace over the quota draws its refusals together after a
//     resume). (Found in review: each sparse refusal set the ceiling to
//     0.9 of what was proven for 30 s; one request in a hundred refused at
//     random kept a configured pace at 1.12-1.15x the ideal, 1.34x on
//     loopback where go-retryablehttp + x/time/rate took 1.03x.) A ceiling
//     proven by a chance cluster climbs back as below. A trial whose
//     refusals came in one run, none accepted among them (a gateway that
//     refused everything for a moment), tells nothing: the ceiling goes
//     back, and the rest of the run begins no trial.
//     A cut of dense refusals is checked as a trial is: when, among the
//     next 200 answers to attempts sent after it, refusals still came at
//     a third or more of the share that made them dense (3 at least), the
//     cut did not help: they were the server's noise, the ceiling goes
//     back to where the first of such cuts in a row found it, and those
//     answers count in the key's share lately (found in session 56: a
//     Policy at its quota behind 5% random 429s took 1.52x the ideal on
//     average in the model, 2.19x at worst, where go-retryablehttp +
//     x/time/rate took 1.105x; a chance cluster among the first few
//     hundred answers, judged against the prior's one in 50, proved the
//     ceiling lower, and no quiet 30 s came to raise it).
//  4. Isolated. The pace goes to 0.8 of itself or to what the server was
//     seen to accept, whichever is faster (a collision after a long quiet
//     run barely moves it), and the ceiling stays.
//
// Each quiet second (no episode; after a cut, counted from the end of its
// pause) raises the pace by a tenth of Policy.Rate, up to the ceiling: a
// pace cut by one collision is back within seconds. The ceiling climbs back
// by a twentieth of Policy.Rate per quiet 30 seconds, so a quota that grows
// is found again. A configured pace never drops below a tenth of Rate.
//
// A window's N is cut to 0.8 of what it admits (unless rule 1 or 2 applies), but
// only a window that held at least half of that when the throttled attempt
// was sent: a window far from its limit was not what the server objected
// to. And only by a refusal that pauses the key: one that asks for more
// than 2 s, or refusals of a window spent (see refusalRun and
// loneRefusals); a lone one that asks less is a collision, of a kind a
// server sends at random (found in review: one in a hundred so took a
// window of 100 a second configured at the quota to 6x the ideal, each
// pausing the key a second and cutting the window for minutes). It climbs
// back by a twentieth of N per quiet 30 seconds: a window counts over its
// whole length, so a quick climb would only collide again.
//
// These rules are for a configured pace (and the configured windows). A
// key with no pace, no windows and no quota headers learns one from its
// 429s instead, by the rules in learn.go; a key paced by the server's quota
// headers follows them (told.go).
const (
	slowFactor     = 0.8              // a cut takes the pace to this share of itself
	farCut         = 0.5              // or to this, when what a resume let go at once was all the server took
	realCut        = 0.9              // a cut to this share or lower tests whether slowing down helps
	slowestShare   = 0.1              // a configured pace never drops below this share of Rate
	climbEvery     = time.Second      // a quiet spell this long raises the pace
	climbShare     = 0.1              // by this share of Rate (of N for windows)
	ceilEvery      = 30 * time.Second // a quiet spell this long raises the ceiling, and ends the noise
	ceilShare      = 0.05             // by this share of Rate (of N)
	minEvidence    = time.Second      // accepted answers counted this long are evidence,
	evidenceBursts = 10               // and over at least this many Bursts' worth of the pace
	provenShare    = 0.9              // a server that accepted less than this share of the pace proves the quota lower
	recurWithin    = 10 * time.Second // an episode this soon after the last recurs
	recurShare     = 0.95             // a recurring episode leaves the ceiling at this share of its pace
	helpedShare    = 1.1              // a cut helped if the next episode came after more than this share of the answers before it
	nearShare      = 0.5              // a window this full is near enough to its limit to be cut

	denseOver  = 100  // refusals among this many recent answers
	denseShare = 0.05 // this share of them or more are the pace's doing
	blipRun    = 5    // a run of this many refusals, none accepted among them, counts as one (see dense)

	latelyOver  = 512   // the key's share of refusals lately counts about this many answers shown to be noise,
	latelyPrior = 0.02  // and begins as this share of latelyOver/2 answers,
	latelyLeast = 0.001 // and is taken as this at least,
	latelyMost  = 0.05  // and this at most: a server that refuses more is refusing the pace
	denseOdds   = 6.0   // refusals are dense only when they came twice as often as lately, or at denseShare, at odds of e^6 to 1

	forgetAfter = time.Minute // an adapted pace is kept this long after its last change
)

// adaptation is a key's record of the server's objections, kept in its
// trouble: a key never refused has none (its pace and windows are as
// configured, its ceiling is Policy.Rate).
//
// Its times are offsets from the transport's epoch (8 bytes, not a
// time.Time's 24); longAgo stands for never.
type adaptation struct {
	ceil      rate.Limit    // a configured pace climbs back quickly up to this (<= Policy.Rate)
	provenAt  time.Duration // when rule 1 or 3 last proved the ceiling: it climbs back in the quiet since, sparse refusals or not
	cutAdm    uint64        // admissions up to this one were sent before the last episode
	episodeAt time.Duration // when the last episode began
	testFrom  rate.Limit    // > 0: the last episode cut the pace from this; the next tells whether it helped
	testRun   int           // the answers accepted before that cut
	origin    rate.Limit    // the pace before the first of the cuts that did not help
	noiseEnd  time.Duration // until then refusals are taken as the server's noise: episodes only pause
	quietAt   time.Duration // the pace and windows climb from here: the last cut, climb or pause end
	ceilAt    time.Duration // when the ceiling last moved
	adjusted  time.Duration // when anything was last lowered or raised
	calming   bool          // a cut began the pause in force: its end restarts the quiet spell
	spent     bool          // the last episode refused more than one attempt (see rule 2)
	unhelped  uint8         // cuts in a row that did not help (0 or 1)
	run       refusalRun    // the refusals since the first of a run, for windows
	lone      loneRefusals  // the lone refusals of windows in a row
	trial     trial         // sparse refusals' trial of a slower ceiling
	resumed   bool          // the key resumed from a pause since the last cut by rule 3
	dense     bool          // the refusal being answered cut by rule 3: its refusals are dense (see collision)
	check     denseCheck    // whether the last cut by rule 3 helped
}

// denseCheck tells whether a cut of dense refusals (rule 3) helped: from
// the answers to attempts sent after it.
type denseCheck struct {
	adm   uint64     // admissions up to this one were sent before the cut
	from  rate.Limit // the ceiling before the first of the cuts in a row checked
	share float64    // the share of refusals that made them dense
	n, k  int32      // answers counted, and refusals among them
	on    bool
}

const (
	checkAnswers = 200 // a dense cut is checked over this many answers to attempts sent after it
	checkShare   = 3.0 // and did not help if refusals still came at a 1/checkShare of the share before, or more
)

// checkDense counts the answer to the attempt adm, refused for the quota
// or not, in the check of the last cut of dense refusals, and ends the
// check once it has counted enough (see rule 3).
func (ks *keyState) checkDense(adm uint64, refused bool) {
	a := &ks.tr.adapt
	c := &a.check
	if !c.on || adm <= c.adm {
		return
	}
	c.n++
	if refused {
		c.k++
	}
	if c.n < checkAnswers {
		return
	}
	c.on = false
	if float64(c.k) >= max(refusalsMin, c.share*float64(c.n)/checkShare) {
		// It did not help: the server's noise.
		if c.from > a.ceil {
			a.ceil = c.from
			a.ceilMoved()
		}
		ks.ev.shown(int(c.n), int(c.k))
	}
}

// longAgo is the time, from the epoch, of what never happened: any wait
// counted from it is over.
const longAgo = time.Duration(math.MinInt64 / 2)

func newAdaptation(ceil rate.Limit) adaptation {
	return adaptation{ceil: ceil, provenAt: longAgo, episodeAt: longAgo, noiseEnd: longAgo,
		quietAt: longAgo, ceilAt: longAgo, adjusted: longAgo, trial: trial{quietUntil: longAgo, endedAt: longAgo}}
}

// evidence is what every key counts of its answers from the first, for the
// adaptation to read when the server objects.
type evidence struct {
	run   int // answers accepted since the last episode began
	taken int // answers accepted since the key last resumed from a pause

	recent [2]uint64 // the last 128 answers, a bit each, set for a refusal (newest lowest)
	seen   int       // answers recorded in recent, up to 128
	fresh  int       // of them, those since the last cut by rule 1 or 3: each answer is evidence for one cut

	answers, refusals int64 // all answers counted (the key's first trouble on), and the refusals among them

	lately, latelyRefused float64 // answers shown to be noise and the refusals among them, older ones weighing less (see shown)
	over                  float64 // a CUSUM test, since the last cut by rule 1 or 3, of refusals twice as often as lately or more
	often                 bool    // over reached denseOdds at the last answer recorded

	spanAt  time.Duration // answers not refused for the quota are counted from here: the first answer, the last cut or resume; longAgo before
	spanOK  int
	spanAdm uint64 // the key's admissions then
	spanRun int    // run then: run-spanRun were accepted since spanAt, if no episode began since
}

// answered counts, at now, an answer that was not a refusal for the quota:
// accepted, or failed for the server's own trouble (which says nothing of
// the quota). The attempt was sent at sent, the key's answer before came
// at prev, and admitted is the key's admissions so far: an attempt sent
// after an idle spell (idleSpan without an answer) begins the count again,
// at its answer, for the time the key sent nothing says nothing of what the
// server bears (found in review: a key used by an hourly job of 100
// requests, refused once in its 4th, took the answers of three hours over
// those hours for its first guess, 0.1 a second, and every later job's
// requests failed for their deadlines).
func (e *evidence) answered(now, sent, prev time.Duration, admitted uint64) {
	switch {
	case e.spanAt == longAgo:
		e.spanAt = now // a count from the first answer (admissions from 0)
	case sent-prev > idleSpan:
		e.restart(now, admitted)
	}
	e.spanOK++
}

// idleSpan is the gap between a key's answers that makes it idle: two turns
// of the slowest pace a key learns (see answered).
const idleSpan = time.Duration(2 * float64(time.Second) / float64(slowestRate))

// record adds an answer to the recent ones, from the key's first trouble
// on: refused for the quota, or not.
func (e *evidence) record(refused bool) {
	b := min(max(e.noisy(), latelyLeast), latelyMost)
	s := max(2*b, denseShare)
	if refused {
		e.over = min(e.over+math.Log(s/b), 2*denseOdds) // (the evidence of a moment ago, not of ever)
	} else {
		e.over = max(0, e.over+math.Log1p(-s)-math.Log1p(-b))
	}
	e.fresh = min(e.fresh+1, 128)
	e.recent[1] = e.recent[1]<<1 | e.recent[0]>>63
	e.recent[0] <<= 1
	if refused {
		e.recent[0] |= 1
	}
	e.seen = min(e.seen+1, 128)
	e.answers++
	e.often = e.over >= denseOdds
}

// begin starts the key's share of refusals lately, at its first trouble,
// from the prior: one refusal in 50, as if over latelyOver/2 answers.
func (e *evidence) begin() {
	e.lately, e.latelyRefused = latelyOver/2, latelyOver/2*latelyPrior
}

// shown adds to the key's share of refusals lately n answers shown to be
// noise, k of them refused; what it counted before weighs less by n of
// latelyOver.
func (e *evidence) shown(n, k int) {
	if n <= 0 {
		return
	}
	keep := max(0, 1-float64(n)/latelyOver)
	e.lately = e.lately*keep + float64(n)
	e.latelyRefused = e.latelyRefused*keep + float64(k)
}

// shownRecent adds the key's last answers, up to 128, to its share of
// refusals lately: shown to be noise.
func (e *evidence) shownRecent() {
	n := e.seen
	e.shown(n, bits.OnesCount64(e.recent[0]&mask(n))+bits.OnesCount64(e.recent[1]&mask(n-64)))
}

// steady reports whether the refusals among the key's last 20 answers came
// no more often than before them: among the up to 108 answers before,
// as many as among the 20 but one, at least.
func (e *evidence) steady() bool {
	n := min(e.seen, 128)
	near := bits.OnesCount64(e.recent[0] & mask(outageAnswers))
	all := bits.OnesCount64(e.recent[0]&mask(n)) + bits.OnesCount64(e.recent[1]&mask(n-64))
	return all-near >= near-1
}

// runs is the number of runs of refusals among the last n answers (up to
// 128): refusals with no answer accepted between them are one run.
func (e *evidence) runs(n int) int {
	lo, hi := e.recent[0]&mask(n), e.recent[1]&mask(n-64)
	// A refusal begins a run when the answer before it (the next bit
	// up) was not one.
	return bits.OnesCount64(lo&^(lo>>1|hi<<63)) + bits.OnesCount64(hi&^(hi>>1))
}

// longest is the longest run of refusals among the last n answers (up to
// 128).
func (e *evidence) longest(n int) int {
	best, run := 0, 0
	for i := range min(n, 128) {
		if e.recent[i/64]>>(i%64)&1 == 0 {
			run = 0
			continue
		}
		run++
		best = max(best, run)
	}
	return best
}

// noisy is the key's share of refusals lately.
func (e *evidence) noisy() float64 {
	return e.latelyRefused / max(e.lately, 1)
}

// cut starts the counts for the next cut by rule 1 or 3 from here: each
// answer is evidence for one cut.
func (e *evidence) cut() {
	e.fresh, e.over = 0, 0
}

// dense reports whether refusals were 5 of the last 100 answers since the
// last cut by rule 1 or 3, or 3 of the last 20 (refusalsMin), and came
// twice as often as lately at odds of e^denseOdds (see record): the pace's
// doing; and the share of them it says the server refused, a low guess.
// Refusals at random, or a collision now and then, are fewer. A run of
// blipRun refusals or more, none accepted among them, counts as one.
func (e *evidence) dense() (float64, bool) {
	w := min(e.fresh, denseOver)
	n := bits.OnesCount64(e.recent[0]&mask(w)) + bits.OnesCount64(e.recent[1]&mask(w-64))
	nw := min(e.fresh, outageAnswers)
	near := bits.OnesCount64(e.recent[0] & mask(nw))
	switch {
	case !e.often:
		// Not more often than the key's refusals came lately: a server
		// that refuses a share at random, whatever the pace, draws three
		// in twenty by chance (at one in 33, at one refusal in nine).
		return 0, false
	case e.runs(w) < 2:
		// One run of refusals, none accepted among them: the server
		// refused everything for a moment (a gateway's blip), which a
		// pace over the quota does not do; its refusals come among
		// answers accepted, again and again.
		return 0, false
	}
	// Nor is such a run, of blipRun refusals or more, more than one
	// refusal beside the others: a blip 80 ms after a lone refusal made
	// two runs, dense (found in session 45: a Policy at the quota of a
	// window of 100 a second, behind a gateway that refused everything
	// for 100 ms every 4 s, cut its pace to 0.7 there and held it under
	// the blips that followed, 43.8 s for 3,000 requests where the peer
	// took 31.2 s; now 31.9 s).
	if l := e.longest(w); l >= blipRun {
		n -= l - 1
	}
	if l := e.longest(nw); l >= blipRun {
		near -= l - 1
	}
	switch {
	case near >= refusalsMin:
		return max(float64(near-1)/outageAnswers, float64(n-1)/float64(max(w, outageAnswers))), true
	case float64(n) >= denseShare*denseOver:
		return float64(n-1) / float64(max(w, outageAnswers)), true
	}
	return 0, false
}

// accept counts an answer the server accepted, to the attempt tk.
func (ks *keyState) accept(tk *ticket, now time.Time, at time.Duration) {
	ks.ev.run++
	ks.ev.taken++
	if l := ks.learning(); l != nil && l.on {
		if l.edge && l.pre.ans != 0 && ks.ev.recent[0]&2 != 0 {
			// The first answer accepted after a run of refusals that
			// cut the pace: a blip's? (learn.go, rule 9)
			ks.blip(now, at, bits.TrailingZeros64(^(ks.ev.recent[0] >> 1)), ks.ev.answers-1)
		}
		l.accept(tk) // learn.go
	}
}

// restart begins a new count of accepted answers: the pace was cut, or the
// key resumed after a pause (the server's bucket is full again). admitted is
// the key's admissions so far.
func (e *evidence) restart(now time.Duration, admitted uint64) {
	e.spanAt, e.spanOK, e.spanAdm, e.spanRun = now, 0, admitted, e.run
}

// accepting is the rate the server has been seen to accept since the count
// began, at a pace p with a bucket of burst, and whether that tells anything:
// counted long enough, and while the key sent at its pace (a key that sent
// less says nothing of what the server would have taken). admitted is the
// key's admissions so far.
func (e *evidence) accepting(now time.Duration, p rate.Limit, burst int, admitted uint64) (rate.Limit, bool) {
	span := (now - e.spanAt).Seconds()
	switch {
	case e.spanAt == longAgo, span < minEvidence.Seconds(),
		span*float64(p) < evidenceBursts*float64(burst),
		float64(admitted-e.spanAdm) < provenShare*span*float64(p):
		return 0, false
	}
	return rate.Limit(float64(max(e.spanOK-burst, 0)) / span), true
}

// refusedMuch reports whether the server refused more than a tenth of the
// answers to what the key sent since the count began (admitted of its
// admissions so far, sending of them still on their way): only then do
// its answers prove the quota below the pace. A pace that climbed back
// during the span sent less than it is now, and refusals at random take a
// share whatever the pace (found in review: with one request in a hundred
// refused at random, a configured pace climbing back after a cut was
// "proven" lower again and again, to a third of its quota).
func (e *evidence) refusedMuch(admitted uint64, sending int32) bool {
	answered := int64(admitted-e.spanAdm) - int64(sending)
	return float64(e.spanOK) < provenShare*float64(answered)
}

// slow reacts to a quota signal for the attempt tk, answered at now (at
// from the epoch): once
// per episode, it cuts the pace and the windows near their limit, or learns
// a pace, as the rules above say. beyond says the refusal came with quota
// headers that said enough remained for tk: a limit they do not describe
// refused it. unexpl says it came without them where the quota they describe
// does not explain it (see unexplained, pause.go): a gateway's, most often,
// that refuses a share at random.
func (ks *keyState) slow(tk ticket, now time.Time, at, wait time.Duration, beyond, unexpl bool) {
	a, ev := &ks.troubled().adapt, &ks.ev
	a.dense = false
	// A refusal the quota the headers describe does not explain, while
	// such refusals do not dominate the key's recent answers, is a
	// gateway's, most often: it cuts no configured pace, its windows
	// included (see unexplained, pause.go).
	gateway := unexpl && !ks.health.refusedMost()
	ev.record(true)
	ev.refusals++
	ks.checkDense(tk.adm, true)
	a.trial.answered(tk.adm, true, ks.atCeil())
	if len(ks.wins) > 0 {
		need := int32(3)
		if bits.OnesCount32(ks.health.refused) >= fewRefusals {
			need = spentNeed(ks.wins, &tk)
		}
		a.run.refused(&tk, need)
	}
	if a.run.no == 1 && len(ks.wins) > 0 {
		a.lone.refused(ks.wins, &tk, at, ks.sending, &a.run)
	}
	if tk.probe || tk.adm <= a.cutAdm {
		if !tk.probe && a.cutAdm != 0 {
			a.spent = true // another refusal of the episode: see rule 2
			if !a.run.cut && at >= a.noiseEnd && a.run.spent() && !gateway {
				// The episode's first refusal, taken for a lone one, has
				// company: the windows are cut now, and what was sent
				// before belongs to this episode.
				ks.cutWindows(tk.mono, at)
				a.cutAdm = ks.admitted
			}
		}
		return // the probe's pace is no pace; older attempts are the same episode
	}
	spent := a.spent
	a.cutAdm, a.spent = ks.admitted, false
	run, last := ev.run, a.episodeAt
	recurring := at-last < recurWithin
	ev.run, a.episodeAt = 0, at
	from, testRun := a.testFrom, a.testRun
	a.testFrom = 0
	p := rate.Limit(0)
	if ks.lim != nil {
		p = ks.lim.Limit()
	}
	if ks.learned() {
		if unexpl && !ks.health.refusedMost() {
			return // not the quota's (see unexplained): it delays only its own retry
		}
		ks.tr.x.learn.told = ks.tr.x.refusalsTold && !unexpl // (it carried quota headers: see unexplained)
		ks.relearn(now, at, p, wait)                         // learn.go
		return
	}
	if got, ok := ev.accepting(at, p, ks.pol.Burst, ks.admitted); ok && got < p*provenShare && ev.refusedMuch(ks.admitted, ks.sending) {
		ks.setPace(now, at, got, max(got, ks.pol.Rate*slowestShare)) // 1: proven lower
		ev.cut()
		a.provenAt = at
		a.check.on = false // what the server took proves it: no check of a cut before gives back a ceiling above it
		// Nor does a trial's verdict of noise, that of one on or of the
		// next in a row with those that helped before it, give back the
		// ceiling they began from (see sparse).
		a.trial.adm, a.trial.endedAt = 0, longAgo
		return
	}
	switch {
	case from == 0:
	case p > from || float64(run) > helpedShare*float64(testRun):
		a.unhelped = 0 // the cut helped
	case spent, run <= 2*(ks.pol.Burst+1):
		// The count was spent, or the server took little more than a
		// resume lets go at once (the probe and a Burst): the pace's
		// doing, not noise.
		a.unhelped = 0
	case a.unhelped < 1:
		a.unhelped++ // did not help, once
	default: // 2: did not help, twice
		a.unhelped, a.noiseEnd = 0, at+ceilEvery
		a.ceil = min(ks.pol.Rate, max(a.ceil, a.origin))
		ev.shownRecent()
	}
	if at < a.noiseEnd {
		return
	}
	share, dense := ev.dense()
	if t := &a.trial; !dense && t.more() && t.runs >= 2 && (a.resumed || t.oftenerThan(t.proof, trialOdds)) {
		// The trial's refusals are dense, and likelier twice as often as
		// its base than at it (or the key paused since the last cut):
		// the pace's doing. A trial stops at a refusal, and where one
		// request in 33 is refused at random, three come in its first 60
		// answers one trial in three. One run of refusals is a blip, not
		// the pace's (see dense). The base is the one a proof needs (see
		// begin): this cut proves the ceiling lower.
		share, dense = float64(t.k-1)/float64(max(t.n, outageAnswers)), true
	}
	if (wait > coarseWait || !a.run.cut && a.run.spent()) && !gateway {
		ks.cutWindows(tk.mono, at)
	}
	switch {
	case ks.lim == nil && ks.mirror() != nil && !beyond && !(unexpl && ks.health.refusedMost()):
		// The server's count paces the key (told.go): its refusal cut
		// the mirror's rate, if a bucket's. A refusal the headers do
		// not explain (see unexplained) is a gateway's, most often,
		// that refuses a share at random.
	case ks.lim == nil:
		// Nothing paces the key, or the headers describe a quota other
		// than the one that refused (a day's, while a second's limit
		// refuses; a Remaining that never falls; refusals without
		// headers, while the count held room, that came to dominate the
		// key's recent answers: found in session 43, a key told a
		// window of a million an hour, against an undescribed bucket of
		// 80 a second whose 429s carry no headers, paused at every one
		// and took 16x the ideal): a pace is learned from the refusals,
		// and the mirror, if any, still holds back what its count says
		// (told.go).
		ks.startLearning(now, at, wait, run, last) // learn.go
	case unexpl && !ks.health.refusedMost():
		// A configured pace refused without quota headers, while the
		// count they told held room or where the server's 429s carried
		// them: a gateway's refusal, most often, which no cut would end
		// (session 43: behind 3%
		// random 429s, a Policy at the quota of a bucket, a window or a
		// log told by headers took 1.25-1.28x the ideal, where
		// go-retryablehttp + x/time/rate took 1.05-1.08x). Rule 1 still
		// proves the quota lower when the server took far less than the
		// key sent, as an undescribed limit under the pace makes it.
	case recurring && dense: // 3
		if c := &a.check; !c.on || c.from < a.ceil {
			c.from = a.ceil // (a cut in a row with the last, still checked, keeps its from)
		}
		a.check.on, a.check.adm, a.check.share, a.check.n, a.check.k = true, ks.admitted, share, 0, 0
		est := p * rate.Limit(1-share) // the server's share of the pace
		a.trial.adm = 0                // a trial on ends: the cut is proven
		if a.resumed && ev.taken <= 2*(ks.pol.Burst+1) {
			// The server took no more than a resume lets go at once:
			// the pace is several times the quota.
			est = min(est, p*farCut)
		}
		ks.setPace(now, at, min(p*slowFactor, est), min(p*recurShare, est))
		ev.cut()
		a.dense = true
		a.resumed = false
		a.provenAt = at
	case recurring:
		ks.sparse(now, at)
	default: // 4: isolated
		to := p * slowFactor
		if got, ok := ev.accepting(at, p, ks.pol.Burst, ks.admitted); ok {
			to = min(p, max(to, got))
		}
		ks.setPace(now, at, to, 0)
	}
	if ks.lim != nil && !ks.learned() && ks.lim.Limit() <= p*realCut {
		a.testFrom, a.testRun = p, run
		if a.unhelped == 0 {
			a.origin = p
		}
	}
}

// setPace cuts the configured pace to to, and its ceiling to ceil if that
// is lower (0: the ceiling stays), within the floor; the quiet spell and the
// count of accepted answers start again.
func (ks *keyState) setPace(now time.Time, at time.Duration, to, ceil rate.Limit) {
	a := &ks.troubled().adapt
	floor := ks.pol.Rate * slowestShare
	to = max(to, floor)
	if ceil > 0 && ceil < a.ceil {
		a.ceil, a.ceilAt = max(ceil, floor), at
		a.ceilMoved()
	}
	ks.lim.SetLimitAt(now, to)
	a.quietAt, a.adjusted, a.calming = at, at, true
	ks.ev.restart(at, ks.admitted)
}

// refusalRun counts the answers to the attempts sent after a refusal, the
// run's first, to tell a window spent from refusals at random: a window
// spent refuses what follows it until it gives back, so its refusals are
// most of those answers, whether they come back together or one at a time
// (each then an episode of its own), and most of what was admitted from
// the first to the last of them. A window sends its N at once when it
// can: refusals at random come close together then, a few among many
// admitted (a 429 comes back at once, before the answers accepted among
// which it was sent: found in review, three random ones of a burst of 500
// were taken for a window spent, 1.8-7x the ideal). Accepted answers to
// attempts sent before the run's first refusal say nothing of it; their
// refusals count, and widen what it spans.
type refusalRun struct {
	from  uint64 // the first unit of the earliest attempt refused in the run; 0: no run
	last  uint64 // the last unit of the latest refusal counted
	units uint64 // the units of the refusals counted
	no    int32  // refusals counted, the first included
	ok    int32  // answers not refused counted
	need  int32  // refusals that can tell a window spent (see spentNeed)
	cut   bool   // the run cut the windows
	lone  bool   // lone refusals in a row took it for a window spent (see loneRefusals)
}

// spentNeed is how many refusals tell a window spent, for the attempt tk,
// while refusals are a fifth of the key's recent answers (fewRefusals;
// else three): three, but for windows near their limit that hold fewer
// than 30 attempts of its cost, a tenth of what they hold, at least one
// (found in review: a window of 100 units, 3 attempts of 30, set a third
// above the server's was refused one or two attempts a window, never
// three, half of them, and never cut; and, without the fifth, every random
// 429 to a window of 10 a second paused the key, 2-10x the ideal).
func spentNeed(wins []windowLog, tk *ticket) int32 {
	need := int32(3)
	for i := range wins {
		if w := &wins[i]; float64(w.count(tk.mono)) >= nearShare*float64(w.n) {
			need = min(need, max(1, int32(min(int64(w.n)/int64(tk.cost)/10, 3))))
		}
	}
	return need
}

// fewRefusals is the refusals among the key's last 20 answers from which
// a window that holds few attempts needs fewer refusals to be told spent.
const fewRefusals = 4

// refused counts a refusal of the attempt tk, which begins a run if none
// is on; need is spentNeed's for it.
func (r *refusalRun) refused(tk *ticket, need int32) {
	first := tk.adm - uint64(tk.cost) + 1
	if r.from == 0 {
		*r = refusalRun{from: first, last: tk.adm, units: uint64(tk.cost), no: 1, need: need}
		return
	}
	// A refusal of an attempt sent before the run's first counts too, and
	// widens what the run spans: those on their way together come back
	// in any order (found in review: four refused at once, the last sent
	// first, counted as one).
	r.no++
	r.units += uint64(tk.cost)
	r.from, r.last = min(r.from, first), max(r.last, tk.adm)
}

// answered counts an answer, not refused, to the attempt admitted adm: a
// run whose refusals are outnumbered ends.
func (r *refusalRun) answered(adm uint64) {
	if r.from == 0 || adm < r.from {
		return
	}
	if r.ok++; r.ok > r.no {
		*r = refusalRun{}
	}
}

// spent reports whether the run is a window's spent: three refusals or
// more (see spentNeed), most of the answers counted and most of the units
// admitted from the first to the last.
func (r *refusalRun) spent() bool {
	return r.lone || r.no >= r.need && r.no > r.ok && 2*r.units > r.last-r.from+1
}

// loneRefusals tells a window spent by refusals that come one at a time,
// each followed by answers accepted: a key with a worker or two, each
// refused request waiting its Retry-After, the next ones sent after the
// server's window gave back. Such refusals come window after window, each
// after about as many admissions as the one before (within a fifth: found
// in review, against a fixed window with Retry-After in whole seconds,
// 81, 121, 100, 81...), half a window's or more; those at random come
// after any number.
type loneRefusals struct {
	adm uint64        // the admission of the last one
	gap uint64        // the admissions from the one before to it
	at  time.Duration // when it came
	n   int8          // gaps in a row of about that length
}

const (
	loneRepeat  = 2 // gaps in a row about as long as the one before make a window spent,
	loneWithin  = 5 // within this share (1/5) of the longer,
	loneSending = 2 // while no more attempts than this are on their way
)

// refused notes the first refusal of a run, of the attempt tk refused at
// now, with sending attempts on their way: lone refusals each within three
// of the window's lengths of the one before, after about as many
// admissions as the gap before, half the window's or more, take the run
// for a window spent.
func (l *loneRefusals) refused(wins []windowLog, tk *ticket, now time.Duration, sending int32, run *refusalRun) {
	var w *windowLog
	for i := range wins {
		if float64(wins[i].count(tk.mono)) >= nearShare*float64(wins[i].n) && (w == nil || wins[i].Per > w.Per) {
			w = &wins[i]
		}
	}
	if w == nil || sending > loneSending {
		*l = loneRefusals{} // far from its limits, or many on their way: see refusalRun
		return
	}
	gap := tk.adm - l.adm
	switch {
	case l.adm == 0 || tk.adm <= l.adm || now-l.at > 3*w.Per || 2*gap < uint64(w.n):
		l.n, gap = 0, 0
	case l.gap > 0 && max(gap, l.gap)-min(gap, l.gap) <= max(gap, l.gap)/loneWithin:
		l.n++
	default:
		l.n = 0 // a first gap
	}
	l.adm, l.gap, l.at = tk.adm, gap, now
	if l.n >= loneRepeat {
		*l = loneRefusals{}
		run.lone = true
	}
}

// cutWindows cuts the key's windows near their limit (see cut) for a
// refusal of the attempt sent at sent, once per episode.
func (ks *keyState) cutWindows(sent, now time.Duration) {
	for i := range ks.wins {
		ks.wins[i].cut(sent, now)
	}
	ks.tr.adapt.run.cut = true
}

// cut lowers the window's n after a throttled answer to an attempt sent at
// sent, if the window was near its limit then.
func (w *windowLog) cut(sent, now time.Duration) {
	if float64(w.count(sent)) < nearShare*float64(w.n) {
		return
	}
	w.n = max(int(float64(w.n)*slowFactor), int(float64(w.N)*slowestShare), 1)
	w.movedAt = now
}

// paceAdapted is EventPace's Reason for a configured pace that 429s cut,
// or that climbs back.
const paceAdapted = "policy, adapted to 429s"

// climb raises what was cut, after a quiet spell: called with each accepted
// answer, at now (at from the epoch). A learned pace grows only while it holds requests back (otherwise
// raising it would prove nothing). A key never refused has nothing to raise.
// It reports whether a configured pace rose.
func (ks *keyState) climb(now time.Time, at time.Duration) bool {
	if ks.tr == nil {
		return false
	}
	a := &ks.tr.adapt
	if ks.learned() {
		ks.climbLearned(now, at) // learn.go
		return false
	}
	raised := ks.climbWindows(at) && ks.lim == nil
	if at-a.quietAt >= climbEvery && ks.lim != nil && ks.climbPace(now, at) {
		a.quietAt, a.adjusted = at, at
		return true
	}
	return raised
}

// climbPace raises a configured pace toward its ceiling, and the ceiling
// toward Policy.Rate, and reports whether either moved.
func (ks *keyState) climbPace(now time.Time, at time.Duration) bool {
	a, r := &ks.tr.adapt, ks.pol.Rate
	raised := false
	if quiet := max(at-a.quietAt, at-a.provenAt); a.ceil < r && at-a.ceilAt >= ceilEvery && quiet >= ceilEvery {
		// A step per quiet 30 s since it last moved: a key idle for an
		// hour comes back at its Rate (regression, found in review: one
		// step per answer left it at a tenth of Rate after an hour).
		// Sparse refusals (rule 3) break no quiet: a ceiling that a
		// chance cluster of them proved lower comes back.
		n := rate.Limit(min(at-a.ceilAt, quiet) / ceilEvery)
		a.ceil, a.ceilAt, raised = min(r, a.ceil+r*ceilShare*n), at, true
		a.ceilMoved()
	}
	if p := ks.lim.Limit(); p < a.ceil {
		n := rate.Limit((at - a.quietAt) / climbEvery) // a step per quiet second
		ks.lim.SetLimitAt(now, min(a.ceil, p+r*climbShare*n))
		raised = true
	}
	return raised
}

// climbWindows raises each cut window's n by a twentieth of N per quiet 30
// seconds, up to N, and reports whether one rose.
func (ks *keyState) climbWindows(now time.Duration) bool {
	raised := false
	for i := range ks.wins {
		if w := &ks.wins[i]; w.n < w.N && now-w.movedAt >= ceilEvery {
			n := int(min((now-w.movedAt)/ceilEvery, time.Duration(w.N))) // a step per quiet 30 s, idle ones too
			w.n = min(w.N, w.n+n*max(1, int(float64(w.N)*ceilShare)))
			w.movedAt, ks.tr.adapt.adjusted, raised = now, now, true
		}
	}
	return raised
}

// windowPace is, of a key paced by its Windows alone (no Rate), the
// slowest of those 429s cut, as a rate: n per Per; 0 when none is cut.
// Stats and EventPace show it as the key's pace: a window cut to 80 of
// 100 a second paced the key, and nothing said so (found in review).
func (ks *keyState) windowPace() rate.Limit {
	if ks.lim != nil {
		return 0
	}
	var r rate.Limit
	for i := range ks.wins {
		if w := &ks.wins[i]; w.n < w.N && w.Per > 0 {
			if p := rate.Limit(float64(w.n) / w.Per.Seconds()); r == 0 || p < r {
				r = p
			}
		}
	}
	return r
}

// keep reports whether the key's pace was adapted recently enough to be
// worth keeping when the key is otherwise idle.
func (ks *keyState) keep(now time.Duration) bool {
	if ks.tr == nil {
		return false // never refused: nothing adapted
	}
	a := &ks.tr.adapt
	adapted := ks.learned() || ks.lim != nil && ks.lim.Limit() < ks.pol.Rate
	for i := range ks.wins {
		adapted = adapted || ks.wins[i].n < ks.wins[i].N
	}
	return adapted && now-a.adjusted < forgetAfter
}

// mask has the n lowest bits set (none for n <= 0, all for n >= 64).
func mask(n int) uint64 {
	switch {
	case n <= 0:
		return 0
	case n >= 64:
		return ^uint64(0)
	}
	return 1<<n - 1
}

// trial is a test of whether sparse refusals are the pace's doing (rule
// 3): the ceiling lowered a twentieth, do they fall to a third? A
// sequential test: each answer adds to the log-likelihood ratio of
// "fell" over "as before" what it says, and the first bound reached,
// +trialOdds or -trialOdds, tells.
type trial struct {
	adm        uint64        // answers to attempts admitted after this count; 0: no trial on
	at         time.Duration // when it began
	from       rate.Limit    // the ceiling before
	base       float64       // the share of refusals before
	llr        float64       // the log-likelihood ratio of its answers: refusals fell to a third of base, over as before
	n, k       int32         // answers and refusals counted
	chainFrom  rate.Limit    // the ceiling before the first of the trials that helped in a row, each begun within 30 s of the last
	chainBase  float64       // the share of refusals before it
	endedAt    time.Duration // when the last trial helped
	quietUntil time.Duration // until then sparse refusals cut nothing: they were shown to be noise
	atN, atK   int32         // answers and refusals counted while the pace was at the ceiling, since it last moved
	proof      float64       // the share of refusals before that a proof is judged against (see begin)
	drop       float64       // helped: refusals fell to base/drop or fewer (0: trialDrop)
	runs       int32         // runs of refusals counted: refusals with no answer accepted between them are one
	refused    bool          // the last answer counted was a refusal
	blip       uint64        // > 0: a trial ended as one run of refusals; the run goes on until an attempt admitted after this one is accepted
}

const (
	noiseShare = 0.7 // refusals at this share of a chain's first base or more: none of its trials helped
	trialDrop  = 3   // a trial helped when refusals fell to a third of the base or fewer,
	trialOdds  = 3.0 // with odds of e^3 (20) to 1; or did not, at those odds
	trialMore  = 2   // refusals twice as often as before, or more, are the pace's still
)

// answered counts an answer to the attempt admitted adm, at a pace at
// the ceiling or near it (atCeil).
func (t *trial) answered(adm uint64, refused, atCeil bool) {
	if !refused && adm > t.blip {
		t.blip = 0 // the run of refusals is over
	}
	if t.adm == 0 && atCeil {
		if t.atN == math.MaxInt32 {
			t.atN, t.atK = t.atN/2, t.atK/2 // a share kept for ever
		}
		t.atN++
		if refused {
			t.atK++
		}
	}
	if t.adm == 0 || adm <= t.adm {
		return // no trial on, or sent before it
	}
	if math.Abs(t.llr) >= trialOdds {
		// Told: the next refusal acts on it. A learned pace's trial
		// (drop learnDrop) goes on past its odds until its answers say
		// "as often" or "twice as often" (see tried): its counts go on
		// too, or oftener and asBefore would judge the answers of its
		// first moments only, and trialMost would never come.
		if t.drop == learnDrop {
			t.n++
			if refused {
				t.k++
			}
		}
		return
	}
	drop := t.drop
	if drop == 0 {
		drop = trialDrop
	}
	t.n++
	if refused && !t.refused {
		t.runs++
	}
	t.refused = refused
	if refused {
		t.k++
		t.llr -= math.Log(drop)
	} else {
		t.llr += math.Log1p(-t.base/drop) - math.Log1p(-t.base)
	}
}

// oftener reports whether the trial's answers show refusals trialMore
// times as often as before or more, at odds of e^odds to 1: the likelihood
// of the share they show (at least trialMore times the share before), over
// that of the share before. A count alone (more refusals than trialMore
// times the share before would make) is no evidence: the trial stops at a
// refusal, so its share runs high (regression: behind 3% random 429s, a
// learned pace's trial that stops at its second refusal found it twice as
// often as before about one time in four, and the cut it tried stood).
func (t *trial) oftener(odds float64) bool { return t.oftenerThan(t.base, odds) }

// oftenerThan is oftener with the share before taken as base.
func (t *trial) oftenerThan(base, odds float64) bool {
	if t.k == 0 || trialMore*base >= 1 {
		return false // none yet, or none can come twice as often
	}
	k, n := float64(t.k), float64(t.n)
	s := min(max(k/n, trialMore*base), 0.99)
	return k*math.Log(s/base)+(n-k)*(math.Log1p(-s)-math.Log1p(-base)) >= odds
}

// asBefore reports whether the trial's answers are at least as likely with
// refusals as often as before as with trialMore times as often.
func (t *trial) asBefore() bool {
	if trialMore*t.base >= 1 {
		return true // none can come twice as often
	}
	k, n := float64(t.k), float64(t.n)
	return k*math.Log(trialMore)+(n-k)*(math.Log1p(-trialMore*t.base)-math.Log1p(-t.base)) <= 0
}

// more reports whether the trial's refusals are dense: the pace's doing,
// still.
func (t *trial) more() bool {
	return t.adm != 0 && t.k >= 3 && float64(t.k) >= denseShare*float64(t.n)
}

// sparse answers a refusal among few, at now (at from the epoch): a trial
// of a ceiling a twentieth lower begins, or the trial on is told noise
// (rule 3).
func (ks *keyState) sparse(now time.Time, at time.Duration) {
	a, ev := &ks.tr.adapt, &ks.ev
	t := &a.trial
	switch {
	case at < t.quietUntil, t.blip != 0:
		return
	case t.adm != 0 && t.llr <= -trialOdds && t.k >= 3 && t.runs < 2:
		// Its refusals came in one run, none accepted among them: the
		// server refused everything for a moment, which tells nothing
		// of the pace (found in review: five in a row every 10 s, each
		// run told "more often" or dense, cut the pace and proved its
		// ceiling lower, faster than it climbs back: 9.3x the ideal,
		// where go-retryablehttp + x/time/rate took 1.006x). The ceiling
		// goes back; the next sparse refusal after the run tries again.
		// The run's own refusals after this one begin no trial: until
		// an attempt sent since the trial began is accepted, they are
		// the same moment's (regression: the run's last refusal began a
		// trial of a ceiling 5% lower, the quiet seconds after the run
		// told it "helped", and the ceiling, proven, sank 5% a run:
		// 1.41x the ideal where the peer took 1.006x; refusing
		// everything for 100 ms every 20 s, 1.33x).
		a.ceil = max(a.ceil, t.from)
		t.adm, t.blip = 0, t.adm
		a.ceilMoved()
		return
	case t.adm != 0 && t.llr <= -trialOdds && float64(t.k) > trialMore*t.base*float64(t.n):
		// Refusals came more often than before: the share before was
		// counted while the key sent less than its ceiling, and the pace
		// is the cause still. The lower ceiling stays, in a row with the
		// next trial, which begins from it.
		base := float64(t.k-1) / float64(t.n)
		t.endedAt = at
		try := a.ceil * recurShare
		t.begin(ks.admitted, a.ceil, ev, at)
		t.base = base
		ks.setPace(now, at, min(ks.lim.Limit(), try), try)
		return
	case t.adm != 0 && t.llr <= -trialOdds:
		back := t.from
		if t.chainFrom > back && float64(t.k) >= noiseShare*t.chainBase*float64(t.n) {
			back = t.chainFrom // none of the trials in a row helped
		}
		a.ceil = max(a.ceil, back)
		t.adm, t.quietUntil = 0, at+ceilEvery
		ev.shown(int(t.n), int(t.k))
		a.ceilMoved()
		return
	case t.adm != 0 && at-t.at < ceilEvery:
		return
	}
	// No trial on, or one that told nothing in 30 s: the ceiling it
	// tried stays, and a new one begins.
	try := a.ceil * recurShare
	t.begin(ks.admitted, a.ceil, ev, at)
	ks.setPace(now, at, min(ks.lim.Limit(), try), try)
}

// begin starts, at now, a trial of a ceiling cut from the ceiling from
// after the key's admission adm: one in a row with the last if that one
// helped within 30 s.
func (t *trial) begin(adm uint64, from rate.Limit, ev *evidence, now time.Duration) {
	// The share of refusals at the ceiling, but the one that began the
	// trial: trials begin at a refusal. Counted over too few answers, the
	// key's since its first trouble, as one in a hundred at least.
	//
	// A proof (a trial's refusals dense, see slow) is judged against the
	// same share where it was counted over enough answers, but against
	// the key's since its first trouble with the prior's one in 50 over
	// trialBefore more where not: a few dozen answers with one refusal
	// among them, the base taken as one in a hundred, made the first
	// chance cluster of a gateway's random 429s "twice as often" at e^3,
	// and the ceiling, proven a quarter lower, climbs back only 5% of
	// Rate per quiet 30 s (regression: TestConfiguredModel, 16 seeds, a
	// Policy at its quota behind 3% random 429s, 1.27x the ideal on
	// average, six seeds 1.34-1.70x, where go-retryablehttp + x/time/rate
	// took 1.07x). The low base stays where a mistake is cheap: a trial
	// whose refusals came more often than it chains a ceiling 5% lower
	// (see sparse), which noise then gives back.
	base := float64(max(t.atK-1, 1)) / float64(max(t.atN, 1))
	proof := base
	if t.atN < trialBefore {
		base = float64(max(ev.refusals-1, 1)) / float64(max(ev.answers, trialBefore))
		proof = (float64(max(ev.refusals-1, 0)) + latelyPrior*trialBefore) / float64(ev.answers+trialBefore)
	}
	chainFrom, chainBase := from, base
	if now-t.endedAt < ceilEvery {
		chainFrom, chainBase = t.chainFrom, t.chainBase
	}
	*t = trial{adm: adm, at: now, from: from, base: base, proof: proof, chainFrom: chainFrom, chainBase: chainBase,
		quietUntil: t.quietUntil, endedAt: longAgo}
}

// trialBefore is the answers at the ceiling that tell the share of
// refusals there.
const trialBefore = 100

// judge ends a trial whose answers show refusals fell: the lower ceiling
// holds.
func (ks *keyState) judge(at time.Duration) {
	a := &ks.tr.adapt
	if t := &a.trial; t.adm != 0 && t.llr >= trialOdds {
		t.adm, t.endedAt = 0, at
		a.provenAt = at
	}
}

// atCeil reports whether the key's configured pace is at its ceiling, or
// near it.
func (ks *keyState) atCeil() bool {
	return ks.lim != nil && ks.tr != nil && ks.lim.Limit() >= ks.tr.adapt.ceil*recurShare
}

// ceilMoved restarts the count of answers at the ceiling.
func (a *adaptation) ceilMoved() {
	a.trial.atN, a.trial.atK = 0, 0
}
