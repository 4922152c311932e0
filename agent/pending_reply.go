package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"

	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/internal/textsafe"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/pool"
)

// supplyInput reads missing fields for a waiting agent from the user's
// reply. handled is false when the reply is about something else.
func (r *run) supplyInput(e *pool.Entry) (handled bool, note string, err error) {
	o := r.o
	a := o.agents[e.AgentName]
	args, unrelated, err := r.extract(a, e)
	if err != nil {
		return false, "", err
	}
	if unrelated {
		return false, fmt.Sprintf("%s (request %s) still waits for the user's input: %s. The user's message is about something else: answer it, and remind the user briefly.",
			a.name, e.ID, a.fieldList(e.Missing)), nil
	}
	col := a.collect(e.Fields, args)
	if col.err != nil {
		return true, "", r.failPooled(a, e, col.err)
	}
	now := o.now()
	e.Fields, e.Missing, e.Problems, e.UpdatedAt = col.fields, col.missing, col.problems, now
	if col.task != "" {
		e.Task = col.task
	}
	if !col.complete() {
		if err := o.pool.Update(r.ctx, e); err != nil {
			return true, "", fmt.Errorf("agent: updating %s in the pool: %w", e.ID, err)
		}
		r.addParked(r.o.waitingOf(e))
		return true, "", nil
	}
	if a.approval != nil {
		req, err := a.approval(col.fields)
		if err != nil {
			return true, "", r.failPooled(a, e, err)
		}
		if req != nil {
			r.fillApproval(e, req, now)
			if err := o.pool.Update(r.ctx, e); err != nil {
				return true, "", fmt.Errorf("agent: updating %s in the pool: %w", e.ID, err)
			}
			r.addParked(r.o.waitingOf(e))
			return true, "", nil
		}
	}
	taken, err := o.pool.Take(r.ctx, e.TenantID, e.ID)
	if errors.Is(err, pool.ErrNotFound) {
		return true, "", nil // another replica resumed it
	}
	if err != nil {
		return true, "", fmt.Errorf("agent: taking %s from the pool: %w", e.ID, err)
	}
	r.resume(a, taken, col.fields)
	return true, "", nil
}

