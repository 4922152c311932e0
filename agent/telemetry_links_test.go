package agent_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/memory"
	"github.com/valetkit/valet/pool"
)

// linksTo reports whether s has a link to target's span.
func linksTo(s, target sdktrace.ReadOnlySpan) bool {
	for _, l := range s.Links() {
		if l.SpanContext.SpanID() == target.SpanContext().SpanID() && l.SpanContext.TraceID() == target.SpanContext().TraceID() {
			return true
		}
	}
	return false
}

// An approval raised by a run on one replica and decided by a run on
// another (two orchestrators sharing the pool and the memory): the
// deciding run's span and the approved action's execute_tool span link to
// the span of the run that raised it, through the traceparent kept in the
// pool entry. The two runs are separate traces.
func TestTracingLinksApprovalToTheRunThatRaisedIt(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tpA := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	tpB := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	p, err := pool.NewMemory(pool.MemoryConfig{})
	if err != nil {
		t.Fatal(err)
	}
	mem, err := memory.NewInMemory(memory.Config{})
	if err != nil {
		t.Fatal(err)
	}
	rt := &router{loop: []llmtest.Reply{
		llmtest.Calls(llmtest.Call("send_email", `{"to":"team@example.com","subject":"Plan"}`)),
		llmtest.Text("Sent."),
	}}
	s := rt.script(t)
	email := &emailAgent{}
	replicaA := agentsOrch(t, s, agent.Config{Pool: p, Memory: mem, TracerProvider: tpA}, email, &noteAgent{})
	replicaB := agentsOrch(t, s, agent.Config{Pool: p, Memory: mem, TracerProvider: tpB}, email, &noteAgent{})
	ctx := context.Background()
	first, err := replicaA.HandleMessage(ctx, msg("mail the team"))
	if err != nil {
		t.Fatal(err)
	}
	if len(first.PendingApprovals) != 1 {
		t.Fatalf("pending %+v", first.PendingApprovals)
	}
	id := first.PendingApprovals[0].ID
	e, err := p.Get(ctx, "u1", id)
	if err != nil || e.TraceParent == "" {
		t.Fatalf("pool entry %+v, %v: want a traceparent", e, err)
	}
	second, err := replicaB.HandleMessage(ctx, msg("Yes!"))
	if err != nil {
		t.Fatal(err)
	}
	if len(email.Sent()) != 1 {
		t.Fatalf("sent %+v", email.Sent())
	}

	var raised, decided sdktrace.ReadOnlySpan
	for _, sp := range spansNamed(rec, "invoke_agent valet") {
		v, _ := attr(sp, "valet.run_id")
		switch v.AsString() {
		case first.RunID:
			raised = sp
		case second.RunID:
			decided = sp
		}
	}
	if raised == nil || decided == nil {
		t.Fatal("missing a run's span")
	}
	if decided.SpanContext().TraceID() == raised.SpanContext().TraceID() {
		t.Fatal("the deciding run should be a trace of its own, linked")
	}
	if !linksTo(decided, raised) {
		t.Fatalf("the deciding run's span does not link to the raising run's: links %+v", decided.Links())
	}
	if l := decided.Links()[0]; !contains(l.Attributes, attribute.String("valet.approval.id", id)) {
		t.Fatalf("link attributes %v, want valet.approval.id %s", l.Attributes, id)
	}
	var decidedEv bool
	for _, ev := range decided.Events() {
		decidedEv = decidedEv || ev.Name == "valet.approval.decided" && contains(ev.Attributes, attribute.String("valet.approval.action", string(approval.Approve)))
	}
	if !decidedEv {
		t.Fatalf("events %+v, want valet.approval.decided with the action", decided.Events())
	}
	// The first run's execute_tool send_email parked the action; the
	// second run's carries it out.
	var resumed sdktrace.ReadOnlySpan
	for _, sp := range spansNamed(rec, "execute_tool send_email") {
		if v, ok := attr(sp, "valet.tool.resumed"); ok && v.AsBool() {
			resumed = sp
		}
	}
	if resumed == nil {
		t.Fatal("no execute_tool span for the approved action")
	}
	childOf(t, resumed, decided)
	if !linksTo(resumed, raised) {
		t.Fatalf("the approved action's span does not link to the raising run's: links %+v", resumed.Links())
	}
}

func contains(kvs []attribute.KeyValue, kv attribute.KeyValue) bool {
	for _, x := range kvs {
		if x == kv {
			return true
		}
	}
	return false
}
