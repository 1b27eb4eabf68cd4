package main

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/throttlehttp/throttle"
	"github.com/throttlehttp/throttle/redisstore"
)

// -redis ADDR shares the quota with every uploader given the same -redis and
// -target: each Transport books its requests' departures in Redis (see
// package redisstore), so four uploaders configured at the quota send as
// one. Should Redis stop answering, each paces alone at a quarter of the
// quota until it answers again (redisstore's default), and the summary
// says how often that began.

// sharedThrough returns the option that shares the quota through the Redis
// at addr, and a function that closes the connection to it.
func sharedThrough(addr string) (throttle.Option, func()) {
	redis.SetLogger(quietLogger{}) // its dial errors would break the progress bar: the summary tells
	client := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	return throttle.WithStore(redisstore.New(client)), func() { client.Close() }
}

// quietLogger drops go-redis's log lines.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}
