package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"strings"
	"time"

	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/internal/textsafe"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/pool"
	"github.com/valetkit/valet/tool"
)

// ResultStatus values of Agent-Tool calls in a ToolCallRecord.
const (
	resultCompleted = "completed"
	resultError     = "error"
)

// cancelledText is the tool result of an action the user cancelled.
const cancelledText = "User cancelled this action."

// startAgent handles the model's call of an Agent-Tool: the arguments are
// collected; an agent that lacks fields or needs approval is parked in the
// pool, any other runs now.
// A parked agent's CreatedAt is created, so that the agents of one turn
// are listed in the order the model called them.
func (r *run) startAgent(a *agentTool, c llm.ToolCall, created time.Time) callOutcome {
	col := a.collect(nil, c.Arguments)
	if col.err != nil {
		return r.agentFailed(a, col.err)
	}
	if !col.complete() {
		return r.park(a, c.ID, col, nil, created)
	}
	if a.approval != nil {
		req, err := a.approval(col.fields)
		if err != nil {
			return r.agentFailed(a, err)
		}
		if req != nil {
			return r.park(a, c.ID, col, req, created)
		}
	}
	content, isErr := r.runAgent(a, c.ID, col.fields)
	out := callOutcome{result: tool.Result{Content: content, IsError: isErr}, status: resultCompleted}
	if isErr {
		out.status = resultError
	}
	return out
}

func (r *run) agentFailed(a *agentTool, err error) callOutcome {
	return callOutcome{
		result: tool.Result{Content: r.agentFailure(a.name, err), IsError: true, Err: err},
		status: resultError,
	}
}

// park puts an agent into the pool, waiting for input (req == nil) or for
// the user's approval of req, and returns the tool result saying so.
func (r *run) park(a *agentTool, callID string, col collected, req *approval.Request, now time.Time) callOutcome {
	o := r.o
	e := &pool.Entry{
		ID:             newID(),
		AgentName:      a.poolName(),
		TenantID:       r.msg.TenantID,
		ConversationID: r.msg.ConversationID,
		Status:         pool.StatusWaitingForInput,
		SchemaVersion:  a.version,
		Fields:         col.fields,
		Missing:        col.missing,
		Problems:       col.problems,
		ToolCallID:     callID,
		Source:         r.msg.Source,
		TaskID:         r.msg.TaskID,
		Task:           col.task,
		TraceParent:    r.traceParent(),
		CreatedAt:      now,
		UpdatedAt:      now,
		ExpiresAt:      now.Add(o.loop.InputTimeout),
	}
	if req != nil {
		r.fillApproval(e, req, now)
	}
	if err := o.pool.Create(r.ctx, e); err != nil {
		r.log().WarnContext(r.ctx, "agent: could not park an Agent-Tool", "agent", a.name, "err", err)
		return callOutcome{
			result: tool.Result{Content: maskText(fmt.Sprintf("agent %q could not wait for the user: %s", a.name, err)), IsError: true, Err: err},
			status: resultError,
		}
	}
	w := o.waitingOf(e)
	return callOutcome{result: tool.Result{Content: waitingText(a, e)}, status: string(w.Status), wait: &w}
}

// fillApproval completes an agent's approval request and makes e wait for it.
func (r *run) fillApproval(e *pool.Entry, req *approval.Request, now time.Time) {
	req.ID = e.ID
	req.AgentName = e.AgentName
	req.TenantID, req.ConversationID = e.TenantID, e.ConversationID
	if req.Source == "" {
		req.Source = e.Source
	}
	if req.TaskID == "" {
		req.TaskID = e.TaskID
	}
	if req.ActionSummary == "" {
		req.ActionSummary = "Run " + e.AgentName
	}
	if req.Details == nil {
		var d map[string]any
		_ = json.Unmarshal(e.Fields, &d)
		req.Details = d
	}
	if len(req.Options) == 0 {
		req.Options = []string{string(approval.Approve), string(approval.Cancel)}
		if req.AllowModification {
			req.Options = []string{string(approval.Approve), string(approval.Edit), string(approval.Cancel)}
		}
	}
	req.CreatedAt = now
	req.Fingerprint = entryFingerprint(e)
	if req.ExpiresAt.IsZero() {
		req.ExpiresAt = now.Add(r.o.loop.ApprovalTimeout)
	}
	e.Status = pool.StatusWaitingForApproval
	e.Approval = req
	e.Missing, e.Problems = nil, nil
	e.ExpiresAt = req.ExpiresAt
}

func (o *Orchestrator) waitingOf(e *pool.Entry) Waiting {
	w := Waiting{AgentID: e.ID, AgentName: e.AgentName, Status: StatusWaitingForInput, Missing: e.Missing, Problems: e.Problems, Path: subPath(e), created: e.CreatedAt}
	if e.Status == pool.StatusWaitingForApproval && e.Approval != nil {
		w.Status = StatusWaitingForApproval
		w.Approval = o.shownRequest(e)
		w.changed = e.Approval.Fingerprint != "" && e.Approval.Fingerprint != w.Approval.Fingerprint
	}
	return w
}

