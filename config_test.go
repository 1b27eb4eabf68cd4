package throttle_test

import (
	"errors"
	"math"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"

	"github.com/throttlehttp/throttle"
)

// newPanic returns what New panics with for opts (nil: it did not).
func newPanic(opts ...throttle.Option) (err error) {
	defer func() {
		if p := recover(); p != nil {
			e, ok := p.(error)
			if !ok {
				err = errors.New("panicked with a non-error")
				return
			}
			err = e
		}
	}()
	throttle.New(rtFunc(nil), opts...).Close()
	return nil
}

func TestBadPolicy(t *testing.T) {
	tests := []struct {
		name string
		p    throttle.Policy
		msg  string
	}{
		{"negative-rate", throttle.Policy{Rate: -1, Burst: 1}, "Rate -1"},
		{"nan-rate", throttle.Policy{Rate: rate.Limit(math.NaN()), Burst: 1}, "Rate NaN"},
		{"minus-inf-rate", throttle.Policy{Rate: rate.Limit(math.Inf(-1))}, "Rate -Inf"},
		{"rate-beyond-a-nanosecond", throttle.Policy{Rate: 1e300, Burst: 1}, "more than one request a nanosecond"},
		{"burst-0-finite-rate", throttle.Policy{Rate: 5}, "Burst 0 with Rate 5"},
		{"burst-without-rate", throttle.Policy{Burst: 5}, "Burst 5 without a finite Rate"},
		{"burst-with-inf-rate", throttle.Policy{Rate: rate.Inf, Burst: 5}, "Burst 5 without a finite Rate"},
		{"queue-without-rate", throttle.Policy{Queue: 3}, "Queue 3 without a finite Rate"},
		{"queue-with-inf-rate", throttle.Policy{Rate: rate.Inf, Queue: 3}, "Queue 3 without a finite Rate"},
		{"window-n-0", throttle.Policy{Windows: []throttle.Window{{N: 0, Per: time.Second}}}, "Windows[0]"},
		{"window-per-0", throttle.Policy{Windows: []throttle.Window{{N: 1}}}, "Windows[0]"},
		{"window-per-huge", throttle.Policy{Windows: []throttle.Window{{N: 1, Per: math.MaxInt64}}}, "Per in (0, "},
		{"negative-inflight", throttle.Policy{MaxInFlight: -1}, "MaxInFlight -1"},
		{"negative-burst", throttle.Policy{Rate: 1, Burst: -2}, "Burst -2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.p.Validate()
			require.ErrorIs(t, err, throttle.ErrInvalidConfig)
			assert.Contains(t, err.Error(), tt.msg)

			for name, opt := range map[string]throttle.Option{
				"WithPolicy:":                   throttle.WithPolicy(tt.p),
				`WithHostPolicy("h.test"):`:     throttle.WithHostPolicy("h.test", tt.p),
				`WithHostPolicy("*.h.test"):`:   throttle.WithHostPolicy("*.h.test", tt.p),
				`WithHostPolicy("h.test:8080")`: throttle.WithHostPolicy("h.test:8080", tt.p),
			} {
				perr := newPanic(opt)
				require.ErrorIs(t, perr, throttle.ErrInvalidConfig, name)
				assert.Contains(t, perr.Error(), name)
				assert.Contains(t, perr.Error(), tt.msg)
			}
		})
	}
	for _, ok := range []throttle.Policy{{}, {Rate: rate.Inf}, {Rate: rate.Limit(math.Inf(1))}, {Rate: 1e9, Burst: 1},
		{Rate: 1, Burst: 1}, {Rate: 1, Queue: 1}, {Rate: 1, Queue: 1, Burst: 3}, {MaxInFlight: 1}} {
		assert.NoError(t, ok.Validate(), "%+v", ok)
		assert.NoError(t, newPanic(throttle.WithPolicy(ok)), "%+v", ok)
	}
}

func TestBadRetry(t *testing.T) {
	tests := []struct {
		name string
		r    throttle.Retry
		msg  string
	}{
		{"negative-attempts", throttle.Retry{MaxAttempts: -1}, "MaxAttempts -1"},
		{"negative-elapsed", throttle.Retry{MaxElapsed: -time.Second}, "MaxElapsed -1s"},
		{"negative-initial", throttle.Retry{InitialDelay: -time.Second}, "InitialDelay -1s"},
		{"negative-max-delay", throttle.Retry{MaxDelay: -time.Second}, "MaxDelay -1s"},
		{"negative-retry-after", throttle.Retry{MaxRetryAfter: -time.Second}, "MaxRetryAfter -1s"},
		{"initial-past-max", throttle.Retry{InitialDelay: time.Minute, MaxDelay: time.Second}, "InitialDelay 1m0s is longer than MaxDelay 1s"},
		{"initial-past-default-max", throttle.Retry{InitialDelay: time.Hour}, "InitialDelay 1h0m0s is longer than MaxDelay 30s"},
		{"budget-above-one", throttle.Retry{Budget: 5}, "Budget 5"},
		{"budget-nan", throttle.Retry{Budget: math.NaN()}, "Budget NaN"},
		{"budget-inf", throttle.Retry{Budget: math.Inf(1)}, "Budget +Inf"},
		{"budget-minus-inf", throttle.Retry{Budget: math.Inf(-1)}, "Budget -Inf"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.r.Validate()
			require.ErrorIs(t, err, throttle.ErrInvalidConfig)
			assert.Contains(t, err.Error(), tt.msg)
			perr := newPanic(throttle.WithRetry(tt.r))
			require.ErrorIs(t, perr, throttle.ErrInvalidConfig)
			assert.Contains(t, perr.Error(), "WithRetry: "+tt.msg)
		})
	}
	for _, ok := range []throttle.Retry{{}, {MaxAttempts: 1}, {Budget: -1}, {Budget: 1}, {BudgetFloor: -1},
		{InitialDelay: 30 * time.Second}, {InitialDelay: time.Minute, MaxDelay: time.Minute}} {
		assert.NoError(t, ok.Validate(), "%+v", ok)
		assert.NoError(t, newPanic(throttle.WithRetry(ok)), "%+v", ok)
	}
}

