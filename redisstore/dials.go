package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"time"
	"weak"

	"github.com/redis/go-redis/v9"
)

// This file holds what a Store learns of its client's dials: why a call
// had no answer when Redis cannot be connected to (nothing listens on its
// port, a TLS handshake fails...). go-redis dials apart from the call, and
// retries the dial for longer than a call's timeout: the call sees its
// timeout end, and why the dial failed is only logged.

// dials notes how the latest dial of the client's connections ended: a
// hook of the client, which passes its commands on untouched.
type dials struct {
	mu  sync.Mutex
	err error     // the latest dial's error; nil: it connected, or none yet
	at  time.Time // when it ended
}

var _ redis.Hook = (*dials)(nil)

// watched holds the dials of each client a Store was made with, by a weak
// pointer to the client: go-redis has no way to take a hook off, so each
// client gets one, whatever the number of Stores made with it (found in
// review: a hook per Store kept every Store alive as long as its client,
// and each dial went through all of them). An entry goes with its client.
var watched sync.Map // weak.Pointer[redis.Client or ClusterClient or Ring] -> *dials

// dialsOf returns the dials of client, hooked to it at the first call.
func dialsOf(client redis.UniversalClient) *dials {
	switch c := client.(type) {
	case *redis.Client:
		return register(c, client)
	case *redis.ClusterClient:
		return register(c, client)
	case *redis.Ring:
		return register(c, client)
	}
	d := new(dials) // a client of a type of its own: a hook per Store
	d.watch(client)
	return d
}

// register returns the dials of the client p, making and hooking them if
// it has none yet.
func register[T any](p *T, client redis.UniversalClient) *dials {
	key := weak.Make(p)
	if d, ok := watched.Load(key); ok {
		return d.(*dials)
	}
	d := new(dials)
	if old, loaded := watched.LoadOrStore(key, d); loaded {
		return old.(*dials)
	}
	runtime.AddCleanup(p, func(k weak.Pointer[T]) { watched.Delete(k) }, key)
	d.watch(client)
	return d
}

// watch adds d to client's hooks: to the nodes a cluster or ring client
// makes from now on (their dials are theirs, not the client's), else to
// the client itself.
func (d *dials) watch(client redis.UniversalClient) {
	switch c := client.(type) {
	case *redis.ClusterClient:
		c.OnNewNode(func(node *redis.Client) { node.AddHook(d) })
	case *redis.Ring:
		c.OnNewNode(func(node *redis.Client) { node.AddHook(d) })
	default:
		client.AddHook(d)
	}
}

// DialHook notes how each dial ends.
func (d *dials) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		now := time.Now()
		d.mu.Lock()
		defer d.mu.Unlock()
		d.err, d.at = err, now
		return conn, err
	}
}

// ProcessHook leaves commands alone.
func (*dials) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

// ProcessPipelineHook leaves pipelines alone.
func (*dials) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// why returns err, the error of a call begun at start whose context ctx
// ended before Redis answered, and the error of the client's latest dial
// if that dial ended in failure since start: why Redis did not answer.
// Any other err is returned as it is.
func (d *dials) why(ctx context.Context, err error, start time.Time) error {
	if err == nil || ctx.Err() == nil {
		return err
	}
	d.mu.Lock()
	dial, at := d.err, d.at
	d.mu.Unlock()
	if dial == nil || at.Before(start) {
		return err
	}
	return fmt.Errorf("%w: %w", err, &dialError{dial})
}

// dialError is why a call had no answer: the client could not connect to
// Redis. Its message is the dial's error, which names the address dialed
// (never a password: go-redis keeps those apart from the address). It
// unwraps to the dial's error, so that errors.As finds a *net.OpError,
// unless that error is a timeout: a dial's own deadline is not the
// caller's, and the error must not match context.DeadlineExceeded.
type dialError struct{ err error }

func (e *dialError) Error() string { return e.err.Error() }

func (e *dialError) Unwrap() error {
	if errors.Is(e.err, context.DeadlineExceeded) {
		return nil
	}
	return e.err
}
