package agent_test

import (
	"context"
	"errors"
	"iter"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/delegate"
	"github.com/valetkit/valet/clock"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

// workerWatch wraps a model and tells when a background worker's call
// for the research starts and when it returns (its ctx ended or it
// answered).
type workerWatch struct {
	llm.Client
	mu       sync.Mutex
	started  chan struct{} // a value per research call started
	returned chan error    // its error, per research call returned
}

func newWorkerWatch(inner llm.Client) *workerWatch {
	return &workerWatch{Client: inner, started: make(chan struct{}, 8), returned: make(chan error, 8)}
}

func (w *workerWatch) research(req llm.Request) bool {
	return isWorker(req) && strings.Contains(firstUser(req), "Research hotels")
}

func (w *workerWatch) Complete(ctx context.Context, req llm.Request) (*llm.Response, error) {
	if !w.research(req) {
		return w.Client.Complete(ctx, req)
	}
	w.started <- struct{}{}
	resp, err := w.Client.Complete(ctx, req)
	w.returned <- err
	return resp, err
}

func (w *workerWatch) Stream(ctx context.Context, req llm.Request) iter.Seq2[llm.Chunk, error] {
	if !w.research(req) {
		return w.Client.Stream(ctx, req)
	}
	return func(yield func(llm.Chunk, error) bool) {
		w.started <- struct{}{}
		var last error
		defer func() { w.returned <- last }()
		for c, err := range w.Client.Stream(ctx, req) {
			last = err
			if !yield(c, err) {
				return
			}
		}
	}
}

// within waits for a value of ch, failing the test after 30s.
func within[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		var zero T
		return zero
	}
}

// graphIDOf is the graph id a spawn's tool result names.
func graphIDOf(t *testing.T, spawnText string) string {
	t.Helper()
	id := between(spawnText, "Started in the background as graph ", ":")
	if id == "" {
		t.Fatalf("spawn result %q names no graph", spawnText)
	}
	return id
}

// slowResearch is researchWrite's workers: the research never answers
// before its ctx ends; the writer answers.
func slowResearch(text string) llmtest.Reply {
	if strings.Contains(text, "Research hotels") {
		return llmtest.Reply{Text: "never", Delay: time.Hour}
	}
	return llmtest.Reply{Text: "Dear Ana."}
}

// Cancel of a conversation whose loop has ended but whose background
// graph runs stops the graph: the research sub-agent's model call gets a
// cancelled ctx at once, the graph and its tasks end cancelled with no
// result stored, the writer never starts, the research is not run again
// (though its run returned an error, which the engine retries), and the
// graph's end is not delivered. The conversation's next graph runs.
func TestCancelStopsConversationsBackgroundGraph(t *testing.T) {
	s := &graphScript{tasks: researchWrite(), worker: slowResearch}
	w := newWorkerWatch(llmtest.NewScriptFunc(s.reply))
	eng := fastEngine(t, 3)
	got := make(chan *agent.Result, 4)
	o := newOrch(t, w, agent.Config{Clock: clock.System{}, SubAgents: subAgents(agent.SubAgentOptions{
		Engine: eng, OnBackground: func(_ context.Context, res *agent.Result) { got <- res },
	})})
	runEngine(t, eng, o)
	ctx := context.Background()
	if _, err := o.HandleMessage(ctx, msg("Find me a hotel in Lisbon and draft an email.")); err != nil {
		t.Fatal(err)
	}
	_, _, spawnText := s.snapshot()
	id := graphIDOf(t, spawnText)
	within(t, w.started, "the research to start")

	if err := o.Cancel(ctx, "u1", "c1"); err != nil {
		t.Fatalf("Cancel with the conversation's graph running: %v, want nil", err)
	}
	if err := within(t, w.returned, "the research's model call to return"); !errors.Is(err, context.Canceled) {
		t.Fatalf("the research's model call returned %v, want its ctx cancelled", err)
	}
	g, err := eng.Graph(ctx, "u1", id)
	if err != nil {
		t.Fatal(err)
	}
	if g.Status != delegate.GraphCancelled || g.Delivered {
		t.Fatalf("graph %s delivered %v, want cancelled and not delivered", g.Status, g.Delivered)
	}
	for _, task := range g.Tasks {
		if task.Status != delegate.TaskCancelled || task.ResultID != "" {
			t.Errorf("task %s = %s (result %q), want cancelled without a result", task.ID, task.Status, task.ResultID)
		}
	}
	// Nothing is left to cancel: the conversation is not running.
	if err := o.Cancel(ctx, "u1", "c1"); !errors.Is(err, agent.ErrNotRunning) {
		t.Fatalf("second Cancel: %v, want ErrNotRunning", err)
	}

	// The conversation's next background work runs and is delivered; the
	// engine is past the cancelled run's end by then (and its retry
	// delay, 5ms, long before the new graph's two model calls end).
	s.mu.Lock()
	s.tasks = []map[string]any{{"id": "write", "task": "Write the summary email."}}
	s.mu.Unlock()
	if _, err := o.HandleMessage(ctx, agent.Message{TenantID: "u1", ConversationID: "c2", Text: "Write to Ana."}); err != nil {
		t.Fatal(err)
	}
	within(t, got, "the second graph's delivery")
	// The research's run started once (a second start would wait in the
	// channel); the first graph's writer never ran, the second's once.
	if n := len(w.started); n != 0 {
		t.Errorf("the research started %d more times: a cancelled task does not run again", n)
	}
	workers, delivery, _ := s.snapshot()
	writers := 0
	for _, text := range workers {
		if strings.Contains(text, "Write the summary email.") {
			writers++
		}
	}
	if writers != 1 {
		t.Errorf("workers %q: want only the second graph's writer", workers)
	}
	if len(delivery) != 1 || strings.Contains(delivery[0], id) {
		t.Errorf("deliveries %q: want the second graph's only", delivery)
	}
	select {
	case res := <-got:
		t.Errorf("a second delivery reached OnBackground: %+v", res)
	default:
	}
}

