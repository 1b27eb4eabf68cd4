package otelthrottle

import (
	"context"
	"errors"
	"hash/maphash"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/throttlehttp/throttle"
)

// Keys that differ in any one field find series of their own, each with its
// own attributes, and find the same series again: what the hash leaves out
// or mixes, the comparison catches.
func TestAttrCacheKeepsKeysApart(t *testing.T) {
	base := attrKey{origin: "https://api.test", status: 200, shape: shapeAttempt, method: methodGet}
	tests := []struct {
		name string
		key  attrKey
		want string // the attributes of its set
	}{
		{"base", base, "http.request.method=GET,http.response.status_code=200,server.address=api.test,server.port=443"},
		{"another origin", with(base, func(k *attrKey) { k.origin = "https://api2.test" }),
			"http.request.method=GET,http.response.status_code=200,server.address=api2.test,server.port=443"},
		{"another method", with(base, func(k *attrKey) { k.method = methodPost }),
			"http.request.method=POST,http.response.status_code=200,server.address=api.test,server.port=443"},
		{"another status", with(base, func(k *attrKey) { k.status = 429 }),
			"http.request.method=GET,http.response.status_code=429,server.address=api.test,server.port=443"},
		{"another shape", with(base, func(k *attrKey) { k.shape = shapeRetry }),
			"http.request.method=GET,http.response.status_code=200,server.address=api.test,server.port=443"},
		{"an error type", with(base, func(k *attrKey) { k.status, k.a = 0, "timeout" }),
			"error.type=timeout,http.request.method=GET,server.address=api.test,server.port=443"},
		{"a key", with(base, func(k *attrKey) { k.key = "tenant-1" }),
			"http.request.method=GET,http.response.status_code=200,server.address=api.test,server.port=443,throttle.key=tenant-1"},
		{"a and b", attrKey{origin: "https://api.test", shape: shapeRefused, method: methodGet, a: "queue_full", b: "queue"},
			"http.request.method=GET,server.address=api.test,server.port=443,throttle.limit=queue,throttle.refusal.reason=queue_full"},
		{"a and b swapped", attrKey{origin: "https://api.test", shape: shapeRefused, method: methodGet, a: "queue", b: "queue_full"},
			"http.request.method=GET,server.address=api.test,server.port=443,throttle.limit=queue_full,throttle.refusal.reason=queue"},
	}
	c := attrCache{seed: maphash.MakeSeed()}
	seen := map[*series]string{}
	for _, tc := range tests {
		k := tc.key
		s := c.of(&k)
		assert.Equal(t, tc.want, setOf(t, s), tc.name)
		if other, ok := seen[s]; ok {
			t.Errorf("%s: the series of %s", tc.name, other)
		}
		seen[s] = tc.name
	}
	for _, tc := range tests {
		k := tc.key
		assert.Same(t, c.of(&k), c.of(&k), "%s: found again", tc.name)
	}
}

func with(k attrKey, change func(*attrKey)) attrKey {
	change(&k)
	return k
}

// setOf is the attributes of s's set, as collect in the external tests
// writes them.
func setOf(t *testing.T, s *series) string {
	t.Helper()
	set := metric.NewAddConfig([]metric.AddOption{s.opt}).Attributes()
	return set.Encoded(attribute.DefaultEncoder())
}

// The key of an event is read from its fields: the origin its URL begins
// with, the method as a number, the partition key only with
// WithKeyAttribute.
func TestAttrKeyOfAnEvent(t *testing.T) {
	e := &throttle.Event{Kind: throttle.EventAnswered, Key: "tenant-1", Method: "PROPFIND",
		URL: "https://api.test:8443/v1/items", Status: 207}
	var k attrKey
	(&Metrics{}).attrKey(&k, shapeAttempt, e, "", "", e.Status)
	assert.Equal(t, attrKey{origin: "https://api.test:8443", status: 207, shape: shapeAttempt, method: methodOther}, k)
	(&Metrics{key: true}).attrKey(&k, shapeAttempt, e, "", "", e.Status)
	assert.Equal(t, "tenant-1", k.key)
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodDelete,
		http.MethodConnect, http.MethodOptions, http.MethodTrace, http.MethodPatch} {
		assert.Equal(t, m, methodOf(m).String())
	}
	assert.Equal(t, "_OTHER", methodOf("get").String())
}

// Each of throttle's errors that refuse a request has a reason of its own,
// wrapped in a WaitError as the Transport gives it; only an error no other
// reason names is "_OTHER" (regression, found in review: ErrCostTooLarge was
// "_OTHER", which the documentation says is another error of the Store).
func TestRefusalReasons(t *testing.T) {
	for err, want := range map[error]string{
		throttle.ErrQueueFull:           "queue_full",
		throttle.ErrWouldExceedDeadline: "would_exceed_deadline",
		throttle.ErrPaused:              "paused",
		throttle.ErrClosed:              "closed",
		throttle.ErrMaxElapsed:          "max_elapsed",
		throttle.ErrCostTooLarge:        "cost_too_large",
		throttle.ErrStoreUnavailable:    "store_unavailable",
		context.DeadlineExceeded:        "deadline_exceeded",
		context.Canceled:                "canceled",
		errors.New("a Store's own"):     "_OTHER",
	} {
		if got := refusal(&throttle.WaitError{Key: "k", Err: err}); got != want {
			t.Errorf("refusal(%v) = %q, want %q", err, got, want)
		}
	}
}
