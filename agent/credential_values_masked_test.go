package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/credentials"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

type EchoIn struct {
	Q string `json:"q" jsonschema:"description=Query"`
}

var errUpstream = errors.New("upstream refused")

// The values a tool read from the credential store, or wrote to it with
// Update, are masked in what the tool returns, success or failure, and in
// the error observers get; that error still wraps the tool's own.
// ExecContext.Credentials stays an Updater (when the store is one) and
// never a TenantDeleter.
func TestCredentialValuesAreMaskedInToolOutput(t *testing.T) {
	const old, fresh = "refresh-0ld-Zq81xKp", "access-N3w-Wm27yLd"
	store := credentials.NewMemory()
	if err := store.Save(context.Background(), "acme", "crm", "", map[string]any{"refresh_token": old, "scopes": []string{"read"}}); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	crm := tool.New("crm", "Reads the CRM", func(ctx context.Context, in EchoIn) (string, error) {
		ec := tool.ExecContextFrom(ctx)
		if _, ok := ec.Credentials.(credentials.TenantDeleter); ok {
			kinds = append(kinds, "TenantDeleter")
		}
		u, ok := ec.Credentials.(credentials.Updater)
		if !ok {
			return "", errors.New("the store is not an Updater")
		}
		err := u.Update(ctx, ec.TenantID, "crm", "", func(_ context.Context, s credentials.Secret) (any, error) {
			return map[string]string{"access_token": fresh}, nil
		})
		if err != nil {
			return "", err
		}
		if in.Q == "fail" {
			return "", fmt.Errorf("GET https://crm.example/api?t=%s: %w", fresh, errUpstream)
		}
		return "refreshed " + old + " into " + fresh, nil
	})
	var mu sync.Mutex
	var stepErrs []error
	obs := agent.ObserverFunc(func(_ context.Context, s agent.Step) {
		if s.Kind == agent.StepToolResult && s.Err != nil {
			mu.Lock()
			stepErrs = append(stepErrs, s.Err)
			mu.Unlock()
		}
	})
	s := llmtest.NewScript(
		llmtest.Calls(llm.ToolCall{ID: "c1", Name: "crm", Arguments: []byte(`{"q":"ok"}`)}),
		llmtest.Calls(llm.ToolCall{ID: "c2", Name: "crm", Arguments: []byte(`{"q":"fail"}`)}),
		llmtest.Text("done"),
	)
	o := newOrch(t, s, agent.Config{Tools: []tool.Tool{crm}, Credentials: store, Observer: obs})
	res, err := o.HandleMessage(context.Background(), agent.Message{TenantID: "acme", ConversationID: "c1", Text: "sync"})
	if err != nil {
		t.Fatal(err)
	}
	if len(kinds) > 0 {
		t.Errorf("ExecContext.Credentials implements %v", kinds)
	}
	var seen strings.Builder
	for _, r := range s.Requests() {
		b, _ := json.Marshal(r.Messages)
		seen.Write(b)
	}
	for _, c := range res.ToolCalls {
		seen.WriteString(c.Error)
	}
	if !strings.Contains(seen.String(), "refreshed *** into ***") || !strings.Contains(seen.String(), "upstream refused") {
		t.Fatalf("the tool did not run as expected: %s", seen.String())
	}
	for _, v := range []string{old, fresh} {
		if strings.Contains(seen.String(), v) {
			t.Errorf("the model or a record sees %q: %s", v, seen.String())
		}
	}
	if len(stepErrs) != 1 {
		t.Fatalf("%d failed tool steps, want 1", len(stepErrs))
	}
	if e := stepErrs[0]; strings.Contains(e.Error(), fresh) || !errors.Is(e, errUpstream) {
		t.Errorf("Step.Err = %v (wraps errUpstream: %v)", e, errors.Is(e, errUpstream))
	}
}