// extract asks the model, in a call constrained to the agent's schema,
// which fields the user's reply supplies.
func (r *run) extract(a *agentTool, e *pool.Entry) (json.RawMessage, bool, error) {
	var sys strings.Builder
	fmt.Fprintf(&sys, "A pending action waits for information from the user. Read the user's reply and call %s with the values it gives.\n", ProvideFieldsToolName)
	fmt.Fprintf(&sys, "Action: %s — %s\n", a.name, firstLine(a.description))
	fmt.Fprintf(&sys, "Collected so far: %s\n", textsafe.EscapeJSON(e.Fields)) // NEL left raw by json.Marshal
	if len(e.Missing) > 0 {
		fmt.Fprintf(&sys, "Still needed: %s\n", a.fieldList(e.Missing))
	}
	if len(e.Problems) > 0 {
		fmt.Fprintf(&sys, "Rejected earlier: %s\n", problemList(e.Problems))
	}
	sys.WriteString("Use only what the user said; leave out what they did not give. If the reply is not an answer to this but about something else, call it with only unrelated set to true.")
	msgs := []llm.Message{llm.SystemMessage(sys.String())}
	msgs = append(msgs, r.recent(4)...)
	msgs = append(msgs, llm.UserMessage(r.msg.Text))
	resp, err := r.callAside(llm.Request{Messages: msgs, Tools: []llm.ToolSpec{a.extractSpec}, ToolChoice: ProvideFieldsToolName, Purpose: llm.PurposeProvideFields})
	if err != nil {
		return nil, false, err
	}
	for _, c := range resp.Message.ToolCalls {
		if c.Name != ProvideFieldsToolName {
			continue
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(c.Arguments, &m); err != nil {
			return nil, true, nil
		}
		var unrelated bool
		_ = json.Unmarshal(m["unrelated"], &unrelated)
		delete(m, "unrelated")
		if unrelated && len(m) == 0 {
			return nil, true, nil
		}
		b, _ := json.Marshal(m)
		return b, false, nil
	}
	return nil, true, nil // no extraction: treat the reply as something else
}

// replyWaiting ends a run whose agents wait for the user: the model
// phrases the question in the persona (one call without tools), or the
// agents' own prompt is the reply.
//
// An approval whose action changed since the user last saw it (a decision
// on it was found stale) is shown as it is now in the reply whatever the
// model writes: its listing follows the model's text. Only then is that
// version recorded as shown (markShown), the one a bare "yes" approves —
// by a user's run only, never by a triggered one's.
func (r *run) replyWaiting() error {
	waits := append(slices.Clone(r.parked), r.pending...)
	prompt := directPrompt(r.o, waits)
	var changed []approval.Request
	for _, w := range waits {
		if w.changed && w.Approval != nil {
			changed = append(changed, *w.Approval)
		}
	}
	text := prompt
	if !r.o.loop.DirectAgentPrompts {
		note := "These actions wait for the user:\n" + prompt +
			"\n\nWrite your reply to the user now, in your own voice, without calling tools. Include any results the user asked for. " +
			"Ask for exactly the missing information. For actions that need confirmation, show what will be done with its details and ask the user to approve, change or cancel."
		if len(changed) > 0 {
			note = "Some of these actions changed after the user was shown them, so the user's decision was not applied to them; they are shown to the user again as they are now. " + note
		}
		msgs := append(r.window[:len(r.window):len(r.window)], r.note(note))
		resp, err := r.callLLM(llm.Request{Messages: msgs, Purpose: llm.PurposePhrase})
		switch {
		case err != nil && r.ctx.Err() != nil:
			return err
		case err != nil:
			r.log().WarnContext(r.ctx, "agent: phrasing the question for the user failed; using the agents' prompt", "err", err)
		case strings.TrimSpace(resp.Message.Content) != "":
			text = resp.Message.Content
			if len(changed) > 0 {
				text = strings.TrimRight(text, "\n") + "\n\n" + changedIntro + "\n" + strings.TrimRight(approval.Present(changed), "\n")
			}
		}
	}
	if r.msg.Source == SourceUser {
		// Only a user's run replies to the user: a triggered run's text is
		// the task's result, which goes along the task's route (a memory
		// update, a chained task) and may never reach the user.
		r.markShown(waits)
	}
	r.finish(llm.AssistantMessage(text))
	return nil
}

// changedIntro heads the listing of changed actions after a phrased reply.
const changedIntro = "Changed since you last saw it, so nothing was done yet; as it stands now:"

// problemList joins the problems of an agent's fields on one line: a
// problem may quote what the model or the user wrote.
func problemList(ps []string) string { return textsafe.Line(strings.Join(ps, "; ")) }

// directPrompt is the agents' own question: the missing fields, and the
// approvals listed for a decision.
func directPrompt(o *Orchestrator, waits []Waiting) string {
	var b strings.Builder
	var reqs []approval.Request
	for _, w := range waits {
		if w.Approval != nil {
			reqs = append(reqs, *w.Approval)
			if len(w.Problems) > 0 {
				fmt.Fprintf(&b, "The change to %q was not applied: %s.\n", w.Approval.ActionSummary, problemList(w.Problems))
			}
			continue
		}
		a := o.agents[w.AgentName]
		what := w.AgentName
		if a != nil {
			what = strings.TrimRight(firstLine(a.description), ".")
		}
		fmt.Fprintf(&b, "To continue (%s), I need: ", what)
		if a != nil && len(w.Missing) > 0 {
			b.WriteString(a.fieldList(w.Missing))
		} else {
			b.WriteString(textsafe.Line(strings.Join(w.Missing, ", ")))
		}
		if len(w.Problems) > 0 {
			b.WriteString(" (" + problemList(w.Problems) + ")")
		}
		b.WriteString(".\n")
	}
	if len(reqs) > 0 {
		b.WriteString(approval.Present(reqs))
	}
	return strings.TrimSpace(b.String())
}

// settle sets the final status: completed, or waiting when agents of the
// conversation wait, with the pending approvals and a state-change event.
func (r *run) settle() {
	res := &r.res
	if res.Status == StatusRefused {
		return
	}
	waits := append(slices.Clone(r.parked), r.pending...)
	res.Status = StatusCompleted
	if len(waits) == 0 {
		return
	}
	// The pool's order (pool.Store.List): oldest first, ties by ID.
	slices.SortStableFunc(waits, func(a, b Waiting) int {
		if c := a.created.Compare(b.created); c != 0 {
			return c
		}
		return strings.Compare(a.AgentID, b.AgentID)
	})
	res.Waiting = waits
	res.Status = StatusWaitingForInput
	for _, w := range waits {
		if w.Approval != nil {
			res.PendingApprovals = append(res.PendingApprovals, *w.Approval)
			res.Status = StatusWaitingForApproval
		}
	}
	if r.emit != nil {
		r.emit(Event{Type: EventStateChange, State: res.Status, Waiting: res.Waiting, Approvals: res.PendingApprovals})
	}
}

// runClient lets approval.Resolve call the model through the run: with
// its retries and timeouts, not streamed, usage counted.
type runClient struct{ r *run }

func (c runClient) Complete(_ context.Context, req llm.Request) (*llm.Response, error) {
	req.Purpose = llm.PurposeResolveApprovals // approval.Resolve's one call
	return c.r.callAside(req)
}

func (c runClient) Stream(ctx context.Context, req llm.Request) iter.Seq2[llm.Chunk, error] {
	return func(yield func(llm.Chunk, error) bool) {
		resp, err := c.Complete(ctx, req)
		if err != nil {
			yield(llm.Chunk{}, err)
			return
		}
		yield(llm.Chunk{Text: resp.Message.Content, Response: resp}, nil)
	}
}
