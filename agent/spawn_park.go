package agent

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/internal/textsafe"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/pool"
	"github.com/valetkit/valet/tool"
)

// An Agent-Tool that needs the user's approval, called inside a sub-agent,
// parks the sub-agent: its loop stops after the turn, its state goes into
// the Agent-Tool's pool entry (pool.Entry.SubAgent, one subLevel per
// nesting level, outermost first), and the coordinator's spawn_agent call
// waits like a parked Agent-Tool. The decision resumes the sub-agents
// innermost first (spawn_resume.go).

// subStateVersion is the version of the subLevel format; an entry of
// another version is refused like one of a stale schema.
const subStateVersion = 1

// subLevel is the loop state of one parked sub-agent.
type subLevel struct {
	V int `json:"v"`
	// CallID is the spawn_agent call that started the sub-agent, in its
	// parent's window (the coordinator's for the outermost level); Args
	// its arguments.
	CallID string          `json:"call_id"`
	Args   json.RawMessage `json:"args,omitempty"`
	Depth  int             `json:"depth"`
	Path   []string        `json:"path"`
	// Skill names the sub-agent's skill ("" for a plain worker); its
	// prompt and tools are rebuilt from the orchestrator's config.
	Skill string `json:"skill,omitempty"`
	Model string `json:"model,omitempty"`
	// Budget is what the sub-agent's budget had left when it parked;
	// Consumed (Wall: its run time), Usage and Turns what it used so far.
	Budget   Budget    `json:"budget,omitzero"`
	Consumed Consumed  `json:"consumed,omitzero"`
	Usage    llm.Usage `json:"usage,omitzero"`
	Turns    int       `json:"turns,omitempty"`
	// Window is the sub-agent's messages after its system prompt: its
	// task, its turns, the results of the other calls of the parking turn.
	Window []llm.Message `json:"window"`
	// Waiting is the call of Window whose result the decision gives: the
	// Agent-Tool's call in the innermost level, the spawn_agent call of
	// the next level in the others.
	Waiting string `json:"waiting"`
}

// subPark is a sub-agent stopped for an approval, on its way up to the
// coordinator, which parks it in the pool.
type subPark struct {
	agent  *agentTool
	col    collected
	req    *approval.Request
	callID string     // the Agent-Tool's call, in the innermost sub-agent
	levels []subLevel // outermost first; each level prepends its own
	waits  string     // set by the level that takes it: its call waiting for it
}

// subPlan is what a sub-agent's turn decided about its Agent-Tool calls
// before they ran: the collected fields and approval request of each, and
// which one may wait for approval (the first by call order).
type subPlan struct {
	calls map[string]*subAgentCall
}

type subAgentCall struct {
	col   collected
	req   *approval.Request
	err   error
	parks bool // the first call of the turn that needs approval
}

// planSubAgentTools collects the arguments of the turn's Agent-Tool calls
// (calls, those the budget lets run) and asks their approval functions,
// on the loop's goroutine: only the first call needing approval may park
// the sub-agent, whatever order the calls finish in.
func (r *run) planSubAgentTools(calls []llm.ToolCall) {
	r.sub.plan = nil
	parking := false
	for _, c := range calls {
		a := r.o.callable[c.Name]
		if a == nil || r.sub.reg != nil && !r.sub.offers(c.Name) {
			continue // not an Agent-Tool, or not in its scope: refused (scopeRefuses)
		}
		if r.sub.plan == nil {
			r.sub.plan = &subPlan{calls: make(map[string]*subAgentCall, len(calls))}
		}
		p := &subAgentCall{col: a.collect(nil, c.Arguments)}
		r.sub.plan.calls[c.ID] = p
		if p.col.err != nil || !p.col.complete() || a.approval == nil {
			continue
		}
		p.req, p.err = a.approval(p.col.fields)
		if p.err == nil && p.req != nil && !parking {
			p.parks, parking = true, true
		}
	}
}

// subAgentTool runs an Agent-Tool the sub-agent called: invalid or
// missing fields are an error result (a sub-agent cannot ask the user; it
// must supply them), one needing approval parks the sub-agent (only the
// first of a turn: the others are told to call again after the decision),
// any other runs now.
func (r *run) subAgentTool(a *agentTool, c llm.ToolCall) callOutcome {
	var p *subAgentCall
	if r.sub.plan != nil {
		p = r.sub.plan.calls[c.ID]
	}
	if p == nil { // not planned: cannot happen; collect it now, never park
		p = &subAgentCall{col: a.collect(nil, c.Arguments)}
		if p.col.err == nil && p.col.complete() && a.approval != nil {
			p.req, p.err = a.approval(p.col.fields)
		}
	}
	col := p.col
	switch {
	case col.err != nil:
		return r.agentFailed(a, col.err)
	case !col.complete():
		var b strings.Builder
		fmt.Fprintf(&b, "%s was not run: a sub-agent cannot ask the user for input, so every required field must be given.", a.name)
		if len(col.missing) > 0 {
			b.WriteString(" Missing: " + a.fieldList(col.missing) + ".")
		}
		if len(col.problems) > 0 {
			b.WriteString(" Rejected values: " + problemList(col.problems) + ".")
		}
		b.WriteString(" Call it again with them.")
		return callOutcome{result: tool.Result{Content: b.String(), IsError: true}, status: resultError}
	case p.err != nil:
		return r.agentFailed(a, p.err)
	case p.req != nil && !p.parks:
		return callOutcome{result: tool.Result{Content: onlyOneApproval(a.name), IsError: true}, status: resultError}
	case p.req != nil:
		req := *p.req
		return callOutcome{
			result: tool.Result{Content: fmt.Sprintf("%s waits for the user's confirmation.", a.name)},
			status: string(StatusWaitingForApproval),
			wait:   &Waiting{sub: &subPark{agent: a, col: col, req: &req, callID: c.ID}},
		}
	}
	content, isErr := r.runAgent(a, c.ID, col.fields)
	out := callOutcome{result: tool.Result{Content: content, IsError: isErr}, status: resultCompleted}
	if isErr {
		out.status = resultError
	}
	return out
}

