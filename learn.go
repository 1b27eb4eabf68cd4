package throttle

import (
	"math"
	"math/bits"
	"slices"
	"time"

	"golang.org/x/time/rate"
)

// This file holds the pace a key learns when nobody tells it the quota: no
// Policy.Rate, no windows, no quota headers, only 429s and their
// Retry-After (issue 9, points 3 and 4). The server's count — a bucket, a
// window, a log of recent requests — is seen only through its refusals, and
// the rules are the same for all three. A refusal is news only when it
// answers an attempt sent at the pace in force: the refusals of attempts
// sent before the last cut neither cut the pace again nor count below. Nor
// is a refusal without quota headers, once the server's refusals of the key
// carried them (a server that sends them on its 429s only): a gateway's, most
// often, it delays only its own retry, unless refusals dominate the key's
// recent answers (see unexplained, pause.go).
//
//  1. First guess. The key's first refusal pauses it and gives it a pace:
//     the answers the server accepted before, over the time from the first
//     answer (the first since the key last resumed, if it did since the last
//     refusal) to the end of the Retry-After (refused before any came back
//     accepted, with a wait of 2 s at most, those on their way then that
//     came back accepted, from the refusal to the resume). A wait stated
//     in whole seconds (delay-seconds; a date, which rounds up to the
//     server's next whole second however short the wait; a reset of a
//     second or more; a wait of 0, or a date already past, which says
//     nothing of when the count gives back, is taken as none stated, a
//     second) may be late by up to one, so the key pauses only
//     for what surely remains and peeks into the last second: one request
//     1/8 s in, then, each time the peek is refused, one twice as far from
//     its refusal, until the wait first asked for has passed (the refused
//     requests themselves wait their whole Retry-After). A server that
//     gives back gradually, a bucket, takes the first peek: the guess is
//     then the answers accepted over the time until it, with those that
//     came during the pause. One that refuses the first peek keeps the
//     guess, over the whole wait asked for: a window or a log, or a bucket
//     whose first tokens went to requests already on their way. Held to the
//     end of the wait and given back at once, it is a window, and the
//     guess about its rate: the pace cruises from there (rule 5). Given
//     back earlier, it grows as a bucket's (rule 2), and a window's reset
//     that came early is set right by rule 4. A first peek that no request
//     took (every one on its way was refused and waits its own
//     Retry-After, as a window's first burst of 16 is) tells neither: the
//     pace grows, but a pause in its search probes, as a window's would,
//     until the first peek of a later pause tells (refused: the count was
//     held; taken in time and accepted: a bucket).
//  2. Search. From a bucket's guess the pace doubles every 150 ms until a
//     refusal, then searches between the last pace that held and the
//     refused one, a step per Retry-After (within 75 ms and 1 s), or as
//     long as a pace a sixteenth over the quota takes to spend what the
//     bucket held at first, if shorter (see searchStep), until they are
//     within a sixteenth: it cruises at the faster that held. A
//     pace has held a whole test when twice that went by unrefused (a
//     window counts over its whole length). A pace rises only once the key
//     sent at least 0.8 of it since it was set, the key resumed, or the
//     key came back from idle (nothing accepted for a test and two of the
//     pace's turns): a pace that its round trips, not the pace, kept it
//     from reaching proves nothing, and an idle spell is no such proof. The pacer of a learned pace holds two tokens, so a turn
//     taken late (a waiter woken late on a busy machine) leaves its time
//     to the next instead of losing it; one, when the server took one
//     request before its first refusal (see resumeLearned). A refusal
//     of a pace that grows from a first pause that told nothing (no
//     request took its peek, each waited out its own Retry-After, or a
//     later peek ended it: the guess is a lower bound), to a key of
//     more than two RoundTrips, is held: the growth stops until 16
//     answers come back accepted, and goes on; a second refusal before
//     that is the growth's, and cuts as above. (Regression, found in
//     session 40: on loopback a random 429 at 10 a second, the second
//     step of a growth from a guess of 5, held a bucket of 100 a second
//     under 10 for a minute, and the row of 3% random 429s took 3.2-4.0x
//     the ideal in the 9 runs of 16 whose first burst drew 16 refusals;
//     TestLearnedModel's fast-n3, 48 seeds, 2.38x, 8.0x at worst, now
//     1.99x and 3.6x. A client of one or two at a time is not held: the
//     second refusal stalls one of its few RoundTrips a whole
//     Retry-After, and review 37's one-at-a-time rows took 5-10% longer
//     held.) So is a refusal of a bucket's first guess before the
//     growth's first step (the first pause ended at its first peek): the
//     guess is what the bucket's depth let through over the pause, a
//     lower bound too (a random 429 on the second request after the
//     resume left a bucket of 100 a second cruising at 37 for 11 s).
//  3. Collisions. A refusal of a learned pace is a collision, not an order to
//     stop: the refused request waits its own Retry-After, and the key goes
//     on, cruising at 0.95 of its pace but no faster than the pace its
//     probes rose from or, when the step refused rose more than an
//     eighth, 0.95 of the step below, whichever is faster (searching, at
//     the last pace that held). The answers
//     accepted since the refusal before (with no pause between, the
//     server's count was at its limit at both ends), over that
//     time, are the rate the server took, exactly so if the key sent faster:
//     counted over 20 answers or more, the pace goes no lower than that rate
//     or 0.97 of itself, whichever is lower, and down to 0.97 of that rate
//     when the server took less than 0.9 of what the key sent. A refusal
//     before 20 answers came back accepted says the pace is far too fast:
//     it goes to the share of the key's last 20 answers not refused for
//     the quota (any answers, those to attempts sent before the last cut
//     too; a 5xx counts as not refused), within half and 0.95 of itself,
//     and the search stays below the pace refused (a slow quota refuses
//     before 20 answers every time). (Regression: the rate accepted in between, counted
//     over the two to five answers that came back, was as often the
//     answers' lag as the server's: behind 3% random 429s, each refusal
//     that came soon after another, nearly one in two, cut the pace by
//     15-50%.) But a pace the server bore (it accepted 0.9 of it or more
//     in the last whole second), refused no more often lately than before
//     (among the up to 108 answers before the last 20, as many refusals
//     as among the 20 but one, at least: refusals that come as they came,
//     not a quota newly spent or another client growing into it), counts
//     only the refusals since the last cut: each refusal is evidence for
//     one cut. (Regression, found in session 47: behind 3% random 429s,
//     a cluster of four in five answers at a pace of 61 on a bucket of
//     100 a second was counted again at each refusal in the 20 answers
//     after it, 20-30% each, and the pace fell to 22 in 0.8 s, where it
//     sat for 30 s, every probe held short of the refused paces just over
//     it; TestLearnedModel over 48 seeds: see the commit.)
//  4. Spent. Refusals that keep coming after a cut (3 of the key's last 20
//     answers) or a wait over 2 s pause the whole key, peeking into the
//     last second of the wait as in rule 1; the refusals of attempts sent
//     before the pause extend it only when they ask for a later end. When
//     they came with nothing accepted between them (the server's count is
//     held until it gives back, as a window's until its reset), or, to a
//     key that took its quota for a window, within half a test of the cut
//     (a window refuses until its reset: they are the same news), the pace
//     goes back to the fastest that held a whole test, but not below half
//     of itself, and when the key resumes, no higher than what the server
//     took over the cycle: the answers accepted from the resume before to
//     the reset, which came between the last peek refused and this resume
//     (halfway is taken), again not below half; far below what was
//     refused, it probes again a test later, from a sixteenth, or, if the
//     pause came during the search of rule 2 and the first pause ended at
//     its first peek, searches on. To a key whose first pause ended at its
//     first peek (a bucket), a pace over the last that held (a search's
//     step, a probe's) that paused it is the slowest refused: the search
//     and the probes stay below it. (Regression, found
//     in session 47: a quota that fell from 100 a second to 92 amid 2%
//     random 429s; a trial took the refusals of a pace of 100.6 for noise
//     and put back the search it had cut, between 100.6 and 201; its step
//     to 142 paused the key, which went back to 100.6 with the search's
//     bound still 201, and so every 2.5 s for 13 s: with rule 3's count
//     since the last cut alone, 72 429s of the quota after the fall in one
//     seed of 32 (19 before it), where the other seeds drew 2-37; now 48,
//     the bound falling at each pause, 11.8 a seed on average where 12.1
//     were. Taken for every pace that paused such a key, a window taken
//     for a bucket drew 74 429s where it drew 53.)
//  5. Probes. A cruising pace waits 2 quiet seconds after a cut, and,
//     unless the cut answered a refusal of a pace that had not risen since
//     its last cut once refusals were found to be noise on the key, at
//     least 200 answers' worth of itself, or of the fastest pace that held
//     a whole test in the last minute if faster (so that probes that end
//     in a refusal cost at most one 429 in 200 of what the quota serves; a
//     minute at most, so a quota under 3.3/s that grows is found; a noise
//     refusal cost no probe, and a pace that a first guess or a search
//     found while another client spent most of the quota finds what that
//     one leaves when it ends); a refusal of a pace that had not risen
//     since its last cut (not since a resume) cost no probe, and does not
//     begin that count again: the probes wait their quiet seconds, or what
//     remains of the hold the last cut set, if longer; then probes
//     upward by 1%, then 2%, 4%… up to 25% (up to doubling while below half
//     the last pace refused), but no more than halfway (geometrically) to
//     the last pace refused while more than a sixteenth below it, each
//     step held a test, or a quarter test once past the last pace refused
//     (but for a window, which refuses only at its reset); a sixteenth
//     past it, it grows again as in rule
//     2, at once: the quota grew, or another client of it left. A probe
//     that ends in a pause doubles the wait before the next, up to a
//     minute: each costs a whole Retry-After.
//  6. Noise. A server that refuses a share of the requests whatever the
//     pace is no quota to find: a cruising pace refused after 8 answers or
//     more, then cut to 0.7 of that pace or less and refused again after
//     no more than 1.5 times as many, goes back to 0.95 of where the cuts
//     began, and for 30 seconds its refusals cut nothing (see noise).
//  7. Trials. Once three refusals came to the key while it cruised, over
//     50 answers or more, and no more than 7% of them, and no more than
//     7% of the answers since the third to last (up to the ninth to last:
//     another client of the quota growing into the room a cut leaves
//     makes refusals come close together, and taken for noise they let
//     the key hold a pace that starves the other; see
//     TestTwoTransportsDoNotTakeEachOthersRefusalsForNoise), the cut of a
//     refusal is tried when the pace cruises on after it (one that came
//     sooner than 20 answers after the one before, too, once refusals
//     were found noise on the key, when it was alone among the last 20
//     and cut by 5%; a deeper cut searches: found in review 36, tried
//     before, the refusals of another client growing into the quota
//     were taken for noise, and a late joiner's job took 1.25x the ideal
//     where 1.21x was, one seed 1.05 -> 1.59x) (see
//     tried): do refusals fall to a fifth of their share so far, or of
//     their recent share if higher? A sequential test of each answer
//     after the cut tells, at
//     odds of 7 to 1, within 400 answers, and 4 s or the probes' own
//     hold after a cut if longer (a slow pace's); the probes wait for it.
//     Not told in time, the answers decide by the likelier share: a
//     fifth, as often as before, or twice as often. As often as before,
//     and that likelier than twice as often (the test stops at a
//     refusal, so the share it saw runs high: it is not noise until the
//     answers after it say so), they are noise: the pace, the slowest
//     refused, the probe's step and its time go back to where they were
//     before the cut, and for 30 seconds refusals cut nothing unless they come three
//     times as often as the trial saw them (a CUSUM test, in any mode; the
//     cut they then make is not tried); while the test leans that way (above
//     zero), the probes wait: another client's refusals, taken for noise,
//     let the key climb into its share. The quiet is for the pace the noise
//     was found at: refusals that pause the key (rule 4) after the probes
//     took it more than a sixteenth past that pace end it, and so do
//     refusals that came as a run, three or more with none accepted among
//     them (a window or a log spent refuses all until it gives back;
//     noise refuses three in a row about once in a thousand refusals at
//     3%), but to a bucket, where such a run is a gateway's blip (rule 9)
//     unless runs are the quota's there; another pause of a pace nearer
//     it cuts nothing. Twice as often as before (at the same
//     odds, see oftener), they are the pace's: it is cut again. A count
//     of them is not: three or more in the trial's answers, a twentieth
//     of them or more, once ended it as dense, but the third of a share
//     of 3% comes within 60 answers in one trial in four by chance, of 5%
//     in more than one in two, and each such trial cut the pace again (found in
//     session 48: behind 3% random 429s, a learned pace sank from 31 to 23
//     a second in 10 s of trials ended so, on a bucket of 100). A pause
//     ends a trial.
//     (Regression: a gateway refusing one request in a hundred at random
//     took a pace learned at a bucket of 100 a second down to 54 on
//     average in 2,000 requests, 2.05x the ideal; now it ends at 100 on
//     average, 1.62x; a slow pace's trials: see climbLearned. Tried up to
//     5% only, five random refusals in a hundred were tried one time in
//     two, their share running over 5% as often as under, and the pace
//     sank untried: 20x the ideal, 7.7x since 7%. Tried only after 20
//     answers, and once 100 had come while cruising, the cuts of refusals
//     that came sooner, nearly one in two at 3% (1 - 0.97^20), and those
//     before the first 100, sank the pace untried: TestLearnedModel, 48
//     seeds, a bucket of 100 a second behind 3% random 429s 2.24x the
//     ideal, now 2.07x; behind 5%, 7.96x, now 6.86x; a log of 200 a second
//     behind 3%, 2.33x, now 2.11x; with quick cuts tried only once noise
//     was found, 2.09x, 6.94x and 2.15x. Counting a search's answers at a
//     pace the server served in each of the last two seconds too took them
//     to 1.97x, 5.16x and 2.05x, but two transports on one bucket, told
//     nothing, without noise, then drew runs of 75-90 429s of 4,000 where
//     62 was the worst, and counted only once noise was found it gained
//     nothing: not kept, review 36.)
//  8. Served. For a minute after refusals were found to be noise (rules 6
//     and 7), a refusal that the pace answers with a cut (rule 3: not one
//     that pauses the key, rule 4) takes it 5% lower at least, and no lower
//     than 0.8 of the answers the server accepted in the median second of
//     the last 30: the server took that many, and noise refuses whatever
//     the pace. Outside the quiet, a cut after noise was found sank the
//     pace one refusal at a time until the next trial told noise again,
//     and each trial restores only the pace its own cut began from; a
//     quota that fell refuses densely, and its refusals still cut by 5%
//     at least and pause the key. (Regression, TestLearnedModel over 48
//     seeds, with rule 7's 7%: a learned pace behind 3% random 429s took
//     1.95x the ideal on a window of 100 a second, 2.95x on a log of 200 a
//     second, 2.47x on a bucket of 100 a second; now 1.60x, 2.33x, 2.24x.
//     Found in review 35: a floor that held a pace already under it, not
//     cut at all, kept a bucket that halved amid 1% random 429s over it
//     for seconds, 309 429s where 40 had been; and the most in a second,
//     not the median, took a deep bucket's burst for its rate.)
//  9. Blips. A run of three refusals or more with none accepted among them
//     (learnedBlip), to a key whose first pause ended at its first peek,
//     taken in time (a bucket), is a gateway's blip, not the quota's: over
//     a bucket, a pace no more than twice its rate (the search's steps,
//     the probes') is refused among answers accepted, one in two at most.
//     The cut the run's first refusal made is undone, but a growth's (a
//     pace that doubles past a window's rate is refused by runs): the
//     pace, the slowest refused, the search's mode, its step and its time
//     go back (the fastest pace held, if the cut lowered it, stays so), a
//     trial the cut began ends, and the pause the run may have brought
//     cuts nothing (rule 4): the refused
//     requests wait their Retry-After, the key peeks into it as rule 1
//     says. Not when the run came within 2 s of another such run
//     (blipQuiet), nor when its first refusal carried quota headers (the
//     server's own, sent on its refusals); and never again on the key
//     once a run undone came again within 2 s: a window whose first reset
//     fell within the first peek looks like a bucket, and refuses a pace
//     over it at each reset.
//     (Regression, found in session 45: behind a gateway that refused
//     every request for 50 ms every 4 s, each blip's first refusal cut the
//     pace and set the slowest refused, its pause cut the pace to the first
//     guess, and the search began again below the quota: 3,000 requests
//     on a bucket of 100 a second took 45.8-49.4 s, 51.4-53.3 s behind
//     100 ms blips, where go-retryablehttp + x/time/rate told the quota
//     took 31.0-31.2 s; now 31.6-32.8 s. TestLearnedModel over 48 seeds,
//     where no gateway blips: a bucket alone, clean or behind random 429s,
//     and every key told by headers, unchanged but for 0.01x; a window or
//     a log taken for a bucket has a run undone now and then: a window of
//     100 a second behind 3% random 429s 1.52x the ideal and 25.5 429s a
//     job, now 1.50x and 32.2; a log of 200 a second behind 3%, 2.12x and
//     13.3, now 2.04x and 13.9; the clean window 27.4 429s, now 27.6; two
//     transports on one bucket, whose refusals come in runs when the other
//     drains it, 28.0 and, behind 1% random 429s, 33.1, now 29.1 and 35.7
//     (these two vary by execution).)
//
// Two transports that share a quota without knowing of each other each learn
// a share of it: refusals fall on each in proportion to its pace and each
// cut is in proportion to the pace, so the faster one is cut more; each
// probes up again when the other leaves. (The shares converge slowly: the
// cuts are few.)
const (
	growEvery    = 150 * time.Millisecond // a growing pace doubles after this long unrefused
	peekFirst    = time.Second / 8        // the first peek into the last second of a wait
	bisectTol    = 1.0 / 16               // the search ends when what was refused is within this share of what held
	longestTest  = 2 * time.Second        // a whole test is twice the server's wait, at most this long
	cutShare     = 0.95                   // a collision cuts the pace to this share of itself
	quickShare   = 0.5                    // a refusal soon after another cuts it to this share at most
	cruiseShare  = 0.97                   // or to this share of what the server was measured to accept
	provedShare  = 0.9                    // when that is below this share of the pace since the last refusal
	minCount     = 20                     // answers accepted between two refusals that make a measure
	reachedShare = 0.8                    // a pace is raised only once the key sent this share of it since it was set
	probeHold    = 2 * time.Second        // after a cut, the pace holds this long before probing
	holdCount    = 200                    // and at least this many answers' worth of the pace
	longestHold  = time.Minute            // nor ever longer than this
	probeFirst   = 0.01                   // a probe raises the pace by this share of itself, doubling each step
	probeMost    = 0.25                   // up to this share
	bigStep      = 1.0 / 8                // a probe refused at a step over this falls back to 0.95 of the step below
	quickenBy    = 4                      // past the last pace refused, a probe's step holds a test over this
	noiseRun     = 8                      // rule 6: refusals after at least this many answers may be noise
	noiseCut     = 0.7                    // when the pace is this share of where they came, or less
	noiseFor     = 30 * time.Second       // and then cut nothing for this long
	servedShare  = 0.8                    // rule 8: a cut after noise was found goes no lower than this share of the median second served
	servedOver   = 30                     // over this many seconds
	servedFor    = time.Minute            // for this long after noise was found
	bearShare    = 0.9                    // rule 3: a pace the server accepted this share of in the last whole second counts a quick refusal's share since the last cut

	learnDrop   = 5             // rule 7: a cut helped when refusals fell to this share of before or fewer
	trialMost   = 400           // a trial not told in this many answers is decided by the likelier share,
	trialFor    = 2 * probeHold // or in this long, once the probes' hold is over
	learnOdds   = 2             // a learned pace's trial tells at these odds (e^2, 7 to 1), within its hold
	trialAfter  = 3             // refusals while cruising, counted, before the first trial
	learnBefore = 50            // among this many answers or more
	learnMore   = 3             // quiet ends when refusals come this many times as often as the noise
	noiseMost   = 0.07          // refusals more often than this so far, or lately (recent), are not tried (rules 3 and 6 answer them)
	bgMost      = 0.25          // the noise's share the CUSUM takes, at most

	learnedBurst = 2 // a learned pace's tokens: a waiter that wakes late (a busy machine) does not lose the time

	learnedBlip = 3               // rule 9: a run of this many refusals, none accepted among them, to a bucket is a blip's
	blipQuiet   = 2 * time.Second // unless another run came within this long

	loneAnswers = 16 // rule 2: a growth refusal after a first pause that told nothing, or of a bucket's first guess, holds the growth until this many answers clear it
	loneRefs    = 2  // for a key with more RoundTrips than this: one fewer waits out a second refusal's Retry-After

	slowestRate = rate.Limit(0.1) // a learned pace never drops below this
	fastestRate = rate.Limit(1e6) // nor grows above this; as hi: nothing refused yet
)

