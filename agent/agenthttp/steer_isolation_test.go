package agenthttp_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/agenthttp"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

// Passes: another tenant cannot cancel or pause a running conversation
// of the same ID: 409 not_running, and the owner's run completes.
func TestAnotherTenantCannotSteerARunningConversation(t *testing.T) {
	g := newGate()
	e := newEnv(t, llmtest.NewScript(llmtest.Calls(llmtest.Call("work", `{}`)), llmtest.Text("done")),
		agent.Config{Tools: []tool.Tool{g.tool()}}, agenthttp.Config{})
	s := e.post("ann", "c1", "do the work")
	select {
	case <-g.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the tool never started")
	}
	for _, sig := range []string{"cancel", "pause"} {
		r := e.do(http.MethodPost, "/conversations/c1/"+sig, "bob", "")
		if code, _ := r.errorOf(t); r.status != http.StatusConflict || code != agenthttp.CodeNotRunning {
			t.Errorf("bob %s ann's run: %d %s", sig, r.status, r.body)
		}
	}
	close(g.release)
	evs := s.all()
	if r := evs[len(evs)-1].Result; r.Status != "completed" || g.cancelled.Load() {
		t.Fatalf("ann's run after bob's signals: %+v", r)
	}
}
