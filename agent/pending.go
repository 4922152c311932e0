package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"runtime/debug"
	"slices"
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
		AgentName:      a.name,
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
		CreatedAt:      now,
		UpdatedAt:      now,
		ExpiresAt:      now.Add(o.loop.InputTimeout),
	}
	if req != nil {
		r.fillApproval(e, req, now)
	}
	if err := o.pool.Create(r.ctx, e); err != nil {
		o.log.WarnContext(r.ctx, "agent: could not park an Agent-Tool", "agent", a.name, "tenant", e.TenantID, "err", err)
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
	w := Waiting{AgentID: e.ID, AgentName: e.AgentName, Status: StatusWaitingForInput, Missing: e.Missing, Problems: e.Problems, created: e.CreatedAt}
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
		Logger:         o.log,
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

func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "agt_" + hex.EncodeToString(b[:])
}

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
	a := o.agents[e.AgentName]
	if a == nil || a.version != e.SchemaVersion {
		o.log.WarnContext(r.ctx, "agent: discarding a pooled agent made from another schema version",
			"agent", e.AgentName, "id", e.ID, "tenant", e.TenantID, "version", e.SchemaVersion)
		o.discard(r.ctx, e)
		return fmt.Sprintf("The pending %s request %s was discarded because the assistant was updated; it did not run. Ask the user to start it again if it is still wanted.", e.AgentName, e.ID), false
	}
	if e.Expired(now) {
		o.discard(r.ctx, e)
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
}

func (o *Orchestrator) discard(ctx context.Context, e *pool.Entry) {
	if err := o.pool.Delete(ctx, e.TenantID, e.ID); err != nil && !errors.Is(err, pool.ErrNotFound) {
		o.log.WarnContext(ctx, "agent: removing a pooled agent failed", "id", e.ID, "tenant", e.TenantID, "err", err)
	}
}

// noteBeforeUser adds a system note for the model just before the user's
// message (window only: notes are not history).
func (r *run) noteBeforeUser(note string) {
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
				r.parked = append(r.parked, o.waitingOf(fresh))
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
				o.log.WarnContext(r.ctx, "agent: recording a changed approval as shown failed; the user's next answer will find it stale", "id", w.AgentID, "tenant", r.msg.TenantID, "err", err)
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

// applyDecision takes a pending approval out of the pool — exactly one
// taker wins — and carries out the decision. A lost race is not an
// error: another reply decided it.
func (r *run) applyDecision(e *pool.Entry, d approval.Decision) error {
	o := r.o
	a := o.agents[e.AgentName]
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
		r.resume(a, taken, col.fields)
	default: // Approve
		r.settled(taken, d.Action, false)
		r.resume(a, taken, taken.Fields)
	}
	return nil
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
		a := o.agents[e.AgentName]
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
	r.parked = append(r.parked, r.o.waitingOf(e))
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
		r.o.log.ErrorContext(ctx, "agent: a taken approval could not be returned to the pool; it is lost", "id", e.ID, "tenant", e.TenantID, "agent", e.AgentName, "err", err)
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
	r.emitResumedStart(a, e, e.Fields)
	r.addResumed(a, e, e.Fields, reason, true, 0)
}

// resume runs an agent taken from the pool and adds its outcome.
func (r *run) resume(a *agentTool, e *pool.Entry, fields json.RawMessage) {
	r.emitResumedStart(a, e, fields)
	t0 := time.Now()
	content, isErr := r.runAgent(a, resumeCallID(e), fields)
	r.addResumed(a, e, fields, content, isErr, time.Since(t0))
}

func (r *run) emitResumedStart(a *agentTool, e *pool.Entry, fields json.RawMessage) {
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
		r.parked = append(r.parked, r.o.waitingOf(e))
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
			r.parked = append(r.parked, r.o.waitingOf(e))
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
			r.o.log.WarnContext(r.ctx, "agent: phrasing the question for the user failed; using the agents' prompt", "err", err)
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