// learnMode is where a learned pace is in its search for the quota.
type learnMode uint8

const (
	modeGrow   learnMode = iota // rule 2: doubling, to the first refusal
	modeSearch                  // rule 2: between the fastest pace held and the slowest refused
	modeCruise                  // rules 3 and 5: small cuts, slow probes
)

// learner is a key's record of what 429s taught it, kept in its rare needs:
// its times are offsets from the transport's epoch.
type learner struct {
	on      bool // the key's pace is learned
	edge    bool // since is a refusal (the server's count was at its limit), not a resume
	refused bool // refused since the pace was last set (the same news only: others set it anew)
	first   bool // the pace is the first guess, its pause not yet over
	held    bool // refusals since the last real one were the same news: the count is held
	window  bool // the first pause showed a window: held to the end of the wait, then given back at once
	blind   bool // first: refused before any answer was accepted, the guess is the pause's answers alone
	gradual bool // the first pause ended at its first peek: the server gives back gradually, a bucket
	untold  bool // no pause yet had its first peek taken in time: how the server gives back is not known
	bucket  bool // the first pause ended at its first peek, taken in time (gradual, never untold): rule 9
	byPace  bool // the key's last admission waited for the pace's turn: a client that sends one at a time has none waiting when its answer comes
	capped  bool // the pace is a probe's step that went only halfway to the slowest pace refused (see climbLearned)
	lone    bool // rule 2: a growth refusal, after a first pause that told nothing or of a bucket's first guess, waits for loneAnswers answers or a second refusal
	mode    learnMode

	step   float64    // the next probe's rise, a share of the pace
	lo, hi rate.Limit // the pace to fall back to; the slowest refused (fastestRate: none)
	tested rate.Limit // the fastest pace that held a whole test unrefused
	low    rate.Limit // the pace when the count began
	shown  rate.Limit // the pace last told in an EventPace

	test   time.Duration // how long a pace must hold to count as held
	hold   time.Duration // how long a cut pace waits before it probes
	costs  bool          // the last cut of the cruising pace answered a probe's refusal, or a refusal in a count begun at a resume, or came before noise was found: a probe may cost a 429 (see holdFor)
	risen  bool          // the last cut of the cruising pace answered a pace that had risen since the cut before (a probe's), or a count begun at a resume
	heldAt time.Duration // when the last pause that set the probes' hold came, or the first pause (see heldLearned)
	next   time.Duration // the pace may rise from then on
	setAt  time.Duration // when the pace was last set

	reachAt  time.Duration // the pace was last set, or the key resumed or came back from idle, then
	reachAdm uint64        // the key's admissions then
	lastOK   time.Duration // the last accepted answer came then

	cut         uint64        // attempts admitted up to this one were sent before the last cut
	cutAns      int64         // the key's answers (ks.ev.answers) at the last cut: the quick share counts those after it (rule 3)
	since       time.Duration // accepted answers are counted from here
	accepted    int           // answers accepted since then, to attempts sent after the cut
	from        time.Duration // first: the first guess counts from here
	firstN      int           // this many answers
	peekEnd     time.Duration // paused: the end of the wait asked by the refusal that began the pause
	peekStep    time.Duration // paused: the last peek came this long after its refusal (0: not peeking, -1: no more peeks)
	runFrom     time.Duration // the key last resumed then
	run         int           // answers accepted since
	cycle       bool          // paused by a held count: the resume measures what the server took
	peekRefused time.Duration // when the last peek was refused
	peekDue     time.Duration // paused: when the first peek was due
	depth       int           // gradual: the answers the first burst drew before the first refusal

	loneAdm uint64 // lone: the key's admissions at the refusal
	loneOK  int32  // lone: answers accepted since, to attempts admitted after it

	peak   rate.Limit    // the fastest pace that held a whole test, sent at (see holdFor)
	peakAt time.Duration // noted then

	refPace  rate.Limit    // rule 6: a pace refused after noiseRun answers or more, the reference
	refRun   int           // the answers accepted before that refusal
	noiseEnd time.Duration // refusals are noise until then

	tri     trial             // rule 7: the trial of a cruising pace's cut (adapt.go)
	triHi   rate.Limit        // the slowest pace refused before it began
	triStep float64           // and the next probe's rise then
	triNext time.Duration     // and when the pace might rise then
	bg      float64           // rule 7: the share of refusals a trial found noise (0: none found)
	cusum   float64           // the evidence since that refusals came more often than bg
	cruiseN int32             // answers counted since the first guess, to attempts sent at the pace in force
	cruiseK int32             // refusals among them
	gaps    [recentGaps]int32 // the answers counted from each of the last cruising refusals to the next (a ring)
	gapI    uint32            // gaps recorded
	gapRun  int32             // answers counted since the last cruising refusal
	bgPace  rate.Limit        // the pace bg was found at
	noiseAt time.Duration     // rules 6 and 7: refusals were last found to be noise then (0: never)

	served   [servedRing]int32 // rule 8: the answers accepted in each of the last seconds from the epoch, a ring
	servedAt int64             // the second of the last answer counted in it

	told    bool          // the refusal relearn answers carried quota headers (the server sends them on its refusals)
	pre     preCut        // rule 9: the learner before the last cut, for a blip to undo
	runAt   time.Duration // rule 9: the last run of learnedBlip refusals or more, none accepted among them, came then
	undid   bool          // and its cut was undone
	noBlips bool          // a run undone came again within blipQuiet: runs are the quota's
}

