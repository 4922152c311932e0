package agenthttp_test

import (
	"net/http"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/agenthttp"
	"github.com/valetkit/valet/llm/llmtest"
)

// A body must be exactly one JSON value. json.Decoder.More reports false
// before a closing '}' or ']', so a body with a stray closer after the
// value slips past the "more than one JSON value" check.
// FAILS at the time of writing: {}} and {}] are accepted.
func TestBodyWithAStrayClosingBracketIsMalformed(t *testing.T) {
	e := newEnv(t, llmtest.NewStrictScript(t), agent.Config{}, agenthttp.Config{})
	for _, body := range []string{`{}}`, `{}]`, `{} }`} {
		r := e.do(http.MethodPost, "/conversations/c1/cancel", "ann", body)
		if code, _ := r.errorOf(t); r.status != http.StatusBadRequest || code != agenthttp.CodeInvalidJSON {
			t.Errorf("body %q: %d %s; want 400 invalid_json", body, r.status, r.body)
		}
	}
}

// Passes: a second value after the first, of any other kind, is refused.
func TestBodyWithASecondValueIsMalformed(t *testing.T) {
	e := newEnv(t, llmtest.NewStrictScript(t), agent.Config{}, agenthttp.Config{})
	for _, body := range []string{`{}{}`, `{} 1`, `{}"x"`, `{}[]`} {
		r := e.do(http.MethodPost, "/conversations/c1/cancel", "ann", body)
		if code, _ := r.errorOf(t); r.status != http.StatusBadRequest || code != agenthttp.CodeInvalidJSON {
			t.Errorf("body %q: %d %s; want 400 invalid_json", body, r.status, r.body)
		}
	}
}