func TestBadOptions(t *testing.T) {
	tests := []struct {
		name string
		opts []throttle.Option
		msgs []string
	}{
		{"nil-option", []throttle.Option{throttle.WithPolicy(throttle.Policy{}), nil}, []string{"option 2 of 2 is nil"}},
		{"host-twice", []throttle.Option{throttle.WithHostPolicy("h.test", throttle.Policy{}), throttle.WithHostPolicy("H.test", throttle.Policy{Rate: 1, Burst: 1})},
			[]string{`WithHostPolicy("h.test"): given twice`}},
		{"wildcard-twice", []throttle.Option{throttle.WithHostPolicy("*.h.test", throttle.Policy{}), throttle.WithHostPolicy("*.h.test", throttle.Policy{})},
			[]string{`WithHostPolicy("*.h.test"): given twice`}},
		{"policy-twice", []throttle.Option{throttle.WithPolicy(throttle.Policy{}), throttle.WithPolicy(throttle.Policy{})}, []string{"WithPolicy: given twice"}},
		{"retry-twice", []throttle.Option{throttle.WithRetry(throttle.Retry{}), throttle.WithRetry(throttle.Retry{})}, []string{"WithRetry: given twice"}},
		{"key-twice", []throttle.Option{throttle.WithKey(nil), throttle.WithKey(nil)}, []string{"WithKey: given twice"}},
		{"events-twice", []throttle.Option{throttle.WithEvents(nil), throttle.WithEvents(nil)}, []string{"WithEvents: given twice"}},
		{"every-problem-at-once", []throttle.Option{throttle.WithPolicy(throttle.Policy{Burst: 5}), throttle.WithRetry(throttle.Retry{MaxAttempts: -1}), throttle.WithHostPolicy("", throttle.Policy{})},
			[]string{"WithPolicy: Burst 5", "WithRetry: MaxAttempts -1", "empty host pattern"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := newPanic(tt.opts...)
			require.ErrorIs(t, err, throttle.ErrInvalidConfig)
			for _, m := range tt.msgs {
				assert.Contains(t, err.Error(), m)
			}
		})
	}
	for _, pattern := range []string{"", "*.", "*", "a.*.b", "*.example.com:80", "exa mple.com", ".example.com",
		// Found in review: these were taken, and the first two matched nothing.
		"[::1", "::1]", "a..b", "a.com:99999", "a.com:0", "a.com:", "[::1]x", "[a.com]", "1::2::3", ":8080"} {
		err := newPanic(throttle.WithHostPolicy(pattern, throttle.Policy{}))
		assert.ErrorIs(t, err, throttle.ErrInvalidConfig, "pattern %q", pattern)
	}
	for _, pattern := range []string{"::1", "[::1]", "[::1]:8080", "localhost:8080", "10.0.0.1", "*.example.com", "api.example.com"} {
		assert.NoError(t, newPanic(throttle.WithHostPolicy(pattern, throttle.Policy{})), "pattern %q", pattern)
	}
	// Distinct patterns are not duplicates: a port, a wildcard.
	assert.NoError(t, newPanic(throttle.WithHostPolicy("h.test", throttle.Policy{}),
		throttle.WithHostPolicy("h.test:8080", throttle.Policy{}), throttle.WithHostPolicy("*.h.test", throttle.Policy{})))
}

// An infinite Rate is unpaced, before and after the server objects: the
// limiter's arithmetic never sees an infinity (issue 8, point 3: a NaN
// there livelocked the key).
func TestInfiniteRateIsUnpaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
			calls++
			if calls <= 3 {
				return reply(r, http.StatusTooManyRequests, "Retry-After", "1"), nil
			}
			return reply(r, http.StatusOK), nil
		}), throttle.WithPolicy(throttle.Policy{Rate: rate.Limit(math.Inf(1))}), throttle.WithRetry(throttle.Retry{MaxAttempts: 1}))
		defer rt.Close()
		for range 3 {
			require.NoError(t, do(t, rt, "http://h.test/"))
			time.Sleep(time.Second)
		}
		start := time.Now()
		for range 100 {
			require.NoError(t, do(t, rt, "http://h.test/"))
		}
		assert.Less(t, time.Since(start), 2*time.Second, "sent as fast as unpaced, or at a learned pace, never stuck")
		st := rt.Stats().Keys["h.test"]
		assert.False(t, math.IsNaN(float64(st.Rate)) || math.IsInf(float64(st.Rate), 0), "rate %v", st.Rate)
	})
}

// A BudgetFloor of 0 is expressible: with a negative BudgetFloor and a
// Budget of 0.5, two failing requests get one retry between them.
func TestBudgetFloorOfZero(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		rt := throttle.New(rtFunc(func(r *http.Request) (*http.Response, error) {
			calls++
			return reply(r, http.StatusServiceUnavailable), nil
		}), throttle.WithRetry(throttle.Retry{Budget: 0.5, BudgetFloor: -1}))
		defer rt.Close()
		require.NoError(t, do(t, rt, "http://h.test/"))
		require.NoError(t, do(t, rt, "http://h.test/"))
		assert.Equal(t, 3, calls, "two firsts and one retry: the share alone")
	})
}
