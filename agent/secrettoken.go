package agent

import "strings"

// Kinds of token (see summarizeArgs), for tokenRuns.
const (
	tokJWT = iota
	tokOpenAI
	tokGitHub
	tokSlack
	tokAWS
	tokGoogle
	tokStripe
	tokKinds
)

// tokenRuns holds, for each kind of token, the end of the last run found
// too short. A later start of the same kind inside that run has a shorter
// run, with fewer dots or character classes, and is not after a blank, so
// is too short as well: skipping it keeps secretSpan linear
// ("eyJ-eyJ-eyJ-...").
type tokenRuns [tokKinds]int

// openAIPrefixes start OpenAI and Anthropic keys of the kinds issued since
// 2024; a key after one needs no mix of character classes.
var openAIPrefixes = [...]string{"sk-proj-", "sk-ant-", "sk-svcacct-", "sk-admin-"}

// tokenSpan returns the secret span of the token (see summarizeArgs) that
// starts at s[i]: the token, prefix included, or the credential after
// Bearer; -1, -1 if there is none.
func tokenSpan[S ~string | ~[]byte](s S, i int, short *tokenRuns) (start, end int) {
	t := s[i:]
	if len(t) < 4 {
		return -1, -1
	}
	kind, p, min, extra := 0, 0, 0, ""
	switch t[0] { // one test per start byte: most text starts no token
	case 'e':
		if t[1] != 'y' || t[2] != 'J' {
			return -1, -1
		}
		kind, p, extra = tokJWT, 3, "-_."
	case 's', 'r':
		switch {
		case t[0] == 's' && t[1] == 'k' && t[2] == '-':
			kind, p, min, extra = tokOpenAI, 3, 20, "-_"
		case len(t) > 8 && t[1] == 'k' && t[2] == '_' && (hasPrefixS(t[3:], "live_") || hasPrefixS(t[3:], "test_")):
			kind, p, min = tokStripe, 8, 16
		default:
			return -1, -1
		}
	case 'g':
		switch {
		case len(t) > 4 && t[1] == 'h' && strings.IndexByte("pousr", t[2]) >= 0 && t[3] == '_':
			kind, p, min, extra = tokGitHub, 4, 20, "_"
		case hasPrefixS(t, "github_pat_"):
			kind, p, min, extra = tokGitHub, 11, 20, "_"
		default:
			return -1, -1
		}
	case 'x':
		if len(t) <= 5 || t[1] != 'o' || t[2] != 'x' || strings.IndexByte("baprs", t[3]) < 0 || t[4] != '-' {
			return -1, -1
		}
		kind, p, min, extra = tokSlack, 5, 10, "-"
	case 'A':
		switch {
		case hasPrefixS(t, "AKIA"), hasPrefixS(t, "ASIA"):
			kind, p = tokAWS, 4
		case hasPrefixS(t, "AIza"):
			kind, p, extra = tokGoogle, 4, "-_"
		default:
			return -1, -1
		}
	case 'B', 'b':
		if len(t) > 6 && (t[1] == 'e' || t[1] == 'E') && equalFold(t[:6], "bearer") {
			return bearerSpan(s, i+6)
		}
		return -1, -1
	default:
		return -1, -1
	}
	if i < short[kind] {
		return -1, -1
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
		ok = n-p >= min && (lower && upper && digit || newOpenAIKey(t[:n]) || secretWordBefore(s, i))
	case tokAWS:
		ok = n-p == 16 && !lower // no letter or digit follows
	case tokGoogle:
		ok = n-p == 35
	default:
		ok = n-p >= min
	}
	if !ok {
		short[kind] = i + n
		return -1, -1
	}
	return i, i + n
}

// newOpenAIKey reports whether t, a run of base64url characters that
// starts with sk-, starts with a prefix of openAIPrefixes followed by 20
// characters or more.
func newOpenAIKey[S ~string | ~[]byte](t S) bool {
	for _, p := range openAIPrefixes {
		if hasPrefixS(t, p) && len(t)-len(p) >= 20 {
			return true
		}
	}
	return false
}

// secretWordBefore reports whether the word before s[i], past blanks (at
// least one), names a secret (isSecretKey): "key sk-...",
// "OPENAI_API_KEY sk-...".
func secretWordBefore[S ~string | ~[]byte](s S, i int) bool {
	j := i
	for j > 0 && isBlank(s[j-1]) {
		j--
	}
	e := j
	for j > 0 && e-j < 64 && (isB64URL(s[j-1]) || s[j-1] == '.') {
		j--
	}
	if j == e || e == i || j > 0 && (isB64URL(s[j-1]) || s[j-1] == '.') {
		return false // no blank, no word, or a word too long to be a name
	}
	return isSecretKey(s[j:e])
}

// bearerSpan returns the credential after the word Bearer, which ends at
// s[i]: after blanks (at least one), a run of token68 characters (letters,
// digits, - . _ ~ + /, then any =) of 16 or more with a digit, or of 20 or
// more with upper- and lower-case letters. Prose ("a Bearer token") is
// left alone.
func bearerSpan[S ~string | ~[]byte](s S, i int) (start, end int) {
	v := i
	for v < len(s) && isBlank(s[v]) {
		v++
	}
	if v == i {
		return -1, -1
	}
	e, lower, upper, digit := v, false, false, false
	for ; e < len(s); e++ {
		switch c := s[e]; {
		case 'a' <= c && c <= 'z':
			lower = true
		case 'A' <= c && c <= 'Z':
			upper = true
		case '0' <= c && c <= '9':
			digit = true
		case strings.IndexByte("-._~+/", c) >= 0:
		default:
			goto end
		}
	}
end:
	for e < len(s) && s[e] == '=' {
		e++
	}
	if n := e - v; n >= 16 && digit || n >= 20 && lower && upper {
		return v, e
	}
	return -1, -1
}

// authScheme returns where the credential of a pair's value that starts
// at s[v] begins: past "Bearer " or "Basic " (any case, then blanks) when
// the value starts with one, at v otherwise.
func authScheme[S ~string | ~[]byte](s S, v int) int {
	n := 0
	switch h := s[v:]; {
	case len(h) > 6 && equalFold(h[:6], "bearer"):
		n = 6
	case len(h) > 5 && equalFold(h[:5], "basic"):
		n = 5
	}
	if n == 0 || !isBlank(s[v+n]) {
		return v
	}
	v += n
	for v < len(s) && isBlank(s[v]) {
		v++
	}
	return v
}
