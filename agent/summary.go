package agent

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Limits of a ToolCallRecord's ArgsSummary.
const (
	summaryMaxString = 60  // a longer string value is cut
	summaryMaxLen    = 300 // the whole summary is cut past this
)

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
//   - Name/value pairs: the value of a pair named "value" (any case) right
//     after a name field (name, key or header, any case, quoted or not, then
//     = or :, blanks) whose value, quoted or a run of name bytes, isSecretKey;
//     white space and a comma may lie between: {"name":"X-Api-Key","value":v},
//     <add key="ApiKey" value="v"/>, "- name: DB_PASSWORD\n  value: v". The
//     value runs as the value of any pair does.
//   - XML elements: the content of <name>...</name> (a namespace prefix
//     allowed) when the name isSecretKey, from the > of the start tag to the
//     next <, which must start an end tag, or to the end of the string; an
//     empty content is left alone.
//   - URL passwords: in scheme://user:password@host, what lies between the
//     first : of the user information and the last @ of the authority, which
//     ends at the first /, ?, #, white space or the end of the string. When
//     the authority ends at /, ? or # after a : and before any @ (a password
//     holding them unencoded, as url.Parse errors quote it), the password runs
//     on to the last @ before the next white space, quote (" ' `), < or > if
//     there is one: a URL with a port and an @ later on is masked a little
//     too much (https://h:8443/***@x), never too little.
//   - Tokens, whatever the key, where the byte before is not an ASCII
//     letter or digit: the prefix and the whole run of characters after it
//     of the class given, when that run is long enough:
//     eyJ then base64url characters (ASCII letters, digits, - and _) and
//     dots, with two dots or more (a JWT);
//     sk- then 20 or more base64url characters, among them an upper-case
//     letter, a lower-case letter and a digit, or right after a word that
//     isSecretKey and blanks ("key sk-...") (OpenAI, Anthropic keys);
//     sk-proj-, sk-ant-, sk-svcacct- or sk-admin- then 20 or more
//     base64url characters (the same, newer kinds);
//     ghp_, gho_, ghu_, ghs_, ghr_ or github_pat_ then 20 or more letters,
//     digits or _ (GitHub);
//     xoxb-, xoxa-, xoxp-, xoxr- or xoxs- then 10 or more letters, digits
//     or - (Slack);
//     AKIA or ASIA then exactly 16 upper-case letters or digits (AWS access
//     key ids);
//     AIza then exactly 35 base64url characters (Google API keys);
//     sk_live_, rk_live_, sk_test_ or rk_test_ then 16 or more letters or
//     digits (Stripe).
//   - Bearer credentials: after the word Bearer (any case, where the byte
//     before is not an ASCII letter or digit) and blanks, a run of token68
//     characters (letters, digits, - . _ ~ + / then any =) of 16 or more
//     with a digit, or of 20 or more with upper- and lower-case letters;
//     "Bearer" stays. After name= (not quoted), a value that starts with
//     Bearer or Basic and blanks runs on over the credential
//     (Authorization=Bearer v).
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
func redact(v any) any { return redactCut(v, summaryMaxString) }

// redactCut is redact with string values cut to max bytes.
func redactCut(v any, max int) any {
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
					x[k] = jsonText(s, max)
				} else {
					x[k] = redactCut(e, max)
				}
			default:
				x[k] = redactCut(e, max)
			}
		}
	case []any:
		for i, e := range x {
			x[i] = redactCut(e, max)
		}
	case string:
		switch stringKind(x) {
		case strAuth:
			return "***"
		case strJSON:
			return jsonText(x, max)
		}
		return cut(maskText(x), max)
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
			return cut(marshal(redactCut(v, max)), max)
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