// preCut is a learner's search as it stood before a refusal cut its pace
// (rule 9).
type preCut struct {
	ans                       int64         // the refusal that cut was the key's answer number ans (0: nothing to undo)
	told                      bool          // it carried quota headers: the quota's, not a blip's
	at                        time.Duration // it came then
	pace, lo, hi, tested, low rate.Limit
	mode                      learnMode
	step                      float64
	next                      time.Duration
}

// servedRing holds servedOver seconds and the one going on, at least.
const servedRing = 32

// serve counts an answer the server accepted at at (rule 8).
func (l *learner) serve(at time.Duration) {
	sec := int64(at / time.Second)
	if sec > l.servedAt {
		for s := max(l.servedAt+1, sec-servedRing+1); s <= sec; s++ {
			l.served[s%servedRing] = 0
		}
		l.servedAt = sec
	}
	if sec >= 0 && sec > l.servedAt-servedRing { // an answer that overtook the last one's second counts in its own
		l.served[sec%servedRing]++
	}
}

// floor is the pace a cut at at goes no lower than (rule 8): servedShare of
// the answers accepted in the median whole second of the last servedOver
// (a second with none counts as none), for servedFor after refusals were
// found to be noise; 0 otherwise. The median, not the most: a deep bucket
// serves a pace grown far past its rate for seconds, until what it held
// is spent (review 35: the most in a second, 550 from a bucket of 50 a
// second 500 deep, held the pace over the rate, 471 429s where 36 were).
func (l *learner) floor(at time.Duration) rate.Limit {
	if l.noiseAt == 0 || at-l.noiseAt > servedFor {
		return 0
	}
	sec := int64(at / time.Second)
	var secs [servedOver]int32
	n := 0
	for s := max(sec-servedOver, 0); s < sec; s++ {
		if s <= l.servedAt && s > l.servedAt-servedRing {
			secs[n] = l.served[s%servedRing]
		}
		n++
	}
	if n == 0 {
		return 0
	}
	slices.Sort(secs[:n])
	return servedShare * rate.Limit(secs[n/2])
}

