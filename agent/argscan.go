package agent

import (
	"bytes"
	"encoding/json"
	"unicode/utf16"
	"unicode/utf8"
)

// maxScanDepth bounds the nesting cleanArgs follows; deeper arguments take
// the slow path.
const maxScanDepth = 200

// cleanArgs reports whether raw is valid JSON, in valid UTF-8, that
// summarizeArgs returns as it is: no key isSecretKey or is
// "_raw_arguments", no name/value pair names a secret, no string is longer
// than summaryMaxString, and no string value is JSON text, starts with an
// HTTP auth scheme or holds a secret span. A false answer only sends raw down the slow path: the
// scan may be cautious, never lax. It allocates only to decode a key
// written with escapes.
func cleanArgs(raw []byte) bool {
	s := argScan{b: raw}
	if !s.value() {
		return false
	}
	s.skipSpace()
	return s.i == len(s.b)
}

// argScan validates JSON by recursive descent, checking strings on the way.
type argScan struct {
	b     []byte
	i     int
	depth int
}

func (s *argScan) skipSpace() {
	for s.i < len(s.b) && isSpace(s.b[s.i]) {
		s.i++
	}
}

// at reports whether s.b[s.i] is c, after white space.
func (s *argScan) at(c byte) bool {
	s.skipSpace()
	return s.i < len(s.b) && s.b[s.i] == c
}

func (s *argScan) value() bool {
	s.skipSpace()
	if s.i == len(s.b) {
		return false
	}
	switch s.b[s.i] {
	case '{':
		return s.object()
	case '[':
		return s.array()
	case '"':
		return s.stringValue()
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.literal("null")
	}
	return s.number()
}

func (s *argScan) object() bool {
	if s.depth++; s.depth > maxScanDepth {
		return false
	}
	s.i++
	if s.at('}') {
		s.i++
		s.depth--
		return true
	}
	// For the name/value rule: whether a name field names a secret, whether
	// there is a value field, and the first name not checked yet (quoted).
	secretName, hasValue, pending := false, false, []byte(nil)
	for {
		if !s.at('"') {
			return false
		}
		start := s.i
		k, esc, ok := s.str()
		if !ok {
			return false
		}
		var name, value bool
		if esc {
			var d string
			if json.Unmarshal(s.b[start:s.i], &d) != nil || isSecretKey(d) || equalFold(d, rawArgumentsKey) {
				return false
			}
			name, value = isNameField(d), equalFold(d, "value")
		} else {
			if isSecretKey(k) || equalFold(k, rawArgumentsKey) {
				return false
			}
			name, value = isNameField(k), equalFold(k, "value")
		}
		if value {
			hasValue = true
			if pending != nil {
				secretName = secretName || isSecretQuoted(pending)
				pending = nil
			}
		}
		if !s.at(':') {
			return false
		}
		s.i++
		if name && s.at('"') {
			start := s.i
			if !s.stringValue() {
				return false
			}
			switch q := s.b[start:s.i]; {
			case hasValue || pending != nil:
				secretName = secretName || isSecretQuoted(q)
			default:
				pending = q // checked only if a value field shows up
			}
		} else if !s.value() {
			return false
		}
		if secretName && hasValue {
			return false
		}
		if more, ok := s.next('}'); !more {
			return ok
		}
	}
}

func (s *argScan) array() bool {
	if s.depth++; s.depth > maxScanDepth {
		return false
	}
	s.i++
	if s.at(']') {
		s.i++
		s.depth--
		return true
	}
	for {
		if !s.value() {
			return false
		}
		if more, ok := s.next(']'); !more {
			return ok
		}
	}
}

// next reads what follows a member of an object or an element of an array
// that ends with end: a comma (more follow) or end (the container is
// closed, ok). Anything else is malformed: not more, not ok.
func (s *argScan) next(end byte) (more, ok bool) {
	if s.skipSpace(); s.i == len(s.b) {
		return false, false
	}
	switch s.b[s.i] {
	case ',':
		s.i++
		return true, true
	case end:
		s.i++
		s.depth--
		return false, true
	}
	return false, false
}

