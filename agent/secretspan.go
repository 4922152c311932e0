package agent

import (
	"strings"
	"unicode/utf8"
)

// hasSecretSpan reports whether s holds a secret span (see summarizeArgs).
// It allocates only to fold a non-ASCII name (see isSecretKey).
func hasSecretSpan[S ~string | ~[]byte](s S) bool {
	a, _ := secretSpan(s, 0)
	return a >= 0
}

// Bytes at which secretSpan looks closer.
const (
	textSep   = 1 // = or :
	textToken = 2 // first byte of a token prefix
	textPct   = 3 // % (%3D and %3A are = and :)
	textTag   = 4 // > (the end of an XML start tag)
)

var textByte = func() (t [256]uint8) {
	t['='], t[':'] = textSep, textSep
	t['%'] = textPct
	t['>'] = textTag
	for _, c := range "esgxArBb" {
		t[c] = textToken
	}
	return t
}()

// nameByte marks the bytes of the name of a pair (see summarizeArgs).
var nameByte = func() (t [256]bool) {
	for c := range t {
		t[c] = isAlnum(byte(c)) || c >= utf8.RuneSelf || strings.IndexByte("-_.[]%+", byte(c)) >= 0
	}
	return t
}()

// secretSpan returns the first secret span of s (see summarizeArgs) that
// starts at or after from, as s[start:end], non-empty; -1, -1 if there is
// none.
func secretSpan[S ~string | ~[]byte](s S, from int) (start, end int) {
	var short tokenRuns
	var ats atScan
	for i := from; i < len(s); i++ {
		switch textByte[s[i]] {
		case textSep:
			if start, end = pairSpan(s, i, s[i], 1, &ats); start < end {
				return start, end
			}
		case textPct:
			if c := encodedSep(s, i); c != 0 {
				if start, end = pairSpan(s, i, c, 3, &ats); start < end {
					return start, end
				}
			}
		case textToken:
			if i == 0 || !isAlnum(s[i-1]) {
				if start, end = tokenSpan(s, i, &short); start >= 0 {
					return start, end
				}
			}
		case textTag:
			if start, end = elementSpan(s, i); start < end {
				return start, end
			}
		}
	}
	return -1, -1
}

// encodedSep returns the = or : that s[i:] starts with percent-encoded
// (%3D, %3A, any case), or 0.
func encodedSep[S ~string | ~[]byte](s S, i int) byte {
	if i+2 >= len(s) || s[i+1] != '3' {
		return 0
	}
	switch s[i+2] {
	case 'D', 'd':
		return '='
	case 'A', 'a':
		return ':'
	}
	return 0
}

// pairSpan returns the value of the pair whose separator c (= or :),
// written in w bytes (3 when percent-encoded), is s[sep:sep+w] when its
// name isSecretKey, or is "value" after a name field that names a secret
// (see namedBefore), or the password of a URL when a literal : is followed
// by //.
func pairSpan[S ~string | ~[]byte](s S, sep int, c byte, w int, ats *atScan) (start, end int) {
	if w == 1 && c == ':' && sep+2 < len(s) && s[sep+1] == '/' && s[sep+2] == '/' {
		return userinfoSpan(s, sep+3, ats)
	}
	j := sep
	for j > 0 && isBlank(s[j-1]) {
		j--
	}
	if j > 0 && (s[j-1] == '"' || s[j-1] == '\'') {
		j--
		for j > 0 && s[j-1] == '\\' { // a quote escaped, by %q say
			j--
		}
	}
	e := j
	for j > 0 && nameByte[s[j-1]] {
		j--
	}
	if j == e || !secretName(s[j:e]) && !(equalFold(s[j:e], "value") && namedBefore(s, j)) {
		return -1, -1
	}
	v := sep + w
	for v < len(s) && isBlank(s[v]) {
		v++
	}
	q := v // the opening quote, past any backslashes escaping it
	for q < len(s) && s[q] == '\\' {
		q++
	}
	e = v
	switch {
	case c == ':':
		for e < len(s) && s[e] != '\n' && s[e] != '\r' {
			e++
		}
	case q < len(s) && (s[q] == '"' || s[q] == '\''):
		v = q + 1
		for e = v; e < len(s) && s[e] != s[q] && s[e] != '\n' && s[e] != '\r'; e++ {
		}
		for e > v && s[e-1] == '\\' { // the backslashes escaping the closing quote
			e--
		}
	default:
		e = authScheme(s, v) // Authorization=Bearer x: the credential too
		for e < len(s) && s[e] != '&' && !isSpace(s[e]) && (w == 1 || !hasPrefixS(s[e:], "%26")) {
			e++
		}
	}
	return v, e
}