// Cancel of a running loop also stops the background graph that loop
// started, including one it submitted just before the cancel reached it:
// the cancelled run cancels its conversation's graphs as it ends.
func TestCancelLoopStopsTheGraphItStarted(t *testing.T) {
	g := newGate()
	var mu sync.Mutex
	var spawnText string
	model := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		if isWorker(req) {
			return slowResearch(firstUser(req))
		}
		tr := toolResults(req)
		if r, ok := tr["sp1"]; ok {
			mu.Lock()
			spawnText = r.Content
			mu.Unlock()
			return llmtest.Reply{ToolCalls: []llm.ToolCall{{ID: "w1", Name: "work", Arguments: []byte(`{}`)}}}
		}
		return llmtest.Reply{ToolCalls: []llm.ToolCall{spawnCall("sp1", map[string]any{"tasks": researchWrite()})}}
	})
	w := newWorkerWatch(model)
	eng := fastEngine(t, 3)
	o := newOrch(t, w, agent.Config{Clock: clock.System{}, Tools: []tool.Tool{g.tool()},
		SubAgents: subAgents(agent.SubAgentOptions{Engine: eng})})
	runEngine(t, eng, o)
	done := start(o, msg("Research, then work."))
	within(t, g.started, "the loop's tool to start")
	within(t, w.started, "the research to start")
	if err := o.Cancel(context.Background(), "u1", "c1"); err != nil {
		t.Fatal(err)
	}
	out := within(t, done, "the cancelled loop to return")
	if !errors.Is(out.err, agent.ErrCancelled) || out.res.Status != agent.StatusCancelled {
		t.Fatalf("loop ended %v, %v; want cancelled", out.res.Status, out.err)
	}
	if err := within(t, w.returned, "the research's model call to return"); !errors.Is(err, context.Canceled) {
		t.Fatalf("the research's model call returned %v, want its ctx cancelled", err)
	}
	mu.Lock()
	id := graphIDOf(t, spawnText)
	mu.Unlock()
	gr, err := eng.Graph(context.Background(), "u1", id)
	if err != nil || gr.Status != delegate.GraphCancelled {
		t.Fatalf("graph = %s, %v; want cancelled with the loop", gr.Status, err)
	}
}

