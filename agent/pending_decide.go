package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/pool"
	"github.com/valetkit/valet/tool"
)

// applyDecision takes a pending approval out of the pool — exactly one
// taker wins — and carries out the decision. A lost race is not an
// error: another reply decided it.
func (r *run) applyDecision(e *pool.Entry, d approval.Decision) error {
	o := r.o
	a := r.agentOf(e.AgentName)
	taken, err := r.takeChecked(e, d.Fingerprint)
	if err != nil || taken == nil {
		return err
	}
	switch d.Action {
	case approval.Cancel:
		r.settled(taken, d.Action, false)
		r.endTaken(a, taken, cancelledText)
	case approval.Edit:
		if !taken.Approval.AllowModification {
			return r.repark(taken, []string{"this action cannot be modified; approve or cancel it"})
		}
		col := a.collect(taken.Fields, d.Fields)
		if col.err != nil {
			r.settled(taken, d.Action, false)
			r.endTaken(a, taken, r.agentFailure(a.name, col.err))
			return nil
		}
		if !col.complete() {
			return r.repark(taken, append(col.problems, missingProblems(col.missing)...))
		}
		if a.approval != nil {
			req, err := a.approval(col.fields)
			if err != nil {
				return r.repark(taken, []string{r.agentFailure(a.name, err)})
			}
			if req != nil {
				// The edit is the user's confirmation of the changed action;
				// the request is kept current for telemetry.
				taken.Fields = col.fields
				r.fillApproval(taken, req, o.now())
			}
		}
		taken.Fields = col.fields
		r.settled(taken, d.Action, false)
		if reason, denied := r.deniedNow(a, taken, col.fields); denied {
			r.endTaken(a, taken, reason)
			return nil
		}
		r.resume(a, taken, col.fields)
	default: // Approve
		r.settled(taken, d.Action, false)
		if reason, denied := r.deniedNow(a, taken, taken.Fields); denied {
			r.endTaken(a, taken, reason)
			return nil
		}
		r.resume(a, taken, taken.Fields)
	}
	return nil
}

// deniedNow classifies an approved plain tool call again, with the
// RiskPolicy and the tool's declared risk in force at the decision: an
// approval is consent to a high-risk call, not a way round a denial, so a
// call now critical (or that the policy fails to classify) is denied,
// with reason as its result, and does not run. Any other risk runs as
// approved. Agent-Tools are not classified (their approval is their own).
func (r *run) deniedNow(a *agentTool, e *pool.Entry, fields json.RawMessage) (reason string, denied bool) {
	if a.plain == nil {
		return "", false
	}
	tl, ok := a.plain.Get(a.name)
	if !ok {
		return "", false // the registry answers an unknown tool
	}
	c := llm.ToolCall{ID: resumeCallID(e), Name: a.name, Arguments: fields}
	declared := tool.SettingsOf(tl).Risk
	v := riskVerdict{classified: true, risk: declared}
	var perr error
	if policy := r.o.loop.RiskPolicy; policy != nil {
		v.risk, perr = r.callPolicy(policy, c, declared)
		v.failed = perr != nil || v.risk < tool.RiskLow
	}
	if !v.failed && v.risk < tool.RiskCritical {
		return "", false
	}
	v.decision = RiskDenied
	if r.o.obs != nil {
		r.step(Step{Kind: StepRisk, ToolCall: c, Risk: v.risk, RiskDecision: v.decision, Err: perr})
	}
	r.log().WarnContext(r.ctx, "agent: an approved tool call is denied by the risk policy in force now; it does not run",
		"tool", a.name, "risk", v.risk.String(), "policy_failed", v.failed)
	return deniedText(a.name, v), true
}

// takeChecked takes a pending approval out of the pool for a decision,
// only as it was checked: still waiting for approval, not paused, of the
// agent's current schema and, when fingerprint is set, with that
// fingerprint (else approval.ErrStale, and nothing is taken). The take is
// conditional on the revision that was checked, so an edit landing between
// the check and the take makes it fail and the entry is checked again;
// nothing ever has to be put back. It returns nil, nil when there is
// nothing to decide any more (another decision took it, or it was paused
// or replaced meanwhile).
func (r *run) takeChecked(e *pool.Entry, fingerprint string) (*pool.Entry, error) {
	o := r.o
	for range 3 {
		a := r.agentOf(e.AgentName)
		if e.Status != pool.StatusWaitingForApproval || e.Approval == nil || e.Paused || a == nil || e.SchemaVersion != a.version {
			return nil, nil
		}
		if fingerprint != "" && fingerprint != entryFingerprint(e) {
			return nil, fmt.Errorf("%w: %s", approval.ErrStale, e.ID) // nothing taken, nothing runs
		}
		taken, err := o.pool.TakeRevision(r.ctx, e.TenantID, e.ID, e.Revision)
		switch {
		case err == nil:
			return taken, nil
		case errors.Is(err, pool.ErrNotFound):
			return nil, nil // another decision took it
		case !errors.Is(err, pool.ErrConflict):
			return nil, fmt.Errorf("agent: taking approval %s: %w", e.ID, err)
		}
		// Changed since it was read (an edit, a pause): read and check again.
		fresh, err := o.pool.Get(r.ctx, e.TenantID, e.ID)
		if errors.Is(err, pool.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("agent: reading approval %s: %w", e.ID, err)
		}
		e = fresh
	}
	return nil, fmt.Errorf("agent: taking approval %s: %w", e.ID, pool.ErrConflict)
}

func missingProblems(missing []string) []string {
	out := make([]string, len(missing))
	for i, m := range missing {
		out[i] = m + ": missing required field"
	}
	return out
}

