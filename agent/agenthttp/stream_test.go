package agenthttp_test

import (
	"context"
	"encoding/json"
	"iter"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/agenthttp"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

func TestStreamSendsEveryEventOfTheRunEndingWithTheResult(t *testing.T) {
	model := llmtest.NewStrictScript(t,
		llmtest.Calls(llmtest.Call("get_weather", `{"city":"Paris"}`), llmtest.Call("get_weather", `{"city":"Lyon"}`)),
		llmtest.Text("Sunny in Paris and Lyon."),
	)
	e := newEnv(t, model, agent.Config{}, agenthttp.Config{})
	s := e.post("ann", "c1", "weather in Paris and Lyon?")
	if cc := s.resp.Header.Get("Cache-Control"); cc != "no-store" {
		t.Fatalf("Cache-Control %q", cc)
	}
	evs := s.all()
	if count(evs, "tool_call_start") != 2 || count(evs, "tool_result") != 2 {
		t.Fatalf("events %v: want two tool calls started and ended", types(evs))
	}
	for _, ev := range evs {
		if ev.Type == "tool_result" && (ev.ToolCall == nil || !ev.ToolCall.Success || ev.ToolCall.Status != "completed" || ev.ToolCall.Name != "get_weather") {
			t.Fatalf("tool_result %+v", ev.ToolCall)
		}
	}
	var text strings.Builder
	for _, ev := range evs {
		if ev.Type == "message_chunk" {
			text.WriteString(ev.Text)
		}
	}
	if text.String() != "Sunny in Paris and Lyon." {
		t.Fatalf("chunks make %q", text.String())
	}
	end := evs[len(evs)-1]
	if end.Result == nil || end.Result.Status != "completed" || end.Result.Response != "Sunny in Paris and Lyon." ||
		end.Result.RunID == "" || len(end.Result.ToolCalls) != 2 || end.Error != nil {
		t.Fatalf("execution_end %+v", end)
	}
	if e.weather.Load() != 2 {
		t.Fatalf("get_weather ran %d times", e.weather.Load())
	}
}

// dropOnce breaks its first streamed call off after some text, so the
// loop retries it and the stream retracts that text.
type dropOnce struct {
	*llmtest.Script
	mu    sync.Mutex
	calls int
}

func (d *dropOnce) Stream(ctx context.Context, req llm.Request) iter.Seq2[llm.Chunk, error] {
	d.mu.Lock()
	d.calls++
	first := d.calls == 1
	d.mu.Unlock()
	if !first {
		return d.Script.Stream(ctx, req)
	}
	return func(yield func(llm.Chunk, error) bool) {
		if yield(llm.Chunk{Text: "Hello, "}, nil) && yield(llm.Chunk{Text: "wor"}, nil) {
			yield(llm.Chunk{}, &llm.Error{Kind: llm.KindUnavailable, Message: "connection reset mid-stream"})
		}
	}
}

func TestStreamRetractsTheTextOfARetriedModelCall(t *testing.T) {
	model := &dropOnce{Script: llmtest.NewScript(llmtest.Text("Hello, world."))}
	e := newEnv(t, model, agent.Config{Loop: agent.LoopConfig{LLMRetryBaseDelay: time.Millisecond}}, agenthttp.Config{})
	evs := e.post("ann", "c1", "hi").all()
	var retract, end *agenthttp.Event
	for i := range evs {
		switch evs[i].Type {
		case "message_retract":
			retract = &evs[i]
		case "message_end":
			end = &evs[i]
		}
	}
	if retract == nil || retract.Text != "Hello, wor" {
		t.Fatalf("events %v: want a message_retract of the broken text, got %+v", types(evs), retract)
	}
	if end == nil || end.Text != "Hello, world." || evs[len(evs)-1].Result.Response != "Hello, world." {
		t.Fatalf("the retried message: %+v", end)
	}
}

func TestStreamCarriesHostileTextAsJSONNeverAsMarkup(t *testing.T) {
	hostile := "<img src=x onerror=alert(1)>\n\ndata: {\"type\":\"execution_end\"}\r\nevent: fake"
	e := newEnv(t, llmtest.NewScript(llmtest.Text(hostile)), agent.Config{}, agenthttp.Config{})
	s := e.post("ann", "c1", "say something nasty")
	evs := s.all()
	for _, line := range s.raw {
		if strings.Contains(line, "<img") || strings.HasPrefix(line, "event: fake") {
			t.Fatalf("raw line %q: model text leaked out of its JSON string", line)
		}
	}
	if got := evs[len(evs)-1].Result.Response; got != hostile {
		t.Fatalf("the text did not survive the trip: %q", got)
	}
	if n := count(evs, "execution_end"); n != 1 {
		t.Fatalf("%d execution_end events: the model's text forged one", n)
	}
}

func TestStreamWritesKeepAliveCommentsWhileAToolRuns(t *testing.T) {
	g := newGate()
	model := llmtest.NewScript(llmtest.Calls(llmtest.Call("work", `{}`)), llmtest.Text("Done."))
	e := newEnv(t, model, agent.Config{Tools: []tool.Tool{g.tool()}}, agenthttp.Config{KeepAlive: time.Millisecond})
	s := e.post("ann", "c1", "work")
	s.until("tool_call_start")
	for s.sc.Scan() { // no event comes while the tool blocks: only comments
		line := s.sc.Text()
		if line == ": keep-alive" {
			break
		}
		if line != "" {
			t.Fatalf("line %q while the tool blocks", line)
		}
	}
	close(g.release)
	if evs := s.all(); evs[len(evs)-1].Result.Status != "completed" {
		t.Fatalf("the run: %+v", evs[len(evs)-1].Result)
	}
}

func TestClientDisconnectCancelsTheRunAndKeepsHistoryPaired(t *testing.T) {
	g := newGate()
	model := llmtest.NewScript(llmtest.Calls(llmtest.Call("work", `{}`), llmtest.Call("get_weather", `{"city":"Oslo"}`)))
	e := newEnv(t, model, agent.Config{Tools: []tool.Tool{g.tool()}}, agenthttp.Config{})
	s := e.post("ann", "c1", "do the long thing")
	s.until("tool_call_start")
	<-g.started
	s.close() // the browser tab closes
	res := e.waitEnded()
	if res.Status != agent.StatusCancelled || !g.cancelled.Load() {
		t.Fatalf("run ended %s, tool saw cancellation %v: a dropped client must cancel the run", res.Status, g.cancelled.Load())
	}
	h := e.history("ann", "c1")
	if len(h) < 3 || h[0].Role != "user" || len(h[1].ToolCalls) != 2 {
		t.Fatalf("history %+v: the user's message and the calls are kept", h)
	}
	pairedHistory(t, h)
}

// blockingWriter is a client that never reads: every write after the
// headers blocks until the write deadline the handler set, then fails.
type blockingWriter struct {
	header http.Header
	mu     sync.Mutex
	dl     time.Time
	sets   int
	writes int
}

func (b *blockingWriter) Header() http.Header { return b.header }
func (b *blockingWriter) WriteHeader(int)     {}
func (b *blockingWriter) Flush()              {}
func (b *blockingWriter) SetWriteDeadline(t time.Time) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.dl, b.sets = t, b.sets+1
	return nil
}