// userinfoSpan returns the password in the authority of a URL that starts
// at s[i] (after "://"). A password holding /, ? or # (not
// percent-encoded, as in the URL a url.Parse error quotes) seems to end
// the authority early: when a : came first and no @, the password runs
// on to the last @ before the next white space or quote, if there is one.
func userinfoSpan[S ~string | ~[]byte](s S, i int, ats *atScan) (start, end int) {
	colon, at := -1, -1
	for ; i < len(s); i++ {
		switch c := s[i]; {
		case c == '/' || c == '?' || c == '#' || isSpace(c):
			if colon >= 0 && at < 0 && !isSpace(c) {
				at = lastAt(ats, s, i)
			}
			i = len(s) // the end of the authority
		case c == '@':
			at = i
		case c == ':' && at < 0 && colon < 0:
			colon = i
		}
	}
	if colon < 0 || at < 0 {
		return -1, -1
	}
	return colon + 1, at
}

// atScan remembers the last answer of lastAt, so that many URLs in one run
// of text ("://a:b/://a:b/...") do not make secretSpan quadratic.
type atScan struct {
	from, to int // lastAt looked at s[from:to], to the end of the run
	at       int // the last @ there, or -1
	ok       bool
}

// lastAt returns the last @ in s[i:] before white space, a quote (" ' `),
// < or > or the end of s; -1 if there is none.
func lastAt[S ~string | ~[]byte](a *atScan, s S, i int) int {
	if !a.ok || i < a.from || i >= a.to {
		a.from, a.at, a.ok = i, -1, true
		for a.to = i; a.to < len(s) && !urlEnd(s[a.to]); a.to++ {
			if s[a.to] == '@' {
				a.at = a.to
			}
		}
	}
	if a.at < i {
		return -1
	}
	return a.at
}

func urlEnd(c byte) bool {
	return isSpace(c) || c == '"' || c == '\'' || c == '`' || c == '<' || c == '>'
}

// secretName reports whether the name of a pair isSecretKey, as written or
// with its %XX escapes decoded.
func secretName[S ~string | ~[]byte](n S) bool {
	if isSecretKey(n) {
		return true
	}
	var buf [64]byte
	d, pct := buf[:0], false
	for i := 0; i < len(n); i++ {
		c := n[i]
		if c == '%' && i+2 < len(n) {
			if h, l := unhex(n[i+1]), unhex(n[i+2]); h >= 0 && l >= 0 {
				c, pct = byte(h<<4|l), true
				i += 2
			}
		}
		d = append(d, c)
	}
	return pct && isSecretKey(d)
}

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

func hasPrefixS[S ~string | ~[]byte](s S, p string) bool {
	return len(s) >= len(p) && string(s[:len(p)]) == p
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

func isB64URL(c byte) bool { return isAlnum(c) || c == '-' || c == '_' }

func isBlank(c byte) bool { return c == ' ' || c == '\t' }

// Kinds of string values (see summarizeArgs).
const (
	strPlain = iota
	strJSON  // starts with { or [
	strAuth  // starts with Bearer or Basic and white space
)

// stringKind classifies a decoded string value, or the first bytes of one,
// by its start after leading white space.
func stringKind[S ~string | ~[]byte](s S) int {
	i := 0
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	h := s[i:]
	switch {
	case len(h) == 0:
		return strPlain
	case h[0] == '{' || h[0] == '[':
		return strJSON
	case len(h) > 6 && equalFold(h[:6], "bearer") && isSpace(h[6]),
		len(h) > 5 && equalFold(h[:5], "basic") && isSpace(h[5]):
		return strAuth
	}
	return strPlain
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
