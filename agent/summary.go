package agent

import (
	"encoding/json"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits of a ToolCallRecord's ArgsSummary.
const (
	summaryMaxString = 60  // a longer string value is cut
	summaryMaxLen    = 300 // the whole summary is cut past this
)

// isSecretKey reports whether the value of the decoded object key k must
// be masked in an ArgsSummary.
//
// A key is compared after JSON unescaping ("pass\u0077ord" is "password"),
// with non-ASCII letters folded to the ASCII letter they match case-
// insensitively (encoding/json matches "paſsword" to a Password field).
// It is split into words at every character that is not a letter or digit
// (-, _, ., space...), between letters and digits, and at camelCase
// boundaries, acronyms included: "XAPIKey" is XAPI, Key; "sessionId" is
// session, Id. Words are compared case-insensitively.
//
// The value of a key is masked, whatever it holds (objects and arrays
// included), when any word is sensitive and the last word is not a benign
// qualifier. A word is sensitive when:
//   - it is one of key, token, secret, password, passwd, pwd, passphrase,
//     credential, credentials, auth, authorization, cookie, session,
//     private, signature, apikey, cvv, ssn, or one of them plus a plural
//     "s" (tokens, api_keys);
//   - it ends with token or secret (accesstoken, clientsecret);
//   - it contains password, passwd, passphrase, apikey or credential
//     (userpassword, xapikey);
//   - it is "number" right after "card" (card_number, cardNumber).
//
// Whole words only otherwise: keyword, author, monkey, tokenizer, secretary
// stay visible. The benign last words, count, type, name, length, len,
// size, expires, expiry, ttl, kind and url, describe a secret without being
// one: session_count, token_type, password_length, auth_url stay visible.
// "id" is deliberately not benign: a session_id is a credential.
func isSecretKey[S ~string | ~[]byte](k S) bool {
	for i := 0; i < len(k); i++ {
		if k[i] >= utf8.RuneSelf {
			return secretWords(foldToASCII(string(k)))
		}
	}
	return secretWords(k)
}

// sensitiveWord reports whether one word of a key is sensitive (see
// isSecretKey).
func sensitiveWord[S ~string | ~[]byte](w S) bool {
	n := len(w)
	if n < 3 {
		return false
	}
	if n > 32 {
		return sensitiveLower(strings.ToLower(string(w)))
	}
	var buf [32]byte
	for i := 0; i < n; i++ {
		c := w[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	return sensitiveLower(string(buf[:n])) // does not escape: no allocation
}

// sensitiveLower is sensitiveWord for a lower-case word of 3 bytes or more.
func sensitiveLower(w string) bool {
	n := len(w)
	if sensitiveName(w) || w[n-1] == 's' && sensitiveName(w[:n-1]) {
		return true
	}
	if n > 5 && strings.HasSuffix(w, "token") || n > 6 && strings.HasSuffix(w, "secret") {
		return true
	}
	for i := 0; i+6 <= n; i++ { // contains password, passwd, passphrase, apikey or credential
		var hit bool
		switch w[i] {
		case 'p':
			r := w[i:]
			hit = strings.HasPrefix(r, "passwd") || strings.HasPrefix(r, "password") || strings.HasPrefix(r, "passphrase")
		case 'a':
			hit = strings.HasPrefix(w[i:], "apikey")
		case 'c':
			hit = strings.HasPrefix(w[i:], "credential")
		}
		if hit {
			return true
		}
	}
	return false
}

func sensitiveName(w string) bool {
	switch w {
	case "key", "token", "secret", "password", "passwd", "pwd", "passphrase",
		"credential", "credentials", "auth", "authorization", "cookie",
		"session", "private", "signature", "apikey", "cvv", "ssn":
		return true
	}
	return false
}

func benignLastWord[S ~string | ~[]byte](w S) bool {
	for _, b := range [...]string{"count", "type", "name", "length", "len", "size", "expires", "expiry", "ttl", "kind", "url"} {
		if equalFold(w, b) {
			return true
		}
	}
	return false
}

// foldToASCII replaces every rune that matches an ASCII letter under Unicode
// simple case folding (ſ, the Kelvin sign K) by that letter, keeping its case.
func foldToASCII(k string) string {
	var b strings.Builder
	for _, r := range k {
		if r >= utf8.RuneSelf {
			for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
				if f < utf8.RuneSelf {
					if unicode.IsUpper(r) {
						r = unicode.ToUpper(f)
					} else {
						r = unicode.ToLower(f)
					}
					break
				}
			}
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Character classes for splitting keys into words. Bytes of other
// (non-ASCII) runes count as lower-case letters.
const (
	clsSep = iota
	clsLower
	clsUpper
	clsDigit
)

func class(c byte) int {
	switch {
	case 'a' <= c && c <= 'z', c >= utf8.RuneSelf:
		return clsLower
	case 'A' <= c && c <= 'Z':
		return clsUpper
	case '0' <= c && c <= '9':
		return clsDigit
	}
	return clsSep
}

// secretWords applies the masking rule to k, split into words, without
// allocating.
func secretWords[S ~string | ~[]byte](k S) bool {
	sensitive, afterCard := false, false
	var last S
	for i := 0; i < len(k); {
		prev := class(k[i])
		if prev == clsSep {
			i++
			continue
		}
		// The word runs from i to j.
		j := i + 1
		for ; j < len(k); j++ {
			cur := class(k[j])
			if cur == clsSep || (prev == clsDigit) != (cur == clsDigit) || prev == clsLower && cur == clsUpper {
				break
			}
			// "APIKey": the upper-case letter before a lower-case one starts a word.
			if prev == clsUpper && cur == clsUpper && j+1 < len(k) && class(k[j+1]) == clsLower {
				break
			}
			prev = cur
		}
		w := k[i:j]
		if !sensitive && (sensitiveWord(w) || afterCard && equalFold(w, "number")) {
			sensitive = true
		}
		afterCard = equalFold(w, "card")
		last = w
		i = j
	}
	if !sensitive {
		return false
	}
	return !benignLastWord(last)
}

// equalFold is an ASCII case-insensitive comparison (p is lower case).
func equalFold[S ~string | ~[]byte](s S, p string) bool {
	if len(s) != len(p) {
		return false
	}
	for i := 0; i < len(p); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != p[i] {
			return false
		}
	}
	return true
}

// invalidSecretArgs stands for arguments that are not valid JSON but have a
// secret-looking key: they cannot be masked field by field.
const invalidSecretArgs = "(invalid arguments, withheld: a key looks secret)"

// summarizeArgs renders tool arguments for telemetry: JSON with the values
// of secret keys (see isSecretKey) replaced by "***" and long strings
// cut. Arguments that need neither are returned as they are (one
// allocation).
func summarizeArgs(raw json.RawMessage) string {
	secret, long := scanArgs(raw)
	if !secret && !long {
		return cut(string(raw), summaryMaxLen)
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		if secret {
			return invalidSecretArgs
		}
		return cut(string(raw), summaryMaxLen)
	}
	b, err := json.Marshal(redact("", v))
	if err != nil {
		return "(unprintable arguments)"
	}
	return cut(string(b), summaryMaxLen)
}

// scanArgs reports whether raw may hold a secret key and whether it holds a
// string longer than summaryMaxString. It allocates only to decode a key
// written with escapes or non-ASCII letters.
func scanArgs(raw []byte) (secret, long bool) {
	inStr, esc, escaped, start := false, false, false, 0
	for i, c := range raw {
		switch {
		case esc:
			esc = false
		case inStr && c == '\\':
			esc, escaped = true, true
		case c == '"' && !inStr:
			inStr, escaped, start = true, false, i+1
		case c == '"':
			inStr = false
			s := raw[start:i]
			if len(s) > summaryMaxString {
				long = true
			}
			if !secret && isKey(raw[i+1:]) && isSecretRawKey(raw[start-1:i+1], escaped) {
				secret = true
			}
			if secret && long {
				return
			}
		}
	}
	return
}

// isSecretRawKey applies isSecretKey to a quoted JSON string, unescaping it
// first when it holds escapes.
func isSecretRawKey(quoted []byte, escaped bool) bool {
	if !escaped {
		return isSecretKey(quoted[1 : len(quoted)-1])
	}
	var k string
	if err := json.Unmarshal(quoted, &k); err != nil {
		return true // a key that does not decode cannot be checked
	}
	return isSecretKey(k)
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
