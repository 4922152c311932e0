package agent_test

import (
	"bytes"
	"context"
	"iter"
	"log/slog"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

// downModel is a model that is always overloaded.
type downModel struct{ calls atomic.Int32 }

var errOverloaded = &llm.Error{Kind: llm.KindUnavailable, StatusCode: 529, Message: "overloaded"}

func (d *downModel) Model() string { return "primary" }
func (d *downModel) Complete(context.Context, llm.Request) (*llm.Response, error) {
	d.calls.Add(1)
	return nil, errOverloaded
}
func (d *downModel) Stream(context.Context, llm.Request) iter.Seq2[llm.Chunk, error] {
	return func(yield func(llm.Chunk, error) bool) { d.calls.Add(1); yield(llm.Chunk{}, errOverloaded) }
}

// renamed answers with its Script under another model name.
type renamed struct {
	*llmtest.Script
	name string
}

func (m renamed) Model() string { return m.name }
func (m renamed) Complete(ctx context.Context, req llm.Request) (*llm.Response, error) {
	resp, err := m.Script.Complete(ctx, req)
	if resp != nil {
		resp.Model = m.name
	}
	return resp, err
}
func (m renamed) Stream(ctx context.Context, req llm.Request) iter.Seq2[llm.Chunk, error] {
	return func(yield func(llm.Chunk, error) bool) {
		for c, err := range m.Script.Stream(ctx, req) {
			if c.Response != nil {
				r := *c.Response
				r.Model = m.name
				c.Response = &r
			}
			if !yield(c, err) {
				return
			}
		}
	}
}

// A switch to a fallback model is never silent: a WARN line, an Observer
// step, a span event, and Result.Models names the model that answered;
// the call is priced at that model, and the conversation's next turn stays
// on it.
func TestFallbackSwitchIsReportedAndPricedAtTheModelThatAnswered(t *testing.T) {
	down := &downModel{}
	backup := renamed{llmtest.NewScript(llmtest.Text("Hello from the backup."), llmtest.Text("Still the backup.")), "backup"}
	fb, err := llm.NewFallback(llm.FallbackConfig{Primary: down, Fallbacks: []llm.Client{backup}, RetryDelay: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	var steps stepLog
	tp, rec := recorder(t)
	o := newOrch(t, fb, agent.Config{
		Logger:         slog.New(slog.NewTextHandler(&logs, nil)),
		Observer:       &steps,
		TracerProvider: tp,
		Prices: agent.Prices{
			"primary": {InputPerMillion: 1000, OutputPerMillion: 1000},
			"backup":  {InputPerMillion: 1, OutputPerMillion: 1},
		},
	})
	res, err := o.HandleMessage(context.Background(), msg("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Models) != 1 || res.Models[0] != "backup" {
		t.Fatalf("Result.Models = %v, want [backup]", res.Models)
	}
	if want := float64(res.Consumed.Tokens) / 1e6; math.Abs(res.Consumed.CostUSD-want) > 1e-12 {
		t.Fatalf("cost %g, want %g (the backup's price)", res.Consumed.CostUSD, want)
	}
	fall := steps.of(agent.StepModelFallback)
	if len(fall) != 1 || fall[0].From != "primary" || fall[0].To != "backup" || fall[0].ErrorKind != llm.KindUnavailable || fall[0].Call != 1 {
		t.Fatalf("fallback steps = %+v, want one primary→backup for call 1", fall)
	}
	if l := logs.String(); !strings.Contains(l, "level=WARN") || !strings.Contains(l, "falling back") || !strings.Contains(l, "to=backup") {
		t.Fatalf("log lacks the WARN line of the switch:\n%s", l)
	}
	var events int
	for _, s := range rec.Ended() {
		for _, e := range s.Events() {
			if e.Name == "valet.llm.fallback" {
				events++
			}
		}
	}
	if events != 2 { // the run's span and the chat span
		t.Fatalf("%d valet.llm.fallback span events, want 2", events)
	}

	calls := down.calls.Load()
	res, err = o.HandleMessage(context.Background(), msg("again"))
	if err != nil {
		t.Fatal(err)
	}
	if down.calls.Load() != calls || len(res.Models) != 1 || res.Models[0] != "backup" {
		t.Fatalf("second turn: primary called %d more times, models %v; want it to stay on backup", down.calls.Load()-calls, res.Models)
	}
}

// A streamed run reports a switch made before the first chunk the same way.
func TestFallbackSwitchInAStreamedRun(t *testing.T) {
	down := &downModel{}
	backup := renamed{llmtest.NewScript(llmtest.Text("Hello from the backup.")), "backup"}
	fb, err := llm.NewFallback(llm.FallbackConfig{Primary: down, Fallbacks: []llm.Client{backup}, RetryDelay: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	var steps stepLog
	o := newOrch(t, fb, agent.Config{Observer: &steps})
	var text string
	var res *agent.Result
	for ev, err := range o.Stream(context.Background(), msg("hi")) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == agent.EventMessageChunk {
			text += ev.Text
		}
		if ev.Result != nil {
			res = ev.Result
		}
	}
	if text != "Hello from the backup." || len(steps.of(agent.StepModelFallback)) != 1 {
		t.Fatalf("text %q, fallback steps %d", text, len(steps.of(agent.StepModelFallback)))
	}
	if res != nil && (len(res.Models) != 1 || res.Models[0] != "backup") {
		t.Fatalf("Result.Models = %v", res.Models)
	}
}

// A tool that calls a Fallback of its own, with the ctx it was given, does
// not report into the run that called the tool (whose hook is not
// goroutine-safe): the switch is the Fallback's own WARN line.
func TestFallbackInsideAToolDoesNotReportIntoTheRun(t *testing.T) {
	var toolLog bytes.Buffer
	inner, err := llm.NewFallback(llm.FallbackConfig{
		Primary: &downModel{}, Fallbacks: []llm.Client{renamed{llmtest.NewScript(llmtest.Text("inner"), llmtest.Text("inner")), "backup"}},
		RetryDelay: time.Nanosecond, Logger: slog.New(slog.NewTextHandler(&toolLog, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	ask := tool.New("ask_other_model", "Ask another model", func(ctx context.Context, in WeatherIn) (string, error) {
		resp, err := inner.Complete(ctx, llm.Request{Messages: []llm.Message{llm.UserMessage(in.City)}})
		if err != nil {
			return "", err
		}
		return resp.Message.Content, nil
	})
	s := llmtest.NewScript(
		llmtest.Calls(llmtest.Call("ask_other_model", `{"city":"a"}`), llmtest.Call("ask_other_model", `{"city":"b"}`)),
		llmtest.Text("done"),
	)
	var steps stepLog
	tp, _ := recorder(t)
	o := newOrch(t, s, agent.Config{Tools: []tool.Tool{ask}, Observer: &steps, TracerProvider: tp})
	if _, err := o.HandleMessage(context.Background(), msg("go")); err != nil {
		t.Fatal(err)
	}
	if n := len(steps.of(agent.StepModelFallback)); n != 0 {
		t.Fatalf("%d fallback steps in the run, want none (the switches were the tool's)", n)
	}
	if got := strings.Count(toolLog.String(), "falling back"); got != 2 {
		t.Fatalf("the tool's Fallback logged %d switches, want 2:\n%s", got, toolLog.String())
	}
}

// The background fact extraction's model call reports a switch too: a
// WARN line of the orchestrator's logger and a StepModelFallback, and it
// stays on the model the conversation moved to.
func TestFallbackSwitchInFactExtraction(t *testing.T) {
	down := &downModel{}
	backup := renamed{llmtest.NewScript(llmtest.Text("Noted.")).On(llm.PurposeRememberFacts,
		llmtest.Remember(llmtest.Fact{Text: "The user's dentist is Dr. Kim.", Kind: "person"})), "backup"}
	fb, err := llm.NewFallback(llm.FallbackConfig{Primary: down, Fallbacks: []llm.Client{backup}, RetryDelay: time.Nanosecond,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	var steps stepLog
	o := newOrch(t, fb, agent.Config{MemoryOptions: agent.MemoryOptions{Extract: true}, Observer: &steps,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if _, err := o.HandleMessage(context.Background(), msg("My dentist is Dr. Kim.")); err != nil {
		t.Fatal(err)
	}
	closeOrch(t, o) // the extraction has run
	if backup.Calls() != 2 {
		t.Fatalf("the backup answered %d calls, want the reply and the extraction", backup.Calls())
	}
	// One switch: the run's first call. The extraction, on the same
	// conversation, went straight to the backup.
	if n := len(steps.of(agent.StepModelFallback)); n != 1 || down.calls.Load() != 2 {
		t.Fatalf("%d fallback steps, primary called %d times; want 1 switch after 2 tries", n, down.calls.Load())
	}
	if strings.Count(logs.String(), "falling back") != 1 {
		t.Fatalf("log:\n%s", logs.String())
	}
}

// With NoStick the extraction's own call switches, and that switch is
// reported like the run's: a WARN line of the orchestrator's logger and a
// StepModelFallback after the run's end.
func TestFallbackSwitchInFactExtractionIsReported(t *testing.T) {
	down := &downModel{}
	backup := renamed{llmtest.NewScript(llmtest.Text("Noted.")).On(llm.PurposeRememberFacts,
		llmtest.Remember(llmtest.Fact{Text: "The user's dentist is Dr. Kim.", Kind: "person"})), "backup"}
	var fbLog bytes.Buffer
	fb, err := llm.NewFallback(llm.FallbackConfig{Primary: down, Fallbacks: []llm.Client{backup}, RetryDelay: time.Nanosecond,
		NoStick: true, Logger: slog.New(slog.NewTextHandler(&fbLog, nil))})
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	var steps stepLog
	o := newOrch(t, fb, agent.Config{MemoryOptions: agent.MemoryOptions{Extract: true}, Observer: &steps,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if _, err := o.HandleMessage(context.Background(), msg("My dentist is Dr. Kim.")); err != nil {
		t.Fatal(err)
	}
	closeOrch(t, o)
	all := steps.all()
	var kinds []agent.StepKind
	for _, s := range all {
		kinds = append(kinds, s.Kind)
	}
	if n := len(steps.of(agent.StepModelFallback)); n != 2 || all[len(all)-2].Kind != agent.StepModelFallback {
		t.Fatalf("steps %v: want 2 fallbacks, the extraction's just before its response", kinds)
	}
	if strings.Count(logs.String(), "agent: model failed, falling back") != 2 || fbLog.Len() != 0 {
		t.Fatalf("orchestrator log:\n%s\nFallback's own log:\n%s", logs.String(), fbLog.String())
	}
}
