package agent_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

var fastRetries = agent.LoopConfig{LLMRetryBaseDelay: time.Millisecond, LLMMaxRetryDelay: 200 * time.Millisecond}

func TestRateLimitBacksOffHonouringRetryAfter(t *testing.T) {
	rl := &llm.Error{Kind: llm.KindRateLimited, StatusCode: 429, RetryAfter: 60 * time.Millisecond}
	s := llmtest.NewScript(llmtest.Fail(rl), llmtest.Fail(rl), llmtest.Text("finally"))
	o := newOrch(t, paired{t, s}, agent.Config{Loop: fastRetries})
	start := time.Now()
	res, err := o.HandleMessage(context.Background(), msg("hi"))
	if err != nil || res.Response != "finally" || s.Calls() != 3 {
		t.Fatalf("res=%+v err=%v calls=%d", res, err, s.Calls())
	}
	if d := time.Since(start); d < 120*time.Millisecond {
		t.Fatalf("retried after %v: Retry-After (2×60ms) not honoured", d)
	}
}

func TestRetriesAreBoundedThenTheErrorIsReturned(t *testing.T) {
	un := &llm.Error{Kind: llm.KindUnavailable, StatusCode: 503}
	s := llmtest.NewScript(llmtest.Fail(un), llmtest.Fail(un), llmtest.Fail(un), llmtest.Text("too late"))
	o := newOrch(t, paired{t, s}, agent.Config{Loop: fastRetries})
	res, err := o.HandleMessage(context.Background(), msg("hi"))
	if llm.KindOf(err) != llm.KindUnavailable || res.Status != agent.StatusError || s.Calls() != 3 {
		t.Fatalf("res=%+v err=%v calls=%d (want 1 try + 2 retries)", res, err, s.Calls())
	}
}

func TestAuthErrorIsReturnedAtOnce(t *testing.T) {
	s := llmtest.NewScript(llmtest.Fail(&llm.Error{Kind: llm.KindAuth, StatusCode: 401}), llmtest.Text("unreachable"))
	o := newOrch(t, paired{t, s}, agent.Config{Loop: fastRetries})
	_, err := o.HandleMessage(context.Background(), msg("hi"))
	if llm.KindOf(err) != llm.KindAuth || s.Calls() != 1 {
		t.Fatalf("err=%v calls=%d", err, s.Calls())
	}
}

func TestTimeoutIsRetriedOnce(t *testing.T) {
	to := &llm.Error{Kind: llm.KindTimeout}
	s := llmtest.NewScript(llmtest.Fail(to), llmtest.Text("ok"))
	o := newOrch(t, paired{t, s}, agent.Config{Loop: fastRetries})
	if res, err := o.HandleMessage(context.Background(), msg("hi")); err != nil || res.Response != "ok" {
		t.Fatalf("res=%+v err=%v", res, err)
	}
	s = llmtest.NewScript(llmtest.Fail(to), llmtest.Fail(to), llmtest.Text("unreachable"))
	o = newOrch(t, paired{t, s}, agent.Config{Loop: fastRetries})
	if _, err := o.HandleMessage(context.Background(), msg("hi")); llm.KindOf(err) != llm.KindTimeout || s.Calls() != 2 {
		t.Fatalf("err=%v calls=%d", err, s.Calls())
	}
}

// overflowModel rejects any request longer than limit characters, like a
// model with a small window; it records the sizes it was sent.
func overflowModel(limit int, sizes *[]int, then func(req llm.Request) llmtest.Reply) *llmtest.Script {
	return llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		n := 0
		for _, m := range req.Messages {
			n += len(m.Content)
		}
		*sizes = append(*sizes, n)
		if n > limit {
			return llmtest.Fail(&llm.Error{Kind: llm.KindContextOverflow, StatusCode: 400, Code: "context_length_exceeded"})
		}
		return then(req)
	})
}

