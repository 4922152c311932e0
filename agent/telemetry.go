package agent

import (
	"context"
	"errors"
	"reflect"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/pool"
	"github.com/valetkit/valet/tool"
)

// TelemetryOptions says what the OpenTelemetry spans and metrics of
// Config.TracerProvider and Config.MeterProvider hold beyond the default.
// The zero value records no content.
type TelemetryOptions struct {
	// AgentName names the agent: span "invoke_agent {AgentName}" and
	// gen_ai.agent.name. Default "valet".
	AgentName string
	// ProviderName is gen_ai.provider.name ("openai", "anthropic", ...).
	// Default: what the LLM client's Provider() string method returns,
	// when it has one, else "_OTHER".
	ProviderName string
	// CaptureContent records what was said: gen_ai.input.messages and
	// gen_ai.output.messages on the invoke_agent and chat spans,
	// gen_ai.tool.call.arguments and gen_ai.tool.call.result on the
	// execute_tool spans. Secrets are masked in all of them as in
	// ToolCallRecord.ArgsSummary (values of secret keys, tokens, key=value
	// pairs, Bearer credentials). Default false: no content, only names,
	// counts, ids and durations.
	CaptureContent bool
}

// Attribute keys of the GenAI semantic conventions (semantic-conventions-
// genai v0.1.0, Development status) and valet's own. They are defined here
// rather than taken from a semconv package, whose GenAI names are still
// moving.
const (
	attrOperation     = attribute.Key("gen_ai.operation.name")
	attrProvider      = attribute.Key("gen_ai.provider.name")
	attrAgentName     = attribute.Key("gen_ai.agent.name")
	attrConversation  = attribute.Key("gen_ai.conversation.id")
	attrRequestModel  = attribute.Key("gen_ai.request.model")
	attrResponseModel = attribute.Key("gen_ai.response.model")
	attrFinish        = attribute.Key("gen_ai.response.finish_reasons")
	attrInputTokens   = attribute.Key("gen_ai.usage.input_tokens")
	attrOutputTokens  = attribute.Key("gen_ai.usage.output_tokens")
	attrTokenType     = attribute.Key("gen_ai.token.type")
	attrToolName      = attribute.Key("gen_ai.tool.name")
	attrToolCallID    = attribute.Key("gen_ai.tool.call.id")
	attrToolType      = attribute.Key("gen_ai.tool.type")
	attrToolArgs      = attribute.Key("gen_ai.tool.call.arguments")
	attrToolResult    = attribute.Key("gen_ai.tool.call.result")
	attrInputMsgs     = attribute.Key("gen_ai.input.messages")
	attrOutputMsgs    = attribute.Key("gen_ai.output.messages")
	attrErrorType     = attribute.Key("error.type")

	attrTenant     = attribute.Key("valet.tenant.id")
	attrRunID      = attribute.Key("valet.run_id")
	attrSource     = attribute.Key("valet.message.source")
	attrTaskID     = attribute.Key("valet.task.id")
	attrPurpose    = attribute.Key("valet.llm.purpose")
	attrStatus     = attribute.Key("valet.run.status")
	attrRetry      = attribute.Key("valet.retry.attempt")
	attrRetryDelay = attribute.Key("valet.retry.delay_s")
	attrApprovalID = attribute.Key("valet.approval.id")
	attrAction     = attribute.Key("valet.approval.action")
	attrResumed    = attribute.Key("valet.tool.resumed")
	attrCostUSD    = attribute.Key("valet.cost.usd")
)

// Values of gen_ai.operation.name.
const (
	opInvokeAgent = "invoke_agent"
	opChat        = "chat"
	opExecuteTool = "execute_tool"
)

// instrumentationName is the OpenTelemetry scope of valet's spans and
// metrics.
const instrumentationName = "github.com/valetkit/valet/agent"

// telemetry is an orchestrator's OpenTelemetry state, made once by
// NewOrchestrator; nil when neither provider is configured, so that a run
// without telemetry only tests a pointer.
type telemetry struct {
	tracer   trace.Tracer // nil: no spans
	opts     TelemetryOptions
	runName  string // "invoke_agent {AgentName}"
	provider attribute.KeyValue
	m        *instruments // nil: no metrics
}

