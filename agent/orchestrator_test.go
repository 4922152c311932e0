package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/clock/clocktest"
	"github.com/valetkit/valet/credentials"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// paired wraps a script so every request the orchestrator sends is checked
// for the tool-call pairing invariant.
type paired struct {
	t *testing.T
	*llmtest.Script
}

func (p paired) check(req llm.Request) {
	p.t.Helper()
	if err := llm.CheckPairing(req.Messages); err != nil {
		p.t.Errorf("request breaks pairing: %v", err)
	}
}

func (p paired) Complete(ctx context.Context, req llm.Request) (*llm.Response, error) {
	p.check(req)
	return p.Script.Complete(ctx, req)
}

type WeatherIn struct {
	City string `json:"city" jsonschema:"description=City name"`
	Days int    `json:"days,omitempty" jsonschema:"minimum=1,maximum=7"`
}

func weatherTool() tool.Tool {
	return tool.New("get_weather", "Current weather for a city", func(ctx context.Context, in WeatherIn) (string, error) {
		return "Sunny, 21°C in " + in.City, nil
	})
}

func newOrch(t *testing.T, model llm.Client, cfg agent.Config) *agent.Orchestrator {
	t.Helper()
	cfg.LLM = model
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = clocktest.New(time.Date(2026, 11, 20, 9, 30, 0, 0, time.UTC))
	}
	o, err := agent.NewOrchestrator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func msg(text string) agent.Message {
	return agent.Message{TenantID: "u1", ConversationID: "c1", Text: text}
}

