package throttle

import (
	"math"
	"net/http"
	"strings"
	"time"
)

// This file parses the grammars of header field values: Retry-After and the
// decimal numbers of the rate-limit fields. sfv.go parses the Structured
// Field Lists of the IETF RateLimit fields; quota.go reads what they mean.

// maxRetryDuration is the longest time.Duration, about 292 years; waits too long to
// represent saturate at it.
const maxRetryDuration = time.Duration(math.MaxInt64)

// ParseRetryAfter parses the value of a Retry-After response header field
// (RFC 9110, Section 10.2.3) and returns how long the server asks the client to
// wait, counted from now (the time the response arrived).
//
// Spaces and tabs around the value are ignored. Accepted are:
//
//   - delay-seconds, a whole number of seconds: "120". A number too large for a
//     time.Duration saturates at the largest Duration, however many digits it has;
//   - decimal seconds as some APIs send them (Shopify sends "2.0"): "1.5", "0.25".
//     Digits are required on both sides of the point, so "2." and ".5" are
//     malformed. The result is exact to the millisecond; further digits round it
//     up to the next millisecond ("0.0001" is 1ms), so a wait never ends before
//     the time the server asked for;
//   - an HTTP-date in any of the three formats of RFC 9110, Section 5.6.7:
//     IMF-fixdate "Sun, 06 Nov 1994 08:49:37 GMT", the obsolete RFC 850 form
//     "Sunday, 06-Nov-94 08:49:37 GMT" and ANSI C's asctime form
//     "Sun Nov  6 08:49:37 1994". The wait is the date minus now; a date at or
//     before now gives 0, true. (The Transport passes the server's clock as now
//     when the answer's Date field shows it to differ from its own.) An RFC 850
//     date's zone is GMT (or UTC, as Go writes it), and its two-digit year is
//     the one RFC 9110 says: not more than 50 years after now, else a century
//     before ("Friday, 01-Jan-60" is 1960 in 2000, 2060 in 2026).
//
// Retry-After is not a list, but proxies and client libraries join a
// header's field lines into one, with a comma and optional whitespace, for any
// field (RFC 9110, Section 5.3): "120, 60", or
// "Sun, 06 Nov 1994 08:49:37 GMT, Sun, 06 Nov 1994 08:49:37 GMT". A value
// that holds several such elements, each of them one of the forms above, gives
// the longest of their waits: the server asked for each. A comma right after
// a day name is the date's own. Empty elements, as an empty field line leaves,
// are skipped; one malformed element makes the whole value malformed ("120,
// soon"), and "1,5" is two waits, 1 and 5 seconds, not one and a half. To
// read a header sent as several field lines, join them with ", ".
//
// The duration is never negative. ok is false, with a zero duration, only when
// the value is absent (empty, blank, or empty elements only) or malformed: a
// sign ("-5", "+5"), a unit ("5s"), an exponent, inner spaces, an ISO 8601
// timestamp, or anything else that is neither of the number forms above nor an
// HTTP-date, nor a list of them. What a missing value means is the caller's
// choice.
//
// The number forms do not allocate, nor does a list of them. ParseRetryAfter
// never panics, whatever the input.
func ParseRetryAfter(value string, now time.Time) (time.Duration, bool) {
	d, _, ok := parseRetryAfter(value, &instant{now: now})
	return d, ok
}

// retryAfter reads the Retry-After of a response header h: its field lines,
// each of which may hold several values joined by an intermediary, give the
// longest wait any of them states. Only the first line was read, and a
// merged one as malformed: a 429 with "Retry-After: 120, 120" paused the key
// for the second a refusal that states no wait is taken to ask, and one with
// the lines "60" and "120" for 60 s (found in review 46). A line that does
// not parse is left out, as one absent (an empty line, merged, is an empty
// element): read as malformed, the lines "120" and "soon" paused the key a
// second where the first line alone, before, gave 120 s (found in session
// 47). A single line is read whole: "120, soon" is malformed.
func retryAfter(h http.Header, now *instant) (d time.Duration, whole, ok bool) {
	lines := h["Retry-After"] // canonical: no need for Values' canonicalization
	if len(lines) == 1 {
		return parseRetryAfter(lines[0], now)
	}
	for _, line := range lines {
		if ld, lw, lok := parseRetryAfter(line, now); lok {
			d, whole, ok = longer(d, whole, ok, ld, lw)
		}
	}
	return d, whole, ok
}

