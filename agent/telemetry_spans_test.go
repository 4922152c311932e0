package agent_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

// recorder is an SDK TracerProvider recording every span it ends.
func recorder(t *testing.T) (*sdktrace.TracerProvider, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, rec
}

// spansNamed returns the ended spans with the name.
func spansNamed(rec *tracetest.SpanRecorder, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

func oneSpan(t *testing.T, rec *tracetest.SpanRecorder, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	s := spansNamed(rec, name)
	if len(s) != 1 {
		var names []string
		for _, x := range rec.Ended() {
			names = append(names, x.Name())
		}
		t.Fatalf("%d spans named %q; spans: %v", len(s), name, names)
	}
	return s[0]
}

// attr returns the span's attribute k.
func attr(s sdktrace.ReadOnlySpan, k string) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == k {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func wantAttr(t *testing.T, s sdktrace.ReadOnlySpan, k string, want any) {
	t.Helper()
	v, ok := attr(s, k)
	if !ok {
		t.Fatalf("span %q has no %s; attributes %v", s.Name(), k, s.Attributes())
	}
	if got := v.AsInterface(); !equalValue(got, want) {
		t.Fatalf("span %q: %s = %v (%T), want %v", s.Name(), k, got, got, want)
	}
}

func equalValue(got, want any) bool {
	switch w := want.(type) {
	case int:
		g, ok := got.(int64)
		return ok && g == int64(w)
	case []string:
		g, ok := got.([]string)
		return ok && slices.Equal(g, w)
	}
	return got == want
}

func childOf(t *testing.T, child, parent sdktrace.ReadOnlySpan) {
	t.Helper()
	if child.Parent().SpanID() != parent.SpanContext().SpanID() || child.SpanContext().TraceID() != parent.SpanContext().TraceID() {
		t.Fatalf("span %q is not a child of %q", child.Name(), parent.Name())
	}
}

// A run is an invoke_agent span under the caller's span, with a chat span
// per model call and an execute_tool span per tool call under it, and a
// tool's own span under its execute_tool, with the GenAI attributes; no
// content is recorded by default.
func TestTracingSpansOfARun(t *testing.T) {
	tp, rec := recorder(t)
	weather := tool.New("get_weather", "Current weather for a city", func(ctx context.Context, in WeatherIn) (string, error) {
		_, span := trace.SpanFromContext(ctx).TracerProvider().Tracer("weather").Start(ctx, "weather lookup")
		span.End()
		return "Sunny in " + in.City, nil
	})
	s := llmtest.NewScript(
		llmtest.Reply{ToolCalls: []llm.ToolCall{{ID: "call_w", Name: "get_weather", Arguments: []byte(`{"city":"Paris"}`)}}, Usage: llm.Usage{InputTokens: 100, OutputTokens: 10}},
		llmtest.Reply{Text: "It is sunny in Paris.", Usage: llm.Usage{InputTokens: 130, OutputTokens: 7}},
	)
	o := newOrch(t, s, agent.Config{Tools: []tool.Tool{weather}, TracerProvider: tp,
		Telemetry: agent.TelemetryOptions{AgentName: "koi", ProviderName: "openai"}})
	ctx, caller := tp.Tracer("app").Start(context.Background(), "request")
	res, err := o.HandleMessage(ctx, msg("Weather in Paris?"))
	caller.End()
	if err != nil {
		t.Fatal(err)
	}
	run := oneSpan(t, rec, "invoke_agent koi")
	childOf(t, run, oneSpan(t, rec, "request"))
	wantAttr(t, run, "gen_ai.operation.name", "invoke_agent")
	wantAttr(t, run, "gen_ai.agent.name", "koi")
	wantAttr(t, run, "gen_ai.provider.name", "openai")
	wantAttr(t, run, "gen_ai.conversation.id", "c1")
	wantAttr(t, run, "valet.tenant.id", "u1")
	wantAttr(t, run, "valet.run_id", res.RunID)
	wantAttr(t, run, "gen_ai.usage.input_tokens", res.Usage.InputTokens)
	wantAttr(t, run, "gen_ai.usage.output_tokens", res.Usage.OutputTokens)
	if res.Usage.InputTokens != 230 || run.SpanKind() != trace.SpanKindInternal || run.Status().Code == codes.Error {
		t.Fatalf("usage %+v, kind %v, status %v", res.Usage, run.SpanKind(), run.Status())
	}

	chats := spansNamed(rec, "chat llmtest")
	if len(chats) != 2 {
		t.Fatalf("%d chat spans, want 2", len(chats))
	}
	for i, want := range []struct {
		in, out int
		finish  string
	}{{100, 10, "tool_calls"}, {130, 7, "stop"}} {
		c := chats[i]
		childOf(t, c, run)
		if c.SpanKind() != trace.SpanKindClient {
			t.Fatalf("chat span kind %v", c.SpanKind())
		}
		wantAttr(t, c, "gen_ai.operation.name", "chat")
		wantAttr(t, c, "gen_ai.provider.name", "openai")
		wantAttr(t, c, "gen_ai.request.model", llmtest.ModelName)
		wantAttr(t, c, "gen_ai.response.model", llmtest.ModelName)
		wantAttr(t, c, "gen_ai.usage.input_tokens", want.in)
		wantAttr(t, c, "gen_ai.usage.output_tokens", want.out)
		wantAttr(t, c, "gen_ai.response.finish_reasons", []string{want.finish})
		wantAttr(t, c, "valet.llm.purpose", string(llm.PurposeLoop))
	}

	ex := oneSpan(t, rec, "execute_tool get_weather")
	childOf(t, ex, run)
	wantAttr(t, ex, "gen_ai.operation.name", "execute_tool")
	wantAttr(t, ex, "gen_ai.tool.name", "get_weather")
	wantAttr(t, ex, "gen_ai.tool.call.id", "call_w")
	if _, ok := attr(ex, "error.type"); ok || ex.Status().Code == codes.Error {
		t.Fatalf("a tool call that succeeded has error.type or status %v", ex.Status())
	}
	childOf(t, oneSpan(t, rec, "weather lookup"), ex)

	for _, sp := range rec.Ended() {
		for _, k := range []string{"gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.call.arguments", "gen_ai.tool.call.result"} {
			if _, ok := attr(sp, k); ok {
				t.Fatalf("span %q records %s without CaptureContent", sp.Name(), k)
			}
		}
	}
}

// A failed tool call's span has error.type and status Error; a retried
// model call is a failed chat span and a retry event on the run's span;
// calls made aside (phrasing, resolving approvals) are chat spans with
// their purpose.
func TestTracingFailuresAndRetries(t *testing.T) {
	tp, rec := recorder(t)
	broken := tool.New("broken", "Always fails", func(ctx context.Context, in WeatherIn) (string, error) {
		return "", errors.New("backend down")
	})
	s := llmtest.NewScript(
		llmtest.Fail(&llm.Error{Kind: llm.KindRateLimited, Message: "slow down"}),
		llmtest.Calls(llmtest.Call("broken", `{"city":"Paris"}`)),
		llmtest.Text("It failed."),
	)
	o := newOrch(t, s, agent.Config{Tools: []tool.Tool{broken}, TracerProvider: tp,
		Loop: agent.LoopConfig{LLMRetryBaseDelay: time.Millisecond}})
	if _, err := o.HandleMessage(context.Background(), msg("Try it")); err != nil {
		t.Fatal(err)
	}
	run := oneSpan(t, rec, "invoke_agent valet")
	wantAttr(t, run, "gen_ai.provider.name", "_OTHER")
	ex := oneSpan(t, rec, "execute_tool broken")
	wantAttr(t, ex, "error.type", "tool_error")
	if ex.Status().Code != codes.Error {
		t.Fatalf("failed tool span status %v", ex.Status())
	}
	chats := spansNamed(rec, "chat llmtest")
	if len(chats) != 3 {
		t.Fatalf("%d chat spans, want 3 (a failed attempt and two calls)", len(chats))
	}
	wantAttr(t, chats[0], "error.type", "rate_limited")
	if chats[0].Status().Code != codes.Error || chats[1].Status().Code == codes.Error {
		t.Fatalf("chat statuses %v, %v", chats[0].Status(), chats[1].Status())
	}
	var retries []sdktrace.Event
	for _, ev := range run.Events() {
		if ev.Name == "valet.llm.retry" {
			retries = append(retries, ev)
		}
	}
	if len(retries) != 1 {
		t.Fatalf("run events %+v, want one valet.llm.retry", run.Events())
	}
	if !slices.Contains(retries[0].Attributes, attribute.String("error.type", "rate_limited")) ||
		!slices.Contains(retries[0].Attributes, attribute.Int("valet.retry.attempt", 1)) {
		t.Fatalf("retry event attributes %v", retries[0].Attributes)
	}
}

// A run that fails has error.type on its span and status Error.
func TestTracingFailedRun(t *testing.T) {
	tp, rec := recorder(t)
	s := llmtest.NewScript(llmtest.Fail(&llm.Error{Kind: llm.KindAuth, Message: "bad key"}))
	o := newOrch(t, s, agent.Config{TracerProvider: tp})
	if _, err := o.HandleMessage(context.Background(), msg("hi")); err == nil {
		t.Fatal("want the auth error")
	}
	run := oneSpan(t, rec, "invoke_agent valet")
	wantAttr(t, run, "error.type", "auth")
	wantAttr(t, run, "valet.run.status", string(agent.StatusError))
	if run.Status().Code != codes.Error || run.Status().Description == "" {
		t.Fatalf("status %+v", run.Status())
	}
}
