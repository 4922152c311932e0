package trigger

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// instrumentationName is the OpenTelemetry scope of the engine's spans.
const instrumentationName = "github.com/valetkit/valet/trigger"

// startRunSpan opens the span of one attempt of run r of t
// (Config.TracerProvider), a child of ctx's.
func (e *Engine) startRunSpan(ctx context.Context, t *Task, r Run, ev *Event) (context.Context, trace.Span) {
	attrs := []attribute.KeyValue{
		attribute.String("valet.tenant.id", t.TenantID),
		attribute.String("valet.task.id", t.ID),
		attribute.String("valet.trigger.kind", string(t.Trigger.Kind)),
		attribute.String("valet.trigger.run_id", r.ID),
		attribute.Int("valet.trigger.attempt", r.Attempt),
		attribute.String("valet.trigger.executor", t.ExecutorName()),
	}
	if ev != nil {
		attrs = append(attrs, attribute.String("valet.trigger.event.source", ev.Source), attribute.String("valet.trigger.event.type", ev.Type))
	}
	return e.tracer.Start(ctx, "trigger.run "+t.Name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
}

// endRunSpan closes an attempt's span with its outcome. Only the kind of
// a failure is recorded: an executor's error text may quote anything.
func endRunSpan(span trace.Span, err error) {
	if err != nil {
		kind := "_OTHER"
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			kind = "timeout"
		case errors.Is(err, context.Canceled):
			kind = "cancelled"
		case refused(err):
			kind = "refused"
		}
		span.SetAttributes(attribute.String("error.type", kind))
		span.SetStatus(codes.Error, kind)
	}
	span.End()
}