// parseRetryAfter is ParseRetryAfter, and reports whether the value has
// whole seconds only (delay-seconds, or an HTTP-date), so that the wait the
// server meant may end up to a second before the one stated: a server
// rounds up to its next whole second (a date), or its wait to whole seconds.
func parseRetryAfter(value string, now *instant) (d time.Duration, whole, ok bool) {
	if d, whole, ok = parseRetryAfterValue(value, now); ok {
		return d, whole, true
	}
	// A single value has no comma but a date's own after its day name,
	// so one that parses is not a list: only a failure pays for the split.
	if strings.IndexByte(value, ',') < 0 {
		return 0, false, false
	}
	for rest := value; rest != ""; {
		var elem string
		elem, rest = nextRetryAfter(rest)
		if strings.Trim(elem, " \t") == "" {
			continue
		}
		ed, ew, eok := parseRetryAfterValue(elem, now)
		if !eok {
			return 0, false, false
		}
		d, whole, ok = longer(d, whole, ok, ed, ew)
	}
	return d, whole, ok
}

// nextRetryAfter splits the first element off a Retry-After value that
// intermediaries merged: up to the first comma, unless all before it is
// letters, a day name, whose comma is the date's own (IMF-fixdate and RFC
// 850's: "Sun, 06 Nov 1994 08:49:37 GMT"): then up to the next. The element
// is then parsed whole, so a comma taken for a date's that is not fails it.
func nextRetryAfter(s string) (elem, rest string) {
	i := strings.IndexByte(s, ',')
	if i < 0 {
		return s, ""
	}
	if isDayName(strings.Trim(s[:i], " \t")) {
		j := strings.IndexByte(s[i+1:], ',')
		if j < 0 {
			return s, ""
		}
		i += 1 + j
	}
	return s[:i], s[i+1:]
}

// isDayName reports whether s is ASCII letters only, as a day name is; the
// date it begins is checked by its parse.
func isDayName(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i] | 0x20; c < 'a' || c > 'z' {
			return false
		}
	}
	return s != ""
}

// longer adds a wait e (whole says whether in whole seconds) to the
// longest so far, d (none if !ok). Of two equal waits the exact one
// counts: the end of the wait is known, and no sooner.
func longer(d time.Duration, whole, ok bool, e time.Duration, ewhole bool) (time.Duration, bool, bool) {
	switch {
	case !ok || e > d:
		return e, ewhole, true
	case e == d:
		return d, whole && ewhole, true
	}
	return d, whole, true
}

// parseRetryAfterValue parses one Retry-After value: delay-seconds,
// decimal seconds or an HTTP-date.
func parseRetryAfterValue(value string, now *instant) (d time.Duration, whole, ok bool) {
	value = strings.Trim(value, " \t")
	if value == "" {
		return 0, false, false
	}
	if isASCIIDigit(value[0]) {
		n, ok := parseDecimal(value)
		if !ok {
			return 0, false, false
		}
		return n.duration(), !strings.Contains(value, "."), true
	}
	date, ok := parseHTTPDate(value, now.now)
	if !ok {
		return 0, false, false
	}
	return durationUntil(date, now.server()), true, true
}

// The layouts of an rfc850-date: its zone is GMT (RFC 9110, Section
// 5.6.7), or UTC, as Go's time.RFC850 writes a time in UTC. Any other is no
// HTTP-date: time.RFC850 read any zone abbreviation, at the offset the
// client machine's own time zone gives that name, if any, else at GMT's
// (found in review: "Saturday, 01-Jan-00 00:01:00 EST", as PHP's
// DATE_RFC850 writes a local time, paused a key a minute on a machine in
// UTC, and 5 h 1 min on one in New York).
const (
	rfc850GMT = "Monday, 02-Jan-06 15:04:05 GMT"
	rfc850UTC = "Monday, 02-Jan-06 15:04:05 UTC"
)

// parseHTTPDate parses an HTTP-date in any of the three formats of RFC
// 9110, Section 5.6.7, told apart by where their first comma is: right
// after a day name of three letters (IMF-fixdate), after a longer one (RFC
// 850's), or nowhere (asctime). now places an rfc850-date's two-digit year
// (see rfc850Year).
func parseHTTPDate(s string, now time.Time) (time.Time, bool) {
	var t time.Time
	var err error
	switch i := strings.IndexByte(s, ','); {
	case i == 3:
		t, err = time.Parse(http.TimeFormat, s)
	case i < 0:
		t, err = time.Parse(time.ANSIC, s)
	case strings.HasSuffix(s, " UTC"):
		t, err = time.Parse(rfc850UTC, s)
		t = rfc850Year(t, now)
	default:
		t, err = time.Parse(rfc850GMT, s)
		t = rfc850Year(t, now)
	}
	return t, err == nil
}

