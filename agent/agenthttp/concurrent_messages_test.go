package agenthttp_test

import (
	"testing"
	"time"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/agenthttp"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

// A second message posted to a conversation whose run is going waits its
// turn (without RouteWhileRunning): both streams end with a completed
// Result, in order, and the history stays paired. Passes.
func TestSecondConcurrentMessageWaitsItsTurn(t *testing.T) {
	g := newGate()
	e := newEnv(t, llmtest.NewScript(llmtest.Calls(llmtest.Call("work", `{}`)), llmtest.Text("first done"), llmtest.Text("second done")),
		agent.Config{Tools: []tool.Tool{g.tool()}}, agenthttp.Config{})
	first := e.post("ann", "c1", "do the work")
	select {
	case <-g.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the tool never started")
	}
	s2 := e.post("ann", "c1", "and then this")
	close(g.release)
	evs1 := first.all()
	evs2 := s2.all()
	if r := evs1[len(evs1)-1].Result; r.Status != "completed" || r.Response != "first done" {
		t.Fatalf("first %+v", r)
	}
	if r := evs2[len(evs2)-1].Result; r.Status != "completed" || r.Response != "second done" {
		t.Fatalf("second %+v", r)
	}
	pairedHistory(t, e.history("ann", "c1"))
}
