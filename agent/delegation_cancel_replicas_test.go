package agent_test

import (
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/delegate"
	"github.com/valetkit/valet/clock"
	"github.com/valetkit/valet/internal/pgtest"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/memory"
	"github.com/valetkit/valet/pool/redispool"
	"github.com/valetkit/valet/tool"
)

// Two replicas share Redis (Control) and PostgreSQL (pgdelegate, one
// schema). The second runs the conversation's loop, which starts a
// background graph and then works on a long tool call, and it is the only
// one running its engine, so the graph's research runs there too. Cancel
// sent to the first replica stops both: the loop (through the Redis
// Control) and the research sub-agent's model call (through the engine:
// River tells the replica running the job); the graph ends cancelled, its
// writer never starts, the research is not run again and nothing is
// delivered. A graph the conversation starts afterwards runs and is
// delivered.
func TestCancelOnOneReplicaStopsLoopAndGraphOnTheOther(t *testing.T) {
	needRedis(t)
	db := pgtest.DB(t)
	schema := pgtest.Schema(t, db)
	prefix := "valettest:steerbg:" + rand.Text()[:12] + ":"
	rdb := redisClient(t, prefix)
	mem := newMem(t, memory.Config{})

	g := newGate()
	var mu sync.Mutex
	var spawnText string
	var research int
	tasks := researchWrite()
	model := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		mu.Lock()
		defer mu.Unlock()
		if isWorker(req) {
			if strings.Contains(firstUser(req), "Research hotels") {
				research++
			}
			return slowResearch(firstUser(req))
		}
		if u := lastUser(req); strings.HasPrefix(u.Content, "[Background Tasks]") && req.Messages[len(req.Messages)-1].Role == llm.RoleUser {
			return llmtest.Reply{Text: "It is done."}
		}
		tr := toolResults(req)
		if _, ok := tr["w1"]; ok {
			return llmtest.Reply{Text: "Done."}
		}
		if r, ok := tr["sp1"]; ok {
			spawnText = r.Content
			if strings.Contains(firstUser(req), "then work") {
				return llmtest.Reply{ToolCalls: []llm.ToolCall{{ID: "w1", Name: "work", Arguments: []byte(`{}`)}}}
			}
			return llmtest.Reply{Text: "On it."}
		}
		return llmtest.Reply{ToolCalls: []llm.ToolCall{spawnCall("sp1", map[string]any{"tasks": tasks})}}
	})
	w := newWorkerWatch(model)

	got := make(chan *agent.Result, 4)
	var engines [2]delegate.Engine
	var os [2]*agent.Orchestrator
	for i := range os {
		ctl, err := redispool.NewControl(rdb, redispool.ControlConfig{Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ctl.Close() })
		eng := pgEngine(t, schema)
		engines[i] = eng
		os[i] = newOrch(t, w, agent.Config{Clock: clock.System{}, Control: ctl, Memory: mem, Tools: []tool.Tool{g.tool()},
			SubAgents: subAgents(agent.SubAgentOptions{Engine: eng, OnBackground: func(_ context.Context, res *agent.Result) { got <- res }})})
	}
	first, second := os[0], os[1]
	runEngine(t, engines[1], second) // the first replica's engine does not run: every task runs on the second

	done := start(second, msg("Research, then work."))
	within(t, g.started, "the loop's tool to start on the second replica")
	within(t, w.started, "the research to start on the second replica")
	if err := first.Cancel(context.Background(), "u1", "c1"); err != nil {
		t.Fatalf("Cancel on the first replica: %v", err)
	}
	out := within(t, done, "the loop on the second replica to return")
	if !errors.Is(out.err, agent.ErrCancelled) || out.res.Status != agent.StatusCancelled {
		t.Fatalf("the loop ended %v, %v; want cancelled", out.res.Status, out.err)
	}
	if err := within(t, w.returned, "the research's model call to return"); !errors.Is(err, context.Canceled) {
		t.Fatalf("the research's model call returned %v, want its ctx cancelled", err)
	}
	mu.Lock()
	id := graphIDOf(t, spawnText)
	mu.Unlock()
	gr, err := engines[0].Graph(context.Background(), "u1", id)
	if err != nil || gr.Status != delegate.GraphCancelled {
		t.Fatalf("graph = %s, %v; want cancelled", gr.Status, err)
	}
	for _, task := range gr.Tasks {
		if task.Status != delegate.TaskCancelled || task.ResultID != "" {
			t.Errorf("task %s = %s (result %q), want cancelled without a result", task.ID, task.Status, task.ResultID)
		}
	}

	// The tenant's next graph (the writer alone, in another conversation)
	// runs and is delivered on the second replica: its engine is past the
	// cancelled job by then.
	mu.Lock()
	tasks = []map[string]any{{"id": "write", "task": "Write the summary email."}}
	mu.Unlock()
	if _, err := first.HandleMessage(context.Background(), agent.Message{TenantID: "u1", ConversationID: "c2", Text: "Now just write to Ana."}); err != nil {
		t.Fatal(err)
	}
	within(t, got, "the next graph's delivery")
	mu.Lock()
	defer mu.Unlock()
	// Its run started once (a second start would wait in the channel; the
	// script may not be reached when the cancel came first).
	if n := len(w.started); n != 0 || research > 1 {
		t.Errorf("the research started %d more times (its script answered %d times): a cancelled task does not run again", n, research)
	}
	select {
	case res := <-got:
		t.Errorf("a second delivery: %+v", res)
	default:
	}
}