// Pause holds the loop only: the background graph it started runs on and
// its end is delivered (a delivered run leaves the pause to the user's
// next message); Cancel is what stops background work.
func TestPauseLeavesBackgroundGraphRunning(t *testing.T) {
	g := newGate()
	release := make(chan struct{})
	var mu sync.Mutex
	var delivered []string
	model := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		if isWorker(req) {
			if strings.Contains(firstUser(req), "Research hotels") {
				<-release
				return llmtest.Reply{Text: "Casa Azul."}
			}
			return llmtest.Reply{Text: "Dear Ana."}
		}
		if u := lastUser(req); strings.HasPrefix(u.Content, "[Background Tasks]") && req.Messages[len(req.Messages)-1].Role == llm.RoleUser {
			mu.Lock()
			delivered = append(delivered, u.Content)
			mu.Unlock()
			return llmtest.Reply{Text: "Your draft is ready."}
		}
		if _, ok := toolResults(req)["sp1"]; ok {
			return llmtest.Reply{ToolCalls: []llm.ToolCall{{ID: "w1", Name: "work", Arguments: []byte(`{}`)}}}
		}
		return llmtest.Reply{ToolCalls: []llm.ToolCall{spawnCall("sp1", map[string]any{"tasks": researchWrite()})}}
	})
	eng := fastEngine(t, 3)
	got := make(chan *agent.Result, 4)
	o := newOrch(t, model, agent.Config{Clock: clock.System{}, Tools: []tool.Tool{g.tool()},
		SubAgents: subAgents(agent.SubAgentOptions{Engine: eng, OnBackground: func(_ context.Context, res *agent.Result) { got <- res }})})
	runEngine(t, eng, o)
	done := start(o, msg("Research, then work."))
	within(t, g.started, "the loop's tool to start")
	if err := o.Pause(context.Background(), "u1", "c1"); err != nil {
		t.Fatal(err)
	}
	close(g.release)
	out := within(t, done, "the paused loop to return")
	if out.err != nil || out.res.Status != agent.StatusPaused {
		t.Fatalf("loop ended %v, %v; want paused", out.res.Status, out.err)
	}
	close(release) // the research answers after the pause
	bg := within(t, got, "the graph's delivery")
	if bg.Response != "Your draft is ready." {
		t.Fatalf("delivery reaction %q", bg.Response)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(delivered) != 1 || !strings.Contains(delivered[0], "2 of 2 tasks completed") {
		t.Fatalf("deliveries %q, want the graph completed after the pause", delivered)
	}
}

// slowSubmit is an in-memory engine whose Submit waits for release and
// then stores the graph whatever its ctx says: a graph that reaches the
// engine after the Cancel meant for its loop looked there.
type slowSubmit struct {
	*delegate.Memory
	entered chan struct{}
	release chan struct{}
	ids     []string // the graphs stored (read once the loop returned)
}

func (s *slowSubmit) Submit(ctx context.Context, g delegate.Graph) error {
	s.entered <- struct{}{}
	<-s.release
	err := s.Memory.Submit(context.WithoutCancel(ctx), g)
	if err == nil {
		s.ids = append(s.ids, g.ID)
	}
	return err
}

// A Cancel that reaches the loop while its graph is on its way to the
// engine (Cancel found no graph to stop) still stops that graph: the
// cancelled loop cancels its conversation's graphs as it ends.
func TestCancelledLoopStopsAGraphSubmittedAsTheCancelArrived(t *testing.T) {
	s := &graphScript{tasks: researchWrite(), worker: slowResearch}
	eng := &slowSubmit{Memory: fastEngine(t, 3), entered: make(chan struct{}, 1), release: make(chan struct{})}
	o := newOrch(t, llmtest.NewScriptFunc(s.reply), agent.Config{Clock: clock.System{},
		SubAgents: subAgents(agent.SubAgentOptions{Engine: eng})})
	runEngine(t, eng, o)
	done := start(o, msg("Find me a hotel in Lisbon and draft an email."))
	within(t, eng.entered, "the graph's Submit")
	if err := o.Cancel(context.Background(), "u1", "c1"); err != nil {
		t.Fatalf("Cancel of the running loop: %v", err)
	}
	close(eng.release) // the graph is stored after Cancel looked for graphs
	out := within(t, done, "the cancelled loop to return")
	if out.res.Status != agent.StatusCancelled {
		t.Fatalf("loop ended %v, %v; want cancelled", out.res.Status, out.err)
	}
	if len(eng.ids) != 1 {
		t.Fatalf("%d graphs submitted, want 1", len(eng.ids))
	}
	g, err := eng.Graph(context.Background(), "u1", eng.ids[0])
	if err != nil || g.Status != delegate.GraphCancelled {
		t.Fatalf("graph submitted as the Cancel arrived = %s, %v; want cancelled by the loop's end", g.Status, err)
	}
}
