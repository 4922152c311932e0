package agent

import (
	"strings"
	"unicode"
	"unicode/utf8"
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
// session, Id. Words are compared case-insensitively; a word of fewer than
// three bytes is never sensitive.
//
// The value of a key is masked, whatever it holds (objects and arrays
// included), when any word is sensitive and the last word is not a benign
// qualifier. A word is sensitive when it, or the word without a final
// plural "s" (tokens, api_keys, sessionids), matches one of these rules:
//   - it is one of key, token, secret, password, passwd, pwd, passphrase,
//     credential, credentials, auth, authorization, cookie, session,
//     private, signature, apikey, cvv, ssn, bearer, jwt;
//   - it ends with token or secret (accesstoken, clientsecret);
//   - it contains password, passwd, passphrase, apikey or credential
//     (userpassword, xapikey);
//   - it is glued: it starts with secret, private, access, session or auth
//     and ends, after that start, with key, id or token (secretkey,
//     privatekey, accesskey, sessionid, authtoken, secretaccesskey); a word
//     starting with "author" is glued only if it starts with "authoriz" or
//     "authoris" (authorid stays visible, authorizationkey does not).
//
// The word "number" right after the word "card" is sensitive too
// (card_number, cardNumber).
//
// Whole words only otherwise: keyword, author, monkey, tokenizer, secretary
// stay visible. The benign last words, count, type, name, length, len,
// size, expires, expiry, ttl, kind and url, describe a secret without being
// one: session_count, token_type, password_length, auth_url stay visible.
// "id" is deliberately not benign: a session_id is a credential.
//
// summarizeArgs masks more than the values of such keys: see there.
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
		return sensitiveLower([]byte(strings.ToLower(string(w))))
	}
	var buf [32]byte
	for i := 0; i < n; i++ {
		c := w[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	return sensitiveLower(buf[:n]) // does not escape: no allocation
}

// sensitiveLower is sensitiveWord for a lower-case word of 3 bytes or more.
func sensitiveLower(w []byte) bool {
	n := len(w)
	if sensitiveWhole(w) || n > 3 && w[n-1] == 's' && sensitiveWhole(w[:n-1]) {
		return true
	}
	for i := 0; i+6 <= n; i++ { // contains password, passwd, passphrase, apikey or credential
		var hit bool
		switch r := w[i:]; r[0] {
		case 'p':
			hit = hasPrefix(r, "passwd") || hasPrefix(r, "password") || hasPrefix(r, "passphrase")
		case 'a':
			hit = hasPrefix(r, "apikey")
		case 'c':
			hit = hasPrefix(r, "credential")
		}
		if hit {
			return true
		}
	}
	return false
}

// sensitiveWhole applies the rules of isSecretKey that look at the whole
// of a lower-case word (all but "contains").
func sensitiveWhole(w []byte) bool {
	return sensitiveName(w) || hasSuffix(w, "token") && len(w) > 5 || hasSuffix(w, "secret") && len(w) > 6 ||
		(w[0] == 's' || w[0] == 'p' || w[0] == 'a') && gluedSecret(w)
}

// gluedSecret reports whether a lower-case word is a secret name written
// without separators: secret, private, access, session or auth (not
// author, but authoriz and authoris), then anything, then key, id or token.
func gluedSecret(w []byte) bool {
	var rest []byte
	switch {
	case hasPrefix(w, "secret"), hasPrefix(w, "access"):
		rest = w[6:]
	case hasPrefix(w, "session"), hasPrefix(w, "private"):
		rest = w[7:]
	case hasPrefix(w, "auth"):
		if hasPrefix(w, "author") && !hasPrefix(w, "authoriz") && !hasPrefix(w, "authoris") {
			return false
		}
		rest = w[4:]
	default:
		return false
	}
	return hasSuffix(rest, "key") || hasSuffix(rest, "id") || hasSuffix(rest, "token")
}

func sensitiveName(w []byte) bool {
	switch string(w) { // no allocation
	case "key", "token", "secret", "password", "passwd", "pwd", "passphrase",
		"credential", "credentials", "auth", "authorization", "cookie",
		"session", "private", "signature", "apikey", "cvv", "ssn", "bearer", "jwt":
		return true
	}
	return false
}

func hasPrefix(w []byte, p string) bool { return len(w) >= len(p) && string(w[:len(p)]) == p }

func hasSuffix(w []byte, p string) bool { return len(w) >= len(p) && string(w[len(w)-len(p):]) == p }

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
	return wordRule(k, false)
}

// wordRule splits k into words (see isSecretKey) and reports whether any of
// them is sensitive and, unless anyWord, the last word is not benign. It
// does not allocate.
func wordRule[S ~string | ~[]byte](k S, anyWord bool) bool {
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
			if anyWord {
				return true
			}
			sensitive = true
		}
		afterCard = equalFold(w, "card")
		last = w
		i = j
	}
	return sensitive && !benignLastWord(last)
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
