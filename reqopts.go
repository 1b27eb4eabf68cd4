package throttle

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// This file holds the options of one request, carried by its context: the
// way net/http users give a request what is its own.

// A RequestOption sets how one request is handled, against the Transport's
// options; give it with [With].
type RequestOption struct {
	name  string
	apply func(*reqConfig) error
}

// reqConfig is what a request's options set.
type reqConfig struct {
	noRetry bool
	key     string // "" : the Transport's
	prio    int
	cost    int // 0: 1
}

type reqOptionsKey struct{}

// With returns a copy of ctx that carries opts for the requests made with
// it (req.WithContext, http.NewRequestWithContext); a Transport reads them
// when it is given the request. Options given again replace those of a
// parent context one by one, the later winning:
//
//	ctx = throttle.With(ctx, throttle.NoRetry())
//	req = req.WithContext(ctx)
//
// An option with a value no Transport can honour makes the request fail
// at once, with an error matching [ErrInvalidRequestOption] that says
// which and why; nothing is sent.
func With(ctx context.Context, opts ...RequestOption) context.Context {
	prev, _ := ctx.Value(reqOptionsKey{}).([]RequestOption)
	all := make([]RequestOption, 0, len(prev)+len(opts))
	all = append(append(all, prev...), opts...)
	return context.WithValue(ctx, reqOptionsKey{}, all)
}

// ErrInvalidRequestOption is matched by the error of a request whose
// options (see [With]) cannot be honoured.
var ErrInvalidRequestOption = errors.New("throttle: invalid request option")

// NoRetry sends the request once: whatever its answer, it is not retried
// (a 429 still pauses its key, for the other requests).
func NoRetry() RequestOption {
	return RequestOption{name: "NoRetry", apply: func(c *reqConfig) error {
		c.noRetry = true
		return nil
	}}
}

// PartitionKey puts the request in key's line, bucket, windows and pause,
// in place of what [WithKey] (or the host) would choose. Its Policy is
// still chosen by its host. As with WithKey, a key that holds a credential
// of the request is shown redacted; an empty key is refused.
func PartitionKey(key string) RequestOption {
	return RequestOption{name: "PartitionKey", apply: func(c *reqConfig) error {
		if key == "" {
			return errors.New("an empty key")
		}
		c.key = key
		return nil
	}}
}

// Priority sets the request's place in its key's line: it goes before the
// waiting requests of lower priority, among equals first come, first
// served; 0 is every request's without it, and negative values are for
// requests that can wait (a nightly batch beside users' calls). No
// priority starves the rest: a waiting request's priority rises by one for
// each second it has waited (aging), so a request of priority p is passed
// only by requests of priority p+d that arrive less than d seconds after
// it; its retries keep its place, but for a probe of an outage that failed
// (see the package doc): it goes behind the requests waiting, at the
// lowest priority among theirs of 0 or more (or at its own, if lower),
// and ages afresh. A leaky bucket's Queue still bounds the line, whatever
// the priority.
func Priority(p int) RequestOption {
	return RequestOption{name: "Priority", apply: func(c *reqConfig) error {
		c.prio = p
		return nil
	}}
}

// maxCost is the largest cost a request may be given, and the largest
// figure WithCost's function may report: far beyond any quota, and small
// enough that no count of units overflows.
const maxCost = 1_000_000_000

// Cost makes each attempt of the request count as n units against its
// key's limits, where the server counts a request as more than one (a
// GraphQL query's points, a batch endpoint's items): n known before
// sending, an estimate if need be. Without it a request costs 1, and a
// Policy's Rate, Burst and Windows' N are in these units.
//
//   - Token bucket: an attempt of cost n waits until the bucket holds n
//     tokens and takes them; the requests after it wait for what it took.
//     (Should the reserve the key holds back against jitter have grown
//     past that, see Policy.Burst, it waits until the bucket is full and
//     leaves it owing the rest.)
//   - Leaky bucket (Policy.Queue): it goes out at its turn, and the one
//     after it n/Rate later.
//   - Windows: it counts as n of each Window's N: no interval of length
//     Per holds more than N units.
//   - What the server's quota headers say remains is spent by n while the
//     request is on its way.
//   - Retries cost n again, as every attempt passes through the pacer.
//     MaxInFlight counts requests, not units: one slot each.
//   - A wait for n units known to end after the context's deadline fails
//     at once with ErrWouldExceedDeadline, taking nothing.
//   - A cost no limit of its key can ever admit fails the request at once,
//     unsent, with an error matching [ErrCostTooLarge] that names the key,
//     the limit and n: more than a token bucket holds (Burst less the one
//     token it keeps in reserve, max(1, Burst-1)), or more than a Window's
//     N. A leaky bucket admits any cost. A request already admitted under
//     the Policy before a change (SetPolicy, SetHostPolicy: waiting in
//     line, or its retry) is not refused for it: it goes when the bucket
//     or the window is whole.
//   - The server may say what the request really cost: see [WithCost]. The
//     charge is then corrected, up or down.
//
// n must be from 1 to 1e9; another value fails the request at once with an
// error matching [ErrInvalidRequestOption]. A Store set by WithStore books
// n units of the shared quota per attempt. [KeyStats].Units counts the
// units charged.
func Cost(n int) RequestOption {
	return RequestOption{name: "Cost", apply: func(c *reqConfig) error {
		if n < 1 || n > maxCost {
			return fmt.Errorf("%d, want 1 to %d units", n, maxCost)
		}
		c.cost = n
		return nil
	}}
}

// requestOptions reads the options ctx carries into *c, which is zero.
// (Filled in place: a reqConfig returned, and then copied, was some 20
// instructions of a request without options.)
func requestOptions(ctx context.Context, c *reqConfig) error {
	opts, ok := ctx.Value(reqOptionsKey{}).([]RequestOption)
	if !ok {
		return nil
	}
	var err error
	*c, err = applyRequestOptions(opts)
	return err
}

// applyRequestOptions is requestOptions once there are options: apply takes
// the config's address, which moves it to the heap, so a request without
// options does not get here.
func applyRequestOptions(opts []RequestOption) (c reqConfig, err error) {
	var bad []string
	for i, o := range opts {
		if o.apply == nil {
			bad = append(bad, "the zero RequestOption (make options with NoRetry, PartitionKey…)")
			continue
		}
		if replaced(opts[i+1:], o.name) {
			// Given again later (a parent context's, say): the later
			// wins, as With says, and this one is not read at all
			// (found in review: a parent's Cost(0) failed a request
			// whose own context gave Cost(2)).
			continue
		}
		if err := o.apply(&c); err != nil {
			bad = append(bad, o.name+": "+err.Error())
		}
	}
	if len(bad) > 0 {
		return c, fmt.Errorf("%w: %s", ErrInvalidRequestOption, strings.Join(bad, "; "))
	}
	return c, nil
}

// replaced reports whether an option of the name given is among later.
func replaced(later []RequestOption, name string) bool {
	for _, o := range later {
		if o.apply != nil && o.name == name {
			return true
		}
	}
	return false
}
