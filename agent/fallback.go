package agent

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/valetkit/valet/llm"
)

// Span event attributes of a fallback switch (valet.llm.fallback).
var (
	attrFallbackFrom = attribute.Key("valet.llm.fallback.from")
	attrFallbackTo   = attribute.Key("valet.llm.fallback.to")
)

// mayFallBack reports whether the orchestrator's clients may hold an
// *llm.Fallback whose switches the run reports: Config.LLM or an entry of
// a ModelMap being one, or a ModelRouter of another kind (which cannot be
// looked through). A Fallback wrapped inside another client is not seen;
// it logs its switches itself.
func mayFallBack(cfg Config) bool {
	if _, ok := cfg.LLM.(*llm.Fallback); ok {
		return true
	}
	switch m := cfg.Models.(type) {
	case nil:
		return false
	case ModelMap:
		for _, c := range m {
			if _, ok := c.(*llm.Fallback); ok {
				return true
			}
		}
		return false
	}
	return true
}

// modelCtx caches the ctx of the run's model calls, made from the ctx of
// the call clock (which changes only after a call timed out).
type modelCtx struct {
	parent, ctx context.Context
}

// modelCtx returns ctx naming the conversation (so an llm.Fallback keeps
// it on the model that answered it) and carrying the hook through which a
// Fallback reports a switch to the run. Only model calls get it: a tool
// running in its own goroutine must not call the run's hook.
func (r *run) modelCtx(ctx context.Context) context.Context {
	if !r.o.fallbacks {
		return ctx // no llm.Fallback to report: no ctx values
	}
	if r.mctx.parent != ctx {
		c := llm.WithConversation(ctx, r.msg.TenantID+"\x00"+r.msg.ConversationID)
		r.mctx = modelCtx{parent: ctx, ctx: llm.WithSwitchHook(c, r.fellBack)}
	}
	return r.mctx.ctx
}

// fellBack reports a switch of an llm.Fallback during one of the run's
// model calls, never silently: a WARN line, an Observer step and a span
// event on the run's span and the call's.
func (r *run) fellBack(s llm.Switch) {
	kind := llm.KindOf(s.Err)
	msg := ""
	if s.Err != nil {
		msg = maskText(s.Err.Error())
	}
	r.log().WarnContext(r.ctx, "agent: model failed, falling back", "from", s.From, "to", s.To, "kind", kind.String(), "err", msg)
	if r.o.obs != nil {
		r.step(Step{Kind: StepModelFallback, Call: r.obs.calls, From: s.From, To: s.To, ErrorKind: kind, Err: s.Err})
	}
	if r.tel == nil {
		return
	}
	ev := trace.WithAttributes(attrFallbackFrom.String(s.From), attrFallbackTo.String(s.To), attrErrorType.String(kind.String()))
	if r.tel.span != nil {
		r.tel.span.AddEvent("valet.llm.fallback", ev)
	}
	if r.tel.chat != nil {
		r.tel.chat.AddEvent("valet.llm.fallback", ev)
	}
}

// noteModel adds the model that answered a call to Result.Models, with
// room for a few calls at once (one allocation for a run of up to 8).
func (r *run) noteModel(req *llm.Request, resp *llm.Response) {
	if r.res.Models == nil {
		r.res.Models = make([]string, 0, 8)
	}
	r.res.Models = append(r.res.Models, r.answeredBy(req, resp))
}

// answeredBy names the model that answered a call: the response's, else
// the request's, else the client's. It sets resp.Model to it when the
// client left it empty, so that the call is priced at that model (a
// routed run's client is not the orchestrator's).
func (r *run) answeredBy(req *llm.Request, resp *llm.Response) string {
	switch {
	case resp.Model != "":
		return resp.Model
	case req.Model != "":
		return req.Model
	}
	if r.llm != nil {
		if m, ok := r.llm.(interface{ Model() string }); ok && m.Model() != "" {
			resp.Model = m.Model()
		}
		return resp.Model
	}
	return r.o.model
}

// model is the name of the run's model: its routed client's, when it
// names one, else the orchestrator's.
func (r *run) model() string {
	if r.llm != nil {
		if m, ok := r.llm.(interface{ Model() string }); ok && m.Model() != "" {
			return m.Model()
		}
	}
	return r.o.model
}

// extractionCtx is the ctx of a fact extraction's model call, which runs
// in the background after its run: it names the run's conversation, and
// its switch hook logs the switch at WARN through the extraction's logger
// and tells the Observer (after the run's last step, like the
// extraction's own steps).
func (o *Orchestrator) extractionCtx(ctx context.Context, x extraction, log *slog.Logger) context.Context {
	ctx = llm.WithConversation(ctx, x.tenant+"\x00"+x.conv)
	return llm.WithSwitchHook(ctx, func(s llm.Switch) {
		kind := llm.KindOf(s.Err)
		msg := ""
		if s.Err != nil {
			msg = maskText(s.Err.Error())
		}
		log.WarnContext(ctx, "agent: model failed, falling back", "from", s.From, "to", s.To, "kind", kind.String(), "err", msg)
		if x.ended != nil {
			o.observeExtraction(ctx, x, Step{Kind: StepModelFallback, From: s.From, To: s.To, ErrorKind: kind, Err: s.Err})
		}
	})
}
