package agent_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

// A tool doing an HTTP request that outlives ToolTimeout is reported as timed out.
func TestHTTPToolTimeout(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(2 * time.Second):
		}
	}))
	defer srv.Close()
	h := tool.New("http", "http", func(ctx context.Context, in revIn) (string, error) {
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return "", err
		}
		resp.Body.Close()
		return "ok", nil
	})
	script := llmtest.NewScript(llmtest.Calls(llmtest.Call("http", `{"x":"a"}`)), llmtest.Text("done"))
	o, _ := agent.NewOrchestrator(agent.Config{LLM: script, Tools: []tool.Tool{h}, Loop: agent.LoopConfig{ToolTimeout: 100 * time.Millisecond}})
	res, err := o.HandleMessage(context.Background(), agent.Message{TenantID: "t", ConversationID: "c", Text: "go"})
	if err != nil {
		t.Fatal(err)
	}
	if e := res.ToolCalls[0].Error; !strings.Contains(e, "timed out") {
		t.Errorf("tool error = %q", e)
	}
}