// repark puts a taken approval back, unchanged, with the reason the
// user's edit was not applied; the user is asked again.
func (r *run) repark(e *pool.Entry, problems []string) error {
	e.Problems = problems
	if err := r.putBack(e); err != nil {
		return err
	}
	r.addParked(r.o.waitingOf(e))
	return nil
}

// putBack returns a taken entry to the pool as it is. It goes on when the
// run's ctx is cancelled meanwhile: a taken entry that is not put back is
// lost, neither run nor pending.
func (r *run) putBack(e *pool.Entry) error {
	e.Revision = 0
	e.UpdatedAt = r.o.now()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), putBackTimeout)
	defer cancel()
	if err := r.o.pool.Create(ctx, e); err != nil {
		r.log().ErrorContext(ctx, "agent: a taken approval could not be returned to the pool; it is lost", "id", e.ID, "agent", e.AgentName, "err", err)
		return fmt.Errorf("agent: returning approval %s to the pool: %w", e.ID, err)
	}
	return nil
}

// putBackTimeout bounds returning a taken entry to the pool once the run's
// own ctx may be gone.
const putBackTimeout = 10 * time.Second

func resumeCallID(e *pool.Entry) string { return "resume_" + e.ID }

// failPooled ends a pooled agent whose own code failed: it leaves the
// pool and its failure enters the conversation as an error result.
func (r *run) failPooled(a *agentTool, e *pool.Entry, cause error) error {
	taken, err := r.o.pool.Take(r.ctx, e.TenantID, e.ID)
	if errors.Is(err, pool.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("agent: taking %s from the pool: %w", e.ID, err)
	}
	r.endTaken(a, taken, r.agentFailure(a.name, cause))
	return nil
}

// endTaken ends an agent taken from the pool without running it
// (cancelled, or its own code failed): reason enters the conversation as
// its error result.
func (r *run) endTaken(a *agentTool, e *pool.Entry, reason string) {
	if e.SubAgent != nil { // the sub-agent that called it reads reason and goes on
		r.resumeSub(a, e, e.Fields, false, reason)
		return
	}
	r.emitResumedStart(a, e, e.Fields)
	r.addResumed(a, e, e.Fields, reason, true, 0)
}

// resume runs an agent taken from the pool and adds its outcome.
func (r *run) resume(a *agentTool, e *pool.Entry, fields json.RawMessage) {
	if e.SubAgent != nil { // it runs in the sub-agent that called it, which goes on
		r.resumeSub(a, e, fields, true, "")
		return
	}
	r.emitResumedStart(a, e, fields)
	var tt toolTel // the approved action's span, linked to the run that raised it (telemetry.go)
	if r.o.tel != nil {
		tt = r.startResumed(a.name, e)
	}
	t0 := time.Now()
	content, isErr := r.runAgent(a, resumeCallID(e), fields)
	if r.o.tel != nil {
		r.endResumed(tt, a.name, content, isErr)
	}
	r.addResumed(a, e, fields, content, isErr, time.Since(t0))
}

func (r *run) emitResumedStart(a *agentTool, e *pool.Entry, fields json.RawMessage) {
	if r.o.obs != nil {
		r.step(Step{Kind: StepToolCall, ToolCall: llm.ToolCall{ID: resumeCallID(e), Name: a.name, Arguments: fields}})
	}
	if r.emit != nil {
		r.emit(Event{Type: EventToolCallStart, ToolCall: &ToolCallRecord{ID: resumeCallID(e), Name: a.name, ArgsSummary: summarizeArgs(fields), Resumed: true}})
	}
}

// addResumed records a resumed agent's outcome and adds it to the
// conversation as a tool call with its result, so the model sees what ran.
func (r *run) addResumed(a *agentTool, e *pool.Entry, fields json.RawMessage, content string, isErr bool, dur time.Duration) {
	id := resumeCallID(e)
	call := llm.ToolCall{ID: id, Name: a.name, Arguments: fields}
	rec := ToolCallRecord{ID: id, Name: a.name, ArgsSummary: summarizeArgs(fields), Duration: dur, Success: !isErr, ResultStatus: resultCompleted, ResultChars: len(content), Resumed: true}
	if isErr {
		rec.ResultStatus, rec.Error = resultError, content
	}
	content, rec.Truncated = r.o.ctxm.TruncateToolResult(content)
	r.res.ToolCalls = append(r.res.ToolCalls, rec)
	r.res.Consumed.ToolCalls++ // the user decided it: it runs whatever the budget says, and counts
	if r.o.obs != nil {
		r.step(Step{Kind: StepToolResult, ToolCall: call, Record: rec, Text: content, Duration: dur})
	}
	r.logToolResult(&rec)
	if r.emit != nil {
		cp := rec
		r.emit(Event{Type: EventToolResult, ToolCall: &cp})
	}
	msgs := []llm.Message{
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{call}},
		{Role: llm.RoleTool, ToolCallID: id, Name: a.name, Content: content, IsError: isErr},
	}
	r.push(msgs...)
	r.commit()
}

// ProvideFieldsToolName is the tool the call reading a waiting Agent-Tool's
// missing fields from the user's reply forces (llm.Request.ToolChoice; its
// Purpose is llm.PurposeProvideFields): the model answers with a call of
// it holding the fields the reply gives, or {"unrelated": true}. See "Calls
// valet makes" in the package documentation for its arguments;
// llmtest.ProvideFields and llmtest.Unrelated script it. (It was called
// ExtractToolName; fact extraction is RememberToolName.)
const ProvideFieldsToolName = "provide_fields"
