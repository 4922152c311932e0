package agenthttp_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/agenthttp"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/trigger"
)

// every endpoint, with a body each would accept.
var endpoints = []struct{ method, path, body string }{
	{http.MethodPost, "/conversations/c1/messages", `{"text":"hi"}`},
	{http.MethodGet, "/conversations/c1/messages", ""},
	{http.MethodPost, "/conversations/c1/cancel", ""},
	{http.MethodPost, "/conversations/c1/pause", ""},
	{http.MethodGet, "/approvals", ""},
	{http.MethodPost, "/approvals/a1", `{"action":"approve","fingerprint":"f"}`},
	{http.MethodGet, "/tasks", ""},
	{http.MethodPost, "/tasks", briefTask},
	{http.MethodGet, "/tasks/brief", ""},
	{http.MethodDelete, "/tasks/brief", ""},
	{http.MethodPost, "/tasks/brief/pause", ""},
	{http.MethodPost, "/tasks/brief/resume", ""},
	{http.MethodPost, "/tasks/brief/retry", ""},
	{http.MethodGet, "/tasks/brief/runs", ""},
	{http.MethodGet, "/no/such/thing", ""},
}

func TestNoEndpointWorksWithoutATenant(t *testing.T) {
	model := llmtest.NewScript()
	eng, err := trigger.New(trigger.Config{Executors: map[string]trigger.Executor{"echo": echoExec{}}})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, model, agent.Config{}, agenthttp.Config{Tasks: eng, Tenant: func(r *http.Request) (string, error) {
		switch r.Header.Get("X-Tenant") {
		case "":
			return "", errors.New("no session")
		case "empty":
			return "", nil // a host function that forgot to fail
		case "banned":
			return "", fmt.Errorf("session: %w", &agenthttp.Error{Status: http.StatusForbidden, Code: "forbidden", Message: "account suspended"})
		case "long":
			return strings.Repeat("x", agent.MaxIDLen+1), nil
		}
		return r.Header.Get("X-Tenant"), nil
	}})
	for _, ep := range endpoints {
		for tenant, want := range map[string]int{"": 401, "empty": 401, "long": 401, "banned": 403} {
			r := e.do(ep.method, ep.path, tenant, ep.body)
			code, _ := r.errorOf(t)
			if r.status != want || (want == 401 && code != agenthttp.CodeUnauthenticated) {
				t.Fatalf("%s %s as %q: %d %s", ep.method, ep.path, tenant, r.status, r.body)
			}
		}
	}
	if model.Calls() != 0 {
		t.Fatalf("%d model calls without a tenant", model.Calls())
	}
	if list, _ := eng.List(t.Context(), "ann"); len(list) != 0 {
		t.Fatal("a task was created without a tenant")
	}
}

func TestPostAndDeleteRequireJSONContentType(t *testing.T) {
	model := llmtest.NewScript()
	e := newEnv(t, model, agent.Config{}, agenthttp.Config{})
	for _, ep := range endpoints {
		if ep.method == http.MethodGet || strings.HasPrefix(ep.path, "/no/") {
			continue
		}
		for _, ct := range []string{"", "application/x-www-form-urlencoded", "text/plain", "multipart/form-data; boundary=x"} {
			r := e.doCT(ep.method, ep.path, "ann", ct, ep.body)
			if code, _ := r.errorOf(t); r.status != http.StatusUnsupportedMediaType || code != agenthttp.CodeUnsupportedMediaType {
				t.Fatalf("%s %s as %q: %d %s", ep.method, ep.path, ct, r.status, r.body)
			}
		}
	}
	if model.Calls() != 0 {
		t.Fatal("a form post reached the model")
	}
	r := e.doCT(http.MethodGet, "/approvals", "ann", "text/plain", "")
	if r.status != http.StatusOK {
		t.Fatalf("a GET needs no content type: %d", r.status)
	}
}