func newTelemetry(cfg Config) (*telemetry, error) {
	// A provider set only when tracing is enabled is a nil pointer
	// otherwise: that is none.
	if isNil(cfg.TracerProvider) {
		cfg.TracerProvider = nil
	}
	if isNil(cfg.MeterProvider) {
		cfg.MeterProvider = nil
	}
	if cfg.TracerProvider == nil && cfg.MeterProvider == nil {
		return nil, nil
	}
	t := &telemetry{opts: cfg.Telemetry}
	if t.opts.AgentName == "" {
		t.opts.AgentName = "valet"
	}
	if t.opts.ProviderName == "" {
		t.opts.ProviderName = "_OTHER"
		if p, ok := cfg.LLM.(interface{ Provider() string }); ok && p.Provider() != "" {
			t.opts.ProviderName = p.Provider()
		}
	}
	t.runName = opInvokeAgent + " " + t.opts.AgentName
	t.provider = attrProvider.String(t.opts.ProviderName)
	if cfg.TracerProvider != nil {
		t.tracer = cfg.TracerProvider.Tracer(instrumentationName)
	}
	if cfg.MeterProvider != nil {
		m, err := newInstruments(cfg.MeterProvider.Meter(instrumentationName))
		if err != nil {
			return nil, err
		}
		t.m = m
	}
	return t, nil
}

// runTel is a run's spans: the invoke_agent span and the model call under
// way. The run has one only when the orchestrator has telemetry, so a run
// without pays for one nil pointer.
type runTel struct {
	span   trace.Span // invoke_agent; nil without a TracerProvider
	chat   trace.Span // the model call under way
	chatT0 time.Time
}

