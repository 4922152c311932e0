package agent

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
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

// rawArgumentsKey is llm/openai.RawArgumentsKey (not imported: agent does
// not depend on a provider): llm/openai keeps arguments that are not a JSON
// object as {"_raw_arguments": "<what the model wrote>"}.
const rawArgumentsKey = "_raw_arguments"

// withheld stands for n bytes of text that is not valid JSON and holds a
// sensitive word: it cannot be masked field by field.
func withheld(n int) string {
	return "(invalid JSON withheld: " + strconv.Itoa(n) + " bytes, may hold a secret)"
}

// summarizeArgs renders tool arguments for telemetry. Valid JSON is
// rendered as JSON (with &, < and > as they are) with strings longer than
// summaryMaxString cut and these values replaced by "***":
//   - the value of a key that isSecretKey;
//   - the "value" field, whatever it holds, of an object whose "name",
//     "key" or "header" field is a string that isSecretKey
//     ({"name":"Authorization","value":"..."}); these field names are
//     compared ASCII case-insensitively;
//   - a string that starts, after leading white space (space, tab, CR,
//     LF), with Bearer or Basic (case-insensitive) then white space.
//
// A string that starts, after leading white space, with { or [ is JSON text:
// when it parses as an object or array it is summarised the same way and
// the result (cut) replaces it; otherwise it is raw text. The string value
// of a "_raw_arguments" key (see rawArgumentsKey) is summarised as JSON text
// when it parses as an object or array, and is raw text otherwise.
//
// In any other string value (decoded), each of these secret spans is
// replaced by "***", the rest of the string kept, before the string is cut:
//   - Pairs: the value of name=value or name:value when the name isSecretKey
//     as written or after decoding its %XX escapes: X-Api-Key: v,
//     ?api_key=v, user=ann&password=v, user[password]=v, api%5Fkey=v. The
//     name is the longest run of ASCII letters and digits, bytes of
//     non-ASCII runes and - _ . [ ] % + that ends right before the = or :,
//     past blanks (space, tab) and a closing quote (" or ') with any
//     backslashes escaping it, as in {"password": v} and in the same JSON
//     quoted by Go's %q ({\"password\":v}). The separator may be
//     percent-encoded (%3D or %3A, any case), as in a URL nested in a
//     query parameter: ...%3Faccess_token%3Dv. The value starts after the
//     separator and blanks. After : it runs to the end of the line (CR, LF
//     or the end of the string), so that a header line keeps only its
//     name: "Authorization: ***". After = it runs to the next &, white
//     space or the end (after %3D, also to the next %26); a value that
//     starts with " or ' (escaped or not) runs, inside the quotes, to the
//     matching quote or the end of the line. An empty value is left alone.
//   - URL passwords: in scheme://user:password@host, what lies between the
//     first : of the user information and the last @ of the authority, which
//     ends at the first /, ?, #, white space or the end of the string.
//   - Tokens, whatever the key, where the byte before is not an ASCII
//     letter or digit: the prefix and the whole run of characters after it
//     of the class given, when that run is long enough:
//     eyJ then base64url characters (ASCII letters, digits, - and _) and
//     dots, with two dots or more (a JWT);
//     sk- then 20 or more base64url characters, among them an upper-case
//     letter, a lower-case letter and a digit (OpenAI, Anthropic keys);
//     ghp_, gho_, ghu_, ghs_, ghr_ or github_pat_ then 20 or more letters,
//     digits or _ (GitHub);
//     xoxb-, xoxa-, xoxp-, xoxr- or xoxs- then 10 or more letters, digits or
//   - (Slack);
//     AKIA then exactly 16 upper-case letters or digits (AWS access key id).
//
// Ordinary words, e-mail addresses, UUIDs and URLs without these spans are
// shown as they are; masking is by shape, so a token of another shape under
// a harmless key stays visible.
//
// Raw text, and whole arguments that are not valid JSON, are withheld when a
// sensitive word (see isSecretKey: split into words the same way) or a
// secret span appears anywhere in them, read as written and after each round
// of undoing \ escapes, and shown cut otherwise.
//
// Arguments that need none of this are returned as they are (one
// allocation).
func summarizeArgs(raw json.RawMessage) string {
	if cleanArgs(raw) {
		return cut(string(raw), summaryMaxLen)
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return rawText(string(raw), summaryMaxLen)
	}
	return cut(marshal(redact(v)), summaryMaxLen)
}

