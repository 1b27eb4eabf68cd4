package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/throttlehttp/throttle/throttletest"
)

// -serve ADDR runs the embedded demo API alone, on ADDR, until Ctrl-C, for
// several uploaders to share: each started with -target http://ADDR (and,
// to share the quota instead of each pacing alone, -redis). At the end it
// prints what the API saw.

// serve runs the demo API on addr until stop ends, then prints its counts.
// It returns the exit status.
func (a *app) serve(stop context.Context, addr string, asJSON bool) int {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		a.fail(fmt.Errorf("-serve %s: %w", addr, err))
		return 2
	}
	api := throttletest.NewAPI(demoQuota)
	srv := &http.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(a.stderr, "%s: demo API (100 requests/s, bursts of 10) at http://%s; Ctrl-C to stop\n", name, ln.Addr())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case <-stop.Done():
	case err = <-served:
	}
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shut)
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		a.fail(fmt.Errorf("-serve %s: %w", addr, err))
		return 1
	}
	t := api.Stats().Total
	s := server{Requests: t.Requests, Accepted: t.Accepted, Throttled: t.Throttled, PeakPerSecond: t.PeakPerSecond}
	if asJSON {
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(s)
		return 0
	}
	fmt.Fprintf(a.stdout, "\ndemo API at http://%s saw %d requests, %d accepted, %d answered 429, at most %d accepted in any second\n",
		ln.Addr(), s.Requests, s.Accepted, s.Throttled, s.PeakPerSecond)
	return 0
}
