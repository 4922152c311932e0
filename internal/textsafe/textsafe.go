package textsafe

import (
	"strings"
	"unicode/utf8"
)

// IsBreak reports whether r ends a line for Unicode or a terminal: LF,
// VT, FF, CR, NEL, LS or PS.
func IsBreak(r rune) bool {
	switch r {
	case '\n', '\v', '\f', '\r', '\u0085', '\u2028', '\u2029':
		return true
	}
	return false
}

// isBidi reports whether r is a bidirectional embedding, override or
// isolate control.
func isBidi(r rune) bool {
	return r >= '\u202A' && r <= '\u202E' || r >= '\u2066' && r <= '\u2069'
}

// isControl reports whether r is a C0 or C1 control character or DEL
// other than a tab or a line break.
func isControl(r rune) bool {
	return (r < 0x20 || r >= 0x7F && r <= 0x9F) && r != '\t' && !IsBreak(r)
}

// unsafe reports whether Line and Lines change r.
func unsafe(r rune) bool {
	return r == utf8.RuneError || IsBreak(r) || isControl(r) || isBidi(r)
}

// Line returns s on one line: each line break becomes a space (CR LF one
// space), each other control character U+FFFD, and the bidirectional
// controls are dropped (see the package documentation). Nothing else
// changes: white space is not collapsed or trimmed. s is returned as it is
// when it needs no change.
func Line(s string) string { return rewrite(s, " ") }

// Lines returns s with each line break written as "\n" (CR LF one "\n"),
// each other control character as U+FFFD, and the bidirectional controls
// dropped (see the package documentation). Splitting the result on "\n"
// gives every line a reader of s could find, and no line holds a break.
// s is returned as it is when it needs no change.
func Lines(s string) string { return rewrite(s, "\n") }

// rewrite writes s with each break as brk and the other unsafe runes
// replaced or dropped.
func rewrite(s, brk string) string {
	i := firstUnsafe(s, brk == "\n")
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == '\r' && i+1 < len(s) && s[i+1] == '\n':
			b.WriteString(brk)
			n = 2
		case IsBreak(r):
			b.WriteString(brk)
		case isBidi(r):
		case isControl(r) || r == utf8.RuneError && n == 1:
			b.WriteRune(utf8.RuneError)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// firstUnsafe returns the index of the first rune of s that rewrite
// changes (-1 for none). With keepLF, a lone "\n" is left as it is.
func firstUnsafe(s string, keepLF bool) int {
	for i, r := range s {
		if r == '\n' && keepLF {
			continue
		}
		if r == utf8.RuneError {
			if _, n := utf8.DecodeRuneInString(s[i:]); n == 1 {
				return i // an invalid byte
			}
			continue // a real U+FFFD
		}
		if unsafe(r) {
			return i
		}
	}
	return -1
}

// EscapeJSON returns the JSON text b, as json.Marshal writes it, with
// each non-ASCII rune that Line would change written as a \u escape: the
// line break encoding/json leaves as it is (NEL), the other C1 controls
// and the bidirectional controls (json.Marshal already escapes the C0
// controls, LS and PS). DEL is escaped too. These runes can only stand
// inside a string of valid JSON, so the value b encodes is unchanged, and
// the text of compact JSON stays on one line. Anything else, invalid
// UTF-8 included, is left as it is; b is returned as it is when it needs
// no change.
func EscapeJSON(b []byte) []byte {
	const hex = "0123456789abcdef"
	var out []byte
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r < 0x7F || r == utf8.RuneError || !unsafe(r) {
			if out != nil {
				out = append(out, b[i:i+n]...)
			}
			i += n
			continue
		}
		if out == nil {
			out = append(make([]byte, 0, len(b)+12), b[:i]...)
		}
		out = append(out, '\\', 'u', hex[r>>12&0xF], hex[r>>8&0xF], hex[r>>4&0xF], hex[r&0xF])
		i += n
	}
	if out == nil {
		return b
	}
	return out
}
