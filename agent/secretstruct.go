package agent

// Secret spans in structured text (see summarizeArgs): the value of a
// name/value pair whose name names a secret, as JSON
// ({"name":"X-Api-Key","value":"v"}), XML attributes
// (<add key="ApiKey" value="v"/>) or YAML (name: DB_PASSWORD, then
// value: v), and the content of an XML element whose name names one
// (<password>v</password>).

// maxNamedValue bounds how far namedBefore looks back for the quoted value
// of a name field, which keeps secretSpan linear.
const maxNamedValue = 256

// namedBefore reports whether the pair whose name starts at s[j] (a "value"
// field) comes right after a name field (name, key or header, compared
// ASCII case-insensitively) whose value isSecretKey: past the opening
// quote of the name at j, white space and a comma, the value of the name
// field, quoted (" or ', escaped or not) or a run of name bytes, then = or
// : and the name field's name, quoted or not.
func namedBefore[S ~string | ~[]byte](s S, j int) bool {
	k := skipQuoteBack(s, j)
	for k > 0 && isSpace(s[k-1]) {
		k--
	}
	if k > 0 && s[k-1] == ',' {
		k--
		for k > 0 && isSpace(s[k-1]) {
			k--
		}
	}
	if k == 0 {
		return false
	}
	var v0, v1 int
	if q := s[k-1]; q == '"' || q == '\'' {
		k--
		for k > 0 && s[k-1] == '\\' {
			k--
		}
		v1 = k
		for k > 0 && s[k-1] != q && s[k-1] != '\n' && v1-k < maxNamedValue {
			k--
		}
		if k == 0 || s[k-1] != q {
			return false
		}
		v0 = k
		k = skipQuoteBack(s, k)
		for v1 > v0 && s[v1-1] == '\\' { // the backslashes escaping the closing quote
			v1--
		}
	} else {
		v1 = k
		for k > 0 && nameByte[s[k-1]] && v1-k < maxNamedValue {
			k--
		}
		v0 = k
	}
	if v0 == v1 {
		return false
	}
	for k > 0 && isBlank(s[k-1]) {
		k--
	}
	if k == 0 || s[k-1] != ':' && s[k-1] != '=' {
		return false
	}
	k--
	for k > 0 && isBlank(s[k-1]) {
		k--
	}
	if k > 0 && (s[k-1] == '"' || s[k-1] == '\'') {
		k--
		for k > 0 && s[k-1] == '\\' {
			k--
		}
	}
	e := k
	for k > 0 && nameByte[s[k-1]] && e-k < len("header") {
		k--
	}
	return isNameField(s[k:e]) && (k == 0 || !nameByte[s[k-1]]) && secretName(s[v0:v1])
}

// skipQuoteBack returns j less the opening quote (" or ') before s[j] and
// the backslashes escaping it, if there is one.
func skipQuoteBack[S ~string | ~[]byte](s S, j int) int {
	if j > 0 && (s[j-1] == '"' || s[j-1] == '\'') {
		j--
		for j > 0 && s[j-1] == '\\' {
			j--
		}
	}
	return j
}

// elementSpan returns the content of the XML element whose start tag ends
// with the > at s[i] when the element's name (past any namespace prefix)
// isSecretKey: <password>v</password>. The content runs to the next <,
// which must start an end tag (</), or to the end of s; an empty content
// is left alone.
func elementSpan[S ~string | ~[]byte](s S, i int) (start, end int) {
	j := i
	for j > 0 && nameByte[s[j-1]] {
		j--
	}
	n := j
	if j > 0 && s[j-1] == ':' { // a namespace prefix: <ns:password>
		j--
		for j > 0 && nameByte[s[j-1]] {
			j--
		}
	}
	if n == i || j == 0 || s[j-1] != '<' || !secretName(s[n:i]) {
		return -1, -1
	}
	e := i + 1
	for e < len(s) && s[e] != '<' {
		e++
	}
	if e == i+1 || e < len(s) && (e+1 == len(s) || s[e+1] != '/') {
		return -1, -1
	}
	return i + 1, e
}
