package throttle

import (
	"math/rand/v2"
	"net/http"
	"testing"
	"time"
)

// The shortcut of the usual admission (admit's free, then AllowN) admits
// exactly when the general path does (readyAt, then take): step by step, the
// same decisions and the same tickets, on keys where the shortcut is taken
// and where it must not be (a pause), and where it is taken but must refuse
// (a full MaxInFlight, a full window, an empty bucket).
func TestAdmissionShortcut(t *testing.T) {
	epoch := time.Unix(1000, 0)
	tr := &Transport{epoch: epoch}
	for _, c := range []struct {
		name    string
		pol     Policy
		pauseAt int  // the step at which both keys pause for a second; -1: never
		plain   bool // the shortcut is taken at the first step
	}{
		{"bucket", Policy{Rate: 8, Burst: 4}, -1, true},
		{"unpaced, MaxInFlight", Policy{MaxInFlight: 2}, -1, true},
		{"bucket, MaxInFlight", Policy{Rate: 8, Burst: 4, MaxInFlight: 2}, -1, true},
		{"bucket, window", Policy{Rate: 8, Burst: 4, Windows: []Window{{N: 3, Per: time.Second}}}, -1, true},
		{"unpaced, two windows, MaxInFlight", Policy{MaxInFlight: 2, Windows: []Window{{N: 3, Per: time.Second}, {N: 8, Per: 3 * time.Second}}}, -1, true},
		{"bucket, window, paused", Policy{Rate: 8, Burst: 4, Windows: []Window{{N: 3, Per: time.Second}}}, 500, true},
		{"bucket, MaxInFlight, paused", Policy{Rate: 8, Burst: 4, MaxInFlight: 3}, 500, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := compile(c.pol)
			short, general := tr.newKeyState(p, "short"), tr.newKeyState(p, "general")
			rng := rand.New(rand.NewPCG(1, 2))
			now := epoch
			var out []ticket // attempts on the wire, the same on both keys
			var plain, notPlain, admitted, refused, slotsFull, windowFull int
			for step := range 3000 {
				// Steps of 1/64 s: at 8/s the tokens are exact in floats,
				// so that AllowN and readyAt's float tolerance agree.
				now = now.Add(time.Duration(rng.IntN(4)) * time.Second / 64)
				mono := tr.since(now)
				if step == c.pauseAt {
					short.troubled().pauseUntil = now.Add(time.Second)
					general.troubled().pauseUntil = now.Add(time.Second)
				}
				for len(out) > 0 && rng.IntN(3) == 0 { // an answer, to both
					tk := out[0]
					out = out[1:]
					for _, ks := range []*keyState{short, general} {
						tk := tk
						tr.learn(&lesson{}, ks, &tk, &http.Response{StatusCode: http.StatusOK}, &hint{}, 0, now, mono)
						if tk.slot {
							ks.slots--
						}
					}
				}

				if short.plain() {
					plain++
					if c.pol.MaxInFlight > 0 && int(short.slots) >= c.pol.MaxInFlight {
						slotsFull++
					}
					for i := range short.wins {
						if short.wins[i].nextAt(mono, 0, 1, false) > mono {
							windowFull++
							break
						}
					}
				} else {
					notPlain++
				}
				var tkShort ticket
				okShort := short.free(now, mono, 1) && (short.lim == nil || short.lim.AllowN(now, 1))
				if okShort {
					short.enter(&tkShort, now, mono, false, 1)
				}
				var tkGeneral ticket
				at, _ := general.readyAt(now, mono, 1)
				okGeneral := !at.After(now)
				if okGeneral {
					general.take(&tkGeneral, now, mono, false, 1)
				}

				if okShort != okGeneral {
					t.Fatalf("step %d: the shortcut admits: %v, the general path: %v (plain %v, slots %d)",
						step, okShort, okGeneral, short.plain(), short.slots)
				}
				if tkShort != tkGeneral {
					t.Fatalf("step %d: tickets differ: shortcut %+v, general %+v", step, tkShort, tkGeneral)
				}
				if okShort {
					admitted++
					out = append(out, tkShort)
				} else {
					refused++
				}
				if short.lim != nil && short.lim.TokensAt(now) != general.lim.TokensAt(now) {
					t.Fatalf("step %d: tokens left: shortcut %v, general %v", step, short.lim.TokensAt(now), general.lim.TokensAt(now))
				}
			}
			t.Logf("admitted %d, refused %d; shortcut taken %d times (%d with every slot held, %d with a window full), not %d",
				admitted, refused, plain, slotsFull, windowFull, notPlain)
			if admitted == 0 || refused == 0 {
				t.Errorf("admitted %d, refused %d: the steps test one decision only", admitted, refused)
			}
			if got := plain > 0; got != c.plain {
				t.Errorf("shortcut taken %d times, want some: %v", plain, c.plain)
			}
			if c.pol.MaxInFlight > 0 && slotsFull == 0 {
				t.Errorf("no step found every slot held: the shortcut's own refusal is not tested")
			}
			if len(c.pol.Windows) > 0 && windowFull == 0 {
				t.Errorf("no step found a window full: the shortcut's own refusal is not tested")
			}
			if c.pauseAt >= 0 && notPlain == 0 {
				t.Errorf("the shortcut was taken during the pause")
			}
		})
	}
}
