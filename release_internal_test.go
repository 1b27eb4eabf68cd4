package throttle

import (
	"net/http"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"
)

// Regression: judge lets go of the key at a request's last answer, under
// the lock it takes anyway. An answer the rules do not retry is the last
// only if Retry.ShouldRetry does not say otherwise: the key must stay held
// (not swept) while the request goes on to retry.
func TestShouldRetryKeepsTheKeyHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rt *Transport
		refs := func() int32 {
			ks := rt.cfg.def.cur.Load().keys.load("a.test")
			ks.mu.Lock()
			defer ks.mu.Unlock()
			return ks.refs
		}
		calls := 0
		rt = New(roundTripFunc(func(*http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody}, nil
		}), WithRetry(Retry{ShouldRetry: func(_ *http.Response, _ error, retry bool) bool {
			calls++
			require.False(t, retry, "a 200 is not retried by the rules")
			require.EqualValues(t, 1, refs(), "answer %d: the request holds its key", calls)
			return calls == 1 // retry the first 200 once
		}}))
		defer rt.Close()
		req, _ := http.NewRequest(http.MethodGet, "http://a.test/", nil)
		_, err := rt.RoundTrip(req)
		require.NoError(t, err)
		require.Equal(t, 2, calls)
		require.EqualValues(t, 0, refs())
		require.EqualValues(t, 1, rt.Stats().Keys["a.test"].Requests)
	})
}