// rfc850Year returns t, an rfc850-date's time, in the year whose last two
// digits its two-digit year gives, as RFC 9110 reads it at now: the year
// that is not more than 50 years after now, nor 50 or more before it.
// (time.Parse's fixed pivot put them in 1969-2068: at 2000-01-01, year 60
// was 2060 where the RFC says 1960, a key held 60 years; in 2026, year 76
// was 1976 where it says 2076. Found in review.)
func rfc850Year(t, now time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	now = now.UTC()
	yy := t.Year() % 100
	y := now.Year() - (now.Year()%100+100)%100 + yy // in now's century
	d := time.Date(y, t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
	switch {
	case d.After(now.AddDate(50, 0, 0)):
		d = time.Date(y-100, t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
	case !d.After(now.AddDate(-50, 0, 0)):
		d = time.Date(y+100, t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
	}
	return d
}

// instant is when an answer came: now, by the client's clock, and, for the
// absolute times the server writes (an HTTP-date, a Unix time), the
// server's clock then, as the answer's Date field shows it (RFC 9110,
// Section 6.6.1): a server whose clock is 3 s behind asks, by the client's,
// for a retry 3 s before it will take one, and one ahead for a wait 3 s too
// long, at every reset. Date is read only when such a time is.
type instant struct {
	now  time.Time
	h    http.Header   // the answer's header, for its Date; nil: the server's clock is taken to be now
	rtt  time.Duration // the attempt's round trip: how much older than now an agreeing Date may be
	srv  time.Time     // the server's clock at now, once read
	read bool
}

const (
	// clockSlack is how far a Date may lie outside the second it truncates
	// and the answer's way back before the clocks are taken to differ.
	clockSlack = time.Second / 4
	// maxSkew is the most the server's clock is taken to differ by: a Date
	// further off is taken for a broken one (or a cache's: with an Age
	// over 0 it is not read at all), and the client's clock is used.
	maxSkew = time.Hour
)

// server returns the server's clock when the answer came: now when the
// answer has no usable Date, or one that now agrees with (the server
// stamped it, truncated to its second, before the answer's way back);
// else Date itself, which is never later than the server's clock was: the
// server stamped it before the answer left. The second's fraction and the
// answer's way back are left out, so a wait counted from it may be up to a
// second and that way long, as a whole-second one may be. (Date plus half
// the round trip was later than the server's clock whenever the trip was
// mostly the way there or the server's work, not the way back: 30 s behind,
// a 429 after 4 s of upload had its retry reach the server 2 s before its
// Retry-After date; found in review t10.)
func (c *instant) server() time.Time {
	switch {
	case c.h == nil:
		return c.now
	case c.read:
		return c.srv
	}
	c.read, c.srv = true, c.now
	v := c.h["Date"]
	if len(v) == 0 || storedAnswer(c.h) {
		return c.srv
	}
	date, ok := parseHTTPDate(strings.Trim(v[0], " \t"), c.now)
	if !ok {
		return c.srv
	}
	off := c.now.Sub(date) // the client's clock ahead by this, less the fraction and the way back
	if off < -clockSlack || off > time.Second+c.rtt+clockSlack {
		if off > -maxSkew && off < maxSkew+time.Second+c.rtt {
			c.srv = date
		}
	}
	return c.srv
}

// durationUntil returns how long from now until t: 0 when t is not after now, and at
// most maxRetryDuration (time.Time.Sub saturates).
func durationUntil(t, now time.Time) time.Duration {
	return max(t.Sub(now), 0)
}

// decimal is a non-negative decimal number as sent in a header field: whole units
// and thousandths. milli is in [0, 1000]: digits past the thousandth round it up,
// which can carry it to 1000; whole saturates at math.MaxInt64.
type decimal struct {
	whole, milli int64
}

// parseDecimal parses one or more ASCII digits, optionally followed by a point
// and one or more digits. Anything else, a sign included, is malformed. It does
// not allocate and takes time linear in len(s).
func parseDecimal(s string) (decimal, bool) {
	var n decimal
	i := 0
	for ; i < len(s) && isASCIIDigit(s[i]); i++ {
		d := int64(s[i] - '0')
		if n.whole > (math.MaxInt64-d)/10 {
			n.whole = math.MaxInt64
		} else {
			n.whole = n.whole*10 + d
		}
	}
	if i == 0 {
		return decimal{}, false
	}
	if i == len(s) {
		return n, true
	}
	if s[i] != '.' {
		return decimal{}, false
	}
	i++
	start, scale, rest := i, int64(100), false
	for ; i < len(s) && isASCIIDigit(s[i]); i++ {
		d := int64(s[i] - '0')
		if scale > 0 {
			n.milli += d * scale
			scale /= 10
		} else if d != 0 {
			rest = true
		}
	}
	if i == start || i != len(s) {
		return decimal{}, false
	}
	if rest {
		n.milli++
	}
	return n, true
}

// duration returns n as a number of seconds, saturating at maxRetryDuration.
func (n decimal) duration() time.Duration {
	const maxSeconds = math.MaxInt64 / int64(time.Second)
	if n.whole > maxSeconds {
		return maxRetryDuration
	}
	d, m := n.whole*int64(time.Second), n.milli*int64(time.Millisecond)
	if d > math.MaxInt64-m {
		return maxRetryDuration
	}
	return time.Duration(d + m)
}

func isASCIIDigit(c byte) bool { return '0' <= c && c <= '9' }
