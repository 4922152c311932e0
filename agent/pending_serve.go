package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/internal/textsafe"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/pool"
)

// servePending serves the conversation's waiting agents before the loop:
// the user's message decides pending approvals or supplies missing fields.
// It reports done when the run ends here (an agent still waits).
func (r *run) servePending() (done bool, err error) {
	o, ctx := r.o, r.ctx
	entries, err := o.pool.List(ctx, r.msg.TenantID)
	if err != nil {
		return false, fmt.Errorf("agent: reading the pool: %w", err)
	}
	var approvals, inputs []*pool.Entry
	var notes []string
	now := o.now()
	for _, e := range entries {
		if conversationOf(e.ConversationID) != r.msg.ConversationID || e.Paused {
			continue
		}
		if note, ok := r.usable(e, now); !ok {
			if note != "" {
				notes = append(notes, note)
			}
			continue
		}
		if e.Status == pool.StatusWaitingForApproval && e.Approval != nil {
			approvals = append(approvals, e)
		} else {
			inputs = append(inputs, e)
		}
	}
	defer func() {
		if err == nil && !done && len(notes) > 0 {
			r.noteBeforeUser(strings.Join(notes, "\n"))
		}
	}()
	// Approvals first; inputs are served once the approvals are decided.
	var left []*pool.Entry // still waiting after this message
	var note string
	switch {
	case r.msg.Source != SourceUser:
		// Only the user answers: a triggered message (whose text may
		// carry an event's untrusted data) decides no approval and
		// supplies no input; they stay pending for the user.
		left = append(inputs, approvals...)
	case len(approvals) > 0:
		rest, n, err := r.decideApprovals(approvals)
		if err != nil {
			return false, err
		}
		left, note = append(inputs, rest...), n
	case len(inputs) > 0:
		handled, n, err := r.supplyInput(inputs[0])
		if err != nil {
			return false, err
		}
		left, note = inputs[1:], n
		if !handled {
			left = append(left, inputs[0])
		}
	}
	if note != "" {
		notes = append(notes, note)
	}
	for _, e := range left {
		r.pending = append(r.pending, r.o.waitingOf(e))
	}
	if len(r.parked) > 0 {
		return true, r.replyWaiting()
	}
	return false, nil
}

// usable checks a pooled entry before it is served: its agent must still
// exist with the same schema, and it must not have expired. Unusable
// entries are removed; the note tells the model.
func (r *run) usable(e *pool.Entry, now time.Time) (note string, ok bool) {
	o := r.o
	a := r.agentOf(e.AgentName)
	if a == nil || a.version != e.SchemaVersion || o.staleSub(e) {
		r.log().WarnContext(r.ctx, "agent: discarding a pooled agent made from another schema version",
			"agent", e.AgentName, "id", e.ID, "version", e.SchemaVersion)
		r.discard(r.ctx, e)
		return fmt.Sprintf("The pending %s request %s was discarded because the assistant was updated; it did not run. Ask the user to start it again if it is still wanted.", e.AgentName, e.ID), false
	}
	if e.Expired(now) {
		r.discard(r.ctx, e)
		r.settled(e, "", true)
		what := e.AgentName
		if e.Approval != nil {
			what = textsafe.Line(e.Approval.ActionSummary)
		}
		return fmt.Sprintf("The pending request %s (%s) expired at %s and was not carried out. Tell the user.", e.ID, what, e.ExpiresAt.UTC().Format(time.RFC3339)), false
	}
	return "", true
}

// settled notes an approval request the run settled (Result.Decided).
func (r *run) settled(e *pool.Entry, a approval.Action, expired bool) {
	if e.Approval == nil && e.Status != pool.StatusWaitingForApproval {
		return // an Agent-Tool waiting for input, not an approval
	}
	// A run with the user's text is a HandleMessage or Stream, whose
	// Response is the reply to the user; ResolveApproval's has no text.
	inReply := r.msg.Source == SourceUser && r.msg.Text != ""
	r.res.Decided = append(r.res.Decided, Decided{ID: e.ID, TenantID: e.TenantID, TaskID: e.TaskID, Action: a, Expired: expired, InReply: inReply})
	if r.o.tel != nil {
		r.linkDecided(e, string(a), expired)
	}
	if r.o.obs != nil {
		r.step(Step{Kind: StepApprovalDecided, Decided: r.res.Decided[len(r.res.Decided)-1]})
	}
}

func (r *run) discard(ctx context.Context, e *pool.Entry) {
	if err := r.o.pool.Delete(ctx, e.TenantID, e.ID); err != nil && !errors.Is(err, pool.ErrNotFound) {
		r.log().WarnContext(ctx, "agent: removing a pooled agent failed", "id", e.ID, "err", err)
	}
}

