package agenthttp_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/agenthttp"
	"github.com/valetkit/valet/llm/llmtest"
)

// Passes: only the application/json media type (any case, with
// parameters) is taken; look-alikes are 415.
func TestContentTypeLookAlikesAreRefused(t *testing.T) {
	e := newEnv(t, llmtest.NewStrictScript(t), agent.Config{}, agenthttp.Config{})
	for _, ct := range []string{"application/jsonx", "application/json-patch+json", "text/json", "application/json, text/plain", "application/ld+json"} {
		r := e.doCT(http.MethodPost, "/conversations/c1/cancel", "ann", ct, `{}`)
		if code, _ := r.errorOf(t); r.status != http.StatusUnsupportedMediaType || code != agenthttp.CodeUnsupportedMediaType {
			t.Errorf("%q: %d %s", ct, r.status, r.body)
		}
	}
	for _, ct := range []string{"application/json; charset=utf-8", "Application/JSON", "application/json;charset=UTF-8"} {
		r := e.doCT(http.MethodPost, "/conversations/c1/cancel", "ann", ct, `{}`)
		if code, _ := r.errorOf(t); r.status != http.StatusConflict || code != agenthttp.CodeNotRunning {
			t.Errorf("%q: %d %s; want it taken (409 not_running)", ct, r.status, r.body)
		}
	}
}

// Passes: a chunked body (no Content-Length) past MaxBodyBytes is 413 and
// reaches no model.
func TestChunkedBodyOverTheLimitIsTooLarge(t *testing.T) {
	model := llmtest.NewScript()
	e := newEnv(t, model, agent.Config{}, agenthttp.Config{MaxBodyBytes: 1024})
	body := io.MultiReader(strings.NewReader(`{"text":"`), strings.NewReader(strings.Repeat("a", 4096)), strings.NewReader(`"}`))
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, e.srv.URL+"/conversations/c1/messages", body)
	req.ContentLength = -1
	req.Header.Set("X-Tenant", "ann")
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	r := reply{resp.StatusCode, resp.Header, string(b)}
	if code, _ := r.errorOf(t); r.status != http.StatusRequestEntityTooLarge || code != agenthttp.CodeBodyTooLarge || model.Calls() != 0 {
		t.Fatalf("%d %s, model calls %d", r.status, r.body, model.Calls())
	}
}

// Passes: OPTIONS is a JSON 405 with Allow; HEAD of a GET endpoint
// answers without a body.
func TestOptionsAndHeadMethods(t *testing.T) {
	e := newEnv(t, llmtest.NewStrictScript(t), agent.Config{}, agenthttp.Config{})
	r := e.do(http.MethodOptions, "/approvals", "ann", "")
	if code, _ := r.errorOf(t); r.status != http.StatusMethodNotAllowed || code != agenthttp.CodeMethodNotAllowed || !strings.Contains(r.header.Get("Allow"), "GET") {
		t.Fatalf("OPTIONS: %d %v %s", r.status, r.header, r.body)
	}
	h := e.do(http.MethodHead, "/approvals", "ann", "")
	if h.status != http.StatusOK || h.body != "" {
		t.Fatalf("HEAD: %d %q", h.status, h.body)
	}
	if n := e.do(http.MethodHead, "/approvals", "", ""); n.status != http.StatusUnauthorized {
		t.Fatalf("HEAD without a tenant: %d", n.status)
	}
}

// Passes: the ?conversation= filter of GET /approvals cannot reach into
// another tenant's conversation of the same ID.
func TestApprovalsFilterCannotCrossTenants(t *testing.T) {
	e := newEnv(t, emailScript(t), agent.Config{}, agenthttp.Config{})
	req := draftEmail(t, e, "ann")
	r := e.do(http.MethodGet, "/approvals?conversation="+req.ConversationID, "bob", "")
	if r.status != http.StatusOK || strings.Contains(r.body, req.ID) {
		t.Fatalf("bob filters by ann's conversation: %d %s", r.status, r.body)
	}
	if h := e.do(http.MethodGet, "/conversations/"+req.ConversationID+"/messages", "bob", ""); h.status != http.StatusOK || strings.Contains(h.body, "team@example.com") {
		t.Fatalf("bob reads ann's conversation: %d %s", h.status, h.body)
	}
}