func onlyOneApproval(name string) string {
	return fmt.Sprintf("%s was not run: another action of this turn waits for the user's confirmation, and only one may wait at a time. "+
		"Call %s again once that one is decided.", name, name)
}

// notePark takes the park of call i of the turn (outs[i].park()) as the
// sub-agent's, when it is the first; a later one is not kept: its result
// says to call it again after the decision.
func (r *run) notePark(base int, calls []llm.ToolCall, outs []callOutcome, i int) {
	out := &outs[i]
	p := out.park()
	out.wait = nil
	if r.sub != nil && r.sub.park == nil {
		p.waits = calls[i].ID
		r.sub.park = p
		return
	}
	// A sub-agent this sub-agent spawned parked too, after another call
	// of the turn did (or, at the top, cannot happen: the coordinator
	// parks each in the pool).
	out.result = tool.Result{Content: onlyOneApproval(calls[i].Name), IsError: true}
	out.status = resultError
	rec := &r.res.ToolCalls[base+i]
	rec.Success, rec.ResultStatus, rec.Error = false, resultError, out.result.Content
}

// stopParked ends a sub-agent's loop that parked: its state becomes the
// park's level (outermost levels are prepended by its parents).
func (r *run) stopParked() error {
	p := r.sub.park
	lv := subLevel{
		V: subStateVersion, CallID: r.sub.callID, Args: r.sub.args, Depth: r.sub.depth, Path: r.sub.path,
		Skill: r.sub.skill, Model: r.msg.Model, Waiting: p.waits,
	}
	used := r.res.Consumed
	used.Wall = time.Since(r.start)
	lv.Budget = budgetLeft(r.msg.Budget, used)
	lv.Consumed, lv.Usage, lv.Turns = used, r.res.Usage, r.res.Turns
	if pr := r.sub.prior; pr != nil {
		lv.Consumed = addConsumed(pr.Consumed, lv.Consumed)
		lv.Consumed.Wall = pr.Consumed.Wall + used.Wall
		lv.Usage, lv.Turns = pr.Usage.Add(lv.Usage), pr.Turns+lv.Turns
	}
	if len(r.window) > 1 {
		lv.Window = append([]llm.Message(nil), r.window[1:]...)
	}
	p.levels = append([]subLevel{lv}, p.levels...)
	r.res.Status = StatusWaitingForApproval
	return nil
}

// budgetLeft is what b leaves after used; a cap that is spent stays a cap
// (the smallest one), since zero would mean none.
func budgetLeft(b Budget, used Consumed) Budget {
	if b.MaxTokens > 0 {
		b.MaxTokens = max(b.MaxTokens-used.Tokens, 1)
	}
	if b.MaxCostUSD > 0 {
		b.MaxCostUSD = max(b.MaxCostUSD-used.CostUSD, 1e-9)
	}
	if b.MaxToolCalls > 0 {
		b.MaxToolCalls = max(b.MaxToolCalls-used.ToolCalls, 1)
	}
	if b.MaxWall > 0 {
		b.MaxWall = max(b.MaxWall-used.Wall, time.Millisecond)
	}
	return b
}

func addConsumed(a, b Consumed) Consumed {
	a.Tokens += b.Tokens
	a.CostUSD += b.CostUSD
	a.ToolCalls += b.ToolCalls
	a.Wall += b.Wall
	return a
}

