package agenthttp_test

import (
	"net/http"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/agenthttp"
	"github.com/valetkit/valet/llm/llmtest"
)

// A Tenant function may return an *Error "answered as it says". One built
// without a Status (&agenthttp.Error{Code: "forbidden"}) makes ServeHTTP
// call WriteHeader(0), which panics in net/http: the client gets a reset
// connection instead of a 401 (or 500) JSON error.
// FAILS at the time of writing: the request errors with EOF.
func TestTenantErrorWithoutAStatusStillAnswersJSON(t *testing.T) {
	e := newEnv(t, llmtest.NewStrictScript(t), agent.Config{}, agenthttp.Config{
		Tenant: func(r *http.Request) (string, error) {
			return "", &agenthttp.Error{Code: "forbidden", Message: "no access"}
		},
	})
	req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/approvals", nil)
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("a Tenant *Error without a Status: %v; want a 4xx/5xx JSON error", err)
	}
	resp.Body.Close()
	if resp.StatusCode < 400 {
		t.Fatalf("a Tenant *Error without a Status: %d", resp.StatusCode)
	}
}