func TestContextOverflowChain(t *testing.T) {
	big := strings.Repeat("result row\n", 3000) // 33000 chars
	search := tool.New("search", "", func(ctx context.Context, in struct{}) (string, error) { return big, nil })
	var sizes []int
	turn := 0
	s := overflowModel(8000, &sizes, func(req llm.Request) llmtest.Reply {
		turn++
		if turn == 1 {
			return llmtest.Calls(llmtest.Call("search", `{}`))
		}
		return llmtest.Text("summary of results")
	})
	// The configured window (10000 tokens ≈ 40000 chars) is larger than the
	// model's real one (8000 chars), so only the overflow chain can save it.
	o := newOrch(t, paired{t, s}, agent.Config{Tools: []tool.Tool{search}, Loop: agent.LoopConfig{ContextTokenLimit: 10000}})
	res, err := o.HandleMessage(context.Background(), msg("search everything"))
	if err != nil || res.Response != "summary of results" {
		t.Fatalf("res=%+v err=%v sizes=%v", res, err, sizes)
	}
	// The first oversized request was rejected; a shortened one went through.
	if len(sizes) < 3 || sizes[1] <= 8000 || sizes[len(sizes)-1] > 8000 {
		t.Fatalf("request sizes = %v", sizes)
	}
	// The history keeps the result as it arrived (cut to its share of the
	// window, 12000 chars); the overflow chain's deeper cut only shortened
	// what was sent.
	h, _ := o.History(context.Background(), "u1", "c1")
	if n := len(h[2].Content); n < 11000 || n > 12500 || !strings.Contains(h[2].Content, "truncated") {
		t.Fatalf("history tool result has %d chars", n)
	}
}

func TestContextOverflowGivesUpWithAClearError(t *testing.T) {
	var sizes []int
	s := overflowModel(10, &sizes, func(llm.Request) llmtest.Reply { return llmtest.Text("unreachable") })
	o := newOrch(t, paired{t, s}, agent.Config{})
	res, err := o.HandleMessage(context.Background(), msg("this message alone is longer than the window"))
	if !errors.Is(err, agent.ErrContextOverflow) || llm.KindOf(err) != llm.KindContextOverflow || res.Status != agent.StatusError {
		t.Fatalf("res=%+v err=%v", res, err)
	}
	if len(sizes) > 4 {
		t.Fatalf("tried %d times; the chain has three defences", len(sizes))
	}
}

func TestLongHistoryIsTrimmedBeforeTheCall(t *testing.T) {
	s := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply { return llmtest.Text("ok") })
	o := newOrch(t, paired{t, s}, agent.Config{Loop: agent.LoopConfig{MaxHistoryMessages: 6}})
	for range 10 {
		if _, err := o.HandleMessage(context.Background(), msg("hello again")); err != nil {
			t.Fatal(err)
		}
	}
	reqs := s.Requests()
	if n := len(reqs[len(reqs)-1].Messages); n > 1+6+1 {
		t.Fatalf("last request had %d messages with MaxHistoryMessages 6", n)
	}
}

func TestLLMTimeoutBoundsAHungModelAndIsRetriedOnce(t *testing.T) {
	var calls atomic.Int32
	hung := modelFunc(func(ctx context.Context, req llm.Request) (*llm.Response, error) {
		if calls.Add(1) == 3 {
			return &llm.Response{Message: llm.AssistantMessage("unreachable")}, nil
		}
		<-ctx.Done() // a connection that never answers
		return nil, ctx.Err()
	})
	o := newOrch(t, hung, agent.Config{Loop: agent.LoopConfig{LLMTimeout: 30 * time.Millisecond}})
	for _, stream := range []bool{false, true} {
		calls.Store(0)
		var err error
		var res *agent.Result
		if stream {
			for ev, e := range o.Stream(context.Background(), msg("hi")) {
				res, err = ev.Result, e
			}
		} else {
			res, err = o.HandleMessage(context.Background(), msg("hi"))
		}
		if llm.KindOf(err) != llm.KindTimeout || calls.Load() != 2 || res.Status != agent.StatusError {
			t.Fatalf("stream=%v: err=%v calls=%d res=%+v", stream, err, calls.Load(), res)
		}
	}
}

