package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/pool"
	"github.com/valetkit/valet/tool"
)

// resumeSub carries out the decision on an Agent-Tool a parked sub-agent
// called (e, taken from the pool): the Agent-Tool runs with fields inside
// the innermost sub-agent when runIt is set (else reason, the user's
// cancellation or the agent's failure, is its error result); that result
// answers the sub-agent's waiting call and the sub-agents go on, innermost
// first. The outermost one's answer enters the coordinator's conversation
// as the result of a spawn_agent call, as a resumed Agent-Tool's does; a
// sub-agent that parks again makes a new entry, and the run waits again.
func (r *run) resumeSub(a *agentTool, e *pool.Entry, fields json.RawMessage, runIt bool, reason string) {
	o := r.o
	r.loadSources() // loaded by staleSub before the take; a sub-agent's tools may come from a source
	levels, err := o.subLevels(e)
	if err != nil { // checked before it was taken (staleEntry)
		r.addSubResumed(e, nil, callOutcome{result: tool.Result{Content: "the sub-agent could not be resumed: " + err.Error(), IsError: true}, status: resultError})
		return
	}
	decided := &subDecision{name: a.name, ran: runIt}
	decide := func(ch *run) (string, bool) {
		ch.emitResumedStart(a, e, fields)
		if !runIt {
			decided.result = ch.subDecided(a, e, fields, reason, true, 0)
			return decided.result, true
		}
		var tt toolTel
		if o.tel != nil {
			tt = ch.startResumed(a.name, e)
		}
		t0 := time.Now()
		content, isErr := ch.runAgent(a, resumeCallID(e), fields)
		if o.tel != nil {
			ch.endResumed(tt, a.name, content, isErr)
		}
		decided.result, decided.isErr = ch.subDecided(a, e, fields, content, isErr, time.Since(t0)), isErr
		return decided.result, isErr
	}
	call := llm.ToolCall{ID: resumeCallID(e), Name: SpawnAgentTool, Arguments: levels[0].Args}
	if o.obs != nil {
		r.step(Step{Kind: StepToolCall, ToolCall: call})
	}
	if r.emit != nil {
		r.emit(Event{Type: EventToolCallStart, ToolCall: &ToolCallRecord{ID: call.ID, Name: call.Name, ArgsSummary: summarizeArgs(call.Arguments), Resumed: true}})
	}
	r.spawned = new(spawnTally)
	t0 := time.Now()
	out := r.continueSub(r.toolCtx, levels, e, decide, decided)
	out.dur = time.Since(t0)
	r.addSpawned()
	if p := out.park(); p != nil {
		out = r.parkSub(p, o.now())
		if out.wait != nil {
			r.addParked(*out.wait)
		}
	}
	r.addSubResumed(e, &levels[0], out)
}

// subDecided records the decided Agent-Tool's outcome in the innermost
// sub-agent (its steps and events carry the sub-agent's path) and returns
// the result its window gets.
func (r *run) subDecided(a *agentTool, e *pool.Entry, fields json.RawMessage, content string, isErr bool, dur time.Duration) string {
	id := resumeCallID(e)
	rec := ToolCallRecord{ID: id, Name: a.name, ArgsSummary: summarizeArgs(fields), Duration: dur, Success: !isErr, ResultStatus: resultCompleted, ResultChars: len(content), Resumed: true}
	if isErr {
		rec.ResultStatus, rec.Error = resultError, content
	}
	content, rec.Truncated = r.o.ctxm.TruncateToolResult(content)
	r.res.ToolCalls = append(r.res.ToolCalls, rec)
	r.res.Consumed.ToolCalls++ // the user decided it: it runs whatever the budget says, and counts
	if r.o.obs != nil {
		r.step(Step{Kind: StepToolResult, ToolCall: llm.ToolCall{ID: id, Name: a.name, Arguments: fields}, Record: rec, Text: content, Duration: dur})
	}
	r.logToolResult(&rec)
	if r.emit != nil {
		cp := rec
		r.emit(Event{Type: EventToolResult, ToolCall: &cp})
	}
	return content
}