// bears reports whether the server accepted bearShare of the pace p or
// more in the last whole second before at (see serve).
func (l *learner) bears(at time.Duration, p rate.Limit) bool {
	sec := int64(at/time.Second) - 1
	return sec >= 0 && sec <= l.servedAt && sec > l.servedAt-servedRing && float64(l.served[sec%servedRing]) >= bearShare*float64(p)
}

// recentGaps is how many of the last gaps between refusals tell their
// recent share (see recent).
const recentGaps = 8

// learning returns the key's learner, or nil if it has none.
func (ks *keyState) learning() *learner {
	if tr := ks.tr; tr != nil && tr.x != nil {
		return &tr.x.learn
	}
	return nil
}

// guessing reports whether the learner has no guess yet: refused before
// any answer came back accepted, it waits for those on their way (see
// startLearning), and shows no pace until then.
func (l *learner) guessing() bool { return l.on && l.first && l.blind }

// learned reports whether the key's pace was learned, not configured.
func (ks *keyState) learned() bool {
	l := ks.learning()
	return l != nil && l.on
}

// stale reports whether a refusal to tk is old news to a learned pace: the
// attempt was sent before the pace was last cut.
func (ks *keyState) stale(tk *ticket) bool {
	l := ks.learning()
	return l != nil && l.on && tk.adm <= l.cut
}

// accepted counts an answer the server accepted to tk, for a key that
// learns its pace.
func (l *learner) accept(tk *ticket) {
	l.run++
	if l.mode == modeCruise && tk.adm > l.cut {
		l.count(false)
	}
	if l.bg > 0 && tk.adm > l.cut {
		l.cusum = max(0, l.cusum+math.Log1p(-learnMore*l.bg)-math.Log1p(-l.bg))
	}
	if t := &l.tri; t.adm != 0 {
		t.answered(tk.adm, false, false)
		if t.llr >= learnOdds {
			t.adm = 0 // the cut helped: it stands, and the probes may go
		}
	}
	if l.lone && tk.adm > l.loneAdm {
		l.loneOK++
	}
	switch {
	case l.first:
		if !l.blind || tk.adm <= l.cut {
			l.firstN++ // an answer to the burst that drew the first refusal (not, blind, a peek)
		}
	case tk.adm > l.cut:
		l.accepted++
	}
}

// holdFor is how long a cut pace r holds before it probes, at at: hold,
// and, when the last cut of the cruising pace answered a probe's refusal
// (costs), at least holdCount answers' worth of r, so that probes that end
// in a refusal cost at most one 429 in holdCount whatever the quota; but
// never longer than longestHold, so that a slow quota that grows is found.
// Before, no probe has cost a 429, and a pace that a first guess or a
// search found while another client spent most of the quota is a share of
// it (regression: a transport that joined another's job on a bucket 5 s in
// was refused at once, guessed 7.5 a second, and held it 27 s, 17 s past
// the other's end: 2.3x the ideal of both jobs, one run in eight). Nor has
// a refusal of a pace that had not risen since its last cut, once
// refusals were found to be noise on the key (rules 6 and 7): it is likely
// one more, and cost no probe (regression: each such refusal held a slow
// pace 200 answers' worth, and behind random 429s the pace, once low, sat
// there: TestLearnedModel over 48 seeds, a bucket of 100 a second behind
// 5%, 6.94x the ideal, now 5.22x, 34.2x at worst, now 26.5x; a bucket of
// 20 a second behind 5%, 2.55x, now 2.32x). Before any noise was found, it
// may be another client's probe, or the pace's own excess over a shallow
// bucket that a test did not show, and the hold it leaves (costs) is as
// long (found in review 38, with every such refusal held 2 s: two
// transports on a bucket of 10 a second, each refused by the other's
// probes and probing again, drew 48-52 429s a run where 37-40 were, three
// on a bucket of 20 a second 48-56 where 37-40 were; a bucket of 10 a
// second that grew to 20, 25 where 16 were; kept for every refusal of a
// pace that had not risen, the noise figures were 4.28x and 2.05x). Such a
// refusal does not begin the hold again, though (see relearn): it keeps
// what remains of the one the last cut set, and waits hold at least. With
// that, the two transports on 10 a second draw 37 where 36 were; the
// trade is deliberate: behind random 429s each such refusal began the hold
// again, and a pace once sunk seldom probed.
//
// Nor are the answers counted at a pace below the fastest that held a
// whole test within the last longestHold (the peak): a quota that served
// the key that fast for a test serves at least as many, its own and
// others', and a cut far below the peak leaves a share that others took;
// a probe costs one 429 in holdCount of those.
func (l *learner) holdFor(at time.Duration, r rate.Limit) time.Duration {
	if !l.costs {
		return l.hold
	}
	if at-l.peakAt <= longestHold {
		r = max(r, l.peak)
	}
	return min(max(l.hold, time.Duration(float64(holdCount)/float64(r)*float64(time.Second))), longestHold)
}

// notePeak notes the key's pace as its peak, at at, if the pace held a
// whole test unrefused and the key sent at it (see holdFor).
func (ks *keyState) notePeak(at time.Duration) {
	l := ks.learning()
	p := ks.lim.Limit()
	if l.refused || at-l.setAt < l.test || float64(ks.admitted-l.reachAdm) < reachedShare*float64(p)*(at-l.reachAt).Seconds() {
		return
	}
	if p >= l.peak || at-l.peakAt > longestHold {
		l.peak, l.peakAt = p, at
	}
}

// testLength is how long a pace must hold to count as held, when the server
// asks to wait for wait: twice that, within [growEvery, longestTest]. A
// search step lasts half as long.
func testLength(wait time.Duration) time.Duration {
	return min(max(2*wait, growEvery), longestTest)
}

// searchStep is how long a search step holds (rule 2): half a test, or,
// for a server that gives back gradually (a bucket), the time a pace a
// sixteenth over the slower end takes to spend what the bucket held at
// first, the answers its first burst drew before the first refusal, if that
// is shorter (but no shorter than half of growEvery). A step held longer
// shows no more: a shallow bucket refuses a pace over it at once, and the
// whole test, twice a Retry-After rounded up to a second, is its wait
// hundreds of times over (regression: a bucket of 1,000 a second, 5 deep,
// searched a second a step, and a job of 4,000 took 1.53x its ideal in
// the model, now 1.22x). So for a server not yet told (a first peek no
// request took): a window's first burst, its whole count, is never short
// next to its rate, and a bucket whose first burst was all refused took
// 1.12x where 1.11x was (review 37).
func (l *learner) searchStep() time.Duration {
	d := l.test / 2
	if (l.gradual || l.untold) && l.depth > 0 && l.lo > 0 {
		d = min(d, max(time.Duration(float64(l.depth)/(bisectTol*float64(l.lo))*float64(time.Second)), growEvery/2))
	}
	return d
}

func clampRate(r rate.Limit) rate.Limit { return min(max(r, slowestRate), fastestRate) }

// satAdd is a+b, saturated at the longest Duration: a wait
// parsed as saturated (a date in year 9999, a Retry-After past a
// Duration's range) is added to the learner's times (found in review:
// at+wait wrapped negative, a refusal asking for a later end than the
// pause's was taken for the same news, and the key sent again during the
// wait the server asked for).
func satAdd(a, b time.Duration) time.Duration {
	if b > 0 && a > maxRetryDuration-b {
		return maxRetryDuration
	}
	return a + b
}

