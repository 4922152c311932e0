package agent_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

type revIn struct {
	X string `json:"x"`
}

// A tool that derives a ctx (as database/sql, grpc, errgroup... do) sees
// context.Canceled when the turn times out, not DeadlineExceeded, and the
// model is told "failed: context canceled" instead of "timed out".
func TestDerivedCtxTimeoutIsDeadlineExceeded(t *testing.T) {
	var got error
	slow := tool.New("slow", "slow", func(ctx context.Context, in revIn) (string, error) {
		c2, cancel := context.WithCancel(ctx)
		defer cancel()
		<-c2.Done()
		got = c2.Err()
		return "", c2.Err()
	})
	script := llmtest.NewScript(llmtest.Calls(llmtest.Call("slow", `{"x":"a"}`)), llmtest.Text("done"))
	o, err := agent.NewOrchestrator(agent.Config{LLM: script, Tools: []tool.Tool{slow}, Loop: agent.LoopConfig{ToolTimeout: 50 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := o.HandleMessage(context.Background(), agent.Message{TenantID: "t", ConversationID: "c", Text: "go"})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(got, context.DeadlineExceeded) {
		t.Errorf("derived ctx Err = %v, want DeadlineExceeded (context.WithTimeout semantics)", got)
	}
	if e := res.ToolCalls[0].Error; !strings.Contains(e, "timed out") {
		t.Errorf("tool error = %q, want a timeout message", e)
	}
}

// Deadline must not be later than the parent's.
func TestDeadlineNotAfterParent(t *testing.T) {
	var dl time.Time
	tl := tool.New("dl", "dl", func(ctx context.Context, in revIn) (string, error) {
		dl, _ = ctx.Deadline()
		return "ok", nil
	})
	script := llmtest.NewScript(llmtest.Calls(llmtest.Call("dl", `{"x":"a"}`)), llmtest.Text("done"))
	o, _ := agent.NewOrchestrator(agent.Config{LLM: script, Tools: []tool.Tool{tl}, Loop: agent.LoopConfig{ToolTimeout: time.Hour}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pd, _ := ctx.Deadline()
	if _, err := o.HandleMessage(ctx, agent.Message{TenantID: "t", ConversationID: "c", Text: "go"}); err != nil {
		t.Fatal(err)
	}
	if dl.After(pd) {
		t.Errorf("tool saw deadline %v after the caller's %v (+%v)", dl, pd, dl.Sub(pd))
	}
}

// The turn's ctx outlives its turn: work a tool started on ctx is not
// cancelled when the turn ends, and the next turn re-arms the same ctx.
func TestTurnCtxEndsWithTurn(t *testing.T) {
	var first context.Context
	var aliveDuringTurn2 bool
	tl := tool.New("t1", "t1", func(ctx context.Context, in revIn) (string, error) {
		if first == nil {
			first = ctx
			return "ok", nil
		}
		aliveDuringTurn2 = first.Err() == nil
		return "ok", nil
	})
	var errBetween error
	var pastDeadlineButAlive bool
	n := 0
	script := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		n++
		switch n {
		case 1:
			return llmtest.Calls(llmtest.Call("t1", `{"x":"a"}`))
		case 2:
			errBetween = first.Err()
			time.Sleep(80 * time.Millisecond) // longer than ToolTimeout
			d, _ := first.Deadline()
			pastDeadlineButAlive = time.Now().After(d) && first.Err() == nil
			return llmtest.Calls(llmtest.Call("t1", `{"x":"a"}`))
		}
		return llmtest.Text("done")
	})
	o, _ := agent.NewOrchestrator(agent.Config{LLM: script, Tools: []tool.Tool{tl}, Loop: agent.LoopConfig{ToolTimeout: 50 * time.Millisecond}})
	if _, err := o.HandleMessage(context.Background(), agent.Message{TenantID: "t", ConversationID: "c", Text: "go"}); err != nil {
		t.Fatal(err)
	}
	if errBetween == nil {
		t.Errorf("turn 1's ctx still live after its turn ended (context.WithTimeout+defer cancel ended it)")
	}
	if pastDeadlineButAlive {
		t.Errorf("turn 1's ctx reports a passed Deadline but Err()==nil (violates context contract)")
	}
	if aliveDuringTurn2 {
		t.Errorf("turn 1's ctx is live again in turn 2 (re-armed)")
	}
}