// addSubResumed adds the outcome of a resumed sub-agent (lv, the
// outermost level; nil when it could not be resumed) to the coordinator's
// conversation: a spawn_agent call with its result, so the model sees its
// answer, or that it waits again.
func (r *run) addSubResumed(e *pool.Entry, lv *subLevel, out callOutcome) {
	args := json.RawMessage(`{}`)
	if lv != nil && len(lv.Args) > 0 {
		args = lv.Args
	}
	id := resumeCallID(e)
	call := llm.ToolCall{ID: id, Name: SpawnAgentTool, Arguments: args}
	content, isErr := out.result.Content, out.result.IsError
	rec := ToolCallRecord{ID: id, Name: SpawnAgentTool, ArgsSummary: summarizeArgs(args), Duration: out.dur, Success: !isErr, ResultChars: len(content), Resumed: true}
	switch {
	case out.status != "":
		rec.ResultStatus = out.status
	case isErr:
		rec.ResultStatus = resultError
	default:
		rec.ResultStatus = resultCompleted
	}
	if isErr {
		rec.Error = content
	}
	content, rec.Truncated = r.o.ctxm.TruncateToolResult(content)
	r.res.ToolCalls = append(r.res.ToolCalls, rec)
	if r.o.obs != nil {
		r.step(Step{Kind: StepToolResult, ToolCall: call, Record: rec, Text: content, Err: out.result.Err, Duration: out.dur})
	}
	r.logToolResult(&rec)
	if r.emit != nil {
		cp := rec
		r.emit(Event{Type: EventToolResult, ToolCall: &cp})
	}
	r.push(
		llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{call}},
		llm.Message{Role: llm.RoleTool, ToolCallID: id, Name: SpawnAgentTool, Content: content, IsError: isErr},
	)
	r.commit()
}

// continueSub resumes the sub-agent of levels[0], a child of r, and those
// it waits for (levels[1:]); decide gives the innermost one's waiting
// result. It returns the outcome of r's spawn_agent call levels[0].CallID:
// the sub-agent's answer, or a park when it waits for approval again.
func (r *run) continueSub(parent context.Context, levels []subLevel, e *pool.Entry, decide func(*run) (string, bool), decided *subDecision) callOutcome {
	o := r.o
	lv := levels[0]
	ctx, cancel := context.WithTimeout(parent, o.spawn.opts.Timeout)
	defer cancel()
	// Its prompt, tools and model are rebuilt from the configuration: its
	// skill's (spawn_skill.go), or the worker's within r's; staleSub
	// checked them before the entry was taken.
	sub, model, refusal := r.childScope(lv.Depth, lv.Skill)
	if refusal != "" {
		return callOutcome{result: tool.Result{Content: "the sub-agent could not be resumed: " + refusal, IsError: true}, status: resultError}
	}
	msg := Message{
		TenantID: r.msg.TenantID, ConversationID: r.msg.ConversationID, Text: subTask(lv),
		Source: r.msg.Source, TaskID: r.msg.TaskID, Model: resumeModel(lv, model), Location: r.msg.Location,
		Budget: lv.Budget,
	}
	sub.path, sub.callID, sub.args, sub.prior, sub.decided = lv.Path, lv.CallID, lv.Args, &lv, decided
	sub.resume = func(ch *run) error { return ch.resumeWindow(lv, levels[1:], e, decide) }
	ch := o.newRun(ctx, msg, nil)
	ch.toolset = r.toolset
	ch.reserver = r.reserver // its model calls are reserved like its parent's
	ch.sub = &sub
	if emit := r.emit; emit != nil {
		path := lv.Path
		ch.emit = func(ev Event) bool {
			if ev.Path == nil {
				ev.Path = path
			}
			return emit(ev)
		}
	}
	var partial string
	res, err := ch.execute(func(ch *run) error { return ch.handleSub(&partial) })
	r.spawned.add(res, ch)
	if p := ch.sub.park; p != nil && err == nil {
		return callOutcome{result: tool.Result{Content: "The sub-agent waits for the user's confirmation."}, status: string(StatusWaitingForApproval), wait: &Waiting{sub: p}}
	}
	return r.subResult(ctx, ch, res, err, partial)
}

