package otelthrottle

// Attributes: what each instrument's series are split by, made once per
// combination and kept, so that recording an event allocates nothing.

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
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

// attrKey is what a set of attributes is made from. It is compared and
// hashed on every event, so it holds the method and the shape as small
// numbers, and is passed by pointer.
type attrKey struct {
	origin string // scheme://host[:port], as the event's URL begins
	a, b   string
	key    string // the partition key, with WithKeyAttribute
	status int
	shape  shape
	method method // http.request.method
}

// attrKey sets k to the key of e's attributes for the instrument of shape s.
func (m *Metrics) attrKey(k *attrKey, s shape, e *throttle.Event, a, b string, status int) {
	*k = attrKey{origin: origin(e.URL), a: a, b: b, status: status, shape: s, method: methodOf(e.Method)}
	if m.key {
		k.key = e.Key
	}
}

// maxSets bounds the combinations of attributes kept. Past it (many hosts,
// or many keys with WithKeyAttribute), a new combination is recorded in the
// overflow series, whose one attribute is otel.metric.overflow=true, as the
// OTel SDK does past its own limit.
const maxSets = 1024

// overflowAttr marks the overflow series.
const overflowAttr = "otel.metric.overflow"

// attrCache keeps the attribute sets made. Reading is a lookup by a hash
// of the key, without a lock: the map is replaced, not changed, when a key
// is added, which happens once per combination. Keys that make the same
// attributes ("https://API.example.com" and "https://api.example.com:443")
// share one series.
type attrCache struct {
	seed maphash.Seed
	m    atomic.Pointer[map[uint64]*entry] // by hash; keys of one hash are chained
	full atomic.Bool                       // maxSets keys are kept

	mu     sync.Mutex // held to add a key
	n      int        // keys kept
	series map[seriesKey]*series

	overflow series // past maxSets, of every new combination
}

// An entry is a key kept, and its series.
type entry struct {
	key  attrKey
	s    *series
	next *entry // of the same hash
}

// seriesKey names a series: its instrument, by shape, and its attributes.
type seriesKey struct {
	shape shape
	set   attribute.Distinct
}

// A series is one combination of attributes of one instrument: its set,
// as a measurement option, and for a counter summed here
// (throttle.attempts) its count.
type series struct {
	opt   metric.MeasurementOption
	count atomic.Int64
}

// hash is k's hash: the origin's, and the partition key's and a and b's
// when set, by maphash (cheaper than a map's own hash of a struct of
// strings, which reflects on its type), mixed with the numbers.
func (c *attrCache) hash(k *attrKey) uint64 {
	h := maphash.String(c.seed, k.origin)
	if k.a != "" {
		h = h*31 + maphash.String(c.seed, k.a)
	}
	if k.b != "" {
		h = h*31 + maphash.String(c.seed, k.b)
	}
	if k.key != "" {
		h = h*31 + maphash.String(c.seed, k.key)
	}
	return h ^ (uint64(k.status) | uint64(k.shape)<<32 | uint64(k.method)<<40)
}

// of returns the series of k's attributes; past maxSets, the overflow.
func (c *attrCache) of(k *attrKey) *series {
	h := c.hash(k)
	if m := c.m.Load(); m != nil {
		for e := (*m)[h]; e != nil; e = e.next {
			if e.key == *k {
				return e.s
			}
		}
	}
	if c.full.Load() {
		return &c.overflow
	}
	return c.add(*k, h)
}

// add adds k, whose hash is h, if another did not first.
func (c *attrCache) add(k attrKey, h uint64) *series {
	c.mu.Lock()
	defer c.mu.Unlock()
	var old map[uint64]*entry
	if m := c.m.Load(); m != nil {
		old = *m
	}
	for e := old[h]; e != nil; e = e.next {
		if e.key == k {
			return e.s
		}
	}
	if c.n >= maxSets {
		c.full.Store(true)
		return &c.overflow
	}
	set := k.set()
	sk := seriesKey{k.shape, set.Equivalent()}
	s := c.series[sk]
	if s == nil {
		s = &series{opt: metric.WithAttributeSet(set)}
		if c.series == nil {
			c.series = make(map[seriesKey]*series)
		}
		c.series[sk] = s
	}
	k.origin, k.key = strings.Clone(k.origin), strings.Clone(k.key)
	m := make(map[uint64]*entry, len(old)+1)
	for h, e := range old {
		m[h] = e
	}
	m[h] = &entry{key: k, s: s, next: old[h]}
	c.m.Store(&m)
	c.n++
	return s
}

// each calls fn for each series of shape sh, and the overflow.
func (c *attrCache) each(sh shape, fn func(*series)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, s := range c.series {
		if k.shape == sh {
			fn(s)
		}
	}
	if sh == shapeAttempt && c.overflow.count.Load() > 0 {
		fn(&c.overflow)
	}
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
		kv = append(kv, attribute.String(methodAttr, k.method.String()))
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
	i := strings.IndexByte(u, ':')
	if i < 0 || !strings.HasPrefix(u[i+1:], "//") {
		return u
	}
	if j := strings.IndexByte(u[i+3:], '/'); j >= 0 {
		return u[:i+3+j]
	}
	return u
}

// server is the host of origin, lower-cased and without brackets or user
// info, and its port: the one given, else the scheme's default; 0 if
// unknown.
func server(origin string) (string, int) {
	scheme, hostport, ok := strings.Cut(origin, "://")
	if !ok {
		scheme, hostport = "", origin
	}
	// Never user info, which may be a token ("sk_live_…@host"): the
	// events show none, and this holds should one slip through.
	hostport = hostport[strings.LastIndexByte(hostport, '@')+1:]
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

// method is http.request.method: a method of RFC 9110 or PATCH, else
// methodOther ("_OTHER"), so that a caller's odd methods cannot make series
// without end.
type method uint8

const (
	methodOther method = iota
	methodGet
	methodHead
	methodPost
	methodPut
	methodDelete
	methodConnect
	methodOptions
	methodTrace
	methodPatch
)

var methodNames = [...]string{"_OTHER", "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"}

func (m method) String() string { return methodNames[m] }

// methodOf is the method of an event's Method.
func methodOf(m string) method {
	switch m {
	case "GET":
		return methodGet
	case "HEAD":
		return methodHead
	case "POST":
		return methodPost
	case "PUT":
		return methodPut
	case "DELETE":
		return methodDelete
	case "CONNECT":
		return methodConnect
	case "OPTIONS":
		return methodOptions
	case "TRACE":
		return methodTrace
	case "PATCH":
		return methodPatch
	}
	return methodOther
}

// errorType is error.type for an attempt the base answered with err:
// "timeout" (a net.Error's Timeout, the context's deadline), "canceled"
// (the context's), else the error's Go type, as OTel's HTTP
// instrumentation names it.
func errorType(err error) string {
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	t := fmt.Sprintf("%T", err)
	if w, ok := err.(interface{ Unwrap() error }); ok && t == "*throttle.redactedError" {
		// The base's error, its message without the URL's credentials
		// (throttle's events show it so): named by the base's type.
		return errorType(w.Unwrap())
	}
	return t
}