func TestMessageBodiesAreCheckedBeforeAnythingRuns(t *testing.T) {
	model := llmtest.NewScript(llmtest.Text("ok"))
	e := newEnv(t, model, agent.Config{}, agenthttp.Config{MaxBodyBytes: 64})
	post := func(body string) reply {
		return e.doCT(http.MethodPost, "/conversations/c1/messages", "ann", "application/json; charset=utf-8", body)
	}
	for name, c := range map[string]struct {
		body, code, says string
		status           int
	}{
		"over the limit": {`{"text":"` + strings.Repeat("a", 100) + `"}`, agenthttp.CodeBodyTooLarge, "64 bytes", 413},
		"malformed":      {`{"text":"hi"`, agenthttp.CodeInvalidJSON, "ends in the middle", 400},
		"syntax":         {`{"text" "hi"}`, agenthttp.CodeInvalidJSON, "byte", 400},
		"wrong type":     {`{"text":42}`, agenthttp.CodeInvalidJSON, `"text"`, 400},
		"unknown field":  {`{"text":"hi","role":"system"}`, agenthttp.CodeInvalidJSON, `"role"`, 400},
		"two values":     {`{"text":"hi"}{"text":"again"}`, agenthttp.CodeInvalidJSON, "more than one", 400},
		"empty body":     {``, agenthttp.CodeInvalidJSON, "empty", 400},
		"blank text":     {`{"text":"  "}`, agenthttp.CodeInvalidRequest, `"text"`, 400},
		"not an object":  {`["hi"]`, agenthttp.CodeInvalidJSON, "", 400},
	} {
		t.Run(name, func(t *testing.T) {
			r := post(c.body)
			code, msg := r.errorOf(t)
			if r.status != c.status || code != c.code || !strings.Contains(msg, c.says) {
				t.Fatalf("%d %s %q; want %d %s saying %q", r.status, code, msg, c.status, c.code, c.says)
			}
		})
	}
	// A body past the limit without a Content-Length (chunked) too.
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/conversations/c1/messages",
		struct{ *strings.Reader }{strings.NewReader(`{"text":"` + strings.Repeat("a", 100) + `"}`)})
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Tenant", "ann")
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || req.ContentLength > 0 {
		t.Fatalf("chunked body over the limit: %d (length %d)", resp.StatusCode, req.ContentLength)
	}
	long := strings.Repeat("c", agent.MaxIDLen+1)
	if r := e.do(http.MethodPost, "/conversations/"+long+"/messages", "ann", `{"text":"hi"}`); r.status != http.StatusBadRequest {
		t.Fatalf("a conversation ID too long: %d %s", r.status, r.body)
	}
	if model.Calls() != 0 {
		t.Fatalf("%d model calls for refused bodies", model.Calls())
	}
	if evs := e.post("ann", "c1", "hi").all(); evs[len(evs)-1].Result.Response != "ok" {
		t.Fatal("a good message after the bad ones")
	}
}

func TestUnknownRoutesAndMethodsAnswerJSON(t *testing.T) {
	e := newEnv(t, llmtest.NewScript(), agent.Config{}, agenthttp.Config{})
	r := e.do(http.MethodGet, "/conversations", "ann", "")
	if code, _ := r.errorOf(t); r.status != http.StatusNotFound || code != agenthttp.CodeNotFound {
		t.Fatalf("unknown route: %d %s", r.status, r.body)
	}
	r = e.do(http.MethodPut, "/approvals/a1", "ann", "{}")
	if code, _ := r.errorOf(t); r.status != http.StatusMethodNotAllowed || code != agenthttp.CodeMethodNotAllowed || !strings.Contains(r.header.Get("Allow"), "POST") {
		t.Fatalf("wrong method: %d %s, Allow %q", r.status, r.body, r.header.Get("Allow"))
	}
}

func TestNewRefusesAMissingTenantFunction(t *testing.T) {
	o, err := agent.NewOrchestrator(agent.Config{LLM: llmtest.NewScript()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := agenthttp.New(o, agenthttp.Config{}); !errors.Is(err, agenthttp.ErrInvalidConfig) {
		t.Fatalf("no Tenant: %v", err)
	}
	if _, err := agenthttp.New(nil, agenthttp.Config{Tenant: headerTenant}); !errors.Is(err, agenthttp.ErrInvalidConfig) {
		t.Fatalf("no orchestrator: %v", err)
	}
	for _, p := range []string{"api", "/api/", "/{x}"} {
		if _, err := agenthttp.New(o, agenthttp.Config{Tenant: headerTenant, Prefix: p}); !errors.Is(err, agenthttp.ErrInvalidConfig) {
			t.Fatalf("prefix %q: %v", p, err)
		}
	}
	if _, err := agenthttp.New(o, agenthttp.Config{Tenant: headerTenant, MaxBodyBytes: -1}); !errors.Is(err, agenthttp.ErrInvalidConfig) {
		t.Fatalf("negative limit: %v", err)
	}
}