// startLearning gives an unpaced key without windows, refused at at and
// about to pause for wait, its first guess (rule 1): the run answers
// accepted since the last refusal (at last), or since its first answer if
// this is its first, over the time until the pause ends. A key refused
// before any answer was accepted guesses from the answers accepted during
// the pause alone (those the server took may be on their way still:
// answers overtake one another), counted from this refusal, when the wait
// is short (a burst overran the quota; a longer one says it is spent);
// with nothing on its way, or none of those accepted, it learns nothing yet.
func (ks *keyState) startLearning(now time.Time, at, wait time.Duration, run int, last time.Duration) {
	from := last
	if from == longAgo {
		from = ks.ev.spanAt
	}
	if s := ks.ev.spanAt; s != longAgo && s > from {
		// The key resumed since the last refusal: the answers count from
		// the first after it. Before it, the key may have sent nothing
		// (its requests all waited out their own Retry-After), which
		// says nothing of what the server would have taken (regression:
		// a transport whose first burst was all refused, while another
		// held the quota, guessed 0.5 a second from the one answer
		// accepted a second later, and kept under 1 a second, 80 s past
		// the other's end).
		from, run = s, run-ks.ev.spanRun
	}
	if len(ks.wins) > 0 {
		return
	}
	if run == 0 || from == longAgo {
		if ks.sending == 0 || wait > coarseWait {
			return // nothing on its way to learn from, or the quota is spent, not overrun
		}
		run, from = 0, at
	}
	r := clampRate(rate.Limit(float64(run) / satAdd(at-from, wait).Seconds()))
	blind := run == 0
	if blind {
		r = fastestRate // no guess yet: the pause alone holds the key
	}
	// The limiter starts full: the pause holds the key, and the peek
	// that ends it must not wait a turn of a guess the resume corrects.
	ks.lim = rate.NewLimiter(r, learnedBurst)
	ks.rarely().learn = learner{on: true, edge: true, first: true, mode: modeGrow,
		lo: r, hi: fastestRate, tested: r, low: r,
		test: testLength(wait), hold: probeHold, heldAt: at, next: satAdd(at, wait), setAt: at, reachAt: at, reachAdm: ks.admitted,
		cut: ks.admitted, cutAns: ks.ev.answers, since: at, from: from, firstN: run, runFrom: from, run: run, blind: blind}
	ks.troubled().adapt.adjusted = at
}

// unlearn forgets a pace learned from 429s when the server begins to say
// what remains on the answers it accepts: the mirror of its count paces
// the key from then on (told.go).
func (ks *keyState) unlearn() {
	if l := ks.learning(); l != nil && l.on {
		*l = learner{}
		ks.lim = nil
	}
}

// peek is how long a learning key pauses after a refusal at at that asks
// for wait, when a pause begins or a peek is refused (rules 1 and 4): a wait
// stated in whole seconds (whole: delay-seconds, an HTTP-date, a reset of a
// second or more; or none stated) may be rounded up by up to one, so the
// key pauses for what surely remains and peeks into the last second, 1/8 s
// in, then twice as far each time the peek is refused, until the wait first
// asked for has passed. A date rounds up whatever the wait: 0.98 s to the
// next whole second may be a bucket's next token, due at once, or a
// window's reset. A wait stated finer is taken as exact. A refusal that
// asks for a later end than the pause's begins the peeks again from there.
func (ks *keyState) peek(at, wait time.Duration, whole bool) time.Duration {
	l := ks.learning()
	switch {
	case whole && wait > peekFirst && (l.peekStep == 0 || satAdd(at, wait) > satAdd(l.peekEnd, time.Second)):
		// A pause begins, or the server asks for a later end.
		d := firstPeek(wait)
		l.peekEnd, l.peekStep, l.peekDue = satAdd(at, wait), peekFirst, satAdd(at, d)
		return d
	case l.peekStep <= 0 || at >= l.peekEnd:
		l.peekEnd, l.peekStep = max(l.peekEnd, satAdd(at, wait)), -1 // no more peeks
		return wait
	}
	l.peekStep, l.peekRefused = 2*l.peekStep, at
	return min(l.peekStep, l.peekEnd-at)
}

// firstPeek is how long a pause for wait, stated in whole seconds, lasts
// before its first peek: what surely remains of it, and peekFirst into its
// last second (see peek, and peekPast in pause.go).
func firstPeek(wait time.Duration) time.Duration {
	return max(wait-time.Second, 0) + peekFirst
}

// resumeLearned begins a new count when the key resumes after a pause: the
// server's count gave back what the pause let it. After the first pause,
// the first guess takes in the answers that came during it, over the time
// until the first peek taken, or until the end of the wait first asked for
// if the server held its count past the first peek (rule 1). After a pause
// that a held count began, the pace goes no higher than what the server
// took since the resume before (rule 4).
func (ks *keyState) resumeLearned(now time.Time, at time.Duration) {
	l := ks.learning()
	if l == nil || !l.on {
		return
	}
	if l.first {
		if l.firstN == 0 {
			ks.unlearn() // refused before any answer, and none accepted since: nothing to guess from
			return
		}
		l.first, l.next = false, at+growEvery
		l.gradual = l.peekStep == peekFirst
		if l.gradual && !ks.peekTaken(0) {
			// No request took the first peek: each on its way was refused
			// and waits its own Retry-After. The resume says only that
			// the server gave back by then, not that it gave back
			// gradually (regression: a window of 100 a second whose
			// first burst of 16 was all refused was taken for a bucket,
			// searched a Retry-After a step, each step over it a spent
			// window, and drew 38-64 429s in 4,000 on loopback).
			l.gradual, l.untold = false, true
		}
		l.bucket = l.gradual
		l.depth = l.firstN
		if l.depth <= 1 {
			// The server took one request before its first refusal:
			// it holds one at a time (a bucket one deep, as far as the
			// key can tell), and the pacer's second token sends two
			// requests a round trip apart, the second refused
			// (regression, found in review 38: two workers on a bucket
			// of 100 a second, one deep, sent a retry beside the other
			// worker's request each time, and each refusal came soon
			// after the one before and halved the pace: 4.1x the ideal,
			// three workers 3.8x; now 1.5x and 1.3x). A turn taken late
			// loses its time: a server that holds one loses it too. A
			// deep bucket that another client drained looks the same
			// (one of the first burst accepted), and its key keeps one
			// token too: found in review 39, two transports on a bucket
			// of 10 a second, 2 deep, behind 1% random 429s, took 1.45x
			// the ideal where 1.35x was, with 50 429s a run where 55
			// were (five executions each). Nothing a one-token pacer
			// sends can show the server deeper.
			ks.lim.SetBurstAt(now, 1)
		}
		span := at - l.from
		if l.peekStep != peekFirst && l.peekEnd > at {
			span = l.peekEnd - l.from // held, then given back at once: a window up to the wait asked
		}
		if r := clampRate(rate.Limit(float64(l.firstN) / span.Seconds())); r > ks.lim.Limit() || l.blind {
			ks.lim.SetLimitAt(now, r)
			l.lo, l.tested = r, r
		}
		if l.peekStep > peekFirst && at >= l.peekEnd {
			// Held to the end of the wait asked, then given back at
			// once: the guess is a window's rate. It is probed, not
			// doubled. (A count given back earlier, at a later peek,
			// may be a bucket whose first tokens went to requests
			// already on their way: it grows from the guess.)
			l.window = true
			l.test = max(l.test, testLength(at-l.from)) // it held from the first answer to the reset
			l.mode, l.step, l.next = modeCruise, probeFirst, at+l.test
		}
	} else if l.untold && l.peekDue > l.runFrom {
		// The first peek of a later pause tells, refused, that the
		// server held its count, or, taken in time and accepted, that it
		// gives back gradually. (The cut that began the pause took the
		// pacer's tokens: the peek waits a turn of the pace.)
		switch {
		case l.peekRefused >= l.peekDue:
			l.untold = false
		case l.peekStep == peekFirst && ks.peekTaken(time.Duration(float64(time.Second)/float64(ks.lim.Limit()))):
			l.untold, l.gradual = false, true
		}
	}
	if end := at; l.cycle && at > l.runFrom {
		// What the server took from the resume before to its reset, over
		// a pause that its held count began: the reset came after the
		// last peek refused, if any, and before this resume, so halfway.
		if l.peekRefused > l.runFrom {
			end = (l.peekRefused + at) / 2
		}
		if r := rate.Limit(float64(l.run) / (end - l.runFrom).Seconds()); r < ks.lim.Limit() {
			r = max(r, ks.lim.Limit()*quickShare)
			ks.setLearned(now, at, r, false)
			l.lo = r
		}
	}
	l.peekStep, l.runFrom, l.run, l.cycle = 0, at, 0, false
	l.reachAt, l.reachAdm = at, ks.admitted
	l.since, l.edge, l.accepted, l.low = at, false, 0, ks.lim.Limit()
	l.next = max(l.next, at+growEvery)
}

// peekTaken reports whether the probe that resumed a learned key went out
// when the pause's first peek was due, give or take a peek's delay and
// turn: not one of the key's own refused requests sent again at the end of
// its wait.
func (ks *keyState) peekTaken(turn time.Duration) bool {
	return ks.tr != nil && ks.tr.probeAt <= ks.learning().peekDue+peekFirst+turn
}

// measured is the rate the server accepted since the count began, and
// whether it tells: counted from a refusal, over at least minCount answers.
// It is a lower bound of the quota (what the server's count would have given
// while the key sent slower is lost), exact when the key sent faster.
func (l *learner) measured(at time.Duration) (rate.Limit, bool) {
	if !l.edge || l.accepted < minCount || at <= l.since {
		return 0, false
	}
	return rate.Limit(float64(l.accepted) / (at - l.since).Seconds()), true
}

// outran reports whether the key sent more than the server accepted since
// the count began, by a tenth or more of what it sent, counting the
// admitted units but those still on their way: what the server took is
// then a bound of the quota, not of what the key offered. A key that sent
// little — its workers each waiting out their own Retry-After, or fewer
// than its pace keeps busy — had nearly all accepted, whatever its pace
// (regression: a transport whose eight workers all waited out refusals
// drawn by another's overshoot measured 25 a second, cut to it, and held
// it 17 s, 8 s past the other's end: 1.38x the ideal of both jobs).
func (l *learner) outran(admitted uint64, sending int32) bool {
	sent := float64(admitted-l.cut) - float64(sending)
	return float64(l.accepted) <= provedShare*sent
}

