package otelthrottle

// Attributes: what each instrument's series are split by, made once per
// combination and kept, so that recording an event allocates nothing.

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/throttlehttp/throttle"
)

// The attribute keys. Those of OTel's semantic conventions for HTTP clients
// where one applies; throttle.* for the rest.
const (
	serverAddress = "server.address"
	serverPort    = "server.port"
	methodAttr    = "http.request.method"
	statusAttr    = "http.response.status_code"
	errorAttr     = "error.type"
	limitAttr     = "throttle.limit"
	reasonAttr    = "throttle.refusal.reason"
	pauseReason   = "throttle.pause.reason"
	pauseSource   = "throttle.pause.source"
	keyAttr       = "throttle.key"
)

// shape says which instrument a set of attributes is for, and so what its
// attrKey's a and b hold.
type shape uint8

const (
	shapeAttempt   shape = iota // a: error.type; status
	shapeRetry                  // as shapeAttempt
	shapeThrottled              // status
	shapePaused                 // a: reason, b: source; no method
	shapeWaited                 // a: limit
	shapeRefused                // a: reason, b: limit
)

// attrKey is what a set of attributes is made from.
type attrKey struct {
	shape  shape
	origin string // scheme://host[:port], as the event's URL begins
	method string
	status int
	a, b   string
	key    string // the partition key, with WithKeyAttribute
}

// attrKey returns the key of e's attributes for the instrument of shape s.
func (m *Metrics) attrKey(s shape, e throttle.Event, a, b string, status int) attrKey {
	k := attrKey{shape: s, origin: origin(e.URL), method: e.Method, status: status, a: a, b: b}
	if m.key {
		k.key = e.Key
	}
	return k
}

// maxSets bounds the attribute sets kept. Past it (many hosts, or many keys
// with WithKeyAttribute) sets are made for each event, which allocates.
const maxSets = 4096

// attrCache keeps the attribute sets made, as measurement options.
type attrCache struct {
	m sync.Map // attrKey → metric.MeasurementOption
	n atomic.Int64
}

// of returns the measurement option of k's attributes.
func (c *attrCache) of(k attrKey) metric.MeasurementOption {
	if o, ok := c.m.Load(k); ok {
		return o.(metric.MeasurementOption)
	}
	o := metric.WithAttributeSet(k.set())
	if c.n.Load() < maxSets {
		k.origin, k.method, k.key = strings.Clone(k.origin), strings.Clone(k.method), strings.Clone(k.key)
		if _, loaded := c.m.LoadOrStore(k, o); !loaded {
			c.n.Add(1)
		}
	}
	return o
}

// set makes k's attributes.
func (k attrKey) set() attribute.Set {
	host, port := server(k.origin)
	kv := make([]attribute.KeyValue, 0, 7)
	kv = append(kv, attribute.String(serverAddress, host))
	if port > 0 {
		kv = append(kv, attribute.Int(serverPort, port))
	}
	if k.shape != shapePaused {
		kv = append(kv, attribute.String(methodAttr, method(k.method)))
	}
	switch k.shape {
	case shapeAttempt, shapeRetry:
		if k.status != 0 {
			kv = append(kv, attribute.Int(statusAttr, k.status))
		}
		if k.a != "" {
			kv = append(kv, attribute.String(errorAttr, k.a))
		}
	case shapeThrottled:
		kv = append(kv, attribute.Int(statusAttr, k.status))
	case shapePaused:
		kv = append(kv, attribute.String(pauseReason, k.a), attribute.String(pauseSource, k.b))
	case shapeWaited:
		kv = append(kv, attribute.String(limitAttr, k.a))
	case shapeRefused:
		kv = append(kv, attribute.String(reasonAttr, k.a), attribute.String(limitAttr, k.b))
	}
	if k.key != "" {
		kv = append(kv, attribute.String(keyAttr, k.key))
	}
	return attribute.NewSet(kv...)
}

// origin is the scheme and host that u, an event's URL, begins with.
func origin(u string) string {
	i := strings.Index(u, "://")
	if i < 0 {
		return u
	}
	if j := strings.IndexByte(u[i+3:], '/'); j >= 0 {
		return u[:i+3+j]
	}
	return u
}

// server is the host of origin, lower-cased and without brackets, and its
// port: the one given, else the scheme's default; 0 if unknown.
func server(origin string) (string, int) {
	scheme, hostport, ok := strings.Cut(origin, "://")
	if !ok {
		scheme, hostport = "", origin
	}
	host, p, err := net.SplitHostPort(hostport)
	if err != nil {
		host, p = strings.Trim(hostport, "[]"), ""
	}
	port, _ := strconv.Atoi(p)
	if port == 0 {
		switch strings.ToLower(scheme) {
		case "http":
			port = 80
		case "https":
			port = 443
		}
	}
	return strings.ToLower(host), port
}

// method is m as http.request.method says it: a method of RFC 9110 or PATCH,
// else "_OTHER", so that a caller's odd methods cannot make series without
// end.
func method(m string) string {
	switch m {
	case "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH":
		return m
	}
	return "_OTHER"
}

// errorType is error.type for an attempt the base answered with err: the
// error's Go type, as OTel's HTTP instrumentation names it, or "timeout".
func errorType(err error) string {
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return "timeout"
	}
	return fmt.Sprintf("%T", err)
}
