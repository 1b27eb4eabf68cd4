package throttle

import (
	"net/http"
	"time"
)

// hint is what one answer says about the key.
type hint struct {
	throttled bool          // 429, 503 with Retry-After, or 403 with the quota spent
	wait      time.Duration // how long the server asks to wait, if hasWait
	hasWait   bool
	source    string // the header the wait came from
}

// readHint reads a response's signals. Only answers that may throttle are
// parsed, so a 2xx costs nothing.
func readHint(resp *http.Response, now time.Time) hint {
	if resp == nil {
		return hint{}
	}
	var h hint
	switch resp.StatusCode {
	case http.StatusTooManyRequests:
		h.throttled = true
	case http.StatusServiceUnavailable, http.StatusForbidden, http.StatusBadGateway, http.StatusGatewayTimeout:
	default:
		return h
	}
	if ra, ok := ParseRetryAfter(resp.Header.Get("Retry-After"), now); ok && resp.StatusCode != http.StatusForbidden {
		h.wait, h.hasWait, h.source = ra, true, "Retry-After"
		h.throttled = h.throttled || resp.StatusCode == http.StatusServiceUnavailable
	}
	switch resp.StatusCode {
	case http.StatusBadGateway, http.StatusGatewayTimeout:
		return h // a floor for the retry's delay; no news about the quota
	}
	q, ok := ParseQuota(resp.Header, now)
	if resp.StatusCode == http.StatusForbidden {
		// GitHub's primary rate limit: 403 with the quota spent.
		if !ok || !q.Exhausted() {
			return hint{}
		}
		h.throttled = true
	}
	if h.throttled && !h.hasWait && ok && q.HasReset {
		h.wait, h.hasWait = q.Reset, true
		h.source = "X-RateLimit-Reset"
		if q.Policy != "" {
			h.source = "RateLimit"
		}
	}
	return h
}

// learn records an attempt's outcome at the key: the answer it got, a pause
// of the given length if the answer throttled, and the end of a probe. It
// reports the pause's end if one began or grew.
func (t *Transport) learn(ks *keyState, tk ticket, resp *http.Response, h hint, pause time.Duration, now time.Time) (until time.Time, source string) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	ks.sending--
	// now was read before the lock: another attempt may have used the
	// limiter since, and its clock must not go back (x/time/rate would count
	// the time between twice).
	paceNow := now
	if ks.limAt.After(paceNow) {
		paceNow = ks.limAt
	}
	ks.limAt = paceNow
	// ok: the server took the request (a 5xx says nothing about the pace).
	ok := resp != nil && !h.throttled && resp.StatusCode < http.StatusInternalServerError
	switch {
	case resp != nil && resp.StatusCode == http.StatusTooManyRequests, h.throttled && resp.StatusCode == http.StatusForbidden:
		ks.stats.Throttled++
	case resp != nil && resp.StatusCode == http.StatusServiceUnavailable:
		ks.stats.Unavailable++
	}
	if tk.probe {
		// The probe's answer decides, unless a pause began or grew while it
		// was out: then the next attempt after that pause probes again.
		ks.probe = probeDue
		if ok && !ks.pauseUntil.After(now) {
			ks.probe = probeNone
			ks.resume(paceNow)
		}
	}
	if ok {
		ks.adapt.accepted++
		ks.recover(paceNow)
	}
	if !tk.probe && ks.ramp > 0 && ok {
		ks.ramp++ // slow start: one more per answer, doubling per round trip
		if ks.ramp > ks.waiting+ks.sending {
			ks.ramp = 0 // no backlog left to hold back
		}
	}
	defer ks.wakeHead()
	if !h.throttled {
		return
	}
	source = "backoff"
	if h.hasWait {
		source = h.source
	}
	until = now.Add(pause)
	if !until.After(ks.pauseUntil) {
		return time.Time{}, ""
	}
	if !ks.pauseUntil.After(now) && pause > 0 {
		ks.stats.Pauses++
		ks.slow(paceNow)
	}
	ks.pauseUntil, ks.pauseBy = until, source
	ks.ramp = 0
	if ks.probe == probeNone {
		ks.probe = probeDue
	}
	return until, source
}

// resume lets the backlog follow a successful probe gently: through the
// pacer, whose bucket is emptied so the backlog does not go as one burst, or,
// with no pacer, ramping up from one request in flight.
func (ks *keyState) resume(now time.Time) {
	if ks.lim == nil {
		ks.ramp = 1
		if ks.ramp > ks.waiting+ks.sending {
			ks.ramp = 0
		}
		return
	}
	if n := int(ks.lim.TokensAt(now)); n > 0 {
		ks.lim.AllowN(now, n)
	}
}
