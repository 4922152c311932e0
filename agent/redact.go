package agent

import (
	"bytes"
	"encoding/json"
	"math"
)

// RedactText returns s with each secret span replaced by "***", the rest
// kept: the value of a pair whose name names a secret
// ("Authorization: ***", "?api_key=***&q=1", "password=***"), the value
// after a name field that names one (<add key="ApiKey" value="***"/>; after
// {"name":"X-Api-Key","value": the rest of the line), the content of an XML element that
// names one (<password>***</password>), the password of a URL
// ("postgres://ann:***@db/app", also when it holds /, ? or # unencoded),
// and well-known credential shapes
// whatever word comes before them: JWTs; OpenAI and Anthropic keys
// (sk-proj-, sk-ant-, sk- with mixed letters and digits, or any long sk-
// key right after a word such as key or token); GitHub (ghp_, gho_, ghu_,
// ghs_, ghr_, github_pat_); Slack (xoxb-, xoxa-, xoxp-, xoxr-, xoxs-); AWS
// access key ids (AKIA, ASIA); Google API keys (AIza); Stripe secret and
// restricted keys (sk_live_, rk_live_, and their _test_ forms); the
// credential after Bearer. The rules in full are those of a
// ToolCallRecord's ArgsSummary.
//
// Masking is by shape: a token of another shape under a harmless name
// stays visible. Text with no secret is returned as it is, without
// allocating. The transcript, the tool failures the model reads and the
// logs use it.
func RedactText(s string) string { return maskText(s) }

// RedactArguments returns tool arguments as JSON with secrets masked, in
// full (ArgsSummary cuts them): the value of each key that names a secret
// ("password", "api_key", "X-Auth-Token"), the value of an object whose
// name, key or header field names one ({"name":"Authorization",
// "value":"***"}), a string that starts with Bearer or Basic, and the
// secret spans of other strings (see RedactText); a string holding JSON is
// redacted as JSON. Arguments that need no change are returned as they
// are; others are re-encoded, keys sorted, numbers as written.
//
// Arguments that are not valid JSON are returned as they are, made valid
// UTF-8, unless a sensitive word or a secret span appears in them: then
// they are withheld ("(invalid JSON withheld: N bytes, may hold a
// secret)").
func RedactArguments(raw json.RawMessage) string {
	if cleanArgs(raw) {
		return string(raw)
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil || d.More() || !json.Valid(raw) {
		return rawText(string(raw), math.MaxInt)
	}
	return marshal(redactCut(v, math.MaxInt))
}
