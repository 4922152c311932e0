package agenthttp_test

import (
	"net/http"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/agenthttp"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

func TestCancelEndpointStopsTheRunningStream(t *testing.T) {
	g := newGate()
	e := newEnv(t, llmtest.NewScript(llmtest.Calls(llmtest.Call("work", `{}`))), agent.Config{Tools: []tool.Tool{g.tool()}}, agenthttp.Config{})
	s := e.post("ann", "c1", "do the long thing")
	s.until("tool_call_start")
	<-g.started
	if r := e.do(http.MethodPost, "/conversations/bob-cannot/cancel", "bob", ""); r.status != http.StatusConflict {
		t.Fatalf("cancel with nothing running: %d %s", r.status, r.body)
	}
	if r := e.do(http.MethodPost, "/conversations/c1/cancel", "bob", ""); r.status != http.StatusConflict {
		t.Fatalf("bob cancels ann's conversation: %d %s", r.status, r.body)
	}
	r := e.do(http.MethodPost, "/conversations/c1/cancel", "ann", "")
	if r.status != http.StatusAccepted || r.body != "{\"signal\":\"cancel\"}\n" {
		t.Fatalf("cancel: %d %q", r.status, r.body)
	}
	evs := s.all()
	end := evs[len(evs)-1]
	if end.Result.Status != "cancelled" || end.Error == nil || end.Error.Code != agenthttp.CodeCancelled || !g.cancelled.Load() {
		t.Fatalf("execution_end %+v, error %+v", end.Result, end.Error)
	}
	pairedHistory(t, e.history("ann", "c1"))
}

func TestPauseEndpointStopsTheRunAtItsNextTurn(t *testing.T) {
	g := newGate()
	e := newEnv(t, llmtest.NewScript(llmtest.Calls(llmtest.Call("work", `{}`))), agent.Config{Tools: []tool.Tool{g.tool()}}, agenthttp.Config{})
	s := e.post("ann", "c1", "do the long thing")
	s.until("tool_call_start")
	<-g.started
	if r := e.do(http.MethodPost, "/conversations/c1/pause", "ann", "{}"); r.status != http.StatusAccepted {
		t.Fatalf("pause: %d %s", r.status, r.body)
	}
	close(g.release)
	evs := s.all()
	if end := evs[len(evs)-1]; end.Result.Status != "paused" || end.Error != nil {
		t.Fatalf("execution_end %+v %+v", end.Result, end.Error)
	}
	if r := e.do(http.MethodPost, "/conversations/c1/pause", "ann", ""); r.status != http.StatusConflict {
		t.Fatalf("pause after the run: %d %s", r.status, r.body)
	} else if code, _ := r.errorOf(t); code != agenthttp.CodeNotRunning {
		t.Fatalf("code %s", code)
	}
}

func TestMessageWhileTheRunGoesIsInjected(t *testing.T) {
	g := newGate()
	model := llmtest.NewStrictScript(t,
		llmtest.Calls(llmtest.Call("work", `{}`)),
		llmtest.Text("Done, in metric."),
	).On(llm.PurposeRoute, llmtest.Text("correction"))
	e := newEnv(t, model, agent.Config{Tools: []tool.Tool{g.tool()}, Loop: agent.LoopConfig{RouteWhileRunning: true}}, agenthttp.Config{})
	first := e.post("ann", "c1", "measure the room")
	first.until("tool_call_start")
	<-g.started
	second := e.post("ann", "c1", "oh, and in metric units").all()
	if len(second) != 1 || second[0].Result.Status != "injected" || second[0].Result.Steered != "inject" {
		t.Fatalf("the second message's stream %v: %+v", types(second), second[len(second)-1].Result)
	}
	close(g.release)
	evs := first.all()
	if end := evs[len(evs)-1].Result; end.Status != "completed" || end.Response != "Done, in metric." {
		t.Fatalf("the running loop %+v", end)
	}
	h := e.history("ann", "c1")
	found := false
	for _, m := range h {
		if m.Role == "user" && m.Content != "measure the room" {
			found = true
		}
	}
	if !found {
		t.Fatalf("the injected correction is not in the history: %+v", h)
	}
}