func TestLLMTimeoutThenASuccessfulRetry(t *testing.T) {
	var calls atomic.Int32
	model := modelFunc(func(ctx context.Context, req llm.Request) (*llm.Response, error) {
		if calls.Add(1) == 1 {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		if err := ctx.Err(); err != nil {
			return nil, err // a reused, already-cancelled ctx would fail here
		}
		return &llm.Response{Message: llm.AssistantMessage("second try worked")}, nil
	})
	o := newOrch(t, model, agent.Config{Loop: agent.LoopConfig{LLMTimeout: 30 * time.Millisecond}})
	res, err := o.HandleMessage(context.Background(), msg("hi"))
	if err != nil || res.Response != "second try worked" || calls.Load() != 2 {
		t.Fatalf("res=%+v err=%v calls=%d", res, err, calls.Load())
	}
}

func TestClientReturningNothingIsAnErrorNotAPanic(t *testing.T) {
	nothing := modelFunc(func(ctx context.Context, req llm.Request) (*llm.Response, error) { return nil, nil })
	o := newOrch(t, nothing, agent.Config{Loop: fastRetries})
	res, err := o.HandleMessage(context.Background(), msg("hi"))
	if err == nil || res.Status != agent.StatusError {
		t.Fatalf("res=%+v err=%v", res, err)
	}
	for _, err := range o.Stream(context.Background(), msg("hi")) {
		if err == nil {
			t.Fatal("stream: no error for an empty reply")
		}
	}
}

// reqChars is the size of a request as overflowModel measures it.
func reqChars(req llm.Request) int {
	n := 0
	for _, m := range req.Messages {
		n += len(m.Content)
	}
	return n
}

// seedHistory plays n short exchanges so the conversation has history
// without any tool result.
func seedHistory(t *testing.T, o *agent.Orchestrator, n int) {
	t.Helper()
	for i := range n {
		if _, err := o.HandleMessage(context.Background(), msg(strings.Repeat("tell me more ", 20)+string(rune('a'+i)))); err != nil {
			t.Fatal(err)
		}
	}
}

// Every retry after an overflow must be strictly smaller than the request
// that was rejected: a defence that changes nothing (truncating tool
// results when there are none) is skipped, never sent again as it was.
func TestContextOverflowNeverResendsTheRejectedRequest(t *testing.T) {
	var sizes []int
	overflowing := false
	s := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		if !overflowing {
			return llmtest.Text(strings.Repeat("here is more ", 20))
		}
		sizes = append(sizes, reqChars(req))
		return llmtest.Fail(&llm.Error{Kind: llm.KindContextOverflow, StatusCode: 400, Code: "context_length_exceeded"})
	})
	o := newOrch(t, paired{t, s}, agent.Config{Loop: agent.LoopConfig{MaxHistoryMessages: 12}})
	seedHistory(t, o, 6) // 12 messages of history, none of them a tool result
	overflowing = true
	_, err := o.HandleMessage(context.Background(), msg("and now?"))
	if !errors.Is(err, agent.ErrContextOverflow) {
		t.Fatalf("err = %v, want ErrContextOverflow", err)
	}
	for i := 1; i < len(sizes); i++ {
		if sizes[i] >= sizes[i-1] {
			t.Fatalf("request sizes %v: attempt %d (%d chars) is not smaller than the rejected one (%d)", sizes, i+1, sizes[i], sizes[i-1])
		}
	}
	if len(sizes) < 2 {
		t.Fatalf("request sizes %v: ForceTrim could have shortened a 12-message history", sizes)
	}
}

// A lone message that is too long for the window is rejected once: no
// defence can make it smaller, so nothing is sent again.
func TestContextOverflowOfAnUnshrinkableRequestIsNotRetried(t *testing.T) {
	var sizes []int
	s := overflowModel(10, &sizes, func(llm.Request) llmtest.Reply { return llmtest.Text("unreachable") })
	o := newOrch(t, paired{t, s}, agent.Config{})
	if _, err := o.HandleMessage(context.Background(), msg("this message alone is longer than the window")); !errors.Is(err, agent.ErrContextOverflow) {
		t.Fatalf("err = %v", err)
	}
	if len(sizes) != 1 {
		t.Fatalf("sent %d times (sizes %v); nothing could shrink it", len(sizes), sizes)
	}
}

// When the server states its window and the request's size, the loop
// shrinks straight to fit, with a margin: one rejected call, one that
// succeeds.
func TestContextOverflowWithStatedSizesShrinksStraightToFit(t *testing.T) {
	const limitChars = 3000
	var sizes []int
	overflowing := false
	s := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		if !overflowing {
			return llmtest.Text(strings.Repeat("here is more ", 20))
		}
		n := reqChars(req)
		sizes = append(sizes, n)
		if n > limitChars {
			// Like OpenAI: "maximum context length is N tokens. However,
			// your messages resulted in M tokens." (4 chars per token)
			return llmtest.Fail(&llm.Error{Kind: llm.KindContextOverflow, StatusCode: 400, Code: "context_length_exceeded",
				ContextLimit: limitChars / 4, ContextUsed: n / 4})
		}
		return llmtest.Text("fits now")
	})
	o := newOrch(t, paired{t, s}, agent.Config{Loop: agent.LoopConfig{MaxHistoryMessages: 40}})
	seedHistory(t, o, 15) // about 8000 chars of history
	overflowing = true
	res, err := o.HandleMessage(context.Background(), msg("and now?"))
	if err != nil || res.Response != "fits now" {
		t.Fatalf("res=%+v err=%v sizes=%v", res, err, sizes)
	}
	if len(sizes) != 2 {
		t.Fatalf("request sizes %v: want one rejected request and one that fits", sizes)
	}
	if sizes[1] < limitChars/2 {
		t.Fatalf("request sizes %v: shrank far below the stated window (%d chars)", sizes, limitChars)
	}
}
