package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"

	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/internal/textsafe"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/pool"
	"github.com/valetkit/valet/tool"
)

// RiskDecision is what became of a classified tool call (Step.RiskDecision).
type RiskDecision string

// The decisions of the risk check (see LoopConfig.RiskPolicy).
const (
	RiskRun    RiskDecision = "run"    // low risk: it runs
	RiskLogged RiskDecision = "logged" // medium risk: it runs, and an INFO line names the tool
	RiskParked RiskDecision = "parked" // high risk: it waits for the user's approval
	RiskDenied RiskDecision = "denied" // critical risk, or the policy failed: it is not run
)

// ErrRiskDenied is the error (Step.Err of the call's StepToolResult) of a
// tool call the risk check denied: its risk was tool.RiskCritical, or the
// RiskPolicy failed. The model reads that it was denied; the run goes on.
var ErrRiskDenied = errors.New("agent: the tool call was denied by the risk policy")

// RiskToolPrefix starts the pool.Entry.AgentName (and approval.Request's
// AgentName) of a plain tool call waiting for the user's approval because
// of its risk: "tool:" and the tool's name. No Agent-Tool name can start
// so (a name has no colon).
const RiskToolPrefix = "tool:"

// Span attributes of the risk check, on the call's execute_tool span.
const (
	attrRisk         = attribute.Key("valet.tool.risk")
	attrRiskDecision = attribute.Key("valet.tool.risk.decision")
)

// riskVerdict is the risk check of one call of a turn.
type riskVerdict struct {
	classified bool // a plain tool call of the run's tools (others are not checked)
	risk       tool.Risk
	decision   RiskDecision
	failed     bool // the policy returned an error or panicked
	parks      bool // in a sub-agent: the call that parks it (the first of the turn)
}

// classifyCalls classifies the turn's plain tool calls before they start,
// on the loop's goroutine and in call order, into t.risks: left nil when
// every call runs as it is and no span wants the verdicts, so the common
// turn allocates nothing for them.
func (r *run) classifyCalls(t *turn, calls []llm.ToolCall) {
	o := r.o
	policy := o.loop.RiskPolicy
	var risks []riskVerdict
	if o.tel != nil {
		risks = make([]riskVerdict, len(calls))
	}
	parking := false // in a sub-agent: a call of the turn parks it already
	for i, c := range calls {
		if r.sub != nil && r.sub.plan != nil {
			if p := r.sub.plan.calls[c.ID]; p != nil && p.parks {
				parking = true // an Agent-Tool called before parks the sub-agent
			}
		}
		if c.Name == SpawnAgentTool || o.callable[c.Name] != nil {
			continue // classified by their own rules (an Agent-Tool's approval)
		}
		tl, ok := r.tools().Get(c.Name)
		if !ok {
			continue // an unknown tool: the registry answers it
		}
		declared := tool.SettingsOf(tl).Risk
		v := riskVerdict{classified: true, risk: declared}
		var perr error
		if policy != nil {
			v.risk, perr = r.callPolicy(policy, c, declared)
			v.failed = perr != nil
		}
		switch {
		case v.failed:
			v.decision = RiskDenied
		case v.risk < tool.RiskLow: // not a risk level: the policy is wrong
			v.failed, v.decision = true, RiskDenied
		case v.risk == tool.RiskLow:
			v.decision = RiskRun
		case v.risk == tool.RiskMedium:
			v.decision = RiskLogged
		case v.risk == tool.RiskHigh:
			v.decision = RiskParked
		default: // critical, or a level above it
			v.decision = RiskDenied
		}
		if v.decision == RiskParked && r.sub != nil && !parking {
			v.parks, parking = true, true
			r.unparkLaterAgents(calls[i+1:])
		}
		if o.obs != nil && (policy != nil || declared != tool.RiskLow) {
			r.step(Step{Kind: StepRisk, ToolCall: c, Risk: v.risk, RiskDecision: v.decision, Err: perr})
		}
		if v.decision == RiskRun && risks == nil {
			continue
		}
		if risks == nil {
			risks = make([]riskVerdict, len(calls))
		}
		risks[i] = v
	}
	t.risks = risks
}

// unparkLaterAgents: a high-risk call parks the sub-agent, so the
// Agent-Tool calls after it in the turn do not (only the first parks).
func (r *run) unparkLaterAgents(later []llm.ToolCall) {
	if r.sub.plan == nil {
		return
	}
	for _, c := range later {
		if p := r.sub.plan.calls[c.ID]; p != nil {
			p.parks = false
		}
	}
}

