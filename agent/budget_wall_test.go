package agent_test

import (
	"context"
	"testing"
	"time"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

// A tool with its own timeout (tool.WithTimeout) runs on r.ctx, not the
// turn's ctx, so the wall-clock cut in runTools does not apply to it.
func TestWallToolWithOwnTimeout(t *testing.T) {
	slow := tool.New("get_weather", "weather", func(ctx context.Context, in WeatherIn) (string, error) {
		select {
		case <-time.After(2 * time.Second):
			return "late", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}, tool.WithTimeout(5*time.Second))
	s := llmtest.NewScript(weatherCalls("Paris"), llmtest.Text("I could not check in time."))
	o := newOrch(t, s, agent.Config{Tools: []tool.Tool{slow}})
	m := msg("Paris?")
	m.Budget = agent.Budget{MaxWall: 100 * time.Millisecond}
	start := time.Now()
	_, _ = o.HandleMessage(context.Background(), m)
	if d := time.Since(start); d > time.Second {
		t.Errorf("run took %v with MaxWall 100ms: a tool with its own timeout is not cut to the wall clock", d)
	}
}

// delayAgent is an Agent-Tool that takes 2s (honouring ctx).
type delayAgent struct{}

func (delayAgent) Run(ctx context.Context, in NoteIn) (agent.Reply, error) {
	select {
	case <-time.After(2 * time.Second):
		return agent.Reply{Text: "done"}, nil
	case <-ctx.Done():
		return agent.Reply{}, ctx.Err()
	}
}

// Agent-Tools run with AgentToolTimeout on r.ctx (runAgent): the wall
// clock does not bound them.
func TestWallAgentTool(t *testing.T) {
	reg := agent.NewRegistry()
	if err := agent.Register(reg, "slow_note", "Save a note slowly", delayAgent{}); err != nil {
		t.Fatal(err)
	}
	s := llmtest.NewScript(llmtest.Calls(llmtest.Call("slow_note", `{"title":"x","day":"Monday"}`)), llmtest.Text("done"))
	o := newOrch(t, s, agent.Config{Agents: reg})
	m := msg("note")
	m.Budget = agent.Budget{MaxWall: 100 * time.Millisecond}
	start := time.Now()
	_, _ = o.HandleMessage(context.Background(), m)
	if d := time.Since(start); d > time.Second {
		t.Errorf("run took %v with MaxWall 100ms: an Agent-Tool is not cut to the wall clock", d)
	}
}

// Model-call retries (backoff) ignore the wall clock: a run with MaxWall
// 100ms and LLMTimeout 500ms lasts ~1.5s of backoff, past the documented
// bound ("the last call may run past it, by at most LLMTimeout").
func TestWallModelRetriesIgnoreBudget(t *testing.T) {
	rl := &llm.Error{Kind: llm.KindRateLimited, Message: "slow down"}
	s := llmtest.NewScript(llmtest.Fail(rl), llmtest.Fail(rl), llmtest.Text("hi"))
	o := newOrch(t, s, agent.Config{Loop: agent.LoopConfig{
		LLMTimeout: 500 * time.Millisecond, LLMRetryBaseDelay: 500 * time.Millisecond, LLMMaxRetries: 2,
	}})
	m := msg("hi")
	m.Budget = agent.Budget{MaxWall: 100 * time.Millisecond}
	start := time.Now()
	_, err := o.HandleMessage(context.Background(), m)
	d := time.Since(start)
	if d > m.Budget.MaxWall+500*time.Millisecond {
		t.Errorf("run took %v (err %v) with MaxWall 100ms, LLMTimeout 500ms: retries are not bounded by the wall clock", d, err)
	}

}