func (b *blockingWriter) Write(p []byte) (int, error) {
	b.mu.Lock()
	b.writes++
	dl := b.dl
	b.mu.Unlock()
	if dl.IsZero() {
		panic("write without a deadline")
	}
	time.Sleep(time.Until(dl))
	return 0, errDeadline{}
}

type errDeadline struct{}

func (errDeadline) Error() string   { return "i/o timeout" }
func (errDeadline) Timeout() bool   { return true }
func (errDeadline) Temporary() bool { return true }

func TestSlowClientIsDroppedAtTheWriteDeadlineAndItsRunCancelled(t *testing.T) {
	long := strings.Repeat("word ", 500) // 500 chunks: far more than the buffer
	e := newEnv(t, llmtest.NewScript(llmtest.Text(long)), agent.Config{},
		agenthttp.Config{WriteTimeout: 20 * time.Millisecond, EventBuffer: 4})
	w := &blockingWriter{header: http.Header{}}
	req, _ := http.NewRequest(http.MethodPost, "/conversations/c1/messages", strings.NewReader(`{"text":"talk a lot"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Tenant", "ann")
	e.h.ServeHTTP(w, req) // returns once the run has ended
	res := e.waitEnded()
	if res.Status != agent.StatusCancelled {
		t.Fatalf("the run of a client that does not read ended %s; want cancelled", res.Status)
	}
	if w.writes != 1 || w.sets == 0 {
		t.Fatalf("%d writes, %d deadlines: the first blocked write should have dropped the client", w.writes, w.sets)
	}
	pairedHistory(t, e.history("ann", "c1"))
}

func TestReconnectingClientReadsTheHistory(t *testing.T) {
	model := llmtest.NewScript(llmtest.Calls(llmtest.Call("get_weather", `{"city":"Rome","key":"sk-proj-abcdef0123456789abcdef"}`)), llmtest.Text("Sunny in Rome."))
	e := newEnv(t, model, agent.Config{}, agenthttp.Config{})
	e.post("ann", "c1", "Rome?").all()
	h := e.history("ann", "c1")
	if len(h) != 4 || h[0].Content != "Rome?" || h[3].Content != "Sunny in Rome." || h[2].Role != "tool" {
		t.Fatalf("history %+v", h)
	}
	if args := h[1].ToolCalls[0].Arguments; strings.Contains(args, "sk-proj") || !json.Valid([]byte(args)) {
		t.Fatalf("tool call arguments %q: secrets masked, JSON kept", args)
	}
	if other := e.history("bob", "c1"); len(other) != 0 {
		t.Fatalf("tenant bob reads ann's conversation: %+v", other)
	}
}
