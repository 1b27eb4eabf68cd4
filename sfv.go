package throttle

import "strings"

// Structured Field Lists (RFC 9651), just as far as the IETF RateLimit and
// RateLimit-Policy fields need them.

// sfItem is a member of a Structured Field List (RFC 9651, Section 3.1): a bare
// item and its parameters.
type sfItem struct {
	value  sfValue
	params []sfParam
}

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

// param returns the value of the parameter key; when it repeats, the last wins.
func (it *sfItem) param(key string) (sfValue, bool) {
	for i := len(it.params) - 1; i >= 0; i-- {
		if it.params[i].key == key {
			return it.params[i].value, true
		}
	}
	return sfValue{}, false
}

// parseSFList parses the field lines of a Structured Field List (RFC 9651,
// Section 4.2) and calls yield with each member in order, reusing one *sfItem.
// It reports whether the whole field is valid; when not, the caller discards
// what yield saw. Blank lines are skipped; an absent field is an empty list.
// Only the bare item types the RateLimit fields use are known: a member that is
// an Inner List, or a Date or Display String, makes the field invalid.
func parseSFList(lines []string, yield func(*sfItem)) bool {
	p := sfParser{}
	if len(lines) == 1 {
		p.s = strings.Trim(lines[0], " \t")
	} else {
		var b strings.Builder
		for _, l := range lines {
			if l = strings.Trim(l, " \t"); l != "" {
				if b.Len() > 0 {
					b.WriteByte(',')
				}
				b.WriteString(l)
			}
		}
		p.s = b.String()
	}
	for p.i < len(p.s) {
		p.item.params = p.item.params[:0]
		if !p.bareItem(&p.item.value) || !p.parameters(&p.item.params) {
			return false
		}
		yield(&p.item)
		p.skip(" \t")
		if p.i == len(p.s) {
			break
		}
		if p.s[p.i] != ',' {
			return false
		}
		p.i++
		p.skip(" \t")
		if p.i == len(p.s) {
			return false // a trailing comma
		}
	}
	return true
}

type sfParser struct {
	s    string
	i    int
	item sfItem
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

// parameters parses ";key[=value]" pairs; a key without a value is true.
func (p *sfParser) parameters(dst *[]sfParam) bool {
	for p.peek() == ';' {
		p.i++
		p.skip(" ")
		start := p.i
		if c := p.peek(); !sfIsLower(c) && c != '*' {
			return false
		}
		p.i++
		p.skip("abcdefghijklmnopqrstuvwxyz0123456789_-.*")
		prm := sfParam{key: p.s[start:p.i], value: sfValue{kind: '?', num: decimal{whole: 1}}}
		if p.peek() == '=' {
			p.i++
			if !p.bareItem(&prm.value) {
				return false
			}
		}
		*dst = append(*dst, prm)
	}
	return true
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
