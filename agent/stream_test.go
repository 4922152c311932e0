package agent_test

import (
	"context"
	"errors"
	"iter"
	"strings"
	"testing"
	"time"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

func TestStreamEventsInOrder(t *testing.T) {
	s := llmtest.NewScript(
		llmtest.Calls(llmtest.Call("get_weather", `{"city":"Paris"}`), llmtest.Call("get_weather", `{"city":"Rome"}`)),
		llmtest.Text("Sunny in both cities."),
	)
	o := newOrch(t, s, agent.Config{Tools: []tool.Tool{weatherTool()}})
	var types []agent.EventType
	text := ""
	var final *agent.Result
	for ev, err := range o.Stream(context.Background(), msg("Paris and Rome?")) {
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, ev.Type)
		switch ev.Type {
		case agent.EventMessageChunk:
			text += ev.Text
		case agent.EventMessageEnd:
			if ev.Text != text {
				t.Errorf("message end text %q, chunks %q", ev.Text, text)
			}
		case agent.EventToolCallStart:
			if ev.ToolCall == nil || ev.ToolCall.Name != "get_weather" {
				t.Errorf("tool start = %+v", ev.ToolCall)
			}
		case agent.EventToolResult:
			if ev.ToolCall == nil || !ev.ToolCall.Success || ev.ToolCall.ResultChars == 0 {
				t.Errorf("tool result = %+v", ev.ToolCall)
			}
		case agent.EventExecutionEnd:
			final = ev.Result
		}
	}
	if text != "Sunny in both cities." || final == nil || final.Response != text || final.Status != agent.StatusCompleted {
		t.Fatalf("text=%q final=%+v", text, final)
	}
	want := []agent.EventType{agent.EventToolCallStart, agent.EventToolCallStart, agent.EventToolResult, agent.EventToolResult, agent.EventMessageStart}
	for i, w := range want {
		if types[i] != w {
			t.Fatalf("events = %v, want prefix %v", types, want)
		}
	}
	if types[len(types)-2] != agent.EventMessageEnd || types[len(types)-1] != agent.EventExecutionEnd {
		t.Fatalf("events = %v", types)
	}
}

func TestStreamReportsErrorsInTheLastEvent(t *testing.T) {
	s := llmtest.NewScript(llmtest.Fail(&llm.Error{Kind: llm.KindAuth, StatusCode: 401}))
	o := newOrch(t, s, agent.Config{})
	n := 0
	for ev, err := range o.Stream(context.Background(), msg("hi")) {
		n++
		if ev.Type != agent.EventExecutionEnd || llm.KindOf(err) != llm.KindAuth || ev.Result.Status != agent.StatusError {
			t.Fatalf("event %+v err %v", ev, err)
		}
	}
	if n != 1 {
		t.Fatalf("%d events", n)
	}
}

func TestStreamStoppedEarlyCancelsTheRun(t *testing.T) {
	entered := make(chan struct{})
	var sawCancel error
	wait := tool.New("wait", "", func(ctx context.Context, in struct{}) (string, error) {
		close(entered)
		<-ctx.Done()
		sawCancel = ctx.Err()
		return "", ctx.Err()
	})
	s := llmtest.NewScript(llmtest.Calls(llmtest.Call("wait", `{}`)), llmtest.Text("never"))
	o := newOrch(t, s, agent.Config{Tools: []tool.Tool{wait}})
	for ev := range o.Stream(context.Background(), msg("go")) {
		if ev.Type == agent.EventToolCallStart {
			break
		}
	}
	// Breaking out happened before the tool ran; the run must not have
	// called the model again, and the tool (if it started) saw the cancel.
	if s.Calls() != 1 {
		t.Fatalf("model called %d times after the consumer left", s.Calls())
	}
	select {
	case <-entered:
		if !errors.Is(sawCancel, context.Canceled) {
			t.Fatalf("tool saw %v", sawCancel)
		}
	default:
	}
}

// TestStreamToolResultsInFinishingOrder: results are reported as calls
// finish, whichever goroutine ran them. The last call of a turn runs on the
// loop's goroutine; here it is the slow one, so the first call's result must
// come out first.
func TestStreamToolResultsInFinishingOrder(t *testing.T) {
	fastDone := make(chan struct{})
	fast := tool.New("fast", "", func(ctx context.Context, in struct{}) (string, error) {
		close(fastDone)
		return "fast done", nil
	})
	slow := tool.New("slow", "", func(ctx context.Context, in struct{}) (string, error) {
		select {
		case <-fastDone:
		case <-ctx.Done():
			return "", ctx.Err()
		}
		// Give the fast call's goroutine time to hand its result over.
		time.Sleep(100 * time.Millisecond)
		return "slow done", nil
	})
	s := llmtest.NewScript(llmtest.Calls(llmtest.Call("fast", `{}`), llmtest.Call("slow", `{}`)), llmtest.Text("ok"))
	o := newOrch(t, s, agent.Config{Tools: []tool.Tool{slow, fast}})
	var order []string
	for ev, err := range o.Stream(context.Background(), msg("go")) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == agent.EventToolResult {
			order = append(order, ev.ToolCall.Name)
		}
	}
	if len(order) != 2 || order[0] != "fast" || order[1] != "slow" {
		t.Fatalf("results reported in order %v, want fast then slow", order)
	}
}