// relearn reacts to a refusal of a learned pace p at now (at from the
// epoch), to an attempt sent at that pace; the server asks for wait (rule 3).
func (ks *keyState) relearn(now time.Time, at time.Duration, p rate.Limit, wait time.Duration) {
	l := ks.learning()
	ks.notePeak(at)
	if t := testLength(wait); !l.window || t > l.test {
		// A window's test is never shorter than the first one showed
		// it: the wait to its reset is short when refused near it.
		l.test = t
	}
	if l.edge && (l.accepted == 0 || l.window && at-l.since < l.test/2) {
		// Nothing accepted since the last refusal: the server's count
		// gave nothing back, the same news. So is a window's refusal
		// within half a test of the last cut (about the wait to its
		// reset), though answers came back accepted between: a window
		// refuses until its reset, and those requests reached it before
		// it was spent, or were another client's share. Refusals that
		// keep coming so pause the key (rule 4).
		l.held, l.refused = true, true
		return
	}
	if l.mode == modeCruise {
		l.count(true)
	}
	done, proven := ks.tried(now, at)
	if done || ks.noise(now, at, p) {
		return
	}
	if l.mode == modeGrow && (!l.gradual && !l.window || l.gradual && p <= l.lo) && ks.refs > loneRefs {
		if !l.lone {
			// A lone refusal of a pace that grows from a first pause
			// that told nothing (no request took its peek, or a later
			// peek ended it: the guess is a lower bound) holds the
			// growth until loneAnswers answers clear it; a second
			// refusal first is the growth's, and cuts (rule 2). So
			// does one of a bucket's first guess, before the growth's
			// first step: what its depth let through over the pause,
			// a lower bound too. (Regression: behind 3% random 429s,
			// the second request after the first resume refused, a
			// bucket of 100 a second cruised at 37 for 11 s;
			// TestLearnedModel, 48 seeds: behind 1% 1.35x -> 1.31x
			// the ideal, the worst 2.38x -> 1.78x, behind 3% 1.69x
			// -> 1.65x, behind 5% 2.37x -> 2.32x, a window behind 3%
			// 1.31x -> 1.32x, the quota's 429s as many or fewer.)
			l.lone, l.loneAdm, l.loneOK = true, ks.admitted, 0
			return
		}
		l.lone = false
	}
	l.pre = preCut{told: l.told, ans: ks.ev.answers, at: at, pace: p, lo: l.lo, hi: l.hi, tested: l.tested, low: l.low, mode: l.mode, step: l.step, next: l.next}
	hi, step, next := l.hi, l.step, l.next
	steady := l.mode == modeCruise && l.edge && p <= l.low // the pace had not risen since its last cut (not a resume): no probe's refusal
	if l.mode == modeCruise {
		l.costs = !steady || l.noiseAt == 0 // a probe's refusal, or no noise found yet (see holdFor)
		l.risen = !steady
	}
	m, ok := l.measured(at)
	quick := l.edge && l.accepted < minCount
	switch {
	case quick:
		// The server's share of the pace, from the refusals among the
		// key's last 20 answers (see rule 3).
		n := outageAnswers
		if l.bears(at, p) && ks.ev.steady() {
			n = int(min(ks.ev.answers-l.cutAns, outageAnswers))
		}
		share := 1 - float64(bits.OnesCount64(ks.ev.recent[0]&mask(n)))/outageAnswers
		l.lo = min(l.lo, max(p*quickShare, min(p*rate.Limit(share), p*cutShare)))
		l.hi = min(l.hi, p) // far too fast is too fast: the search stays below it
	case ok && m < l.low*provedShare && l.outran(ks.admitted, ks.sending):
		l.hi, l.lo = p, m*cruiseShare // sent faster than the server took: its rate
	default:
		prev := l.lo
		l.hi, l.lo = p, min(l.lo, p*cutShare) // growing: the last step that held
		if l.mode == modeCruise {
			// A probe refused: back to the pace it rose from, which
			// held its whole hold, when 0.95 of the refused would be
			// above it (a probe's steps each held a test, but a test
			// of a few seconds cannot show a bucket a few percent
			// over its rate). A step of more than an eighth is what
			// drew the refusal, not the step below, which held a
			// test: back to 0.95 of that one, if faster. So is a step
			// that went halfway to the slowest pace refused, short of
			// its own (see climbLearned): the steps below it held
			// tests as far from where the probes began (found in review
			// 37: a window's pace probed 75, 92, 101.5, refused at
			// 101.5 once, went back to 56 and held 16 s).
			back := l.low
			if p > prev*(1+bigStep) || l.capped {
				back = max(back, prev*cutShare)
			}
			l.lo = min(p*cutShare, back)
		}
		if ok {
			l.lo = max(l.lo, min(m, p*cruiseShare))
		}
	}
	l.lo = max(l.lo, min(p*cutShare, l.floor(at))) // rule 8
	if l.tested >= p {
		l.tested = min(l.tested, l.lo) // what held once is refused now
	}
	switch {
	case l.hi == fastestRate: // refused only in quick succession: still growing
	case float64(l.hi) <= float64(l.lo)*(1+bisectTol), l.mode == modeCruise && !quick:
		l.mode, l.step = modeCruise, probeFirst
	default:
		l.mode = modeSearch
	}
	l.held = false
	ks.health.refused = 0 // the cut answers them: refusals dominate if they keep coming
	ks.setLearned(now, at, l.lo, true)
	l.cut, l.cutAns, l.since, l.edge, l.accepted, l.low = ks.admitted, ks.ev.answers, at, true, 0, l.lo
	l.next = at + l.searchStep()
	if l.mode == modeCruise {
		if steady {
			// A refusal of a pace that had not risen since its last
			// cut cost no probe: the probes wait their quiet seconds
			// again, but the count of answers that the last probe's
			// refusal set them is not begun again (see holdFor).
			// (Regression: behind random 429s, each one began it
			// again, and a pace that had sunk rarely probed: at 100
			// a second behind 1%, 200 answers' worth went by without
			// one in 13% of the tries; a slow pace's, a minute, at 2%
			// in 6%. TestLearnedModel over 48 seeds: a bucket of 100 a
			// second behind 5% random 429s 5.22x the ideal, now 4.76x,
			// the worst 26.5x, now 16.5x; behind 3% 2.05x, now 1.98x;
			// review 38's one-at-a-time client on a bucket of one
			// behind 2%, 8.9x, now 7.0x, the worst 42x, now 22x.) A
			// count begun at a resume is not a cut's: its first
			// refusal answers a pace that a pause, or a first guess,
			// set, and holds as a probe's (found in review 39: counted
			// so, a late joiner on a window of 20 a second took 1.21x
			// the ideal where 1.18x was, now 1.16x; two transports on
			// a bucket of 10 a second drew 38 429s a run where 36 were,
			// the worst 59-61 where 54 was, now 37 and 45-50).
			l.next = max(next, at+l.hold)
		} else {
			l.next = at + l.holdFor(at, l.lo)
		}
		// The share before: of the key's cruising answers so far, or over
		// the last gaps between its refusals (recent) if higher: a pace
		// that rose past the quota, or that the quota fell under, is
		// refused more often than it was. (Regression: behind 2% random
		// 429s, a quota that fell under the pace had a cut tried against
		// the share from before the fall; the cut took the pace under
		// the quota, its refusals came as often as that, and it went
		// back over.)
		base := max(float64(max(l.cruiseK-1, 1))/float64(max(l.cruiseN, trialBefore)), l.recent())
		if (!quick || l.noiseAt != 0) && !proven && l.cruiseN >= learnBefore && l.cruiseK >= trialAfter && base <= noiseMost {
			// Rule 7: a sparse refusal's cut is tried.
			l.tri = trial{adm: ks.admitted, at: at, from: p, base: base, quietUntil: longAgo, endedAt: longAgo, drop: learnDrop}
			l.triHi, l.triStep, l.triNext, l.refPace, l.refRun = hi, step, next, 0, 0
		}
	}
}

// count counts an answer to a cruising pace, refused or not.
func (l *learner) count(refused bool) {
	if l.cruiseN == math.MaxInt32 {
		l.cruiseN, l.cruiseK = l.cruiseN/2, l.cruiseK/2 // a share kept for ever
	}
	l.cruiseN++
	l.gapRun = min(l.gapRun+1, math.MaxInt32-1)
	if refused {
		if l.cruiseK > 0 {
			l.gaps[l.gapI%recentGaps] = l.gapRun
			l.gapI++
		}
		l.cruiseK++
		l.gapRun = 0
	}
}

// recent is the share of refusals over the gaps between the last cruising
// refusals (up to recentGaps of them), 0 before two gaps.
func (l *learner) recent() float64 {
	n := min(l.gapI, recentGaps)
	if n < 2 {
		return 0
	}
	var sum int64
	for _, g := range l.gaps[:n] {
		sum += int64(g)
	}
	return float64(n) / float64(max(sum, 1))
}

