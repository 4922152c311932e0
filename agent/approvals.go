package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/pool"
)

// ListPendingApprovals returns the tenant's open approval requests, oldest
// first, from every conversation and source. Expired ones are left out.
func (o *Orchestrator) ListPendingApprovals(ctx context.Context, tenantID string) ([]approval.Request, error) {
	entries, err := o.live(ctx, tenantID)
	var out []approval.Request
	for _, e := range entries {
		if e.Status == pool.StatusWaitingForApproval && e.Approval != nil {
			out = append(out, *o.shownRequest(e))
		}
	}
	return out, err
}

// PendingAgents returns the tenant's Agent-Tools waiting in the pool, for
// input or approval, oldest first. Expired ones are left out.
func (o *Orchestrator) PendingAgents(ctx context.Context, tenantID string) ([]Waiting, error) {
	entries, err := o.live(ctx, tenantID)
	var out []Waiting
	for _, e := range entries {
		out = append(out, o.waitingOf(e))
	}
	return out, err
}

// live lists the tenant's pooled entries that have not expired.
func (o *Orchestrator) live(ctx context.Context, tenantID string) ([]*pool.Entry, error) {
	if err := checkTenant(tenantID); err != nil {
		return nil, err
	}
	entries, err := o.pool.List(ctx, tenantID)
	if err != nil {
		return nil, fmt.Errorf("agent: reading the pool: %w", err)
	}
	now := o.now()
	return slices.DeleteFunc(entries, func(e *pool.Entry) bool { return e.Expired(now) }), nil
}

// ResolveApproval applies a decision taken outside the conversation (a
// button in a UI) to one pending approval, then lets the loop continue so
// the model reports the outcome. The approved action runs exactly once,
// even when decisions race on several replicas sharing the pool: a loser
// gets approval.ErrNotFound and nothing runs.
//
// Errors: approval.ErrNotFound (unknown ID, another tenant's, already
// decided), approval.ErrExpired (the entry is removed), ErrPaused,
// ErrStaleAgent, approval.ErrInvalidDecision, approval.ErrNotAllowed (an
// edit of a request that does not allow one), approval.ErrStale (the
// decision carries a Fingerprint and the action was edited since; it stays
// pending, nothing ran). An edit whose fields are
// invalid does not run: the approval stays pending, the Result says why.
func (o *Orchestrator) ResolveApproval(ctx context.Context, tenantID, id string, d approval.Decision) (*Result, error) {
	r := o.newRun(ctx, Message{TenantID: tenantID}, nil)
	r.obs.late = true // started once the approval's conversation is known
	return r.execute(func(r *run) error { return r.resolve(id, d) })
}

func (r *run) resolve(id string, d approval.Decision) (err error) {
	parent := r.ctx
	r.steerStart() // steerable like a message's run (steer.go)
	defer func() { err = r.steerFinish(parent, err) }()
	o, ctx := r.o, r.ctx
	if err := checkTenant(r.msg.TenantID); err != nil {
		return err
	}
	if err := d.Check(); err != nil {
		return err
	}
	if err := r.startBudget(); err != nil {
		return err
	}
	e, err := o.pendingApproval(ctx, r.msg.TenantID, id)
	if err != nil {
		return err
	}
	r.msg.ConversationID = conversationOf(e.ConversationID)
	r.logh.conv = r.msg.ConversationID
	// The user decides: the run is the user's (a SpendGuard pausing
	// non-critical runs lets it through), about the entry's task.
	r.msg.Source, r.msg.TaskID = SourceUser, e.TaskID
	r.res.Source, r.res.TaskID = r.msg.Source, r.msg.TaskID
	if o.obs != nil {
		r.startStep()
	}
	if err := r.checkSpend(); err != nil {
		return err
	}
	key := convKey{r.msg.TenantID, r.msg.ConversationID}
	c, err := o.acquire(ctx, key)
	if err != nil {
		return err
	}
	defer o.release(key, c)
	// Read it again under the conversation's lock: a message may have
	// decided it meanwhile.
	if e, err = o.pendingApproval(ctx, r.msg.TenantID, id); err != nil {
		return err
	}
	a := r.agentOf(e.AgentName)
	switch {
	case e.Paused:
		return fmt.Errorf("%w: %s", ErrPaused, id)
	case a == nil || a.version != e.SchemaVersion || r.staleSub(e):
		r.log().WarnContext(ctx, "agent: discarding a pooled agent made from another schema version", "agent", e.AgentName, "id", id)
		r.discard(ctx, e)
		return fmt.Errorf("%w: %s (%s)", ErrStaleAgent, id, e.AgentName)
	case e.Expired(o.now()):
		r.discard(ctx, e)
		r.settled(e, "", true)
		return fmt.Errorf("%w: %s expired at %s; nothing ran", approval.ErrExpired, id, e.ExpiresAt.Format("2006-01-02 15:04:05 MST"))
	case d.Action == approval.Edit && !e.Approval.AllowModification:
		return fmt.Errorf("%w: %s", approval.ErrNotAllowed, id)
	case d.Fingerprint != "" && d.Fingerprint != entryFingerprint(e):
		return fmt.Errorf("%w: %s", approval.ErrStale, id)
	}

	// A run of the conversation: Cancel and Pause reach it. What waits
	// for the user's next message (injected texts, a pause) is left to it.
	r.beginSteerTake(false)
	defer r.endSteer()
	if err := r.open(); err != nil {
		return r.end(err)
	}
	r.setSystem(r.systemPrompt())
	before := len(r.res.ToolCalls)
	err = r.applyDecision(e, d)
	if err == nil && len(r.res.ToolCalls) == before && len(r.parked) == 0 {
		err = fmt.Errorf("%w: %s", approval.ErrNotFound, id) // another decision took it first
	}
	if err == nil {
		r.collectPending(e.ID)
		if len(r.parked) > 0 {
			err = r.replyWaiting()
		} else {
			err = r.loop()
		}
	}
	if err == errPaused {
		r.steer.paused = true
		err = r.end(nil)
		r.res.Status, r.res.Response = StatusPaused, ""
		return err
	}
	return r.end(err)
}