// marshal renders v as JSON, leaving &, < and > as they are: a masked URL
// reads "?api_key=***&q=1", not "\u0026q=1".
func marshal(v any) string {
	var b strings.Builder
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if e.Encode(v) != nil {
		return "(unprintable arguments)"
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// redact applies the rules of summarizeArgs to a decoded JSON value.
func redact(v any) any {
	switch x := v.(type) {
	case map[string]any:
		maskValue := false
		for k, e := range x {
			if s, ok := e.(string); ok && isNameField(k) && isSecretKey(s) {
				maskValue = true
				break
			}
		}
		for k, e := range x {
			switch {
			case isSecretKey(k), maskValue && equalFold(k, "value"):
				x[k] = "***"
			case equalFold(k, rawArgumentsKey):
				if s, ok := e.(string); ok {
					x[k] = jsonText(s, summaryMaxString)
				} else {
					x[k] = redact(e)
				}
			default:
				x[k] = redact(e)
			}
		}
	case []any:
		for i, e := range x {
			x[i] = redact(e)
		}
	case string:
		switch stringKind(x) {
		case strAuth:
			return "***"
		case strJSON:
			return jsonText(x, summaryMaxString)
		}
		return cut(maskText(x), summaryMaxString)
	}
	return v
}

// jsonText summarises s, text that may hold JSON, in at most about max
// bytes: as JSON when it parses as an object or array, as raw text
// otherwise.
func jsonText(s string, max int) string {
	var v any
	if json.Unmarshal([]byte(s), &v) == nil {
		switch v.(type) {
		case map[string]any, []any:
			return cut(marshal(redact(v)), max)
		}
	}
	return rawText(s, max)
}

// rawText is s cut to max bytes, or withheld when a sensitive word or a
// secret span appears anywhere in it.
func rawText(s string, max int) string {
	if sensitiveText(s) {
		return withheld(len(s))
	}
	return cut(strings.ToValidUTF8(s, "\uFFFD"), max)
}

// sensitiveText reports whether a sensitive word or a secret span appears in
// s as written or after any round of undoing escapes (\n, \u0070, \x70,
// \\...).
func sensitiveText(s string) bool {
	for range 8 {
		if sensitiveWordIn(s) || hasSecretSpan(s) {
			return true
		}
		var changed bool
		if s, changed = unescapeText(s); !changed {
			return false
		}
	}
	return true // escaped more than 8 times over: do not guess
}

// sensitiveWordIn reports whether any word of s is sensitive (see
// isSecretKey; the benign last words do not apply to text).
func sensitiveWordIn(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			s = foldToASCII(s)
			break
		}
	}
	return wordRule(s, true)
}

// unescapeText undoes one level of JSON or JavaScript escapes in s: \uXXXX
// (surrogate pairs included), \xHH, \n and the like, and \c for any other c.
func unescapeText(s string) (string, bool) {
	i := strings.IndexByte(s, '\\')
	if i < 0 || i == len(s)-1 {
		return s, false
	}
	var b strings.Builder
	b.Grow(len(s))
	b.WriteString(s[:i])
	for ; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch c = s[i]; c {
		case 'u':
			if r, ok := hexRune(s[i+1:], 4); ok {
				i += 4
				if utf16.IsSurrogate(r) && i+6 < len(s) && s[i+1] == '\\' && s[i+2] == 'u' {
					if r2, ok := hexRune(s[i+3:], 4); ok {
						if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
							r = d
							i += 6
						}
					}
				}
				b.WriteRune(r)
				continue
			}
		case 'x':
			if r, ok := hexRune(s[i+1:], 2); ok {
				i += 2
				b.WriteRune(r)
				continue
			}
		case 'n', 't', 'r', 'b', 'f', 'v', '0':
			c = ' '
		}
		b.WriteByte(c)
	}
	return b.String(), true
}

