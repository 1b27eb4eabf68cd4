package throttle_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/throttlehttp/throttle"
)

// Stats must not mislead (issue 8, point 4). This test runs on the real
// clock on purpose: a few nanoseconds pass between two clock reads there,
// and a request that went at once must still not count as waited.
func TestStatsSayWhatHappened(t *testing.T) {
	rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) { return reply(r, http.StatusOK), nil }),
		throttle.WithHostPolicy("a.test", throttle.Policy{MaxInFlight: 2}),
		throttle.WithHostPolicy("b.test", throttle.Policy{Rate: 1e6, Burst: 100}),
		throttle.WithHostPolicy("c.test", throttle.Policy{Rate: 1e5, Burst: 100}))
	defer rt.Close()
	for range 20 {
		require.NoError(t, do(t, rt, "http://a.test/"))
		require.NoError(t, do(t, rt, "http://b.test/"))
	}
	require.NoError(t, do(t, rt, "http://c.test/"))
	// A body left open holds its MaxInFlight slot, with nothing on the wire.
	resp, err := rt.RoundTrip(newReq(t, context.Background(), http.MethodGet, "http://a.test/open"))
	require.NoError(t, err)
	defer resp.Body.Close()

	st := rt.Stats()
	a := st.Keys["a.test"]
	assert.Zero(t, a.Waited, "none waited for its turn")
	assert.Zero(t, a.InFlight, "nothing on the wire")
	assert.Equal(t, 1, a.Slots, "the open body holds a slot")
	assert.EqualValues(t, 1e6, st.Keys["b.test"].Rate)
	assert.EqualValues(t, 1e5, st.Keys["c.test"].Rate)
	assert.Zero(t, st.Total.Rate, "paces of different keys do not add up")
	assert.EqualValues(t, 42, st.Total.Requests)
}

// One key under two policies (a tenant's key, on two hosts with policies
// of their own) is one entry of Stats.Keys, its counts added up, and
// counted once in the total (regression, found in review: the total
// counted the first state twice, 3 requests of 2).
func TestStatsOfOneKeyUnderTwoPolicies(t *testing.T) {
	rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) { return reply(r, http.StatusOK), nil }),
		throttle.WithKey(func(*http.Request) string { return "tenant-1" }),
		throttle.WithPolicy(throttle.Policy{Rate: 100, Burst: 10}),
		throttle.WithHostPolicy("b.test", throttle.Policy{Rate: 50, Burst: 5}))
	defer rt.Close()
	for _, u := range []string{"http://a.test/", "http://b.test/", "http://b.test/"} {
		require.NoError(t, do(t, rt, u))
	}
	st := rt.Stats()
	require.Len(t, st.Keys, 1)
	assert.EqualValues(t, 3, st.Keys["tenant-1"].Requests)
	assert.EqualValues(t, 3, st.Total.Requests)
	assert.EqualValues(t, 3, st.Total.Attempts)
	assert.EqualValues(t, 50, st.Keys["tenant-1"].Rate, "the lower pace")
}