// tried counts a refusal of a learned pace, at now (at from the epoch),
// in the trial of its last cut, if one is on, or in the quiet after one
// told noise (rule 7), and reports whether that is all it does (done):
// the trial has not told yet, or tells that the refusals are noise, and
// the pace goes back to where it was cut from; or the quiet goes on.
// Refusals twice as frequent as before the cut (at the trial's odds, see
// oftener) are the pace's: the trial ends, and the refusal cuts. Refusals as frequent as before are noise once that is likelier
// than twice as frequent too; until then the trial goes on. Refusals
// that end a quiet cut too, and that cut is not tried (proven): the test
// told already.
func (ks *keyState) tried(now time.Time, at time.Duration) (done, proven bool) {
	l := ks.learning()
	t := &l.tri
	if t.adm == 0 {
		if l.bg == 0 {
			return false, false
		}
		if at >= l.noiseEnd {
			// The quiet is over: the next refusal is tried again. (A
			// pace that grows again in it keeps it: noise that sank the
			// pace is what the growth climbs back through; refusals of a
			// pace grown past the quota pause the key, see heldLearned.
			// Found in review: ending the quiet at the first refusal of
			// a growing pace, nearly always noise's, halved it, and a
			// bucket of 1,000 a second behind 2% random 429s took 8x the
			// ideal where 5.6x was.)
			l.bg, l.cusum, l.noiseEnd = 0, 0, 0
			return false, false
		}
		// Quiet after refusals found noise: they cut nothing, unless they
		// come more often than the noise did (a CUSUM test of bg against
		// learnMore times bg).
		l.cusum += math.Log(learnMore)
		if l.cusum < trialOdds {
			l.cut, l.since, l.accepted = ks.admitted, at, 0
			return true, false
		}
		l.bg, l.cusum, l.noiseEnd = 0, 0, 0
		return false, true
	}
	t.answered(math.MaxUint64, true, false)
	switch {
	case t.oftener(learnOdds), at-t.at >= noiseFor:
		t.adm = 0
		return false, false
	case t.llr <= -learnOdds && t.asBefore():
		ks.noiseFound(now, at)
	}
	return true, false
}

// noiseFound ends the trial of a learned pace's cut, at now (at from the
// epoch), with refusals as often as before: noise (rule 7).
func (ks *keyState) noiseFound(now time.Time, at time.Duration) {
	l := ks.learning()
	t := &l.tri
	t.adm = 0
	// The noise's share, under 1/learnMore so that the CUSUM's
	// alternative is a share (found in review: at a share over a
	// third, its step was NaN, and the quiet ended at once). The
	// trial's own share runs high when it stops at a refusal: no more
	// than twice the share before counts (more, and the CUSUM would not
	// see a quota that fell under the pace).
	bg := min(max(t.base, float64(t.k)/float64(t.n)), trialMore*t.base, bgMost)
	l.noiseEnd, l.bg, l.cusum, l.bgPace, l.noiseAt = at+noiseFor, bg, 0, t.from, at
	l.lo, l.hi, l.mode, l.step = t.from, max(l.triHi, t.from), modeCruise, max(l.triStep, probeFirst)
	l.next = l.triNext // the cut's hold goes too (found in review: a slow pace's, 37 s, outlived its noise)
	if l.hi < fastestRate && float64(l.hi) > float64(t.from)*(1+bisectTol) && l.gradual {
		// The search that the noise ended goes on, between the pace
		// it was cut from and the slowest refused before (rule 2).
		l.mode, l.next = modeSearch, at+l.searchStep()
	}
	ks.setLearned(now, at, t.from, false)
	l.cut, l.since, l.accepted, l.low = ks.admitted, at, 0, t.from // the count begins again at the pace restored
}

// noise reports whether a refusal of a learned pace p, at at, is noise
// (rule 6): refusals the pace does not make, which no cut would end. Against
// a quota, a refusal that came after noiseRun answers or more came at a
// pace a little over it, and a pace cut by 30% is under it: the next one
// waits for the probes to climb back, many more answers later. A server
// that refuses a share of the requests whatever the pace (one in fifty)
// refuses as often after the cut: the pace goes back to 0.95 of where the
// cuts began, and for noiseFor refusals cut nothing (each refused request
// waits its own Retry-After; refusals that dominate still pause the key).
// Regression, found in review: against a server that took 1,600 a second
// and refused every fiftieth request, a learned pace fell to 4 a second in
// six minutes; now about 500. (Refusing every tenth, it still falls: the
// runs are too short for this rule, and rule 3 halves a searching pace at
// each.)
func (ks *keyState) noise(now time.Time, at time.Duration, p rate.Limit) bool {
	l := ks.learning()
	run := l.accepted
	if l.mode != modeCruise {
		l.refPace, l.refRun = 0, 0 // a search moves the pace for reasons of its own
		return false
	}
	if !l.edge || run < noiseRun {
		return false
	}
	fresh := func() { l.cut, l.since, l.accepted = ks.admitted, at, 0 }
	switch {
	case at < l.noiseEnd:
		fresh()
		return true
	case l.refPace == 0 || p > l.refPace || run < l.refRun/2:
		// The fastest pace refused so, or refusals that came more often
		// (the quota shrank): the reference.
		l.refPace, l.refRun = p, run
	case p <= l.refPace*noiseCut && float64(run) <= 1.5*float64(l.refRun)+2:
		l.noiseEnd, l.noiseAt = at+noiseFor, at
		to := max(p, l.refPace*cutShare)
		l.lo, l.hi, l.refPace, l.refRun = to, max(l.hi, l.refPace), 0, 0
		ks.setLearned(now, at, to, false)
		fresh()
		return true
	case p <= l.refPace*noiseCut:
		l.refPace, l.refRun = p, run // the cuts helped: a lower quota
	}
	return false
}

// heldLearned reacts to a pause of a learned key (rule 4): when the
// refusals that began it were the same news, the pace goes back to the
// fastest that held a whole test, not below half, and the resume measures
// what the server took; a probe ended so waits twice as long next time, as
// do pauses within two holds of the last (a window's count spent cycle
// after cycle). A lone pause of a pace that had not risen since its last
// cut, long after the one before, ended no probe (a gateway that refused
// everything for a moment): the hold stays (regression: behind five 429s
// in a row every 10 s, each such pause doubled the hold, 2 s to a minute,
// no probe came, and the pace sank 5% a run, 1.94x the ideal; everything
// refused for 100 ms every 20 s, 1.19x).
func (ks *keyState) heldLearned(now time.Time, at time.Duration) {
	l := ks.learning()
	if l.held && ks.blip(now, at, bits.TrailingZeros64(^ks.ev.recent[0]), ks.ev.answers) {
		return
	}
	ks.notePeak(at)
	l.tri.adm = 0 // the pace before the pause is not the one to go back to (found in review)
	if l.bg > 0 && (ks.lim.Limit() > l.bgPace*(1+bisectTol) || (!l.bucket || l.noBlips) && bits.TrailingZeros64(^ks.ev.recent[0]) >= learnedBlip) {
		// Refusals dense enough to pause the key, to a pace that rose
		// more than a sixteenth past where the noise was found, are the
		// pace's: the quiet is over. Found in review, each refusal
		// swallowed, the CUSUM cut short by the pauses they made: noise
		// that stopped left the quiet on while the pace doubled to 1.8x
		// the quota (159 429s in a run); a quota that fell under a
		// probe's pace drew 6 429s a second for 20 s. So are refusals
		// in a run, none accepted among them, at any pace: a window's
		// count spent, not noise (regression: a window of 100 a second
		// behind 3% random 429s, its pace paused at each reset and sat
		// over the window in the quiet; TestLearnedModel over 48 seeds,
		// 32.0 429s of the quota a job, now 29.9); but not to a bucket,
		// where a run is a gateway's blip (rule 9), unless runs came
		// back within blipQuiet (noBlips).
		l.bg, l.cusum, l.noiseEnd = 0, 0, 0
	}
	if l.bg > 0 && at < l.noiseEnd {
		// A pause in the quiet, of a pace no more than a sixteenth past
		// where the noise was found, is noise's too: three refusals in
		// twenty come by chance (at 3%, about one refusal in nine has two
		// more among the 19 answers before it). The key waits what the
		// server asks, and its pace stays. (Regression: each such pause
		// cut the pace to the fastest that held a whole test unrefused,
		// which under noise is one from long ago: half the pace; a
		// bucket of 100 a second behind 3% random 429s took 3.5x the
		// ideal on average in the model, 2.6x without that cut.)
		l.held = false
		return
	}
	was := ks.lim.Limit()
	to := min(l.lo, was)
	if l.gradual && ks.lim.Limit() > l.lo {
		l.hi = min(l.hi, ks.lim.Limit()) // the pace that paused a bucket is refused (rule 4)
	}
	if l.held {
		to = min(to, max(l.tested, to*quickShare))
		l.cycle = true
	}
	l.lo = to
	ks.setLearned(now, at, to, true)
	if l.hi == fastestRate {
		if l.mode != modeGrow || float64(was) <= float64(to)*(1+bisectTol) {
			return
		}
		// A growth whose refusals paused the key without cutting it
		// (the first swallowed in the quiet of rule 7, the others the
		// same news) was refused all the same: the pace that paused it
		// is the slowest refused, and the pace probes up to it (rule 4)
		// rather than doubling back to it as soon as the key resumes.
		l.hi = was
	}
	if float64(l.hi) > float64(to)*(1+bisectTol) {
		if l.mode == modeSearch && l.gradual {
			// A search the pause interrupted goes on, a step a half
			// test, between the pace it fell back to and the slowest
			// refused, if the server gives back gradually (a bucket:
			// the first pause ended at its first peek): probes from a
			// sixteenth, a test a step, took a fast quota's pace from
			// half of it back up in 8 s. A window whose reset a later
			// peek met refuses each step over it at its next reset,
			// with all on their way: it probes.
			l.next = at + l.searchStep()
			return
		}
		l.mode, l.step, l.next = modeCruise, bisectTol, at+l.test // far below what was refused: probe soon
		return
	}
	if l.mode == modeCruise && (l.risen || at-l.heldAt <= 2*l.hold) {
		l.hold = min(2*l.hold, longestHold)
	}
	l.heldAt = at
	l.mode, l.step, l.next = modeCruise, probeFirst, at+l.holdFor(at, to)
}