// resumeWindow fills a resumed sub-agent's window (its system prompt is
// set): its saved messages, with the result of its waiting call — from
// decide in the innermost level, else from the sub-agent it waits for —
// then runs its loop. When the sub-agent it waits for parks again, so
// does it.
func (r *run) resumeWindow(lv subLevel, inner []subLevel, e *pool.Entry, decide func(*run) (string, bool)) error {
	window := append([]llm.Message(nil), lv.Window...)
	at := waitingAt(lv)
	var content string
	var isErr bool
	if len(inner) == 0 {
		content, isErr = decide(r)
	} else {
		r.spawned = new(spawnTally)
		out := r.continueSub(r.toolCtx, inner, e, decide, r.sub.decided)
		r.addSpawned()
		if p := out.park(); p != nil {
			p.waits = lv.Waiting
			r.sub.park = p
			r.push(window...)
			r.commit()
			return r.stopParked()
		}
		content, isErr = out.result.Content, out.result.IsError
	}
	window[at].Content, window[at].IsError = content, isErr
	r.push(window...)
	r.commit()
	if err := r.ctx.Err(); err != nil {
		return err
	}
	return r.loop()
}

// subResult is the outcome of the spawn_agent call whose sub-agent ch
// ended with res and err: its answer with a line of what it used (with
// what it used before it parked, when resumed), or why it stopped, with
// partial, the last text it wrote. ctx is the sub-agent's timeout.
func (r *run) subResult(ctx context.Context, ch *run, res *Result, err error, partial string) callOutcome {
	o := r.o
	turns, used, dur := res.Turns, res.Consumed, res.Duration
	if pr := ch.sub.prior; pr != nil {
		turns += pr.Turns
		used = addConsumed(pr.Consumed, used)
		dur += pr.Consumed.Wall
	}
	var out callOutcome
	stats := fmt.Sprintf("[sub-agent: %d model turns, %d tokens, %d tool calls, %s]",
		turns, used.Tokens, used.ToolCalls, dur.Round(time.Millisecond))
	switch {
	case err == nil && res.BudgetExceeded:
		out.result.Content = res.Response + "\n\n[stopped: the sub-agent's budget share ran out; this answer may be partial]\n" + stats
		out.status = resultBudgetSpent
	case err == nil:
		out.result.Content = res.Response + "\n\n" + stats
	case errors.Is(err, ErrBudgetExceeded):
		out.result.Content = partialText(partial) + "[stopped: the sub-agent's budget share ran out before it answered]\n" + stats
		out.result.IsError, out.status = true, resultBudgetSpent
	case ctx.Err() == context.DeadlineExceeded && r.ctx.Err() == nil && r.toolCtx.Err() == nil:
		out.result.Content = partialText(partial) + fmt.Sprintf("[stopped: the sub-agent timed out after %s]\n", o.spawn.opts.Timeout) + stats
		out.result.IsError = true
		out.result.Err = err
	default:
		out.result.Content = partialText(partial) + "sub-agent failed: " + maskText(err.Error()) + "\n" + stats
		out.result.IsError = true
		out.result.Err = err
	}
	if err != nil {
		// It stopped without answering: what the user decided still
		// happened, and the coordinator must know, or it may do it again.
		out.result.Content = ch.sub.decided.text() + out.result.Content
	}
	r.keepResult(ctx, ch.sub, res, used, partial, err, &out) // stored before anyone reads it (delegation.go)
	return out
}

