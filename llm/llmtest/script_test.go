package llmtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
)

func TestScriptAnswersInOrderAndRecords(t *testing.T) {
	s := llmtest.NewScript(
		llmtest.Calls(llmtest.Call("get_weather", map[string]string{"city": "Paris"})),
		llmtest.Text("Sunny."),
	)
	ctx := context.Background()
	req := llm.Request{Messages: []llm.Message{llm.UserMessage("weather?")}}

	r1, err := s.Complete(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if len(r1.Message.ToolCalls) != 1 || r1.Message.ToolCalls[0].Name != "get_weather" || r1.FinishReason != "tool_calls" {
		t.Fatalf("first reply = %+v", r1)
	}
	if got := string(r1.Message.ToolCalls[0].Arguments); got != `{"city":"Paris"}` {
		t.Errorf("arguments = %s", got)
	}
	req.Messages = append(req.Messages, r1.Message, llm.ToolResultMessage(r1.Message.ToolCalls[0], "sunny", false))
	r2, err := s.Complete(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if r2.Message.Content != "Sunny." || r2.FinishReason != "stop" || r2.Message.Role != llm.RoleAssistant {
		t.Fatalf("second reply = %+v", r2)
	}
	if r2.Usage.InputTokens == 0 || r2.Usage.OutputTokens == 0 {
		t.Errorf("usage not estimated: %+v", r2.Usage)
	}
	if s.Calls() != 2 || s.Remaining() != 0 {
		t.Errorf("Calls = %d, Remaining = %d", s.Calls(), s.Remaining())
	}
	reqs := s.Requests()
	if len(reqs) != 2 || len(reqs[0].Messages) != 1 || len(reqs[1].Messages) != 3 {
		t.Fatalf("recorded requests = %+v", reqs)
	}

	if _, err := s.Complete(ctx, req); !errors.Is(err, llmtest.ErrScriptExhausted) {
		t.Fatalf("third call error = %v, want ErrScriptExhausted", err)
	}
	s.Reset()
	if s.Calls() != 0 || s.Remaining() != 2 {
		t.Errorf("after Reset: Calls = %d, Remaining = %d", s.Calls(), s.Remaining())
	}
}

func TestScriptGeneratesToolCallIDs(t *testing.T) {
	s := llmtest.NewScript(
		llmtest.Calls(llmtest.Call("a", nil), llmtest.Call("b", `{"x":1}`)),
		llmtest.Calls(llm.ToolCall{ID: "mine", Name: "c"}, llmtest.Call("d", []byte(`{}`))),
	)
	var ids []string
	for range 2 {
		r, err := s.Complete(context.Background(), llm.Request{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range r.Message.ToolCalls {
			ids = append(ids, c.ID)
			if !json.Valid(c.Arguments) {
				t.Errorf("call %s: invalid arguments %q", c.Name, c.Arguments)
			}
		}
	}
	if got, want := strings.Join(ids, ","), "call_1,call_2,mine,call_3"; got != want {
		t.Errorf("ids = %s, want %s", got, want)
	}
}

func TestScriptFail(t *testing.T) {
	want := &llm.Error{Kind: llm.KindRateLimited, RetryAfter: time.Second}
	s := llmtest.NewScript(llmtest.Fail(want))
	_, err := s.Complete(context.Background(), llm.Request{})
	if !errors.Is(err, want) || llm.KindOf(err) != llm.KindRateLimited {
		t.Fatalf("err = %v", err)
	}
}

func TestScriptFuncMayUseTheScript(t *testing.T) {
	var s *llmtest.Script
	s = llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		// Calls includes the request being answered.
		if s.Calls() == 1 {
			return llmtest.Calls(llmtest.Call("lookup", nil))
		}
		return llmtest.Text("done after " + req.Messages[len(req.Messages)-1].Content)
	})
	r, err := s.Complete(context.Background(), llm.Request{Messages: []llm.Message{llm.UserMessage("go")}})
	if err != nil || len(r.Message.ToolCalls) != 1 {
		t.Fatalf("first = %+v, %v", r, err)
	}
	r, err = s.Complete(context.Background(), llm.Request{Messages: []llm.Message{llm.UserMessage("again")}})
	if err != nil || r.Message.Content != "done after again" {
		t.Fatalf("second = %+v, %v", r, err)
	}
	if s.Remaining() != 0 {
		t.Errorf("Remaining = %d for a func script", s.Remaining())
	}
}

func TestScriptStreamReassembles(t *testing.T) {
	const text = "It is sunny in Paris today."
	s := llmtest.NewScript(llmtest.Reply{Text: text, ToolCalls: []llm.ToolCall{llmtest.Call("note", nil)}})
	var pieces []string
	var final *llm.Response
	for c, err := range s.Stream(context.Background(), llm.Request{}) {
		if err != nil {
			t.Fatal(err)
		}
		if c.Response != nil {
			if c.Text != "" {
				t.Errorf("final chunk has text %q", c.Text)
			}
			final = c.Response
			continue
		}
		pieces = append(pieces, c.Text)
	}
	if len(pieces) < 2 || strings.Join(pieces, "") != text {
		t.Fatalf("pieces = %q", pieces)
	}
	if final == nil || final.Message.Content != text || len(final.Message.ToolCalls) != 1 || final.Message.ToolCalls[0].ID != "call_1" {
		t.Fatalf("final = %+v", final)
	}
}

func TestScriptStreamStopsEarlyAndReportsErrors(t *testing.T) {
	s := llmtest.NewScript(llmtest.Text("one two three"), llmtest.Fail(errors.New("boom")))
	n := 0
	for range s.Stream(context.Background(), llm.Request{}) {
		n++
		break
	}
	if n != 1 {
		t.Fatalf("got %d chunks before break", n)
	}
	_, err := llm.Collect(s.Stream(context.Background(), llm.Request{}))
	if err == nil || err.Error() != "boom" {
		t.Fatalf("err = %v", err)
	}
	_, err = llm.Collect(s.Stream(context.Background(), llm.Request{}))
	if !errors.Is(err, llmtest.ErrScriptExhausted) {
		t.Fatalf("err = %v, want ErrScriptExhausted", err)
	}
}

func TestScriptDelayHonoursContext(t *testing.T) {
	s := llmtest.NewScript(llmtest.Reply{Text: "late", Delay: time.Hour}, llmtest.Reply{Text: "late", Delay: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 2)
	go func() {
		_, err := s.Complete(ctx, llm.Request{})
		done <- err
	}()
	go func() {
		_, err := llm.Collect(s.Stream(ctx, llm.Request{}))
		done <- err
	}()
	for s.Calls() < 2 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	for range 2 {
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	}
	if _, err := s.Complete(ctx, llm.Request{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled ctx: err = %v", err)
	}
}

func TestScriptShortDelay(t *testing.T) {
	s := llmtest.NewScript(llmtest.Reply{Text: "ok", Delay: time.Millisecond})
	r, err := s.Complete(context.Background(), llm.Request{})
	if err != nil || r.Message.Content != "ok" {
		t.Fatalf("%+v, %v", r, err)
	}
}

func TestScriptConcurrent(t *testing.T) {
	s := llmtest.NewScriptFunc(func(llm.Request) llmtest.Reply { return llmtest.Calls(llmtest.Call("t", nil)) })
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := map[string]bool{}
	for range 16 {
		wg.Go(func() {
			r, err := s.Complete(context.Background(), llm.Request{})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			seen[r.Message.ToolCalls[0].ID] = true
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(seen) != 16 || s.Calls() != 16 {
		t.Fatalf("distinct ids = %d, calls = %d", len(seen), s.Calls())
	}
}
