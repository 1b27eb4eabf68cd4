package throttletest

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
)

// A Server is an API listening on a loopback address, for tests and programs that
// need a real socket. Inside a synctest bubble use the API's RoundTrip instead.
type Server struct {
	URL string // base URL, "http://127.0.0.1:port", with no trailing slash
	API *API   // the API behind the server, for Stats and Reset

	srv    *httptest.Server
	cancel context.CancelFunc
}

// NewServer starts a Server for NewAPI(cfg). The caller must Close it.
func NewServer(cfg Config) *Server {
	api := NewAPI(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	srv := httptest.NewUnstartedServer(api)
	srv.Config.BaseContext = func(net.Listener) context.Context { return ctx }
	srv.Start()
	return &Server{URL: srv.URL, API: api, srv: srv, cancel: cancel}
}

// Client returns an HTTP client for the server, whose idle connections Close
// closes.
func (s *Server) Client() *http.Client { return s.srv.Client() }

// Close cuts short the requests waiting in a queue or in Latency (they are counted
// as Canceled), then shuts the server down and blocks until every request has
// ended.
func (s *Server) Close() {
	s.cancel()
	s.srv.Close()
}
