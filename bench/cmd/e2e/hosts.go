package main

import (
	"net/http/httptest"

	"github.com/throttlehttp/throttle/throttletest"
)

// A host is one server of a run, on loopback: its address and the APIs
// behind it.
type host struct {
	url  string
	apis []*throttletest.API // one; for a quota whose rate halves, the one before and the one after
	stop func()
}

// startHosts starts fresh servers for one run of records requests, one per
// host, whose noise is drawn from seed (host 0 from seed itself, as the one
// server of a single-host scenario). The caller stops them.
func (s scenario) startHosts(records int, seed int64) []host {
	q := s.quotaOf(records)
	hs := make([]host, s.hostCount())
	for h := range hs {
		cfg := s.config(records, seed+int64(h)<<32)
		if q.halveAfter > 0 {
			before, after := halvingAPIs(cfg, q)
			srv := httptest.NewServer(&switched{before: before, after: after, halveAfter: q.halveAfter})
			hs[h] = host{url: srv.URL, apis: []*throttletest.API{before, after}, stop: srv.Close}
			continue
		}
		srv := throttletest.NewServer(cfg)
		hs[h] = host{url: srv.URL, apis: []*throttletest.API{srv.API}, stop: srv.Close}
	}
	return hs
}

// sum adds up what the hosts' APIs saw; its PeakPerSecond is the highest of
// any one API, whose quota it is measured against (for a quota whose rate
// halves, of either, each counted apart).
func sum(hs []host) throttletest.Counts {
	var c throttletest.Counts
	for _, h := range hs {
		for _, api := range h.apis {
			t := api.Stats().Total
			c.Requests += t.Requests
			c.Throttled += t.Throttled
			c.Unavailable += t.Unavailable
			c.Outage += t.Outage
			c.PeakPerSecond = max(c.PeakPerSecond, t.PeakPerSecond)
		}
	}
	return c
}