func TestToolRoundTrip(t *testing.T) {
	s := llmtest.NewScript(
		llmtest.Calls(llmtest.Call("get_weather", `{"city":"Paris"}`)),
		llmtest.Text("It is sunny in Paris."),
	)
	paris, _ := time.LoadLocation("Europe/Paris")
	o := newOrch(t, paired{t, s}, agent.Config{SystemPrompt: "You are Koi.", Tools: []tool.Tool{weatherTool()}})
	m := msg("Weather in Paris?")
	m.Location = paris
	res, err := o.HandleMessage(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != agent.StatusCompleted || res.Response != "It is sunny in Paris." || res.Turns != 2 {
		t.Fatalf("result = %+v", res)
	}
	if len(res.ToolCalls) != 1 || !res.ToolCalls[0].Success || res.ToolCalls[0].Name != "get_weather" ||
		res.ToolCalls[0].ArgsSummary != `{"city":"Paris"}` || res.ToolCalls[0].ResultChars != len("Sunny, 21°C in Paris") {
		t.Fatalf("tool calls = %+v", res.ToolCalls)
	}
	if res.Usage.InputTokens == 0 || res.Usage.OutputTokens == 0 {
		t.Fatalf("usage not summed: %+v", res.Usage)
	}
	reqs := s.Requests()
	sys := reqs[0].Messages[0]
	for _, want := range []string{"You are Koi.", "Friday, 20 November 2026, 10:30", "Europe/Paris", "get_weather: Current weather for a city"} {
		if sys.Role != llm.RoleSystem || !strings.Contains(sys.Content, want) {
			t.Errorf("system prompt lacks %q:\n%s", want, sys.Content)
		}
	}
	if len(reqs[0].Tools) != 1 || reqs[0].Tools[0].Name != "get_weather" {
		t.Fatalf("tools sent = %+v", reqs[0].Tools)
	}
	second := reqs[1].Messages
	last := second[len(second)-1]
	if last.Role != llm.RoleTool || last.Content != "Sunny, 21°C in Paris" || last.IsError {
		t.Fatalf("tool result sent back = %+v", last)
	}

	// The conversation's history holds the whole exchange.
	h, err := o.History(context.Background(), "u1", "c1")
	if err != nil {
		t.Fatal(err)
	}
	roles := ""
	for _, m := range h {
		roles += string(m.Role[0])
	}
	if roles != "uata" {
		t.Fatalf("history roles = %q, want user, assistant(call), tool, assistant", roles)
	}
}

func TestHistoryCarriesAcrossMessagesAndTenantsAreSeparate(t *testing.T) {
	s := llmtest.NewScript(llmtest.Text("Hi Ann."), llmtest.Text("Your name is Ann."), llmtest.Text("I don't know."))
	o := newOrch(t, paired{t, s}, agent.Config{})
	ctx := context.Background()
	for _, m := range []agent.Message{
		{TenantID: "u1", ConversationID: "c1", Text: "I'm Ann"},
		{TenantID: "u1", ConversationID: "c1", Text: "Who am I?"},
		{TenantID: "u2", ConversationID: "c1", Text: "Who am I?"},
	} {
		if _, err := o.HandleMessage(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	reqs := s.Requests()
	if n := len(reqs[1].Messages); n != 4 { // system, I'm Ann, Hi Ann., Who am I?
		t.Fatalf("second request has %d messages: %+v", n, reqs[1].Messages)
	}
	for _, m := range reqs[2].Messages {
		if strings.Contains(m.Content, "Ann") {
			t.Fatalf("tenant u2 saw tenant u1's history: %+v", reqs[2].Messages)
		}
	}
}

// TestParallelToolCallsOverlap proves concurrency by overlap: each of the
// three tools waits until all three have started.
func TestParallelToolCallsOverlap(t *testing.T) {
	var started sync.WaitGroup
	started.Add(3)
	allIn := make(chan struct{})
	go func() { started.Wait(); close(allIn) }()
	slow := tool.New("slow", "waits for its siblings", func(ctx context.Context, in struct {
		N int `json:"n"`
	}) (string, error) {
		started.Done()
		select {
		case <-allIn:
			return fmt.Sprintf("done %d", in.N), nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	})
	s := llmtest.NewScript(
		llmtest.Calls(llmtest.Call("slow", `{"n":1}`), llmtest.Call("slow", `{"n":2}`), llmtest.Call("slow", `{"n":3}`)),
		llmtest.Text("all done"),
	)
	o := newOrch(t, paired{t, s}, agent.Config{Tools: []tool.Tool{slow}, Loop: agent.LoopConfig{ToolTimeout: 5 * time.Second}})
	res, err := o.HandleMessage(context.Background(), msg("go"))
	if err != nil {
		t.Fatal(err)
	}
	for i, rec := range res.ToolCalls {
		if !rec.Success {
			t.Fatalf("call %d failed (not concurrent?): %+v", i, rec)
		}
	}
	// Results come back in call order whatever order they finished in.
	msgs := s.Requests()[1].Messages
	for i, want := range []string{"done 1", "done 2", "done 3"} {
		if got := msgs[len(msgs)-3+i].Content; got != want {
			t.Fatalf("tool result %d = %q, want %q", i, got, want)
		}
	}
}

func TestFailuresBecomeErrorResultsAndTheLoopGoesOn(t *testing.T) {
	failing := tool.New("flaky_search", "web search", func(ctx context.Context, in struct {
		Q string `json:"q"`
	}) (string, error) {
		return "", errors.New("search backend returned 502")
	})
	boom := tool.New("boom", "panics", func(ctx context.Context, in struct{}) (string, error) {
		panic("nil map write")
	})
	hang := tool.New("hang", "ignores nothing but never ends on its own", func(ctx context.Context, in struct{}) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	})
	s := llmtest.NewScript(
		llmtest.Calls(
			llmtest.Call("flaky_search", `{"q":"x"}`),
			llmtest.Call("boom", `{}`),
			llmtest.Call("get_wether", `{"city":"Rome"}`),
			llmtest.Call("get_weather", `{"city":"Rome","days":9}`),
			llmtest.Call("get_weather", `{"city":`),
			llmtest.Call("hang", `{}`),
		),
		llmtest.Calls(llmtest.Call("get_weather", `{"city":"Rome","days":2}`)),
		llmtest.Text("Rome: sunny."),
	)
	o := newOrch(t, paired{t, s}, agent.Config{
		Tools: []tool.Tool{weatherTool(), failing, boom, hang},
		Loop:  agent.LoopConfig{ToolTimeout: 50 * time.Millisecond},
	})
	res, err := o.HandleMessage(context.Background(), msg("Weather in Rome?"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Response != "Rome: sunny." || res.Turns != 3 {
		t.Fatalf("result = %+v", res)
	}
	sent := s.Requests()[1].Messages
	if sent[len(sent)-1].Role != llm.RoleSystem { // six failures in a row: the doom-loop detector's note
		t.Errorf("no note after six failures: %+v", sent[len(sent)-1])
	}
	results := sent[len(sent)-7 : len(sent)-1]
	wants := []string{"502", "internal error", "get_weather", "days", "", "timed out"}
	for i, m := range results {
		if !m.IsError || !strings.Contains(m.Content, wants[i]) {
			t.Errorf("result %d = %+v, want an error mentioning %q", i, m, wants[i])
		}
		if res.ToolCalls[i].Success || res.ToolCalls[i].ResultStatus != "error" {
			t.Errorf("record %d = %+v, want failure", i, res.ToolCalls[i])
		}
	}
	if !strings.Contains(results[2].Content, "Available tools") {
		t.Errorf("unknown tool result does not list the tools: %q", results[2].Content)
	}
	if !res.ToolCalls[6].Success {
		t.Errorf("recovery call failed: %+v", res.ToolCalls[6])
	}
}

func TestExecContextReachesTools(t *testing.T) {
	var got tool.ExecContext
	who := tool.New("whoami", "", func(ctx context.Context, in struct{}) (string, error) {
		got = tool.ExecContextFrom(ctx)
		return "ok", nil
	})
	s := llmtest.NewScript(llmtest.Calls(llm.ToolCall{ID: "call_xyz", Name: "whoami", Arguments: json.RawMessage(`{}`)}), llmtest.Text("done"))
	o := newOrch(t, paired{t, s}, agent.Config{Tools: []tool.Tool{who}})
	if _, err := o.HandleMessage(context.Background(), msg("who?")); err != nil {
		t.Fatal(err)
	}
	if got.TenantID != "u1" || got.ConversationID != "c1" || got.CallID != "call_xyz" || got.Logger == nil {
		t.Fatalf("exec context = %+v", got)
	}
}

func TestLargeToolResultIsTruncatedForTheModel(t *testing.T) {
	big := strings.Repeat("line of search results\n", 2000) // 46000 chars
	search := tool.New("search", "", func(ctx context.Context, in struct{}) (string, error) { return big, nil })
	s := llmtest.NewScript(llmtest.Calls(llmtest.Call("search", `{}`)), llmtest.Text("summary"))
	o := newOrch(t, paired{t, s}, agent.Config{Tools: []tool.Tool{search}, Loop: agent.LoopConfig{MaxToolResultChars: 1000}})
	res, err := o.HandleMessage(context.Background(), msg("search"))
	if err != nil {
		t.Fatal(err)
	}
	sent := s.Requests()[1].Messages
	got := sent[len(sent)-1].Content
	if len(got) > 1200 || !strings.Contains(got, "truncated") {
		t.Fatalf("tool result sent with %d chars: %q", len(got), got[max(0, len(got)-100):])
	}
	if rec := res.ToolCalls[0]; rec.ResultChars != len(big) || !rec.Truncated {
		t.Fatalf("record = %+v", rec)
	}
}

func TestArgsSummaryMasksSecretsAndCutsLongStrings(t *testing.T) {
	login := tool.New("login", "", func(ctx context.Context, in struct {
		User     string `json:"user"`
		Password string `json:"password"`
		Note     string `json:"note"`
	}) (string, error) {
		return "ok", nil
	})
	long := strings.Repeat("x", 500)
	s := llmtest.NewScript(llmtest.Calls(llmtest.Call("login", map[string]string{"user": "ann", "password": "hunter2", "note": long})), llmtest.Text("in"))
	o := newOrch(t, paired{t, s}, agent.Config{Tools: []tool.Tool{login}})
	res, err := o.HandleMessage(context.Background(), msg("log in"))
	if err != nil {
		t.Fatal(err)
	}
	sum := res.ToolCalls[0].ArgsSummary
	if strings.Contains(sum, "hunter2") || !strings.Contains(sum, `"password":"***"`) || !strings.Contains(sum, `"user":"ann"`) || len(sum) > 200 {
		t.Fatalf("summary = %q", sum)
	}
}

func TestMaxTurnsEndsWithOneCallWithoutTools(t *testing.T) {
	calls := 0
	s := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		calls++
		if len(req.Tools) == 0 {
			return llmtest.Text("Here is what I found so far.")
		}
		return llmtest.Calls(llmtest.Call("get_weather", `{"city":"Oslo"}`))
	})
	o := newOrch(t, paired{t, s}, agent.Config{Tools: []tool.Tool{weatherTool()}, Loop: agent.LoopConfig{MaxTurns: 3}})
	res, err := o.HandleMessage(context.Background(), msg("loop forever"))
	if err != nil {
		t.Fatal(err)
	}
	if calls != 4 || res.Turns != 3 || len(res.ToolCalls) != 3 || res.Response != "Here is what I found so far." {
		t.Fatalf("calls=%d result=%+v", calls, res)
	}
	last := s.Requests()[3]
	if len(last.Tools) != 0 || !strings.Contains(last.Messages[len(last.Messages)-1].Content, "Do not call tools") {
		t.Fatalf("final request = %+v", last)
	}
}

func TestEmptyReplyIsRetriedOnceThenAnError(t *testing.T) {
	s := llmtest.NewScript(llmtest.Text(""), llmtest.Text("Now I answer."))
	o := newOrch(t, paired{t, s}, agent.Config{})
	res, err := o.HandleMessage(context.Background(), msg("hi"))
	if err != nil || res.Response != "Now I answer." {
		t.Fatalf("res=%+v err=%v", res, err)
	}
	s = llmtest.NewScript(llmtest.Text(""), llmtest.Text("  "))
	o = newOrch(t, paired{t, s}, agent.Config{})
	res, err = o.HandleMessage(context.Background(), msg("hi"))
	if !errors.Is(err, agent.ErrEmptyReply) || res.Status != agent.StatusError {
		t.Fatalf("res=%+v err=%v", res, err)
	}
}

func TestBadInputGetsClearErrors(t *testing.T) {
	if _, err := agent.NewOrchestrator(agent.Config{}); !errors.Is(err, agent.ErrNoLLM) {
		t.Fatalf("nil LLM: %v", err)
	}
	s := llmtest.NewScript()
	if _, err := agent.NewOrchestrator(agent.Config{LLM: s, Loop: agent.LoopConfig{MaxTurns: -1}}); !errors.Is(err, agent.ErrInvalidConfig) {
		t.Fatalf("negative MaxTurns: %v", err)
	}
	if _, err := agent.NewOrchestrator(agent.Config{LLM: s, Tools: []tool.Tool{weatherTool(), weatherTool()}}); !errors.Is(err, agent.ErrInvalidConfig) {
		t.Fatalf("duplicate tools: %v", err)
	}
	o := newOrch(t, s, agent.Config{})
	for _, tc := range []struct {
		m    agent.Message
		want error
	}{
		{agent.Message{TenantID: "u1", Text: "  \n"}, agent.ErrEmptyMessage},
		{agent.Message{Text: "hello"}, agent.ErrNoTenant},
	} {
		res, err := o.HandleMessage(context.Background(), tc.m)
		if !errors.Is(err, tc.want) || res == nil || res.Status != agent.StatusError {
			t.Errorf("%+v: res=%+v err=%v", tc.m, res, err)
		}
	}
	if s.Calls() != 0 {
		t.Fatalf("the model was called %d times for bad input", s.Calls())
	}
}

func TestHooks(t *testing.T) {
	s := llmtest.NewScript(llmtest.Text("answer"))
	var post *agent.Result
	o := newOrch(t, paired{t, s}, agent.Config{Hooks: agent.Hooks{
		ShouldProcess: func(ctx context.Context, m agent.Message) (bool, string, error) {
			if strings.Contains(m.Text, "spam") {
				return false, "looks like spam", nil
			}
			return true, "", nil
		},
		PrepareContext: func(ctx context.Context, m agent.Message, msgs []llm.Message) ([]llm.Message, error) {
			return append(msgs[:len(msgs)-1:len(msgs)-1], llm.SystemMessage("The user is a VIP."), msgs[len(msgs)-1]), nil
		},
		PostProcess: func(ctx context.Context, m agent.Message, res *agent.Result) error {
			post = res
			return errors.New("logged, not fatal")
		},
	}})
	res, err := o.HandleMessage(context.Background(), msg("buy spam now"))
	if err != nil || res.Status != agent.StatusRefused || res.Response != "looks like spam" || s.Calls() != 0 {
		t.Fatalf("refused: res=%+v err=%v calls=%d", res, err, s.Calls())
	}
	res, err = o.HandleMessage(context.Background(), msg("hello"))
	if err != nil || res.Response != "answer" || post != res {
		t.Fatalf("res=%+v err=%v post=%v", res, err, post)
	}
	sent := s.Requests()[0].Messages
	if sent[len(sent)-2].Content != "The user is a VIP." {
		t.Fatalf("prepare-context edit not sent: %+v", sent)
	}
}

// TestCancelMidTurn: a cancelled ctx while tools run returns promptly,
// reports cancellation and leaves no goroutine (goleak checks at exit).
func TestCancelMidTurn(t *testing.T) {
	entered := make(chan struct{}, 2)
	wait := tool.New("wait", "", func(ctx context.Context, in struct{}) (string, error) {
		entered <- struct{}{}
		<-ctx.Done()
		return "", ctx.Err()
	})
	s := llmtest.NewScript(llmtest.Calls(llmtest.Call("wait", `{}`), llmtest.Call("wait", `{}`)), llmtest.Text("never"))
	o := newOrch(t, paired{t, s}, agent.Config{Tools: []tool.Tool{wait}})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-entered; <-entered; cancel() }()
	start := time.Now()
	res, err := o.HandleMessage(ctx, msg("wait"))
	if !errors.Is(err, context.Canceled) || res.Status != agent.StatusCancelled {
		t.Fatalf("res=%+v err=%v", res, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %v to notice the cancellation", d)
	}
	if s.Calls() != 1 {
		t.Fatalf("model called %d times after cancellation", s.Calls())
	}
	// The interrupted turn is complete (both calls answered), so it is kept and paired.
	h, _ := o.History(context.Background(), "u1", "c1")
	if err := llm.CheckPairing(h); err != nil || len(h) != 4 {
		t.Fatalf("history after cancel (%d msgs): %v", len(h), err)
	}
}

func TestCancelWhileWaitingForTheModel(t *testing.T) {
	s := llmtest.NewScript(llmtest.Reply{Text: "late", Delay: time.Minute})
	o := newOrch(t, s, agent.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	res, err := o.HandleMessage(ctx, msg("hi"))
	if !errors.Is(err, context.DeadlineExceeded) || res.Status != agent.StatusCancelled {
		t.Fatalf("res=%+v err=%v", res, err)
	}
}

func TestSameConversationIsSerialisedOthersRunInParallel(t *testing.T) {
	var inFlight, maxInFlight atomic.Int32
	gate := make(chan struct{})
	s := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		return llmtest.Text("ok")
	})
	slowModel := modelFunc(func(ctx context.Context, req llm.Request) (*llm.Response, error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			m := maxInFlight.Load()
			if n <= m || maxInFlight.CompareAndSwap(m, n) {
				break
			}
		}
		select {
		case <-gate:
		case <-time.After(30 * time.Millisecond):
		}
		return s.Complete(ctx, req)
	})
	o := newOrch(t, slowModel, agent.Config{})
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			if _, err := o.HandleMessage(context.Background(), agent.Message{TenantID: "u1", ConversationID: "same", Text: fmt.Sprint("m", i)}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if m := maxInFlight.Load(); m != 1 {
		t.Fatalf("same conversation ran %d messages at once", m)
	}
	// The last request of the conversation saw all three earlier exchanges.
	reqs := s.Requests()
	if n := len(reqs[3].Messages); n != 1+3*2+1 {
		t.Fatalf("4th message saw %d messages", n)
	}

	// Two different conversations: both must be in the model at the same time.
	maxInFlight.Store(0)
	both := make(chan struct{})
	var arrived atomic.Int32
	barrier := modelFunc(func(ctx context.Context, req llm.Request) (*llm.Response, error) {
		if arrived.Add(1) == 2 {
			close(both)
		}
		select {
		case <-both:
		case <-time.After(5 * time.Second):
			return nil, errors.New("the other conversation never arrived: not parallel")
		}
		return &llm.Response{Message: llm.AssistantMessage("ok")}, nil
	})
	o = newOrch(t, barrier, agent.Config{})
	for _, c := range []string{"a", "b"} {
		wg.Go(func() {
			if _, err := o.HandleMessage(context.Background(), agent.Message{TenantID: "u1", ConversationID: c, Text: "hi"}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}

// modelFunc adapts a function to llm.Client (Stream via Complete).
type modelFunc func(ctx context.Context, req llm.Request) (*llm.Response, error)

func (f modelFunc) Complete(ctx context.Context, req llm.Request) (*llm.Response, error) {
	return f(ctx, req)
}

func (f modelFunc) Stream(ctx context.Context, req llm.Request) iter.Seq2[llm.Chunk, error] {
	return func(yield func(llm.Chunk, error) bool) {
		r, err := f(ctx, req)
		if err != nil {
			yield(llm.Chunk{}, err)
			return
		}
		yield(llm.Chunk{Response: r}, nil)
	}
}

func TestToolTimeoutOverride(t *testing.T) {
	sleepy := func(d time.Duration) func(context.Context, struct{}) (string, error) {
		return func(ctx context.Context, _ struct{}) (string, error) {
			select {
			case <-time.After(d):
				return "woke up", nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
	}
	patient := tool.New("patient", "has a longer timeout of its own", sleepy(150*time.Millisecond), tool.WithTimeout(5*time.Second))
	hasty := tool.New("hasty", "has a shorter timeout of its own", sleepy(time.Second), tool.WithTimeout(20*time.Millisecond))
	plain := tool.New("plain", "uses the loop's ToolTimeout", sleepy(150*time.Millisecond))
	s := llmtest.NewScript(llmtest.Calls(llmtest.Call("patient", `{}`), llmtest.Call("hasty", `{}`), llmtest.Call("plain", `{}`)), llmtest.Text("ok"))
	o := newOrch(t, paired{t, s}, agent.Config{Tools: []tool.Tool{patient, hasty, plain}, Loop: agent.LoopConfig{ToolTimeout: 50 * time.Millisecond}})
	res, err := o.HandleMessage(context.Background(), msg("go"))
	if err != nil {
		t.Fatal(err)
	}
	got := []bool{res.ToolCalls[0].Success, res.ToolCalls[1].Success, res.ToolCalls[2].Success}
	if !got[0] || got[1] || got[2] {
		t.Fatalf("success = %v, want patient ok, hasty and plain timed out: %+v", got, res.ToolCalls)
	}
	for _, i := range []int{1, 2} {
		if !strings.Contains(res.ToolCalls[i].Error, "timed out") {
			t.Errorf("call %d error = %q", i, res.ToolCalls[i].Error)
		}
	}
}

func TestMissingAndDuplicateCallIDsAreRepaired(t *testing.T) {
	turn := 0
	model := modelFunc(func(ctx context.Context, req llm.Request) (*llm.Response, error) {
		if err := llm.CheckPairing(req.Messages); err != nil {
			return nil, &llm.Error{Kind: llm.KindBadRequest, Message: err.Error()}
		}
		turn++
		if turn == 1 {
			return &llm.Response{Message: llm.AssistantMessage("",
				llm.ToolCall{Name: "get_weather", Arguments: []byte(`{"city":"Paris"}`)},
				llm.ToolCall{ID: "x", Name: "get_weather", Arguments: []byte(`{"city":"Rome"}`)},
				llm.ToolCall{ID: "x", Name: "get_weather", Arguments: []byte(`{"city":"Oslo"}`)},
			)}, nil
		}
		return &llm.Response{Message: llm.AssistantMessage("done")}, nil
	})
	o := newOrch(t, model, agent.Config{Tools: []tool.Tool{weatherTool()}})
	res, err := o.HandleMessage(context.Background(), msg("three cities"))
	if err != nil || res.Response != "done" {
		t.Fatalf("res=%+v err=%v", res, err)
	}
	ids := map[string]bool{}
	for _, c := range res.ToolCalls {
		if c.ID == "" || ids[c.ID] || !c.Success {
			t.Fatalf("records = %+v", res.ToolCalls)
		}
		ids[c.ID] = true
	}
}

func TestMaxParallelToolsCapsConcurrency(t *testing.T) {
	for _, limit := range []int32{1, 3} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) { testMaxParallel(t, limit) })
	}
}

func testMaxParallel(t *testing.T, limit int32) {
	var running, peak atomic.Int32
	work := tool.New("work", "", func(ctx context.Context, in struct {
		N int `json:"n"`
	}) (string, error) {
		n := running.Add(1)
		defer running.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(5 * time.Millisecond)
		return fmt.Sprint(in.N), nil
	})
	var calls []llm.ToolCall
	for i := range 12 {
		calls = append(calls, llmtest.Call("work", fmt.Sprintf(`{"n":%d}`, i)))
	}
	s := llmtest.NewScript(llmtest.Calls(calls...), llmtest.Text("done"))
	o := newOrch(t, paired{t, s}, agent.Config{Tools: []tool.Tool{work}, Loop: agent.LoopConfig{MaxParallelTools: int(limit)}})
	res, err := o.HandleMessage(context.Background(), msg("go"))
	if err != nil || len(res.ToolCalls) != 12 {
		t.Fatalf("res=%+v err=%v", res, err)
	}
	for i, rec := range res.ToolCalls {
		if !rec.Success {
			t.Fatalf("call %d: %+v", i, rec)
		}
	}
	if p := peak.Load(); p > limit || p < min(2, limit) {
		t.Fatalf("peak concurrency %d with MaxParallelTools %d", p, limit)
	}
	// The results still answer the calls in order.
	sent := s.Requests()[1].Messages
	for i := range 12 {
		if got := sent[len(sent)-12+i].Content; got != fmt.Sprint(i) {
			t.Fatalf("result %d = %q", i, got)
		}
	}
}

// A tool stopped by the caller's cancellation is recorded as interrupted,
// not failed, both in the Result and in the result the model will read.
func TestToolKilledByCancellationIsInterrupted(t *testing.T) {
	started := make(chan struct{})
	slow := tool.New("book_flight", "Book a flight", func(ctx context.Context, in struct{}) (string, error) {
		close(started)
		<-ctx.Done()
		return "", fmt.Errorf("booking aborted: %w", ctx.Err())
	})
	s := llmtest.NewScript(llmtest.Calls(llmtest.Call("book_flight", `{}`)), llmtest.Text("next message"))
	o := newOrch(t, paired{t, s}, agent.Config{Tools: []tool.Tool{slow}})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-started; cancel() }()
	res, err := o.HandleMessage(ctx, msg("book it"))
	if !errors.Is(err, context.Canceled) || res.Status != agent.StatusCancelled {
		t.Fatalf("res=%+v err=%v", res, err)
	}
	if len(res.ToolCalls) != 1 || res.ToolCalls[0].ResultStatus != "interrupted" || res.ToolCalls[0].Success {
		t.Fatalf("records = %+v, want one interrupted call", res.ToolCalls)
	}
	h, err := o.History(context.Background(), "u1", "c1")
	if err != nil {
		t.Fatal(err)
	}
	last := h[len(h)-1]
	if last.Role != llm.RoleTool || !last.IsError || !strings.Contains(last.Content, "interrupted") || strings.Contains(last.Content, "failed") {
		t.Fatalf("the model will read %+v; want it told the call was interrupted, not that it failed", last)
	}
}

func TestToolCallRecordCountsAttempts(t *testing.T) {
	fails := 2
	flaky := tool.New("fetch_rates", "Exchange rates", func(ctx context.Context, in struct{}) (string, error) {
		if fails > 0 {
			fails--
			return "", tool.Transient(errors.New("upstream 503"))
		}
		return "EUR/USD 1.08", nil
	}, tool.WithRetries(3, time.Microsecond))
	s := llmtest.NewScript(llmtest.Calls(llmtest.Call("fetch_rates", `{}`), llmtest.Call("get_weather", `{"city":"Oslo"}`)), llmtest.Text("done"))
	o := newOrch(t, paired{t, s}, agent.Config{Tools: []tool.Tool{flaky, weatherTool()}})
	res, err := o.HandleMessage(context.Background(), msg("rates and weather"))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.ToolCalls) != 2 || res.ToolCalls[0].Attempts != 3 || !res.ToolCalls[0].Success || res.ToolCalls[1].Attempts != 1 {
		t.Fatalf("records = %+v, want 3 attempts for the retried call and 1 for the other", res.ToolCalls)
	}
}

// A tool reaches the message's tenant's credentials through its
// ExecContext, and never another tenant's, whatever tenant it names.
func TestToolCredentialsAreBoundToTheMessagesTenant(t *testing.T) {
	store := credentials.NewMemory()
	ctx := context.Background()
	if err := store.Save(ctx, "u1", "google", "", map[string]string{"token": "u1-token"}); err != nil {
		t.Fatal(err)
	}
	if err := store.Save(ctx, "u2", "google", "", map[string]string{"token": "u2-token"}); err != nil {
		t.Fatal(err)
	}
	type in struct {
		Tenant string `json:"tenant"`
	}
	var got []string
	peek := tool.New("peek", "Reads a google token", func(ctx context.Context, v in) (string, error) {
		ec := tool.ExecContextFrom(ctx)
		s, err := ec.Credentials.Get(ctx, v.Tenant, "google", "")
		if err != nil {
			got = append(got, v.Tenant+": "+err.Error())
			return "", err
		}
		var tok struct{ Token string }
		if err := s.Decode(&tok); err != nil {
			return "", err
		}
		got = append(got, v.Tenant+": "+tok.Token)
		return "ok", nil
	})
	s := llmtest.NewScript(
		llmtest.Calls(llmtest.Call("peek", `{"tenant":"u1"}`)),
		llmtest.Calls(llmtest.Call("peek", `{"tenant":"u2"}`)),
		llmtest.Text("done"),
	)
	o := newOrch(t, paired{t, s}, agent.Config{Tools: []tool.Tool{peek}, Credentials: store})
	if _, err := o.HandleMessage(ctx, msg("peek")); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != "u1: u1-token" || !strings.HasPrefix(got[1], "u2: ") || strings.Contains(got[1], "u2-token") || !strings.Contains(got[1], credentials.ErrNotFound.Error()) {
		t.Fatalf("tool saw %q; want u1's token and not found for u2", got)
	}
}

// The PostProcess hook sees the whole Result, tool calls of every turn
// included, when it runs.
func TestPostProcessSeesEveryToolCall(t *testing.T) {
	s := llmtest.NewScript(
		llmtest.Calls(llmtest.Call("get_weather", `{"city":"Paris"}`)),
		llmtest.Calls(llmtest.Call("get_weather", `{"city":"Rome"}`), llmtest.Call("get_weather", `{"city":"Oslo"}`)),
		llmtest.Text("done"),
	)
	var seen []string
	o := newOrch(t, paired{t, s}, agent.Config{Tools: []tool.Tool{weatherTool()}, Hooks: agent.Hooks{
		PostProcess: func(ctx context.Context, m agent.Message, res *agent.Result) error {
			for _, c := range res.ToolCalls {
				seen = append(seen, c.ArgsSummary)
			}
			return nil
		},
	}})
	res, err := o.HandleMessage(context.Background(), msg("three cities"))
	if err != nil || len(res.ToolCalls) != 3 {
		t.Fatalf("res=%+v err=%v", res, err)
	}
	if len(seen) != 3 || !strings.Contains(seen[0], "Paris") || !strings.Contains(seen[2], "Oslo") {
		t.Fatalf("the hook saw %q", seen)
	}
}