// startTelemetry opens the run's invoke_agent span, a child of the
// caller's span (a trigger run's, a request's), and makes the run's
// contexts carry it, so that model calls, tools and the client's own spans
// nest under it.
func (r *run) startTelemetry() {
	t := r.o.tel
	r.tel = new(runTel)
	if t.tracer == nil {
		return
	}
	attrs := []attribute.KeyValue{
		attrOperation.String(opInvokeAgent),
		t.provider,
		attrAgentName.String(t.opts.AgentName),
		attrConversation.String(r.msg.ConversationID),
		attrTenant.String(r.msg.TenantID),
		attrRunID.String(r.res.RunID),
		attrSource.String(string(r.msg.Source)),
	}
	if m := r.model(); m != "" {
		attrs = append(attrs, attrRequestModel.String(m))
	}
	if r.msg.TaskID != "" {
		attrs = append(attrs, attrTaskID.String(r.msg.TaskID))
	}
	if t.opts.CaptureContent && r.msg.Text != "" {
		attrs = append(attrs, attrInputMsgs.String(contentJSON([]llm.Message{llm.UserMessage(r.msg.Text)}, "")))
	}
	ctx, span := t.tracer.Start(r.ctx, t.runName, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	r.tel.span = span
	r.ctx, r.toolCtx, r.clock.parent = ctx, ctx, ctx
}

// endTelemetry closes the run's span with its outcome and records its
// cost.
func (r *run) endTelemetry(res *Result, err error) {
	t := r.o.tel
	if m := t.m; m != nil && res.Consumed.CostUSD > 0 {
		m.cost.Add(context.WithoutCancel(r.ctx), res.Consumed.CostUSD, metric.WithAttributes(attrTenant.String(r.msg.TenantID)))
	}
	span := r.tel.span
	if span == nil {
		return
	}
	span.SetAttributes(
		attrInputTokens.Int(res.Usage.InputTokens),
		attrOutputTokens.Int(res.Usage.OutputTokens),
		attrStatus.String(string(res.Status)),
		attrCostUSD.Float64(res.Consumed.CostUSD),
	)
	if t.opts.CaptureContent && res.Response != "" {
		span.SetAttributes(attrOutputMsgs.String(contentJSON([]llm.Message{{Role: llm.RoleAssistant, Content: res.Response}}, "")))
	}
	if err != nil && res.Status != StatusRefused {
		span.SetAttributes(attrErrorType.String(runErrorType(err)))
		span.SetStatus(codes.Error, maskText(err.Error()))
	}
	span.End()
}

// runErrorType is error.type of a failed run: the model error's kind, or
// the agent's sentinel that the run ended with.
func runErrorType(err error) string {
	var le *llm.Error
	switch {
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline_exceeded"
	case errors.Is(err, ErrBudgetExceeded):
		return "budget_exceeded"
	case errors.Is(err, ErrContextOverflow):
		return "context_overflow"
	case errors.Is(err, ErrEmptyReply):
		return "empty_reply"
	case errors.As(err, &le):
		return le.Kind.String()
	}
	return "_OTHER"
}

// startChat opens the span of a model call attempt.
func (r *run) startChat(req *llm.Request) {
	t := r.o.tel
	r.tel.chatT0 = time.Now()
	if r.tel.span == nil {
		return
	}
	model := req.Model
	if model == "" {
		model = r.model()
	}
	name := opChat
	if model != "" {
		name += " " + model
	}
	attrs := []attribute.KeyValue{
		attrOperation.String(opChat),
		t.provider,
		attrRequestModel.String(model),
		attrPurpose.String(string(req.Purpose)),
		attrConversation.String(r.msg.ConversationID),
	}
	if t.opts.CaptureContent {
		attrs = append(attrs, attrInputMsgs.String(contentJSON(req.Messages, "")))
	}
	_, r.tel.chat = t.tracer.Start(r.ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// chatCtx is ctx carrying the model call's span, for the client's own
// spans (an HTTP client's) to nest under it.
func (r *run) chatCtx(ctx context.Context) context.Context {
	if r.tel == nil || r.tel.chat == nil {
		return ctx
	}
	return trace.ContextWithSpan(ctx, r.tel.chat)
}

// endChat closes the model call's span and records its metrics.
func (r *run) endChat(req *llm.Request, resp *llm.Response, err error) {
	t := r.o.tel
	d := time.Since(r.tel.chatT0)
	model := req.Model
	if model == "" {
		model = r.model()
	}
	errType := ""
	if err != nil {
		errType = llm.KindOf(err).String()
		if r.ctx.Err() != nil {
			errType = "cancelled"
		}
	}
	if m := t.m; m != nil {
		m.chat(context.WithoutCancel(r.ctx), t.provider, model, req.Purpose, resp, errType, d)
	}
	span := r.tel.chat
	if span == nil {
		return
	}
	r.tel.chat = nil
	if err != nil {
		span.SetAttributes(attrErrorType.String(errType))
		span.SetStatus(codes.Error, maskText(err.Error()))
		span.End()
		return
	}
	span.SetAttributes(
		attrInputTokens.Int(resp.Usage.InputTokens),
		attrOutputTokens.Int(resp.Usage.OutputTokens),
	)
	if resp.Model != "" {
		span.SetAttributes(attrResponseModel.String(resp.Model))
	}
	if resp.FinishReason != "" {
		span.SetAttributes(attrFinish.StringSlice([]string{resp.FinishReason}))
	}
	if t.opts.CaptureContent {
		m := resp.Message
		m.Role = llm.RoleAssistant
		span.SetAttributes(attrOutputMsgs.String(contentJSON([]llm.Message{m}, resp.FinishReason)))
	}
	span.End()
}

// retryEvent notes on the run's span that a failed model call is retried.
func (r *run) retryEvent(st *callState, err error) {
	if r.tel.span == nil {
		return
	}
	r.tel.span.AddEvent("valet.llm.retry", trace.WithAttributes(
		attrErrorType.String(llm.KindOf(err).String()),
		attrRetry.Int(st.tries),
		attrRetryDelay.Float64(st.delay.Seconds()),
	))
}

// toolTel is one tool call's span and start.
type toolTel struct {
	span trace.Span
	t0   time.Time
}

// startTool opens the execute_tool span of call c (a plain tool or an
// Agent-Tool), a child of the run's span. links are added to it (an
// approved action's link to the run that raised its approval).
func (r *run) startTool(c llm.ToolCall, resumed bool, links ...trace.Link) toolTel {
	t := r.o.tel
	tt := toolTel{t0: time.Now()}
	if r.tel.span == nil {
		return tt
	}
	attrs := []attribute.KeyValue{
		attrOperation.String(opExecuteTool),
		attrToolName.String(c.Name),
		attrToolCallID.String(c.ID),
		attrToolType.String("function"),
	}
	if resumed {
		attrs = append(attrs, attrResumed.Bool(true))
	}
	if t.opts.CaptureContent {
		attrs = append(attrs, attrToolArgs.String(redactArgs(c.Arguments)))
	}
	_, tt.span = t.tracer.Start(r.ctx, opExecuteTool+" "+c.Name, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attrs...), trace.WithLinks(links...))
	return tt
}

// otherTool is the tool name on metrics of a call to a tool the run does
// not have: the names a model makes up must not each open a series.
const otherTool = "_OTHER"

// metricToolName is name when the run has that tool or Agent-Tool, else
// otherTool.
func (r *run) metricToolName(name string) string {
	if _, ok := r.tools().Get(name); ok {
		return name
	}
	if r.o.callable[name] != nil {
		return name
	}
	return otherTool
}

// toolCtx is ctx carrying the call's span, so that the tool's own spans
// nest under execute_tool.
func (tt toolTel) ctx(ctx context.Context) context.Context {
	if tt.span == nil {
		return ctx
	}
	return trace.ContextWithSpan(ctx, tt.span)
}

// endTool closes a tool call's span and records its metrics. It may run on
// the call's own goroutine.
func (r *run) endTool(tt toolTel, name string, out *callOutcome) {
	t := r.o.tel
	errType := ""
	if out.result.IsError {
		errType = toolErrorType(out)
	}
	if m := t.m; m != nil {
		m.tool(context.WithoutCancel(r.ctx), r.metricToolName(name), errType, time.Since(tt.t0))
	}
	if tt.span == nil {
		return
	}
	if t.opts.CaptureContent {
		tt.span.SetAttributes(attrToolResult.String(maskText(out.result.Content)))
	}
	if errType != "" {
		tt.span.SetAttributes(attrErrorType.String(errType))
		tt.span.SetStatus(codes.Error, errType)
	}
	tt.span.End()
}

// toolErrorType is error.type of a failed tool call: low-cardinality, never
// the error's text (which may quote a secret).
func toolErrorType(out *callOutcome) string {
	var pe *tool.PanicError
	switch {
	case out.status == resultInterrupted, out.status == resultBudgetSpent:
		return out.status
	case errors.As(out.result.Err, &pe):
		return "panic"
	case errors.Is(out.result.Err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(out.result.Err, tool.ErrUnknownTool):
		return "unknown_tool"
	}
	return "tool_error"
}

// traceParent is the W3C traceparent of the run's span, kept with what the
// run parks in the pool so that the run deciding it later, maybe on
// another replica, links to it. "" without tracing.
func (r *run) traceParent() string {
	if r.tel == nil || r.tel.span == nil {
		return ""
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(r.ctx, c)
	return c["traceparent"]
}

// raisedLink is the link to the span that parked e, when e holds one.
func raisedLink(e *pool.Entry) (trace.Link, bool) {
	if e.TraceParent == "" {
		return trace.Link{}, false
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": e.TraceParent})
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return trace.Link{}, false
	}
	return trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{attrApprovalID.String(e.ID)}}, true
}

// linkDecided links the run's span to the span of the run that raised the
// approval the run just settled, and notes the decision as an event.
func (r *run) linkDecided(e *pool.Entry, action string, expired bool) {
	span := r.tel.span
	if span == nil {
		return
	}
	if l, ok := raisedLink(e); ok {
		span.AddLink(l)
	}
	span.AddEvent("valet.approval.decided", trace.WithAttributes(
		attrApprovalID.String(e.ID), attrAction.String(action), attribute.Bool("valet.approval.expired", expired)))
}

// startResumed opens the execute_tool span of an Agent-Tool taken from
// the pool to be carried out, linked to the span that parked it.
func (r *run) startResumed(name string, e *pool.Entry) toolTel {
	c := llm.ToolCall{ID: resumeCallID(e), Name: name, Arguments: e.Fields}
	if l, ok := raisedLink(e); ok {
		return r.startTool(c, true, l)
	}
	return r.startTool(c, true)
}

// endResumed closes a resumed Agent-Tool's span.
func (r *run) endResumed(tt toolTel, name, content string, isErr bool) {
	out := callOutcome{result: tool.Result{Content: content, IsError: isErr}}
	r.endTool(tt, name, &out)
}

// isNil reports whether v is nil or an interface holding a nil pointer,
// map, slice, func or channel (a typed nil, such as a
// (*sdktrace.TracerProvider)(nil) set only when tracing is on).
func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface:
		return rv.IsNil()
	}
	return false
}