// callPolicy calls the RiskPolicy, turning a panic into an error. The
// panic's value is logged masked; it never reaches the model.
func (r *run) callPolicy(policy func(context.Context, llm.ToolCall, tool.Risk) (tool.Risk, error), c llm.ToolCall, declared tool.Risk) (risk tool.Risk, err error) {
	defer func() {
		if v := recover(); v != nil {
			r.log().ErrorContext(r.ctx, "agent: the risk policy panicked; the call is denied", "tool", c.Name,
				"panic", r.maskSeen(maskText(fmt.Sprint(v))), "stack", string(debug.Stack()))
			risk, err = tool.RiskCritical, errRiskPolicyPanicked
		}
	}()
	risk, err = policy(r.ctx, c, declared)
	if err != nil {
		r.log().WarnContext(r.ctx, "agent: the risk policy failed; the call is denied", "tool", c.Name, "err", r.maskSeen(maskText(err.Error())))
	}
	return risk, err
}

var errRiskPolicyPanicked = errors.New("agent: the risk policy panicked")

// riskGate acts on call i's verdict before it runs: it reports whether
// the call is done (denied or parked, with its outcome in out); a call
// that is not done runs.
func (t *turn) riskGate(i int, c llm.ToolCall, tt toolTel, out *callOutcome) bool {
	r := t.r
	v := t.risks[i]
	if !v.classified {
		return false
	}
	if tt.span != nil {
		tt.span.SetAttributes(attrRisk.String(v.risk.String()), attrRiskDecision.String(string(v.decision)))
	}
	switch v.decision {
	case RiskLogged:
		r.log().InfoContext(r.ctx, "agent: a medium-risk tool call runs", "tool", c.Name, "call_id", c.ID)
	case RiskDenied:
		*out = callOutcome{result: tool.Result{Content: deniedText(c.Name, v), IsError: true, Err: ErrRiskDenied}, status: string(RiskDenied)}
		return true
	case RiskParked:
		*out = r.parkRisky(c, v, t.at.Add(time.Duration(i)))
		return true
	}
	return false
}

func deniedText(name string, v riskVerdict) string {
	if v.failed {
		return fmt.Sprintf("tool %q was not run: this call was denied by the risk policy (it could not be classified). "+
			"Do not call it again with these arguments; tell the user it was not done.", name)
	}
	return fmt.Sprintf("tool %q was not run: this call was denied by the risk policy (risk %s). "+
		"Do not try it again or work around it; tell the user it was not done.", name, v.risk)
}

// parkRisky makes a high-risk call wait for the user's approval: at the
// top, a pool entry made as an Agent-Tool's approval is; in a sub-agent,
// the sub-agent parks with it (spawn_park.go), the first of the turn only.
func (r *run) parkRisky(c llm.ToolCall, v riskVerdict, now time.Time) callOutcome {
	o := r.o
	reg := r.tools()
	tl, _ := reg.Get(c.Name)
	a := plainAgent(c.Name, tl, reg)
	if err := checkRiskyArgs(tl, c.Arguments); err != nil {
		return callOutcome{result: tool.Result{Content: maskText(err.Error()), IsError: true, Err: err}, status: resultError}
	}
	fields := append(json.RawMessage(nil), c.Arguments...)
	req := riskRequest(c.Name, fields, v.risk)
	if r.sub != nil {
		if !v.parks {
			return callOutcome{result: tool.Result{Content: onlyOneApproval(c.Name), IsError: true}, status: resultError}
		}
		return callOutcome{
			result: tool.Result{Content: fmt.Sprintf("%s waits for the user's confirmation.", c.Name)},
			status: string(StatusWaitingForApproval),
			wait:   &Waiting{sub: &subPark{agent: a, col: collected{fields: fields}, req: req, callID: c.ID}},
		}
	}
	e := &pool.Entry{
		ID:             newID(),
		AgentName:      a.poolName(),
		TenantID:       r.msg.TenantID,
		ConversationID: r.msg.ConversationID,
		Status:         pool.StatusWaitingForApproval,
		SchemaVersion:  a.version,
		Fields:         fields,
		ToolCallID:     c.ID,
		Source:         r.msg.Source,
		TaskID:         r.msg.TaskID,
		TraceParent:    r.traceParent(),
		CreatedAt:      now,
		UpdatedAt:      now,
	}
	r.fillApproval(e, req, now)
	if err := o.pool.Create(r.ctx, e); err != nil {
		r.log().WarnContext(r.ctx, "agent: could not park a high-risk tool call", "tool", c.Name, "err", err)
		return callOutcome{
			result: tool.Result{Content: maskText(fmt.Sprintf("tool %q was not run: it needs the user's approval, and the request could not be stored: %s", c.Name, err)), IsError: true, Err: err},
			status: resultError,
		}
	}
	w := o.waitingOf(e)
	return callOutcome{result: tool.Result{Content: riskWaitingText(c.Name, e)}, status: string(w.Status), wait: &w}
}