// subDecision is the user's decision on the action a parked sub-agent
// waited for, once carried out (resumeSub): a resumed sub-agent that stops
// without answering reports it in its spawn_agent result.
type subDecision struct {
	name   string // the Agent-Tool
	ran    bool   // approved (or edited) and run; else cancelled or failed before running
	result string // the result the sub-agent was given (truncated); "" until decided
	isErr  bool
}

// text introduces d's outcome in a stopped sub-agent's result; "" for
// none (not resumed, or stopped before the decision was carried out).
func (d *subDecision) text() string {
	if d == nil || d.result == "" {
		return ""
	}
	switch {
	case !d.ran:
		return fmt.Sprintf("The action %s the sub-agent waited for did not run: %s\n\n", d.name, d.result)
	case d.isErr:
		return fmt.Sprintf("The approved action %s ran and failed: %s\n\n", d.name, d.result)
	}
	return fmt.Sprintf("The approved action %s ran: %s\n\n", d.name, d.result)
}

// staleSub reports whether e is a sub-agent's entry this run cannot
// resume (another state format, sub-agents disabled or shallower): it is
// discarded like an entry of a stale schema. It is asked before e is
// taken; the run's tool sources are loaded first, so the sub-agents are
// checked against, and resumed with, the tools they parked with.
func (r *run) staleSub(e *pool.Entry) bool {
	if len(e.SubAgent) == 0 {
		return false
	}
	r.loadSources()
	levels, err := r.o.subLevels(e)
	if err == nil {
		err = r.subScopes(levels, e)
	}
	if err != nil {
		r.log().WarnContext(r.ctx, "agent: a parked sub-agent cannot be resumed as it parked", "id", e.ID, "agent", e.AgentName, "err", maskText(err.Error()))
	}
	return err != nil
}

// subScopes checks, under the current configuration, that each level of
// levels would be resumed as it parked: its scope (its skill's, or the
// worker's within its parent's) can still be built and still offers the
// call it waits on — the next level's spawn_agent, or in the innermost
// e's Agent-Tool or high-risk plain tool — and the model it would run on is routable. A skill
// that no longer lists the tool, or a model removed from Config.Models,
// makes the entry stale before it is taken: nothing runs.
func (r *run) subScopes(levels []subLevel, e *pool.Entry) error {
	parent := r
	for i, lv := range levels {
		sub, model, refusal := parent.childScope(lv.Depth, lv.Skill)
		if refusal != "" {
			return fmt.Errorf("sub-agent state: level %d: %s", i, refusal)
		}
		if err := r.o.CheckModel(resumeModel(lv, model)); err != nil {
			return fmt.Errorf("sub-agent state: level %d: %w", i, err)
		}
		want := SpawnAgentTool
		if i == len(levels)-1 {
			want = e.AgentName
			if r.o.agents[want] == nil {
				// A plain tool's high-risk call waits as RiskToolPrefix and
				// its name (risk.go): the scope must still offer the tool.
				want = strings.TrimPrefix(want, RiskToolPrefix)
			}
		}
		if !sub.offers(want) {
			return fmt.Errorf("sub-agent state: level %d is no longer given %s", i, want)
		}
		parent = &run{o: r.o, toolset: r.toolset, sub: &sub}
	}
	return nil
}

// resumeModel is the model a resumed sub-agent runs on: its skill's, as
// configured now (skillModel), else the one it parked with.
func resumeModel(lv subLevel, skillModel string) string {
	if skillModel != "" {
		return skillModel
	}
	return lv.Model
}

// subTask is the task message of a saved sub-agent (its first user
// message): the resumed run's Message.Text, as observers saw it first.
func subTask(lv subLevel) string {
	for _, m := range lv.Window {
		if m.Role == llm.RoleUser {
			return m.Content
		}
	}
	return ""
}