// shownRequest is e's approval request as it stands. When the action was
// changed after the request was made (its arguments no longer have the
// request's fingerprint), the request is rebuilt from the current
// arguments, so what is shown is always what would run, with its
// fingerprint.
func (o *Orchestrator) shownRequest(e *pool.Entry) *approval.Request {
	a := *e.Approval
	fp := entryFingerprint(e)
	if a.Fingerprint == fp {
		return &a
	}
	if a.Fingerprint != "" { // an entry from before fingerprints is taken as it is
		var req *approval.Request
		if ag := o.agents[e.AgentName]; ag != nil && ag.approval != nil {
			req, _ = ag.approval(e.Fields)
		}
		a.ActionSummary, a.Details = "Run "+e.AgentName, nil
		if req != nil {
			if req.ActionSummary != "" {
				a.ActionSummary = req.ActionSummary
			}
			a.Details = req.Details
		}
		if a.Details == nil {
			_ = json.Unmarshal(e.Fields, &a.Details)
		}
	}
	a.Fingerprint = fp
	return &a
}

// shownFingerprint is the fingerprint of the action as the conversation
// last presented it (the stored request's), or, for an entry from before
// fingerprints, of the action as it is.
func shownFingerprint(e *pool.Entry) string {
	if e.Approval != nil && e.Approval.Fingerprint != "" {
		return e.Approval.Fingerprint
	}
	return entryFingerprint(e)
}

// entryFingerprint identifies the action a pooled approval would run.
func entryFingerprint(e *pool.Entry) string {
	return approval.Fingerprint(e.AgentName, e.SchemaVersion, e.Fields)
}

// waitingText is the tool result of a parked agent: what it waits for, so
// the history stays valid and the model knows not to call it again.
func waitingText(a *agentTool, e *pool.Entry) string {
	var b strings.Builder
	if e.Status == pool.StatusWaitingForApproval {
		fmt.Fprintf(&b, "%s is ready and waits for the user's confirmation (request %s): %s.", a.name, e.ID, strings.TrimRight(textsafe.Line(e.Approval.ActionSummary), "."))
		b.WriteString(" The user will be asked to approve, edit or cancel it.")
	} else {
		fmt.Fprintf(&b, "%s waits for the user's input (request %s).", a.name, e.ID)
		if len(e.Missing) > 0 {
			b.WriteString(" Still needed: " + a.fieldList(e.Missing) + ".")
		}
		if len(e.Problems) > 0 {
			b.WriteString(" Rejected values: " + problemList(e.Problems) + ".")
		}
		b.WriteString(" The user will be asked.")
	}
	fmt.Fprintf(&b, " Do not call %s again for this request.", a.name)
	return b.String()
}

// fieldList names fields with their descriptions: "to (Recipient email address)".
func (a *agentTool) fieldList(names []string) string {
	var props map[string]struct {
		Description string `json:"description"`
	}
	var root struct {
		Properties json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(a.editSchema, &root) == nil {
		_ = json.Unmarshal(root.Properties, &props)
	}
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = n
		if d := props[n].Description; d != "" {
			d, _, _ = strings.Cut(d, ". ")
			parts[i] += " (" + strings.TrimRight(d, ".") + ")"
		}
	}
	return strings.Join(parts, ", ")
}

// runAgent runs a complete agent with its own timeout and returns the tool
// result. Panics are recovered into an error result.
func (r *run) runAgent(a *agentTool, callID string, fields json.RawMessage) (content string, isErr bool) {
	if a.plain != nil {
		return r.runPlain(a, callID, fields) // risk.go
	}
	o := r.o
	timeout := a.opts.timeout
	if timeout <= 0 {
		timeout = o.loop.AgentToolTimeout
	}
	ctx, cancel := context.WithTimeout(r.toolCtx, timeout)
	defer cancel()
	ctx = tool.WithExecContext(ctx, tool.ExecContext{
		TenantID:       r.msg.TenantID,
		ConversationID: r.msg.ConversationID,
		CallID:         callID,
		Credentials:    r.credentials(),
		Logger:         r.log(),
	})
	reply, err := safeRun(ctx, a, fields)
	switch {
	case err == nil:
		return reply.content(), false
	case r.ctx.Err() == nil && ctx.Err() == context.DeadlineExceeded:
		return fmt.Sprintf("agent %q timed out after %s", a.name, timeout), true
	default:
		return r.agentFailure(a.name, err), true
	}
}

func safeRun(ctx context.Context, a *agentTool, fields json.RawMessage) (reply Reply, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &tool.PanicError{Tool: a.name, Value: v, Stack: debug.Stack()}
		}
	}()
	return a.run(ctx, fields)
}