// hexRune decodes the n hex digits that start s.
func hexRune(s string, n int) (rune, bool) {
	if len(s) < n {
		return 0, false
	}
	var r rune
	for i := 0; i < n; i++ {
		c := s[i]
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

func isNameField[S ~string | ~[]byte](k S) bool {
	return equalFold(k, "name") || equalFold(k, "key") || equalFold(k, "header")
}

// maskText replaces each secret span of s (see summarizeArgs) by "***".
func maskText(s string) string {
	a, b := secretSpan(s, 0)
	if a < 0 {
		return s
	}
	var t strings.Builder
	t.Grow(len(s))
	last := 0
	for ; a >= 0; a, b = secretSpan(s, b) {
		t.WriteString(s[last:a])
		t.WriteString("***")
		last = b
	}
	t.WriteString(s[last:])
	return t.String()
}

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
)

var textByte = func() (t [256]uint8) {
	t['='], t[':'] = textSep, textSep
	t['%'] = textPct
	for _, c := range "esgxA" {
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
	for i := from; i < len(s); i++ {
		switch textByte[s[i]] {
		case textSep:
			if start, end = pairSpan(s, i, s[i], 1); start < end {
				return start, end
			}
		case textPct:
			if c := encodedSep(s, i); c != 0 {
				if start, end = pairSpan(s, i, c, 3); start < end {
					return start, end
				}
			}
		case textToken:
			if i == 0 || !isAlnum(s[i-1]) {
				if n := tokenLen(s, i, &short); n > 0 {
					return i, i + n
				}
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
// name isSecretKey, or the password of a URL when a literal : is followed
// by //.
func pairSpan[S ~string | ~[]byte](s S, sep int, c byte, w int) (start, end int) {
	if w == 1 && c == ':' && sep+2 < len(s) && s[sep+1] == '/' && s[sep+2] == '/' {
		return userinfoSpan(s, sep+3)
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
	if j == e || !secretName(s[j:e]) {
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
		for e < len(s) && s[e] != '&' && !isSpace(s[e]) && (w == 1 || !hasPrefixS(s[e:], "%26")) {
			e++
		}
	}
	return v, e
}

// userinfoSpan returns the password in the authority of a URL that starts
// at s[i] (after "://").
func userinfoSpan[S ~string | ~[]byte](s S, i int) (start, end int) {
	colon, at := -1, -1
	for ; i < len(s); i++ {
		switch c := s[i]; {
		case c == '/' || c == '?' || c == '#' || isSpace(c):
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

// Kinds of token (see summarizeArgs), for tokenRuns.
const (
	tokJWT = iota
	tokOpenAI
	tokGitHub
	tokSlack
	tokAWS
	tokKinds
)

// tokenRuns holds, for each kind of token, the end of the last run found
// too short. A later start of the same kind inside that run has a shorter
// run, with fewer dots or character classes, so is too short as well:
// skipping it keeps secretSpan linear ("eyJ-eyJ-eyJ-...").
type tokenRuns [tokKinds]int

// tokenLen returns the length of the token (see summarizeArgs) that starts
// at s[i], or 0.
func tokenLen[S ~string | ~[]byte](s S, i int, short *tokenRuns) int {
	t := s[i:]
	kind, p, min, extra := 0, 0, 0, ""
	switch {
	case hasPrefixS(t, "eyJ"):
		kind, p, extra = tokJWT, 3, "-_."
	case hasPrefixS(t, "sk-"):
		kind, p, min, extra = tokOpenAI, 3, 20, "-_"
	case len(t) > 4 && t[0] == 'g' && t[1] == 'h' && strings.IndexByte("pousr", t[2]) >= 0 && t[3] == '_':
		kind, p, min, extra = tokGitHub, 4, 20, "_"
	case hasPrefixS(t, "github_pat_"):
		kind, p, min, extra = tokGitHub, 11, 20, "_"
	case len(t) > 5 && hasPrefixS(t, "xox") && strings.IndexByte("baprs", t[3]) >= 0 && t[4] == '-':
		kind, p, min, extra = tokSlack, 5, 10, "-"
	case hasPrefixS(t, "AKIA"):
		kind, p = tokAWS, 4
	default:
		return 0
	}
	if i < short[kind] {
		return 0
	}
	n, dots, lower, upper, digit := p, 0, false, false, false
	for ; n < len(t); n++ {
		switch c := t[n]; {
		case 'a' <= c && c <= 'z':
			lower = true
		case 'A' <= c && c <= 'Z':
			upper = true
		case '0' <= c && c <= '9':
			digit = true
		case strings.IndexByte(extra, c) >= 0:
			if c == '.' {
				dots++
			}
		default:
			goto end
		}
	}
end:
	var ok bool
	switch kind {
	case tokJWT:
		ok = dots >= 2
	case tokOpenAI:
		ok = n-p >= min && lower && upper && digit
	case tokAWS:
		ok = n-p == 16 && !lower // no letter or digit follows
	default:
		ok = n-p >= min
	}
	if !ok {
		short[kind] = i + n
		return 0
	}
	return n
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
