package throttletest

import (
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"
)

// An API is a fake third-party API with quotas per API key. It is an http.Handler,
// to serve on a socket (NewServer does), and an http.RoundTripper that serves
// in-process without any network, for tests inside testing/synctest bubbles.
//
// Every request is counted (see Stats). A request arrives after any
// Config.ArrivalJitter; one that arrives during an Outage gets 503 at once; one
// without a key gets 401; one that a quota refuses gets 429 with Retry-After; an
// admitted one waits its turn in any leaky-bucket queue, then Latency, then gets
// 200 with {"ok":true}, whatever its method (POST and PUT too: one status means
// accepted), or a random 503 (see Config.Unavailable). GET /__stats answers Stats
// as JSON at once, needs no key and is not counted.
//
// An API reads time only through time.Now and timers, so inside a synctest bubble
// it runs on the bubble's fake clock, and it keeps one clock from NewAPI or Reset
// on. One created outside the bubble that serves it (say, before synctest.Test)
// takes the bubble's clock at its first request, where the clock of its Outages
// then starts. But once it has served a request, a request on a clock that is
// behind (a second bubble, or a bubble after the real clock) makes it panic: its
// quotas would count by the wrong time. Reset it between bubbles.
// It is safe for concurrent use.
type API struct {
	cfg Config

	mu    sync.Mutex
	keys  map[string]*keyState
	rng   *rand.Rand
	clock clock

	stats recorder
}

var (
	_ http.Handler      = (*API)(nil)
	_ http.RoundTripper = (*API)(nil)
)

// NewAPI returns an API with the given configuration; the clock of its Outages
// starts now, or at the first request if that comes on an earlier clock: inside a
// synctest bubble when NewAPI ran outside it (see API). It opens no socket and
// starts no goroutine. It panics if a Limit or an Outage cannot work (say, a
// token bucket without Rate).
func NewAPI(cfg Config) *API {
	cfg.validate()
	cfg.Limits = slices.Clone(cfg.Limits)
	cfg.Outages = slices.Clone(cfg.Outages)
	for i := range cfg.Outages {
		if cfg.Outages[i].RetryAfter == 0 {
			cfg.Outages[i].RetryAfter = time.Second
		}
	}
	if cfg.KeyHeader == "" {
		cfg.KeyHeader = "X-API-Key"
	}
	if cfg.UnavailableRetryAfter == 0 {
		cfg.UnavailableRetryAfter = time.Second
	}
	a := &API{cfg: cfg}
	a.Reset()
	return a
}

// Reset returns the API to its state just after NewAPI: every quota whole, every
// count zero, the random draws restarted from Seed, the clock of the Outages
// restarted now (or at the first request, as after NewAPI). Call it while no
// request is being served, and between two synctest bubbles that share the API.
func (a *API) Reset() {
	a.mu.Lock()
	a.keys = make(map[string]*keyState)
	a.rng = rand.New(rand.NewPCG(uint64(a.cfg.Seed), 0))
	a.clock.restart(time.Now())
	a.mu.Unlock()
	a.stats.reset()
}

// Stats returns a snapshot of what the API saw since NewAPI or Reset.
func (a *API) Stats() Stats { return a.stats.snapshot() }

// keyState holds one key's limiters; its mutex makes check-all-then-take atomic.
type keyState struct {
	mu     sync.Mutex
	limits []limiter
	last   time.Time // the latest time admit decided at
}

func (a *API) state(key string) *keyState {
	a.mu.Lock()
	defer a.mu.Unlock()
	k := a.keys[key]
	if k == nil {
		k = &keyState{limits: make([]limiter, len(a.cfg.Limits))}
		for i, l := range a.cfg.Limits {
			k.limits[i] = newLimiter(l)
		}
		a.keys[key] = k
	}
	return k
}

// arrivalDelay returns the random delay of one request on its way to the API.
func (a *API) arrivalDelay() time.Duration {
	if a.cfg.ArrivalJitter == 0 {
		return 0
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return time.Duration(a.rng.Int64N(int64(a.cfg.ArrivalJitter)))
}

// refuseAtRandom draws whether a request is one of Config.Refused.
func (a *API) refuseAtRandom() bool {
	if a.cfg.Refused == 0 {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.rng.Float64() < a.cfg.Refused
}

// draw returns the random part of one admitted request: its delay and whether it
// gets 503.
func (a *API) draw() (delay time.Duration, down bool) {
	delay = a.cfg.Latency
	if a.cfg.LatencyJitter == 0 && a.cfg.Unavailable == 0 {
		return delay, false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cfg.LatencyJitter > 0 {
		delay += time.Duration(a.rng.Int64N(int64(a.cfg.LatencyJitter)))
	}
	return delay, a.cfg.Unavailable > 0 && a.rng.Float64() < a.cfg.Unavailable
}

// admission is the decision on one request.
type admission struct {
	ok      bool
	now     time.Time     // when it was decided: see admit
	wait    time.Duration // refused: the true wait, the longest of the refusals
	serveAt time.Time     // admitted: when its queue turn comes
	quotas  []quota       // for the quota headers, when wanted
	bind    int           // index in quotas for the X-RateLimit family
}

// admit decides at now: it checks every limit first and takes from all of them
// only when all admit, so a refused request consumes nothing.
//
// now is the request's reading of the clock, taken before the key's lock, and
// concurrent requests take the lock in another order than they read the clock.
// The limiters count on time that never goes back for a key (a fixed window
// that sees an earlier time rolls back to that window with a count of 0, and
// the next request forward again, with another 0; a sliding log's expiry needs
// its times in order), so a reading earlier than the key's last decision is
// decided at that decision's time: the request is being decided after it
// anyway. On the real clock, 16 goroutines on a fixed window of 2 per
// millisecond had 596 of 1,969 windows admit more than 2, one 12.
func (k *keyState) admit(now time.Time, wantQuotas bool) admission {
	k.mu.Lock()
	defer k.mu.Unlock()
	if now.Before(k.last) {
		now = k.last
	} else {
		k.last = now
	}
	ad := admission{ok: true, now: now, serveAt: now}
	waits := make([]time.Duration, len(k.limits))
	for i, l := range k.limits {
		ok, wait := l.check(now)
		if !ok {
			ad.ok = false
			waits[i] = max(wait, 1) // refused means a wait, however short
			ad.wait = max(ad.wait, waits[i])
		}
	}
	if ad.ok {
		for _, l := range k.limits {
			ad.serveAt = later(ad.serveAt, l.take(now))
		}
	}
	if !wantQuotas {
		return ad
	}
	ad.bind = -1
	var bindWait time.Duration
	for i, l := range k.limits {
		q, ok := l.quota(now)
		if !ok {
			continue
		}
		if waits[i] > bindWait {
			ad.bind, bindWait = len(ad.quotas), waits[i]
		}
		ad.quotas = append(ad.quotas, q)
	}
	if ad.bind < 0 {
		ad.bind = fewestRemaining(ad.quotas)
	}
	return ad
}

// release ends an admitted request.
func (k *keyState) release() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, l := range k.limits {
		l.release()
	}
}