// noteBeforeUser adds a system note for the model just before the user's
// message (window only: notes are not history).
func (r *run) noteBeforeUser(note string) {
	if r.o.obs != nil {
		r.step(Step{Kind: StepNote, Text: note})
	}
	w := r.window
	at := len(w)
	if at > 0 && w[at-1].Role == llm.RoleUser {
		at--
	}
	out := make([]llm.Message, 0, len(w)+1+4) // never in the history's buffer
	out = append(out, w[:at]...)
	out = append(out, r.note(note))
	r.setWindow(append(out, w[at:]...))
}

// decideApprovals resolves the user's reply against pending approvals and
// applies the decisions in the order the user confirmed them. It returns
// the approvals the reply left undecided.
func (r *run) decideApprovals(entries []*pool.Entry) (rest []*pool.Entry, note string, err error) {
	o := r.o
	stale := false
	reqs := make([]approval.Request, len(entries))
	editable := map[string]json.RawMessage{}
	for i, e := range entries {
		reqs[i] = *e.Approval
		if e.Approval.AllowModification {
			editable[e.ID] = o.agents[e.AgentName].editSchema
		}
	}
	res, err := approval.Resolve(r.ctx, runClient{r}, r.msg.Text, reqs, approval.ResolveOptions{Editable: editable, History: r.recent(6)})
	if err != nil {
		return nil, "", err
	}
	decided := map[string]bool{}
	for _, d := range res.Decided {
		var e *pool.Entry
		for _, x := range entries {
			if x.ID == d.ID {
				e = x
			}
		}
		if e == nil || decided[d.ID] {
			continue
		}
		dec := d.Decision
		dec.Fingerprint = shownFingerprint(e) // the action the conversation showed the user
		err := r.applyDecision(e, dec)
		if errors.Is(err, approval.ErrStale) {
			// It changed since the user saw it: it stays pending, and the
			// reply shows it as it is now (replyWaiting), which makes that
			// version the one the user's next answer decides.
			if fresh, err := o.pool.Get(r.ctx, e.TenantID, e.ID); err == nil && fresh.Status == pool.StatusWaitingForApproval && fresh.Approval != nil {
				r.addParked(o.waitingOf(fresh))
				decided[d.ID] = true // parked: not among the rest
			} else {
				stale = true // among the rest: the model is told
			}
			continue
		}
		if err != nil {
			return nil, "", err
		}
		decided[d.ID] = true
	}
	for _, e := range entries {
		if !decided[e.ID] {
			rest = append(rest, e)
		}
	}
	if len(rest) > 0 {
		left := make([]approval.Request, len(rest))
		for i, e := range rest {
			left[i] = *e.Approval
		}
		note = "These actions still wait for the user's confirmation; the user's message did not decide them:\n" + approval.Present(left)
		if stale {
			note = "Some actions changed after the user was shown them, so the user's decision was not applied to them; show them again. " + note
		}
	}
	return rest, note, nil
}

// markShown records that the reply the user gets shows the approvals in
// waits as they are now: each one whose action changed since it was last
// shown is stored with its current request, so that the user's next
// answer decides that version. One changed again meanwhile is left as it
// is stored (the next answer finds it stale and it is shown again), and
// so is one that cannot be written now.
func (r *run) markShown(waits []Waiting) {
	o := r.o
	for _, w := range waits {
		if !w.changed || w.Approval == nil {
			continue
		}
		for range 3 {
			fresh, err := o.pool.Get(r.ctx, r.msg.TenantID, w.AgentID)
			if err != nil || fresh.Approval == nil || entryFingerprint(fresh) != w.Approval.Fingerprint {
				break // gone, or not the version the reply shows
			}
			fresh.Approval = o.shownRequest(fresh)
			fresh.UpdatedAt = o.now()
			err = o.pool.Update(r.ctx, fresh)
			if err != nil && !errors.Is(err, pool.ErrConflict) {
				r.log().WarnContext(r.ctx, "agent: recording a changed approval as shown failed; the user's next answer will find it stale", "id", w.AgentID, "err", err)
			}
			if !errors.Is(err, pool.ErrConflict) {
				break
			}
		}
	}
}

// recent returns up to n of the latest user and assistant texts before
// the user's message, as context for an aside call.
func (r *run) recent(n int) []llm.Message {
	w := r.window
	if len(w) > 0 && w[len(w)-1].Role == llm.RoleUser {
		w = w[:len(w)-1]
	}
	out := plainMessages(w)
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return out
}

// plainMessages keeps the user and assistant texts of msgs: context for an
// aside call, without tool calls whose pairing it would have to keep. A
// triggered run's message is left out: it would read as the user's words
// there (an aside call decides approvals and reads fields from what the
// user said), and its text holds event data anyone may have written.
func plainMessages(msgs []llm.Message) []llm.Message {
	var out []llm.Message
	for i := range msgs {
		m := &msgs[i]
		if isTriggered(m) {
			continue
		}
		if (m.Role == llm.RoleUser || m.Role == llm.RoleAssistant) && len(m.ToolCalls) == 0 && m.Content != "" {
			out = append(out, llm.Message{Role: m.Role, Content: m.Content})
		}
	}
	return out
}