// stringValue scans a string value and reports whether it needs no change.
func (s *argScan) stringValue() bool {
	v, esc, ok := s.str()
	if !ok || len(v) > summaryMaxString {
		return false
	}
	if esc {
		var buf [summaryMaxString]byte // decoded, v is no longer
		v = unescapeJSON(v, buf[:0])
	}
	return stringKind(v) == strPlain && !hasSecretSpan(v)
}

// isSecretQuoted applies isSecretKey to a valid quoted JSON string,
// unescaping it first when it holds escapes.
func isSecretQuoted(q []byte) bool {
	v := q[1 : len(q)-1]
	if bytes.IndexByte(v, '\\') < 0 {
		return isSecretKey(v)
	}
	var d string
	if json.Unmarshal(q, &d) != nil {
		return true
	}
	return isSecretKey(d)
}

// unescapeJSON appends to dst the content v of a valid JSON string,
// decoded as encoding/json decodes it: an unpaired surrogate is U+FFFD.
func unescapeJSON(v, dst []byte) []byte {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c != '\\' {
			dst = append(dst, c)
			continue
		}
		i++ // v is valid: an escape is complete
		switch c = v[i]; c {
		case 'u':
			r, _ := hexRune(string(v[i+1:i+5]), 4)
			i += 4
			if utf16.IsSurrogate(r) {
				r1 := r
				r = utf8.RuneError
				if i+6 < len(v) && v[i+1] == '\\' && v[i+2] == 'u' {
					if r2, ok := hexRune(string(v[i+3:i+7]), 4); ok {
						if d := utf16.DecodeRune(r1, r2); d != utf8.RuneError {
							r = d
							i += 6
						}
					}
				}
			}
			dst = utf8.AppendRune(dst, r)
			continue
		case 'n':
			c = '\n'
		case 't':
			c = '\t'
		case 'r':
			c = '\r'
		case 'b':
			c = '\b'
		case 'f':
			c = '\f'
		}
		dst = append(dst, c)
	}
	return dst
}

// strSpecial marks the bytes str must look at.
var strSpecial = func() (t [256]bool) {
	for c := range t {
		t[c] = c == '"' || c == '\\' || c < 0x20 || c >= utf8.RuneSelf
	}
	return t
}()

// str scans a JSON string: v is its content as written, esc whether it
// holds escapes.
func (s *argScan) str() (v []byte, esc, ok bool) {
	b := s.b
	start, high := s.i+1, false
	for i := start; i < len(b); i++ {
		if !strSpecial[b[i]] {
			continue
		}
		switch c := b[i]; {
		case c == '"':
			s.i = i + 1
			v = b[start:i]
			return v, esc, !high || utf8.Valid(v)
		case c == '\\':
			esc = true
			if i++; i == len(b) {
				return nil, false, false
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(b) {
					return nil, false, false
				}
				if _, ok := hexRune(string(b[i+1:i+5]), 4); !ok {
					return nil, false, false
				}
				i += 4
			default:
				return nil, false, false
			}
		case c < 0x20:
			return nil, false, false
		case c >= utf8.RuneSelf:
			high = true
		}
	}
	return nil, false, false
}

func (s *argScan) literal(l string) bool {
	if len(s.b)-s.i < len(l) || string(s.b[s.i:s.i+len(l)]) != l {
		return false
	}
	s.i += len(l)
	return true
}

func (s *argScan) number() bool {
	b, i := s.b, s.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	if i < len(b) && b[i] == '0' {
		i++
	} else if i = digits(b, i); i < 0 {
		return false
	}
	if i < len(b) && b[i] == '.' {
		if i = digits(b, i+1); i < 0 {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i = digits(b, i); i < 0 {
			return false
		}
	}
	s.i = i
	return true
}

// digits returns the end of the digits that start at b[i], or -1 if there
// are none.
func digits(b []byte, i int) int {
	n := i
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	if i == n {
		return -1
	}
	return i
}

// cut shortens s to at most n bytes on a rune boundary, marking the cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
