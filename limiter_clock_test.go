package throttle

import (
	"net/http"
	"testing"
	"time"
)

// Regression: learn reads now before it takes the key's lock. A limiter
// operation at that earlier time (here, raising a slowed rate) moved the
// limiter's clock back and minted tokens for time already paid for.
func TestLearnNeverMovesTheLimiterClockBack(t *testing.T) {
	epoch := time.Unix(1000, 0)
	tr := &Transport{epoch: epoch}
	ks := tr.newKeyState(compile(Policy{Rate: 10, Burst: 2}), "k") // depth 1
	t0 := epoch.Add(time.Minute)
	ks.slow(ticket{adm: 1}, t0, tr.since(t0), time.Second, false, false) // 8/s
	t1 := t0.Add(time.Minute)
	stale := t1.Add(-100 * time.Millisecond) // the answer was read 100ms before learn got the lock
	var tk ticket
	ks.take(&tk, t1, tr.since(t1), false, 1) // meanwhile another request took the token at t1
	ks.sending++
	tr.learn(&lesson{}, ks, &ticket{adm: tk.adm, cost: tk.cost, sent: stale, mono: tr.since(stale)}, &http.Response{StatusCode: http.StatusOK}, &hint{}, 0, stale, tr.since(stale)) // a quiet spell: the rate is raised
	at, _ := ks.readyAt(t1, tr.since(t1), 1)
	if want := time.Duration(float64(time.Second) / float64(ks.lim.Limit())); at.Sub(t1) < want-time.Millisecond {
		t.Fatalf("next token %v after the last one taken, want %v at %v/s", at.Sub(t1), want, ks.lim.Limit())
	}
}
