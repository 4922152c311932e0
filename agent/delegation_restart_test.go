package agent_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/delegate"
	"github.com/valetkit/valet/agent/delegate/pgdelegate"
	"github.com/valetkit/valet/clock"
	"github.com/valetkit/valet/internal/pgtest"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
)

// pgEngine is a pgdelegate engine on schema, migrated, retrying fast.
func pgEngine(t *testing.T, schema string) *pgdelegate.Engine {
	t.Helper()
	eng, err := pgdelegate.New(pgtest.DB(t), pgdelegate.Config{Schema: schema, Parallel: 2,
		RetryDelay: 10 * time.Millisecond, MaxRetryDelay: 50 * time.Millisecond, FetchCooldown: 10 * time.Millisecond, FetchPollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return eng
}

// Results and an undelivered graph survive a restart on PostgreSQL: the
// first process stores a spawn's result and runs the research, then stops
// while the writer runs; a new engine and orchestrator on the same schema
// run the writer (given the first process's research) and deliver, and
// the first spawn's result is still found by its reference.
func TestBackgroundGraphSurvivesRestartOnPostgres(t *testing.T) {
	db := pgtest.DB(t)
	schema := pgtest.Schema(t, db)
	var research atomic.Int32
	writing := make(chan struct{}, 1)

	// Process 1: the writer never finishes before the process stops.
	s1 := &graphScript{tasks: researchWrite(), worker: func(text string) llmtest.Reply {
		if strings.Contains(text, "Research hotels") {
			research.Add(1)
			return llmtest.Reply{Text: "Casa Azul, 120 EUR."}
		}
		select {
		case writing <- struct{}{}:
		default:
		}
		return llmtest.Reply{Text: "unfinished", Delay: time.Hour}
	}}
	eng1 := pgEngine(t, schema)
	o1 := newOrch(t, llmtest.NewScriptFunc(s1.reply), agent.Config{Clock: clock.System{}, SubAgents: subAgents(agent.SubAgentOptions{Engine: eng1})})
	ctx1, stop1 := context.WithCancel(context.Background())
	done1 := make(chan error, 1)
	go func() { done1 <- eng1.Run(ctx1, o1.TaskExecutor()) }()
	if _, err := o1.HandleMessage(context.Background(), msg("Find a hotel and write to Ana.")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-writing: // the research is stored: the writer started
	case <-time.After(60 * time.Second):
		t.Fatal("the writer never started")
	}
	stop1()
	if err := <-done1; err != nil {
		t.Fatal(err)
	}

	// Process 2, on the same schema.
	s2 := &graphScript{worker: func(text string) llmtest.Reply {
		if strings.Contains(text, "Research hotels") {
			research.Add(1)
		}
		return llmtest.Reply{Text: "Dear Ana, " + strings.TrimSpace(between(text, `status="completed">`, "</agent_result>"))}
	}}
	got := make(chan *agent.Result, 2)
	eng2 := pgEngine(t, schema)
	o2 := newOrch(t, llmtest.NewScriptFunc(s2.reply), agent.Config{Clock: clock.System{}, SubAgents: subAgents(agent.SubAgentOptions{
		Engine: eng2, OnBackground: func(_ context.Context, res *agent.Result) { got <- res },
	})})
	runEngine(t, eng2, o2)
	awaitResult(t, got)
	_, delivery, _ := s2.snapshot()
	if len(delivery) != 1 || !strings.Contains(delivery[0], "2 of 2 tasks completed") || !strings.Contains(delivery[0], "Dear Ana, Casa Azul, 120 EUR.") {
		t.Fatalf("delivery after the restart %q, want both tasks, the writer given the first process's research", delivery)
	}
	if n := research.Load(); n != 1 {
		t.Fatalf("the research ran %d times, want once", n)
	}
}

// between is the text of s between open and close.
func between(s, open, close string) string {
	_, s, _ = strings.Cut(s, open)
	s, _, _ = strings.Cut(s, close)
	return s
}

// A foreground spawn's result stored on PostgreSQL is found by its
// reference from another process.
func TestSpawnResultSurvivesRestartOnPostgres(t *testing.T) {
	db := pgtest.DB(t)
	schema := pgtest.Schema(t, db)
	var id string
	m1 := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		if isWorker(req) {
			return llmtest.Reply{Text: "Casa Azul, 120 EUR."}
		}
		if r, ok := toolResults(req)["sp1"]; ok {
			if ids := delegate.Refs(r.Content); len(ids) == 1 {
				id = ids[0]
			}
			return llmtest.Reply{Text: "Done."}
		}
		return llmtest.Reply{ToolCalls: []llm.ToolCall{spawnCall("sp1", map[string]any{"task": "Find a hotel."})}}
	})
	o1 := newOrch(t, m1, agent.Config{SubAgents: subAgents(agent.SubAgentOptions{Engine: pgEngine(t, schema)})})
	if _, err := o1.HandleMessage(context.Background(), msg("Find a hotel.")); err != nil {
		t.Fatal(err)
	}
	if id == "" {
		t.Fatal("the spawn's result names no reference")
	}
	var worker string
	m2 := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		if isWorker(req) {
			worker = firstUser(req)
			return llmtest.Reply{Text: "Written."}
		}
		if _, ok := toolResults(req)["sp2"]; ok {
			return llmtest.Reply{Text: "Done."}
		}
		return llmtest.Reply{ToolCalls: []llm.ToolCall{spawnCall("sp2", map[string]any{"task": "Write to Ana.", "context": "[agent_result:" + id + "]"})}}
	})
	o2 := newOrch(t, m2, agent.Config{SubAgents: subAgents(agent.SubAgentOptions{Engine: pgEngine(t, schema)})})
	if _, err := o2.HandleMessage(context.Background(), msg("Write to Ana.")); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(worker, "Casa Azul, 120 EUR.") {
		t.Fatalf("the second process's writer was sent %q", worker)
	}
}
