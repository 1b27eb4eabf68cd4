package throttle

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"golang.org/x/time/rate"
)

// A trial that finds noise at a share over a third (a server refusing half
// the requests at random) quiets the key with a CUSUM whose step stays a
// number: at such a share its alternative, three times as often, was over
// one, the step NaN, and the quiet ended at the next refusal (found in
// review).
func TestQuietOfHeavyNoiseKeepsItsCount(t *testing.T) {
	ks := &keyState{pol: &policy{}}
	ks.lim = rate.NewLimiter(10, learnedBurst)
	ks.rarely().learn = learner{on: true, mode: modeCruise, lo: 10, hi: 20, cut: 1,
		tri: trial{adm: 1, at: 0, from: 10, base: 0.5, drop: learnDrop, quietUntil: longAgo, endedAt: longAgo}}
	l := ks.learning()
	l.tri.llr = -learnOdds // told: one more refusal ends it
	ks.admitted = 10
	done, _ := ks.tried(time.Now(), time.Second)
	assert.True(t, done)
	assert.Positive(t, l.bg, "noise found")
	for i := range 5 {
		l.accept(&ticket{adm: uint64(20 + i)})
	}
	assert.False(t, math.IsNaN(l.cusum), "the CUSUM is a number")
	done, _ = ks.tried(time.Now(), 2*time.Second)
	assert.True(t, done, "a refusal in the quiet of heavy noise cuts nothing")
}
