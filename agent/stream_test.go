package agent_test

import (
	"context"
	"errors"
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