// blip undoes the last cut of a learned pace, at now (at from the epoch),
// when the refusal that made it began a run of run refusals, none accepted
// among them, that ended at the key's answer number last, and the run is a
// blip's (rule 9). It reports whether it did.
func (ks *keyState) blip(now time.Time, at time.Duration, run int, last int64) bool {
	l := ks.learning()
	pre := l.pre
	if run < learnedBlip {
		return false
	}
	prev, undid := l.runAt, l.undid
	l.runAt, l.undid = at, false
	if undid && at-prev < blipQuiet {
		l.noBlips = true // the run undone came again: the quota's (a window's count, spent at each reset)
	}
	if pre.ans == 0 || pre.told || pre.mode == modeGrow || pre.ans <= last-int64(run) || l.window || !l.bucket || l.noBlips || prev != 0 && at-prev < blipQuiet {
		return false
	}
	l.pre.ans, l.undid = 0, true
	if t := &l.tri; t.adm != 0 && t.at == pre.at {
		t.adm = 0 // the trial of the cut undone
	}
	l.lo, l.hi, l.tested, l.mode, l.step, l.next = pre.lo, pre.hi, min(l.tested, pre.tested), pre.mode, pre.step, pre.next
	l.held, l.cycle = false, false
	ks.setLearned(now, at, pre.pace, false)
	l.low = pre.low
	return true
}

// paced notes, at now, whether an admission of the key waited for its
// learned pace's turn (held), and whether it was a retry's. A retry of the
// only request on the key (a client that sends one at a time) takes the
// pacer's whole tokens left with it: they filled while it waited out its
// Retry-After, and the client's next request, sent as soon as the retry is
// answered, would go a round trip after it, not a turn, into a bucket
// whose depth may be one, and be refused in its turn (regression, found in
// review 37: a loop on a bucket of 100 a second, one deep, had every other
// request refused, its pace sank to 2 a second, 37x the ideal; now 2.1x).
// A key with other requests is left as it is: its turns are shared, and a
// waiter that woke late keeps the time it lost. (Tried and undone in
// e7db1da: a retry with none waiting in the line took the token, and two
// transports on one bucket, whose workers all waited out refusals, came
// back a turn at a time: 29.6 429s a run where 28.0 were, the worst 54-65
// where 38-39 were, over five executions of 48 seeds; every retry taking
// them, tried in review 38 for a client of two or three workers on a
// bucket of one, still 4x the ideal: the worst 62-65 in five executions
// where 39-60 were.)
func (ks *keyState) paced(now time.Time, held, retry bool) {
	if l := ks.learning(); l != nil && l.on {
		l.byPace = held
		if retry && ks.refs == 1 {
			ks.drain(now)
		}
	}
}

// setLearned sets the learned pace to r at at; at a refusal (cut), the
// server's count is at its limit, so the next request waits its turn.
func (ks *keyState) setLearned(now time.Time, at time.Duration, r rate.Limit, cut bool) {
	ks.lim.SetLimitAt(now, clampRate(r))
	if cut {
		ks.drain(now)
	}
	ks.troubled().adapt.adjusted = at
	l := ks.learning()
	l.setAt, l.refused, l.capped = at, false, false
	l.reachAt, l.reachAdm = at, ks.admitted
}

// climbLearned raises a learned pace when its time comes (rules 2 and 5),
// called with each accepted answer, while the pace holds requests back
// (otherwise raising it would prove nothing): requests wait for their turn
// now, or the key's last admission waited for it (regression, found in
// review 37: a client that sends one request at a time, a loop, has none
// waiting when its answer comes, and its pace never left its first guess;
// a bucket of 100 a second, 5 deep, took 20x the ideal, 1 deep 100x).
func (ks *keyState) climbLearned(now time.Time, at time.Duration) {
	l := ks.learning()
	l.serve(at)
	p := ks.lim.Limit()
	idle := at-l.lastOK > max(l.test, time.Duration(2*float64(time.Second)/float64(p)))
	l.lastOK = at
	if idle {
		// Nothing came back for a test, and two of the pace's turns: the
		// key was idle, and what it sends is measured from now, not
		// from before the idle spell (regression, found in review: a key
		// idle for 20 s had to send at its pace for 80 s before a probe,
		// and one idle for a night, never).
		l.reachAt, l.reachAdm = at, ks.admitted
		return
	}
	if t := &l.tri; t.adm != 0 && (at-t.at >= trialFor && at >= l.next || t.n >= trialMost) {
		// Not told at its odds in time: the answers so far decide. As
		// often as before is likelier than a fifth as often, and than
		// twice as often: noise. Otherwise the cut stands. A slow pace's
		// hold, 200 answers' worth of it, is the trial's time too
		// (regression: at 12 a second, 4 s were 48 answers, too few to
		// tell; behind 3% random 429s a learned pace sank to 3 a second,
		// 33x the ideal).
		if t.llr < 0 && t.asBefore() {
			ks.noiseFound(now, at)
		} else {
			t.adm = 0
		}
	}
	if l.lone {
		if l.loneOK < loneAnswers {
			return // a lone refusal of the growth waits for the answers to clear it
		}
		l.lone = false
	}
	if ks.waiting == 0 && !l.byPace || at < l.next || l.tri.adm != 0 {
		return // not yet, or a cut on trial: the probes wait for its verdict
	}
	if l.bg > 0 && l.cusum > 0 {
		// Quiet after refusals found noise (rule 7), refusals came more
		// often than the noise since: the probes wait for the evidence
		// to fall back (regression: another transport's refusals, taken
		// for noise, let this one climb into its share).
		return
	}
	if float64(ks.admitted-l.reachAdm) < reachedShare*float64(p)*(at-l.reachAt).Seconds() {
		return // the key did not send at the pace: it proves nothing
	}
	if !l.refused && at-l.setAt >= l.test {
		l.tested = max(l.tested, p)
	}
	ks.notePeak(at)
	switch l.mode {
	case modeGrow:
		l.lo = p
		ks.setLearned(now, at, 2*p, false)
		l.next = at + growEvery
	case modeSearch:
		l.lo = max(l.lo, p)
		if float64(l.hi) <= float64(l.lo)*(1+bisectTol) {
			l.mode, l.step, l.next = modeCruise, probeFirst, at+l.holdFor(at, l.lo)
			return
		}
		ks.setLearned(now, at, rate.Limit(math.Sqrt(float64(l.lo*l.hi))), false)
		l.next = at + l.searchStep()
	default:
		l.lo = max(l.lo, p)
		if p > l.hi*(1+bisectTol) {
			// Past the last refusal: the quota grew, or its other client
			// left. It grows again as in rule 2, from now.
			l.mode, l.hi, l.hold = modeGrow, fastestRate, probeHold
			ks.setLearned(now, at, 2*p, false)
			l.next = at + growEvery
			return
		}
		np := p * rate.Limit(1+l.step)
		if float64(l.hi) > float64(p)*(1+bisectTol) {
			// More than a sixteenth below the slowest pace refused, a
			// step goes no more than halfway there (geometrically), as
			// the search does: the quota lies between what held and
			// what was refused (regression: a window of 100 a second,
			// its pace cut to 92 by a cycle's count, probed 98 then
			// 110, refused as 110 was at the last probe, and did so
			// every 5 s, three 429s and a pause each time).
			np = min(np, max(rate.Limit(math.Sqrt(float64(p*l.hi))), p*(1+probeFirst)))
		}
		ks.setLearned(now, at, np, false)
		l.capped = np < p*rate.Limit(1+l.step)
		most := probeMost
		if p*2 < l.hi {
			most = 1 // far below what was refused: up to doubling
		}
		l.step = min(2*l.step, most)
		l.next = at + l.test
		if np > l.hi && !l.window {
			// Past the last pace refused: the quota grew, or another
			// client of it left, unless it is refused within a quarter
			// test. The steps quicken, so that the pace grows again a
			// second after it passed, not tests later. A window refuses
			// only at its reset, with all that went since: its steps
			// stay whole tests.
			l.next = at + l.test/quickenBy
		}
	}
}

// paceNews returns the learned pace and whether it moved by a tenth or more
// since it was last told.
func (ks *keyState) paceNews() (rate.Limit, bool) {
	l := ks.learning()
	if l == nil || !l.on || l.guessing() {
		return 0, false
	}
	r := ks.lim.Limit()
	if l.shown > 0 && r > l.shown*0.9 && r < l.shown*1.1 {
		return r, false
	}
	l.shown = r
	return r, true
}