// parkSub parks, at the coordinator, a sub-agent that waits for approval:
// the Agent-Tool's pool entry made as park() makes one, with the
// sub-agents' state. It returns the outcome of the coordinator's
// spawn_agent call.
func (r *run) parkSub(p *subPark, now time.Time) callOutcome {
	o, a := r.o, p.agent
	state, err := json.Marshal(p.levels)
	if err != nil { // cannot happen: plain data
		return callOutcome{result: tool.Result{Content: "the sub-agent could not wait for the user: " + maskText(err.Error()), IsError: true, Err: err}, status: resultError}
	}
	e := &pool.Entry{
		ID:             newID(),
		AgentName:      a.poolName(),
		TenantID:       r.msg.TenantID,
		ConversationID: r.msg.ConversationID,
		Status:         pool.StatusWaitingForApproval,
		SchemaVersion:  a.version,
		Fields:         p.col.fields,
		SubAgent:       state,
		ToolCallID:     p.callID,
		Source:         r.msg.Source,
		TaskID:         r.msg.TaskID,
		Task:           p.col.task,
		TraceParent:    r.traceParent(),
		CreatedAt:      now,
		UpdatedAt:      now,
	}
	r.fillApproval(e, p.req, now)
	if err := o.pool.Create(r.ctx, e); err != nil {
		r.log().WarnContext(r.ctx, "agent: could not park a sub-agent waiting for approval", "agent", a.name, "err", err)
		return callOutcome{
			result: tool.Result{Content: maskText(fmt.Sprintf("the sub-agent stopped: its action %q could not wait for the user's confirmation: %s", a.name, err)), IsError: true, Err: err},
			status: resultError,
		}
	}
	w := o.waitingOf(e)
	return callOutcome{result: tool.Result{Content: subWaitingText(e)}, status: string(w.Status), wait: &w}
}

// subWaitingText is the result of the coordinator's spawn_agent call
// whose sub-agent waits for the user's approval.
func subWaitingText(e *pool.Entry) string {
	return fmt.Sprintf("The sub-agent is paused: its action %s waits for the user's confirmation (request %s): %s. "+
		"The user will be asked to approve, edit or cancel it; once the user decides, the sub-agent goes on and its answer "+
		"comes back to you. Do not call spawn_agent again for this task.",
		e.AgentName, e.ID, strings.TrimRight(textsafe.Line(e.Approval.ActionSummary), "."))
}

// subLevels decodes e's sub-agent state, checking that this orchestrator
// can resume it: the format's version, depths within SubAgentOptions, and
// each level waiting on a call its window holds.
func (o *Orchestrator) subLevels(e *pool.Entry) ([]subLevel, error) {
	var lv []subLevel
	if err := json.Unmarshal(e.SubAgent, &lv); err != nil {
		return nil, fmt.Errorf("sub-agent state: %w", err)
	}
	switch {
	case len(lv) == 0:
		return nil, fmt.Errorf("sub-agent state: no level")
	case o.spawn == nil:
		return nil, fmt.Errorf("sub-agent state: sub-agents are not enabled")
	}
	skills := o.cfg.Skills
	for i, l := range lv {
		switch {
		case l.V != subStateVersion:
			return nil, fmt.Errorf("sub-agent state: version %d (want %d)", l.V, subStateVersion)
		case l.Depth != i+1 || l.Depth > o.spawn.opts.MaxDepth || len(l.Path) != l.Depth:
			return nil, fmt.Errorf("sub-agent state: level %d at depth %d", i, l.Depth)
		case waitingAt(l) < 0:
			return nil, fmt.Errorf("sub-agent state: level %d does not hold its waiting call", i)
		case i == len(lv)-1 && l.Waiting != e.ToolCallID:
			return nil, fmt.Errorf("sub-agent state: the innermost level waits on another call")
		}
		if l.Skill != "" {
			if !hasSkills(skills) {
				return nil, fmt.Errorf("sub-agent state: level %d runs skill %q, and no skills are configured", i, l.Skill)
			}
			if _, ok := skills.Get(l.Skill); !ok {
				return nil, fmt.Errorf("sub-agent state: level %d runs skill %q, which is not configured", i, l.Skill)
			}
		}
	}
	return lv, nil
}

// waitingAt is the index in l.Window of the tool message of l.Waiting, or -1.
func waitingAt(l subLevel) int {
	for i := len(l.Window) - 1; i >= 0; i-- {
		if m := l.Window[i]; m.Role == llm.RoleTool && m.ToolCallID == l.Waiting {
			return i
		}
	}
	return -1
}

// subPath is the path of the sub-agent that called e's Agent-Tool; nil
// when the coordinator called it.
func subPath(e *pool.Entry) []string {
	if len(e.SubAgent) == 0 {
		return nil
	}
	var lv []struct {
		Path []string `json:"path"`
	}
	if json.Unmarshal(e.SubAgent, &lv) != nil || len(lv) == 0 {
		return nil
	}
	return lv[len(lv)-1].Path
}

// subArgs are the arguments of the coordinator's spawn_agent call whose
// sub-agent e holds; {} when they cannot be read.
func subArgs(e *pool.Entry) json.RawMessage {
	var lv []struct {
		Args json.RawMessage `json:"args"`
	}
	if json.Unmarshal(e.SubAgent, &lv) != nil || len(lv) == 0 || len(lv[0].Args) == 0 {
		return json.RawMessage(`{}`)
	}
	return lv[0].Args
}

// subCancelledText is the result of the coordinator's spawn_agent call
// whose sub-agent was removed with its Agent-Tool (CancelAgent).
func subCancelledText(e *pool.Entry) string {
	return fmt.Sprintf("User cancelled the sub-agent's action %s; the sub-agent was stopped and did not finish its task.", e.AgentName)
}
