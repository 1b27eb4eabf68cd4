package throttle

import "strings"

// Structured Field Lists and Dictionaries (RFC 9651), just as far as the
// IETF RateLimit and RateLimit-Policy fields need them.

type sfParam struct {
	key   string
	value sfValue
}

// sfValue is a bare item. kind is 'i' Integer, 'd' Decimal, 's' String, 't'
// Token, ':' Byte Sequence or '?' Boolean.
type sfValue struct {
	kind byte
	neg  bool
	num  decimal // Integer, Decimal; Boolean as 0 or 1
	str  string  // String (unescaped), Token
}

func (v sfValue) isText() bool { return v.kind == 's' || v.kind == 't' }

// sfParams are the parameters of a member of a List (RFC 9651, Section 3.1.2).
type sfParams []sfParam

// get returns the value of the parameter key; when it repeats, the last wins.
func (ps sfParams) get(key string) (sfValue, bool) {
	for i := len(ps) - 1; i >= 0; i-- {
		if ps[i].key == key {
			return ps[i].value, true
		}
	}
	return sfValue{}, false
}

// sfList reads the field lines of a Structured Field List (RFC 9651, Section
// 4.2) one member (a bare item and its parameters) at a time. Each member's
// parameters are appended to the slice next is given, so a buffer of the
// caller's, reused, spares allocations; passing back the slice the last
// member's came in, emptied, keeps what a member of more parameters than
// the buffer holds grew it to, so a field of many such members allocates
// once, not once a member:
//
//	var buf [8]sfParam
//	l := sfList{lines: lines}
//	for v, ps, ok := l.next(buf[:0]); ok; v, ps, ok = l.next(ps[:0]) { ... }
//	if l.invalid { ... discard what next gave ... }
//
// The bare item and the parameters come apart so that escape analysis, which
// does not tell a struct's fields apart, does not move the buffer to the heap
// when the item's text is kept.
//
// invalid reports, once next has returned false, whether the field is not a
// valid List: the caller then discards all of it. Blank lines are skipped; an
// absent field is an empty list. Only the bare item types the RateLimit fields
// use are known: a member that is an Inner List, or a Date or Display String,
// makes the field invalid.
type sfList struct {
	lines   []string
	invalid bool

	p       sfParser
	started bool // the first member has been read
}

// next returns the next member's bare item v, and its parameters appended to
// params; ok is false at the end of the list, or at the first error, which
// sets invalid.
func (l *sfList) next(params sfParams) (v sfValue, ps sfParams, ok bool) {
	if !l.member() {
		return sfValue{}, nil, false
	}
	if !l.p.bareItem(&v) {
		l.invalid = true
		return sfValue{}, nil, false
	}
	if ps, ok = l.p.parameters(params); !ok {
		l.invalid = true
		return sfValue{}, nil, false
	}
	return v, ps, true
}

// member moves to the start of the next member, past the comma that ends
// the one before, and reports whether there is one; a trailing comma, or
// anything else than a comma after a member, sets invalid.
func (l *sfList) member() bool {
	p := &l.p
	if !l.started {
		l.started = true
		p.s = joinLines(l.lines)
		return p.i < len(p.s) // false: an empty field
	}
	p.skip(" \t")
	if p.i == len(p.s) {
		return false
	}
	if p.s[p.i] != ',' {
		l.invalid = true
		return false
	}
	p.i++
	p.skip(" \t")
	if p.i == len(p.s) {
		l.invalid = true // a trailing comma
		return false
	}
	return true
}

// sfDict reads the field lines of a Structured Field Dictionary (RFC 9651,
// Section 4.2.2) as sfList reads a List, one member (its key, its bare item
// and its parameters) at a time; invalid says the same. A member without a
// value is true; a key may repeat, and the caller keeps the last. A member
// whose value is an Inner List makes the field invalid, as in a List.
//
// A List whose members are Tokens without values ("default;r=5") is also a
// Dictionary, of true members; a Dictionary with a value ("limit=5") is
// never a List, as no bare item is followed by '='.
type sfDict struct{ sfList }

// next returns the next member's key, its bare item v, and its parameters
// appended to params; ok is false at the end of the dictionary, or at the
// first error, which sets invalid.
func (d *sfDict) next(params sfParams) (key string, v sfValue, ps sfParams, ok bool) {
	if !d.member() {
		return "", sfValue{}, nil, false
	}
	p := &d.p
	if key, ok = p.key(); !ok {
		d.invalid = true
		return "", sfValue{}, nil, false
	}
	v = sfTrue
	if p.accept('=') && !p.bareItem(&v) {
		d.invalid = true
		return "", sfValue{}, nil, false
	}
	if ps, ok = p.parameters(params); !ok {
		d.invalid = true
		return "", sfValue{}, nil, false
	}
	return key, v, ps, true
}