// pendingApproval reads one approval of the tenant, mapping "absent" and
// "not an approval" onto approval.ErrNotFound.
func (o *Orchestrator) pendingApproval(ctx context.Context, tenantID, id string) (*pool.Entry, error) {
	e, err := o.pool.Get(ctx, tenantID, id)
	if errors.Is(err, pool.ErrNotFound) || err == nil && (e.Status != pool.StatusWaitingForApproval || e.Approval == nil) {
		return nil, fmt.Errorf("%w: %s", approval.ErrNotFound, id)
	}
	if err != nil {
		return nil, fmt.Errorf("agent: reading the pool: %w", err)
	}
	return e, nil
}

// collectPending notes the conversation's other waiting agents, so the
// Result reports everything still open.
func (r *run) collectPending(except string) {
	entries, err := r.o.pool.List(r.ctx, r.msg.TenantID)
	if err != nil {
		return
	}
	now := r.o.now()
	for _, e := range entries {
		if conversationOf(e.ConversationID) == r.msg.ConversationID && e.ID != except && !e.Paused && !e.Expired(now) &&
			!slices.ContainsFunc(r.parked, func(w Waiting) bool { return w.AgentID == e.ID }) {
			r.pending = append(r.pending, r.o.waitingOf(e))
		}
	}
}

// PauseAgent pauses a pooled agent: it is neither served by the user's
// messages nor decided until ResumeAgent. Errors: pool.ErrNotFound.
func (o *Orchestrator) PauseAgent(ctx context.Context, tenantID, id string) error {
	return o.setPaused(ctx, tenantID, id, true)
}

// ResumeAgent undoes PauseAgent.
func (o *Orchestrator) ResumeAgent(ctx context.Context, tenantID, id string) error {
	return o.setPaused(ctx, tenantID, id, false)
}

func (o *Orchestrator) setPaused(ctx context.Context, tenantID, id string, paused bool) error {
	if err := checkTenant(tenantID); err != nil {
		return err
	}
	for range 3 { // a concurrent write bumps the revision: read again
		e, err := o.pool.Get(ctx, tenantID, id)
		if err != nil {
			return fmt.Errorf("agent: pause/resume %s: %w", id, err)
		}
		if e.Paused == paused {
			return nil
		}
		e.Paused = paused
		e.UpdatedAt = o.now()
		err = o.pool.Update(ctx, e)
		if !errors.Is(err, pool.ErrConflict) {
			if err != nil {
				return fmt.Errorf("agent: pause/resume %s: %w", id, err)
			}
			return nil
		}
	}
	return fmt.Errorf("agent: pause/resume %s: %w", id, pool.ErrConflict)
}

// CancelAgent removes a pooled agent without running it; its conversation
// records that the user cancelled it, so the model knows. An Agent-Tool a
// sub-agent called is removed with the sub-agent: it does not go on, and
// the conversation records that its spawn_agent call ended so. Errors:
// pool.ErrNotFound.
func (o *Orchestrator) CancelAgent(ctx context.Context, tenantID, id string) error {
	if err := checkTenant(tenantID); err != nil {
		return err
	}
	e, err := o.pool.Get(ctx, tenantID, id)
	if err != nil {
		return fmt.Errorf("agent: cancel %s: %w", id, err)
	}
	conv := conversationOf(e.ConversationID)
	key := convKey{tenantID, conv}
	c, err := o.acquire(ctx, key)
	if err != nil {
		return err
	}
	defer o.release(key, c)
	taken, err := o.pool.Take(ctx, tenantID, id)
	if err != nil {
		return fmt.Errorf("agent: cancel %s: %w", id, err)
	}
	callID := resumeCallID(taken)
	name, args, text := strings.TrimPrefix(taken.AgentName, RiskToolPrefix), taken.Fields, cancelledText
	if taken.SubAgent != nil { // the sub-agent that called it is stopped with it (spawn_park.go)
		name, args, text = SpawnAgentTool, subArgs(taken), subCancelledText(taken)
	}
	err = o.mem.Append(ctx, tenantID, conv,
		llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: callID, Name: name, Arguments: args}}},
		llm.Message{Role: llm.RoleTool, ToolCallID: callID, Name: name, Content: text, IsError: true},
	)
	if err != nil {
		// The agent is cancelled all the same; only the note is missing.
		return fmt.Errorf("agent: cancel %s: %w: %w", id, ErrHistoryNotSaved, err)
	}
	return nil
}
