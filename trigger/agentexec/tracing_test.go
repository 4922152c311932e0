package agentexec_test

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/agentexec"
)

// A task's run is a trigger.run span of the engine, and the agent's
// invoke_agent span of that run is its child, in one trace.
func TestTracingTriggeredRunIsUnderTheTriggerSpan(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	model := llmtest.NewScript(llmtest.Text("Here is your briefing."))
	o := newOrch(t, model, nil, agent.Config{TracerProvider: tp})
	e, err := trigger.New(trigger.Config{
		Executors:      map[string]trigger.Executor{trigger.DefaultExecutor: newExec(t, o, agentexec.Config{})},
		TracerProvider: tp,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	task := scheduleTask("brief", "Write the morning briefing.")
	task.Status = ""
	task.Trigger.Schedule = trigger.Schedule{At: time.Now().Add(time.Hour)}
	if err := e.CreateTask(ctx, task); err != nil {
		t.Fatal(err)
	}
	r, err := e.RunNow(ctx, "u1", "brief")
	if err != nil || r.Status != trigger.RunSucceeded {
		t.Fatalf("run %+v, %v", r, err)
	}
	var run, inv sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		switch s.Name() {
		case "trigger.run " + task.Name:
			run = s
		case "invoke_agent valet":
			inv = s
		}
	}
	if run == nil || inv == nil {
		t.Fatalf("spans %v", rec.Ended())
	}
	if inv.Parent().SpanID() != run.SpanContext().SpanID() || inv.SpanContext().TraceID() != run.SpanContext().TraceID() {
		t.Fatal("the agent's invoke_agent span is not a child of the trigger run's span")
	}
	want := map[string]string{"valet.task.id": "brief", "valet.tenant.id": "u1", "valet.trigger.run_id": r.ID}
	for _, kv := range run.Attributes() {
		if w, ok := want[string(kv.Key)]; ok {
			if kv.Value.AsString() != w {
				t.Fatalf("%s = %q, want %q", kv.Key, kv.Value.AsString(), w)
			}
			delete(want, string(kv.Key))
		}
	}
	if len(want) != 0 {
		t.Fatalf("trigger.run span lacks %v: %v", want, run.Attributes())
	}
	for _, kv := range inv.Attributes() {
		if kv.Key == "valet.task.id" && kv.Value.AsString() != "brief" {
			t.Fatalf("invoke_agent valet.task.id %q", kv.Value.AsString())
		}
	}
}
