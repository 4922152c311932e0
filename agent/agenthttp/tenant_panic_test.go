package agenthttp_test

import (
	"io"
	"net/http"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/agenthttp"
	"github.com/valetkit/valet/llm/llmtest"
)

// A host's Tenant function that panics must not take the server down nor
// answer something other than the uniform JSON error. net/http recovers
// the panic (the server lives on) but the client gets a reset connection,
// not a 500 {"error":{"code":"internal"}}.
// FAILS at the time of writing: the request errors with EOF.
func TestPanickingTenantFunctionAnswersA500(t *testing.T) {
	e := newEnv(t, llmtest.NewStrictScript(t), agent.Config{}, agenthttp.Config{
		Tenant: func(r *http.Request) (string, error) {
			if r.Header.Get("X-Tenant") == "boom" {
				panic("the session store is down")
			}
			return headerTenant(r)
		},
	})
	req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/approvals", nil)
	req.Header.Set("X-Tenant", "boom")
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Errorf("a panicking Tenant function: %v; want a 500 JSON answer", err)
	} else {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		r := reply{resp.StatusCode, resp.Header, string(b)}
		if code, _ := r.errorOf(t); r.status != http.StatusInternalServerError || code != agenthttp.CodeInternal {
			t.Errorf("a panicking Tenant function: %d %s", r.status, r.body)
		}
	}
	// The server still serves others.
	if r := e.do(http.MethodGet, "/approvals", "ann", ""); r.status != http.StatusOK {
		t.Fatalf("after the panic: %d %s", r.status, r.body)
	}
}