// checkRiskyArgs refuses arguments that could not run: not a JSON object,
// or (for a tool with a schema) invalid. The user is never asked to
// approve a call that would fail.
func checkRiskyArgs(tl tool.Tool, args json.RawMessage) error {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(args, &obj); err != nil || obj == nil {
		return fmt.Errorf("tool %q was not run: its arguments must be a JSON object; fix them and call again", tl.Spec().Name)
	}
	if s := tool.SchemaOf(tl); s != nil {
		if err := s.Validate(args); err != nil {
			return fmt.Errorf("%w; fix the arguments and call again", err)
		}
	}
	return nil
}

// riskRequestArgsMax bounds the arguments shown in an approval's summary;
// Details holds them in full.
const riskRequestArgsMax = 200

// riskRequest is the approval request of a high-risk call: the tool and
// its arguments, secrets masked, each on one line.
func riskRequest(name string, args json.RawMessage, risk tool.Risk) *approval.Request {
	shown := textsafe.Line(RedactArguments(args))
	summary := shown
	if len(summary) > riskRequestArgsMax {
		cut := riskRequestArgsMax
		for cut > 0 && !utf8.RuneStart(summary[cut]) {
			cut--
		}
		summary = summary[:cut] + "…"
	}
	return &approval.Request{
		ActionSummary: textsafe.Line("Run " + name + " " + summary),
		Details:       map[string]any{"tool": name, "arguments": shown, "risk": risk.String()},
		Options:       []string{string(approval.Approve), string(approval.Cancel)},
	}
}

// riskWaitingText is the result of a parked high-risk call: it waits, so
// the history stays valid and the model knows not to call it again.
func riskWaitingText(name string, e *pool.Entry) string {
	return fmt.Sprintf("%s was not run yet: this call is high risk and waits for the user's confirmation (request %s). "+
		"The user will be asked to approve or cancel it; once decided, its result comes back to you. Do not call %s again for this request.",
		name, e.ID, name)
}

// plainAgent wraps a plain tool as the agentTool a pooled approval is
// decided through (pending_decide.go): its version fingerprints the tool's
// spec, so a tool whose name, description or schema changed is stale; it
// runs through reg, as a plain call does.
func plainAgent(name string, tl tool.Tool, reg *tool.Registry) *agentTool {
	spec := tl.Spec()
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00", spec.Name, spec.Description)
	h.Write(spec.Parameters)
	return &agentTool{name: name, description: spec.Description, version: hex.EncodeToString(h.Sum(nil)[:8]), plain: reg}
}

// poolName is the AgentName of a's pool entries: a plain tool's is
// RiskToolPrefix and its name.
func (a *agentTool) poolName() string {
	if a.plain != nil {
		return RiskToolPrefix + a.name
	}
	return a.name
}

// agentOf is the agentTool a pool entry named name is decided through: a
// registered Agent-Tool, or a plain tool of the run's tools (RiskToolPrefix)
// looked up now. Nil when there is none: the entry is stale.
func (r *run) agentOf(name string) *agentTool {
	if a := r.o.agents[name]; a != nil {
		return a
	}
	plain, ok := strings.CutPrefix(name, RiskToolPrefix)
	if !ok {
		return nil
	}
	r.loadSources()
	reg := r.tools()
	tl, ok := reg.Get(plain)
	if !ok {
		return nil
	}
	return plainAgent(plain, tl, reg)
}

// runPlain runs an approved plain tool call as a turn's call runs: with
// the tool's timeout (else LoopConfig.ToolTimeout), the run's
// credentials, its result scrubbed.
func (r *run) runPlain(a *agentTool, callID string, fields json.RawMessage) (string, bool) {
	ctx := tool.WithExecContext(r.toolCtx, tool.ExecContext{
		TenantID:       r.msg.TenantID,
		ConversationID: r.msg.ConversationID,
		CallID:         callID,
		Credentials:    r.credentials(),
		Logger:         r.log(),
	})
	res := a.plain.Execute(ctx, llm.ToolCall{ID: callID, Name: a.name, Arguments: fields}, r.o.loop.ToolTimeout)
	r.scrubToolResult(&res)
	return res.Content, res.IsError
}

// mayParkRisky reports whether a plain tool call of an orchestrator with
// cfg and its registry reg may wait for approval: with a RiskPolicy, with
// tool sources (an MCP tool is high risk unless its server says
// otherwise), or with a tool declared high risk. Its runs then serve the
// conversation's pending approvals like an orchestrator with Agent-Tools.
func mayParkRisky(cfg Config, reg *tool.Registry) bool {
	if cfg.Loop.RiskPolicy != nil || len(cfg.ToolSources) > 0 {
		return true
	}
	for _, n := range reg.Names() {
		if t, ok := reg.Get(n); ok && tool.SettingsOf(t).Risk >= tool.RiskHigh {
			return true
		}
	}
	return false
}