// joinLines joins the field lines of a field with commas, as RFC 9110 combines
// them, skipping blank lines; one line takes no allocation.
func joinLines(lines []string) string {
	if len(lines) == 1 {
		return strings.Trim(lines[0], " \t")
	}
	var b strings.Builder
	for _, l := range lines {
		if l = strings.Trim(l, " \t"); l != "" {
			if b.Len() > 0 {
				b.WriteByte(',')
			}
			b.WriteString(l)
		}
	}
	return b.String()
}

type sfParser struct {
	s string
	i int
}

func (p *sfParser) peek() byte {
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

// skip advances past the bytes in set.
func (p *sfParser) skip(set string) {
	for p.i < len(p.s) && strings.IndexByte(set, p.s[p.i]) >= 0 {
		p.i++
	}
}

// sfTrue is the value of a parameter or Dictionary member without one.
var sfTrue = sfValue{kind: '?', num: decimal{whole: 1}}

// parameters parses ";key[=value]" pairs, appending them to dst; a key
// without a value is true.
func (p *sfParser) parameters(dst sfParams) (sfParams, bool) {
	for p.peek() == ';' {
		p.i++
		p.skip(" ")
		key, ok := p.key()
		if !ok {
			return nil, false
		}
		prm := sfParam{key: key, value: sfTrue}
		if p.accept('=') && !p.bareItem(&prm.value) {
			return nil, false
		}
		dst = append(dst, prm)
	}
	return dst, true
}

// key parses the key of a parameter or Dictionary member: a lower-case
// letter or '*', then lower-case letters, digits, '_', '-', '.' and '*'.
func (p *sfParser) key() (string, bool) {
	start := p.i
	if c := p.peek(); !sfIsLower(c) && c != '*' {
		return "", false
	}
	p.i++
	p.skip("abcdefghijklmnopqrstuvwxyz0123456789_-.*")
	return p.s[start:p.i], true
}

func (p *sfParser) bareItem(v *sfValue) bool {
	*v = sfValue{}
	start := p.i
	switch c := p.peek(); {
	case c == '-' || isASCIIDigit(c):
		return p.number(v)
	case c == '"':
		return p.str(v)
	case sfIsLower(c|0x20) || c == '*': // Token: ALPHA or "*", then tchar, ":" or "/"
		p.i++
		p.skip(sfTokenChars)
		v.kind, v.str = 't', p.s[start:p.i]
		return true
	case c == ':': // Byte Sequence: base64 between colons
		p.i++
		p.skip("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=")
		v.kind = ':'
		return p.accept(':')
	case c == '?': // Boolean: ?0 or ?1
		p.i++
		v.kind = '?'
		if p.accept('1') {
			v.num.whole = 1
			return true
		}
		return p.accept('0')
	}
	return false
}

// accept advances past c, which is not 0, if it comes next.
func (p *sfParser) accept(c byte) bool {
	if p.peek() != c {
		return false
	}
	p.i++
	return true
}

const sfTokenChars = "!#$%&'*+-.^_`|~:/0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// number parses an Integer (at most 15 digits) or a Decimal (at most 12 digits,
// a point, then 1 to 3 digits).
func (p *sfParser) number(v *sfValue) bool {
	if p.peek() == '-' {
		v.neg = true
		p.i++
	}
	digits, frac := 0, -1 // frac counts the digits after the point; -1 before it
scan:
	for ; p.i < len(p.s); p.i++ {
		switch c := p.s[p.i]; {
		case isASCIIDigit(c) && frac < 0:
			v.num.whole = v.num.whole*10 + int64(c-'0')
			digits++
		case isASCIIDigit(c):
			v.num.milli = v.num.milli*10 + int64(c-'0')
			frac++
		case c == '.' && frac < 0 && digits > 0:
			frac = 0
		default:
			break scan
		}
		if digits > 15 || frac >= 0 && digits > 12 || frac > 3 {
			return false
		}
	}
	if digits == 0 || frac == 0 {
		return false
	}
	v.kind = 'i'
	if frac > 0 {
		for ; frac < 3; frac++ {
			v.num.milli *= 10
		}
		v.kind = 'd'
	}
	return true
}

// str parses a String: printable ASCII between double quotes, with \" and \\
// escaping a quote and a backslash. It allocates only for escapes.
func (p *sfParser) str(v *sfValue) bool {
	p.i++ // the opening quote
	start, b := p.i, []byte(nil)
	for ; p.i < len(p.s); p.i++ {
		switch c := p.s[p.i]; {
		case c == '"':
			v.kind, v.str = 's', p.s[start:p.i]
			if b != nil {
				v.str = string(b)
			}
			p.i++
			return true
		case c == '\\':
			if p.i+1 == len(p.s) || p.s[p.i+1] != '"' && p.s[p.i+1] != '\\' {
				return false
			}
			if b == nil {
				b = []byte(p.s[start:p.i]) // never nil
			}
			p.i++
			b = append(b, p.s[p.i])
		case c < 0x20 || c > 0x7e:
			return false
		case b != nil:
			b = append(b, c)
		}
	}
	return false
}

func sfIsLower(c byte) bool { return 'a' <= c && c <= 'z' }
