package throttle

import (
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// The shortcut of the usual answer (judgePlain, and acceptPlain for a key
// never in trouble) ends an attempt exactly as judge's general path does:
// answer by answer, the same ticket and the same key, and not retried, on
// keys with and without a pacer, windows and MaxInFlight, bodies that hold
// the slot and bodies that do not, answers that are timed and answers that
// are not, and keys that met trouble (a pause and its probe) midway, whose
// answers the shortcut passes to learn.
func TestAnswerShortcut(t *testing.T) {
	for _, c := range []struct {
		name    string
		pol     Policy
		pauseAt int // the step at which both keys pause for a second; -1: never
	}{
		{"bucket", Policy{Rate: 8, Burst: 4}, -1},
		{"unpaced", Policy{}, -1},
		{"bucket, window, MaxInFlight", Policy{Rate: 8, Burst: 4, MaxInFlight: 3, Windows: []Window{{N: 5, Per: time.Second}}}, -1},
		{"leaky bucket, two windows", Policy{Rate: 8, Queue: 4, Windows: []Window{{N: 5, Per: time.Second}, {N: 9, Per: 3 * time.Second}}}, -1},
		{"bucket, MaxInFlight, paused", Policy{Rate: 8, Burst: 4, MaxInFlight: 3}, 400},
		{"unpaced, window, paused", Policy{Windows: []Window{{N: 5, Per: time.Second}}}, 400},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				short, general := New(nil), New(nil)
				defer short.Close()
				defer general.Close()
				general.plain = false // judge's general path, always
				p := compile(c.pol)
				ksShort, ksGeneral := short.newKeyState(p, "k"), general.newKeyState(p, "k")
				req, err := http.NewRequest(http.MethodGet, "http://k/", nil)
				if err != nil {
					t.Fatal(err)
				}
				rng := rand.New(rand.NewPCG(1, 2))
				type attempt struct{ short, general ticket }
				var out []attempt
				var open []io.Closer // bodies that hold a slot, in pairs
				var plain, notPlain, timed, untimed, tied int
				for step := range 2000 {
					time.Sleep(time.Duration(rng.IntN(4)) * time.Second / 64)
					now, mono := short.now()
					if step == c.pauseAt {
						for _, ks := range []*keyState{ksShort, ksGeneral} {
							ks.pause(hint{}, time.Second, now)
						}
					}
					if rng.IntN(2) == 0 && (c.pol.MaxInFlight == 0 || int(ksShort.slots) < c.pol.MaxInFlight) {
						var a attempt
						for i, ks := range []*keyState{ksShort, ksGeneral} {
							tk := &a.short
							if i == 1 {
								tk = &a.general
							}
							ks.mu.Lock()
							ks.refs++
							ks.take(tk, now, mono, false, 1)
							ks.mu.Unlock()
						}
						out = append(out, a)
					}
					if len(out) > 0 && rng.IntN(2) == 0 {
						i := rng.IntN(len(out))
						a := out[i]
						out = append(out[:i], out[i+1:]...)
						status := []int{200, 204, 301, 304, http.StatusSwitchingProtocols}[rng.IntN(5)]
						withBody := rng.IntN(2) == 0
						if short.plain && !ksShort.wantsQuota(a.short.adm) { // (see request.plain)
							plain++
						} else {
							notPlain++
						}
						if a.short.timed {
							timed++
						} else {
							untimed++
						}
						var resps [2]*http.Response
						for j, r := range []*request{
							{t: short, ks: ksShort, req: req, ctx: context.Background(), held: true},
							{t: general, ks: ksGeneral, req: req, ctx: context.Background(), held: true},
						} {
							body := io.ReadCloser(http.NoBody)
							if withBody {
								body = io.NopCloser(strings.NewReader("x"))
							}
							resps[j] = &http.Response{StatusCode: status, Header: http.Header{}, Body: body}
							tk := &a.short
							if j == 1 {
								tk = &a.general
							}
							if r.plain(tk, resps[j]) {
								r.judgePlain(tk, resps[j])
							} else {
								var o outcome
								r.judge(&o, tk, 1, resps[j], nil)
								if o.retryable || o.delay != 0 {
									t.Fatalf("step %d: a %d is retried, in %v", step, status, o.delay)
								}
							}
							if r.held {
								t.Fatalf("step %d: the request still holds the key after its last answer", step)
							}
						}
						if a.short != a.general {
							t.Fatalf("step %d: tickets differ: shortcut %+v, general %+v", step, a.short, a.general)
						}
						if a := reflect.TypeOf(resps[0].Body); a != reflect.TypeOf(resps[1].Body) {
							t.Fatalf("step %d: bodies differ: shortcut %v, general %v", step, a, reflect.TypeOf(resps[1].Body))
						}
						if _, ok := resps[0].Body.(*slotBody); ok {
							tied++
							open = append(open, resps[0].Body, resps[1].Body)
						}
					}
					if len(open) > 0 && rng.IntN(3) == 0 { // a body that held a slot closed, on both
						open[0].Close()
						open[1].Close()
						open = open[2:]
					}
					if !reflect.DeepEqual(ksShort, ksGeneral) {
						t.Fatalf("step %d: the keys differ:\nshortcut %+v\ngeneral  %+v", step, ksShort, ksGeneral)
					}
				}
				t.Logf("shortcut taken %d times, not %d; %d answers timed, %d not; %d bodies held a slot", plain, notPlain, timed, untimed, tied)
				if plain == 0 || notPlain == 0 {
					t.Errorf("shortcut taken %d times, not %d: the steps test one path only", plain, notPlain)
				}
				if timed == 0 || untimed == 0 && len(c.pol.Windows) == 0 {
					t.Errorf("%d answers timed, %d not: the steps test one case only", timed, untimed)
				}
				if c.pol.MaxInFlight > 0 && tied == 0 {
					t.Errorf("no body held a slot")
				}
			})
		})
	}
}