// dropOnce streams "Hello, wor" and then fails, once; later calls stream
// the whole reply.
type dropOnce struct {
	llmtest.Script
	calls int
}

func (d *dropOnce) Stream(ctx context.Context, req llm.Request) iter.Seq2[llm.Chunk, error] {
	d.calls++
	if d.calls > 1 {
		return d.Script.Stream(ctx, req)
	}
	return func(yield func(llm.Chunk, error) bool) {
		if yield(llm.Chunk{Text: "Hello, "}, nil) && yield(llm.Chunk{Text: "wor"}, nil) {
			yield(llm.Chunk{}, &llm.Error{Kind: llm.KindUnavailable, Message: "connection reset mid-stream"})
		}
	}
}

// render shows a stream the way a terminal does, following the documented
// rules: chunks are printed as they come, and an EventMessageRetract erases
// the text printed since EventMessageStart. It returns the messages that
// ended (EventMessageEnd) and the Result, and checks that the screen holds
// exactly those messages.
func render(t *testing.T, events iter.Seq2[agent.Event, error]) ([]string, *agent.Result) {
	t.Helper()
	var shown []string
	var screen, cur strings.Builder
	var res *agent.Result
	for ev, err := range events {
		switch ev.Type {
		case agent.EventMessageStart:
			cur.Reset()
		case agent.EventMessageChunk:
			screen.WriteString(ev.Text)
			cur.WriteString(ev.Text)
		case agent.EventMessageRetract:
			s := screen.String()
			if ev.Text != cur.String() || !strings.HasSuffix(s, ev.Text) {
				t.Fatalf("retract text %q, message so far %q", ev.Text, cur.String())
			}
			screen.Reset()
			screen.WriteString(s[:len(s)-len(ev.Text)])
			cur.Reset()
		case agent.EventMessageEnd:
			if ev.Text != cur.String() {
				t.Errorf("message end text %q, chunks %q", ev.Text, cur.String())
			}
			shown = append(shown, cur.String())
		case agent.EventExecutionEnd:
			if err != nil {
				t.Fatal(err)
			}
			res = ev.Result
		}
	}
	if got, want := screen.String(), strings.Join(shown, ""); got != want {
		t.Fatalf("the screen shows %q; the messages that ended are %q", got, want)
	}
	return shown, res
}

func TestStreamRetriedAfterADropRetractsThePartialText(t *testing.T) {
	d := &dropOnce{Script: *llmtest.NewScript(llmtest.Text("Hello, world."))}
	o := newOrch(t, d, agent.Config{Loop: fastRetries})
	shown, res := render(t, o.Stream(context.Background(), msg("hi")))
	if res == nil || res.Response != "Hello, world." {
		t.Fatalf("result %+v", res)
	}
	if len(shown) != 1 || shown[0] != res.Response {
		t.Fatalf("a consumer following the rules shows %q; Result.Response is %q", shown, res.Response)
	}
}

// A reply that was never streamed (the agents' own prompt, with
// DirectAgentPrompts) is streamed as a message too, so the last message
// shown is always Result.Response.
func TestStreamShowsTheResponseEvenWhenTheModelDidNotWriteIt(t *testing.T) {
	reg := agent.NewRegistry()
	if err := agent.Register(reg, "book_table", "Book a table", bookTable{}); err != nil {
		t.Fatal(err)
	}
	s := llmtest.NewScript(llmtest.Calls(llmtest.Call("book_table", `{}`)))
	o := newOrch(t, s, agent.Config{Agents: reg, Loop: agent.LoopConfig{DirectAgentPrompts: true}})
	shown, res := render(t, o.Stream(context.Background(), msg("book a table")))
	if res == nil || res.Status != agent.StatusWaitingForInput || res.Response == "" {
		t.Fatalf("result %+v", res)
	}
	if len(shown) == 0 || shown[len(shown)-1] != res.Response {
		t.Fatalf("shown %q; Result.Response is %q", shown, res.Response)
	}
}

type bookTableIn struct {
	Restaurant string `json:"restaurant" jsonschema:"required"`
}

type bookTable struct{}

func (bookTable) Run(_ context.Context, in bookTableIn) (agent.Reply, error) {
	return agent.Reply{Text: "booked " + in.Restaurant}, nil
}
