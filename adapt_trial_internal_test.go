package throttle

import "testing"

// A trial's test ends at its first bound: answers after it that the next
// refusal has not acted on yet change nothing (found in review: a trial
// told noise by three refusals read "helped" 939 accepted answers later,
// and its lower ceiling was proven).
func TestTrialVerdictIsFinal(t *testing.T) {
	tr := trial{adm: 1, base: 0.01}
	adm := uint64(2)
	for range 3 {
		tr.answered(adm, true, false)
		adm++
	}
	if tr.llr > -trialOdds {
		t.Fatalf("llr %.2f after 3 refusals: not noise", tr.llr)
	}
	told := tr.llr
	for range 5000 {
		tr.answered(adm, false, false)
		adm++
	}
	if tr.llr != told || tr.n != 3 {
		t.Errorf("after the verdict, 5,000 accepted answers moved the test: llr %.2f -> %.2f, %d answers counted", told, tr.llr, tr.n)
	}
}
