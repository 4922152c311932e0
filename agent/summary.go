package agent

import (
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// Limits of a ToolCallRecord's ArgsSummary.
const (
	summaryMaxString = 60  // a longer string value is cut
	summaryMaxLen    = 300 // the whole summary is cut past this
)

// secretKeyParts mark argument names whose values are never recorded.
var secretKeyParts = [...]string{"password", "passwd", "secret", "token", "api_key", "apikey", "authorization", "credential", "private_key", "cvv", "card_number", "ssn"}

func isSecretKey(k string) bool {
	k = strings.ToLower(k)
	for _, p := range secretKeyParts {
		if strings.Contains(k, p) {
			return true
		}
	}
	return false
}

// summarizeArgs renders tool arguments for telemetry: JSON with
// secret-looking fields replaced by "***" and long strings cut. Arguments
// that need neither are returned as they are (one allocation).
func summarizeArgs(raw json.RawMessage) string {
	if !needsRedaction(raw) {
		return cut(string(raw), summaryMaxLen)
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return cut(string(raw), summaryMaxLen)
	}
	b, err := json.Marshal(redact("", v))
	if err != nil {
		return "(unprintable arguments)"
	}
	return cut(string(b), summaryMaxLen)
}

// needsRedaction reports, without allocating, whether raw may hold a
// secret-looking key or a string longer than summaryMaxString.
func needsRedaction(raw []byte) bool {
	inStr, esc, start := false, false, 0
	for i, c := range raw {
		switch {
		case esc:
			esc = false
		case inStr && c == '\\':
			esc = true
		case c == '"' && !inStr:
			inStr, start = true, i+1
		case c == '"':
			inStr = false
			s := raw[start:i]
			if len(s) > summaryMaxString || isKey(raw[i+1:]) && hasSecretPart(s) {
				return true
			}
		}
	}
	return false
}

// isKey reports whether the string that ended just before rest is an
// object key: the next non-space byte is a colon.
func isKey(rest []byte) bool {
	for _, c := range rest {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		case ':':
			return true
		}
		return false
	}
	return false
}

func hasSecretPart(s []byte) bool {
	if len(s) < 3 {
		return false
	}
	for _, p := range secretKeyParts {
		if len(s) >= len(p) && containsFold(s, p) {
			return true
		}
	}
	return false
}

// containsFold is a case-insensitive ASCII substring test (p is lower case).
func containsFold(s []byte, p string) bool {
outer:
	for i := 0; i+len(p) <= len(s); i++ {
		for j := 0; j < len(p); j++ {
			c := s[i+j]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != p[j] {
				continue outer
			}
		}
		return true
	}
	return false
}

func redact(key string, v any) any {
	if key != "" && isSecretKey(key) {
		return "***"
	}
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = redact(k, e)
		}
	case []any:
		for i, e := range x {
			x[i] = redact("", e)
		}
	case string:
		return cut(x, summaryMaxString)
	}
	return v
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
