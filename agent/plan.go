package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/valetkit/valet/internal/textsafe"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/tool"
)

// UpdatePlanTool is the name of the planning tool (Config.Plan).
const UpdatePlanTool = "update_plan"

// Bounds of a plan: an update_plan call past one of them is refused with
// an error result and the previous plan stays.
const (
	MaxPlanSteps          = 50   // steps in a plan
	MaxPlanStepIDLen      = 64   // characters of a step's ID
	MaxPlanDescriptionLen = 500  // characters of a step's description
	MaxPlanFocusLen       = 500  // characters of Plan.Focus
	MaxPlanApproachLen    = 2000 // characters of Plan.Approach
)

// ErrInvalidPlan is the error of an update_plan call whose arguments fit
// the tool's schema but not a plan (a duplicate or blank step ID, a blank
// description); those that do not fit the schema (an unknown status, more
// than MaxPlanSteps steps, text past its bound) fail with
// tool.ErrInvalidArguments. Either way the model reads why in the tool
// result and the previous plan stays. Observers see the error as a
// StepToolResult's Err.
var ErrInvalidPlan = errors.New("agent: invalid plan")

// PlanStatus is the status of one step of a Plan.
type PlanStatus string

// The statuses of a PlanStep.
const (
	PlanPending    PlanStatus = "pending"
	PlanInProgress PlanStatus = "in_progress"
	PlanDone       PlanStatus = "done"
	PlanBlocked    PlanStatus = "blocked"
	PlanSkipped    PlanStatus = "skipped"
)

// valid reports whether s is one of the statuses.
func (s PlanStatus) valid() bool {
	switch s {
	case PlanPending, PlanInProgress, PlanDone, PlanBlocked, PlanSkipped:
		return true
	}
	return false
}

// mark is the checkbox of a step with status s in Plan.Markdown.
func (s PlanStatus) mark() string {
	switch s {
	case PlanDone:
		return "[x]"
	case PlanInProgress:
		return "[~]"
	case PlanBlocked:
		return "[!]"
	case PlanSkipped:
		return "[-]"
	}
	return "[ ]"
}

// PlanStep is one step of a Plan.
type PlanStep struct {
	ID          string     `json:"id" jsonschema:"minLength=1,maxLength=64,description=A short stable identifier of the step (e.g. 1 or fetch-data)"`
	Description string     `json:"description" jsonschema:"minLength=1,maxLength=500,description=What the step does"`
	Status      PlanStatus `json:"status" jsonschema:"enum=pending,enum=in_progress,enum=done,enum=blocked,enum=skipped"`
}

// Plan is the model's plan for a task of a conversation, as it last set
// it with the update_plan tool (Config.Plan). The model writes it: its
// text is the model's, not the user's.
type Plan struct {
	// Steps in order; at most MaxPlanSteps, IDs unique.
	Steps []PlanStep `json:"steps" jsonschema:"minItems=1,maxItems=50,description=Every step of the plan in order, each with its current status: send the whole plan each time"`
	// Focus is the step being worked on (its ID) or a short text.
	Focus string `json:"focus,omitempty" jsonschema:"maxLength=500,description=The ID of the step being worked on now or a short note of the current focus"`
	// Approach is the overall approach, in a few sentences.
	Approach string `json:"approach,omitempty" jsonschema:"maxLength=2000,description=The overall approach in a few sentences"`
}

// PlanOptions offers the model the update_plan tool (UpdatePlanTool), to
// keep a plan of a longer task in view: steps with an ID, a description
// and a status (pending, in_progress, done, blocked, skipped), the current
// focus and the approach. Each call sends the whole plan, which replaces
// the previous one; the tool result is the plan as a markdown checklist
// (Plan.Markdown), and Result.Plan is the plan when the run ends.
//
// The plan is kept per conversation in its history, as the update_plan
// call and its result: a run starts from the newest call in the loaded
// history that succeeded. A compaction (LoopConfig.CompactThreshold) that
// folds that call into the summary carries it after the summary, so the
// model still sees the plan and the next runs find it. Without
// compaction, a run whose plan's call is about to leave the
// MaxHistoryMessages messages the next run loads repeats the call and its
// result (under a new call ID) after its user message in the turn it
// saves.
//
// The plan is the model's text and may echo what tools returned: like
// any tool result, its result makes a turn's facts count as not the
// user's own (MemoryOptions.Extract).
//
// Sub-agents (Config.SubAgents) are offered update_plan too, but their
// plan is their own and thrown away with them: it is neither the
// conversation's nor saved.
type PlanOptions struct {
	// Enabled offers update_plan to the model. Default false.
	Enabled bool
}

// planToolDescription tells the model what update_plan is for.
const planToolDescription = "Keep a plan of a task with several steps: call it at the start of such a task, and again whenever a step's status changes. " +
	"Send the whole plan each time (it replaces the previous one); the result shows the current plan."

// addPlanTool adds update_plan to reg when opts enable it.
func addPlanTool(opts PlanOptions, reg *tool.Registry) error {
	if !opts.Enabled {
		return nil
	}
	t := tool.New(UpdatePlanTool, planToolDescription, func(_ context.Context, p Plan) (string, error) {
		if err := p.check(); err != nil {
			return "", err
		}
		return p.Markdown(), nil
	})
	if err := reg.Add(t); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return nil
}

// check reports what makes p a plan update_plan refuses (ErrInvalidPlan).
func (p *Plan) check() error {
	var probs []string
	add := func(format string, a ...any) {
		if len(probs) < 10 {
			probs = append(probs, fmt.Sprintf(format, a...))
		}
	}
	if len(p.Steps) == 0 {
		add("steps: at least one step is required")
	}
	if len(p.Steps) > MaxPlanSteps {
		add("steps: %d steps, at most %d are allowed", len(p.Steps), MaxPlanSteps)
	}
	seen := make(map[string]bool, len(p.Steps))
	for i, s := range p.Steps {
		id := strings.TrimSpace(s.ID)
		switch {
		case id == "":
			add("steps/%d/id: empty", i)
		case utf8.RuneCountInString(s.ID) > MaxPlanStepIDLen:
			add("steps/%d/id: longer than %d characters", i, MaxPlanStepIDLen)
		case seen[id]:
			add("steps/%d/id: %s is the ID of an earlier step; IDs must be unique", i, strconv.Quote(textsafe.Line(cut(id, MaxPlanStepIDLen))))
		}
		seen[id] = true
		if strings.TrimSpace(s.Description) == "" {
			add("steps/%d/description: empty", i)
		} else if utf8.RuneCountInString(s.Description) > MaxPlanDescriptionLen {
			add("steps/%d/description: longer than %d characters", i, MaxPlanDescriptionLen)
		}
		if !s.Status.valid() {
			add("steps/%d/status: %s is not one of pending, in_progress, done, blocked, skipped", i, strconv.Quote(textsafe.Line(cut(string(s.Status), 32))))
		}
	}
	if utf8.RuneCountInString(p.Focus) > MaxPlanFocusLen {
		add("focus: longer than %d characters", MaxPlanFocusLen)
	}
	if utf8.RuneCountInString(p.Approach) > MaxPlanApproachLen {
		add("approach: longer than %d characters", MaxPlanApproachLen)
	}
	if len(probs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s; the previous plan is unchanged", ErrInvalidPlan, strings.Join(probs, "; "))
}

// Markdown renders the plan as a checklist, one line per step ("- [x] 2:
// Book the hotel (done)"; [ ] pending, [~] in progress, [x] done, [!]
// blocked, [-] skipped) after the approach and the focus. Every text is
// put on one line (line breaks become spaces, control characters are
// replaced), so no text of the model can forge a line of its own.
func (p *Plan) Markdown() string {
	if p == nil {
		return ""
	}
	var b strings.Builder
	done := 0
	for _, s := range p.Steps {
		if s.Status == PlanDone || s.Status == PlanSkipped {
			done++
		}
	}
	fmt.Fprintf(&b, "Current plan (%d of %d steps done or skipped):", done, len(p.Steps))
	if a := strings.TrimSpace(p.Approach); a != "" {
		b.WriteString("\nApproach: " + textsafe.Line(a))
	}
	if f := strings.TrimSpace(p.Focus); f != "" {
		b.WriteString("\nFocus: " + textsafe.Line(f))
	}
	for _, s := range p.Steps {
		b.WriteString("\n- " + s.Status.mark() + " " + textsafe.Line(strings.TrimSpace(s.ID)) + ": " +
			textsafe.Line(strings.TrimSpace(s.Description)) + " (" + textsafe.Line(string(s.Status)) + ")")
	}
	return b.String()
}

// clone returns a copy of p that shares nothing with it.
func (p *Plan) clone() *Plan {
	if p == nil {
		return nil
	}
	c := *p
	c.Steps = append([]PlanStep(nil), p.Steps...)
	return &c
}

// parsePlan reads the arguments of an update_plan call: the plan, or nil
// when update_plan would refuse them.
func parsePlan(args json.RawMessage) *Plan {
	var p Plan
	d := json.NewDecoder(bytes.NewReader(args))
	d.DisallowUnknownFields()
	if err := d.Decode(&p); err != nil || p.check() != nil {
		return nil
	}
	return &p
}

// planCall is the newest update_plan call of a history that succeeded.
type planCall struct {
	plan   *Plan
	at     int // the index of the assistant message that made it
	call   llm.ToolCall
	result llm.Message
}

// latestPlan finds the newest successful update_plan call of msgs: one
// whose tool result follows it and is not an error, and whose arguments
// are a valid plan. ok is false when there is none.
func latestPlan(msgs []llm.Message) (pc planCall, ok bool) {
	for i := len(msgs) - 1; i >= 0; i-- {
		m := &msgs[i]
		if m.Role != llm.RoleAssistant || len(m.ToolCalls) == 0 {
			continue
		}
		for j := len(m.ToolCalls) - 1; j >= 0; j-- {
			c := m.ToolCalls[j]
			if c.Name != UpdatePlanTool {
				continue
			}
			res, found := resultOf(msgs[i+1:], c.ID)
			if !found || res.IsError {
				continue
			}
			if p := parsePlan(c.Arguments); p != nil {
				return planCall{plan: p, at: i, call: c, result: res}, true
			}
		}
	}
	return pc, false
}

// resultOf finds the tool result answering call id among the tool
// messages at the start of msgs.
func resultOf(msgs []llm.Message, id string) (llm.Message, bool) {
	for _, m := range msgs {
		if m.Role != llm.RoleTool {
			break
		}
		if m.ToolCallID == id {
			return m, true
		}
	}
	return llm.Message{}, false
}

// planCarryMargin is how many of the messages a run loads are not
// counted on to hold the plan: a provider may drop a tool result whose
// call it leaves out.
const planCarryMargin = 2

// planState is where the plan a run found in the history lies.
type planState struct {
	// age: the plan's call and the messages after it in the run's
	// buffer when the run began (the history loaded and the user's
	// message); 0 when the plan is this run's own.
	age    int
	call   llm.ToolCall
	result llm.Message
}

// restorePlan sets Result.Plan from the conversation's history: the plan
// of its newest successful update_plan call.
func (r *run) restorePlan() {
	if r.buf == nil || r.res.Plan != nil {
		return
	}
	hist := r.buf.history()
	if pc, ok := latestPlan(hist); ok {
		r.res.Plan = pc.plan
		r.plan = planState{age: len(hist) - pc.at, call: pc.call, result: pc.result}
	}
}

// carryPlan returns the turn to save: turn itself, or, when the plan's
// call would otherwise be among the last messages the next run loads
// (MaxHistoryMessages, with a margin of planCarryMargin), turn with that
// call and its result repeated after the user's message, under a new call
// ID, so the plan stays in view. With compaction on it is carried by the
// compaction instead (carriedPlan).
func (r *run) carryPlan(turn []llm.Message) []llm.Message {
	p := &r.plan
	if p.age == 0 || r.o.loop.CompactThreshold > 0 || len(turn) == 0 || turn[0].Role != llm.RoleUser ||
		p.age-1+len(turn) <= r.o.loop.MaxHistoryMessages-planCarryMargin { // turn[0] is counted in age
		return turn
	}
	call, result := p.call, p.result
	call.ID = "plan_" + r.res.RunID
	result.ToolCallID = call.ID
	out := make([]llm.Message, 0, len(turn)+2)
	out = append(out, turn[0], llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{call}}, result)
	return append(out, turn[1:]...)
}

// applyPlans makes the plan of the last successful update_plan call among
// calls (a turn's, recorded from Result.ToolCalls[base]) the run's plan.
func (r *run) applyPlans(calls []llm.ToolCall, base int) {
	for i := len(calls) - 1; i >= 0; i-- {
		c := calls[i]
		if c.Name != UpdatePlanTool || !r.res.ToolCalls[base+i].Success {
			continue
		}
		p := parsePlan(c.Arguments)
		if p == nil {
			continue
		}
		r.res.Plan, r.plan = p, planState{} // its call is in the run's turn
		if r.o.obs != nil {
			r.step(Step{Kind: StepPlan, Text: p.Markdown(), ToolCall: c})
		}
		return
	}
}

// carriedPlan returns, for a compaction that folds hist[:cut] into a
// summary, the update_plan call (alone in an assistant message) and its
// result to put after the summary: those of the plan in force, when its
// call is among the messages folded. Nil when the plan is off, there is
// no plan or its call is kept anyway.
func (r *run) carriedPlan(hist []llm.Message, cut int) []llm.Message {
	if !r.o.cfg.Plan.Enabled {
		return nil
	}
	pc, ok := latestPlan(hist)
	if !ok || pc.at >= cut {
		return nil
	}
	return []llm.Message{
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{pc.call}},
		pc.result,
	}
}

// isCarriedPlan reports whether msgs (the messages after a summary) start
// with a plan a compaction carried: an assistant message whose only
// content is one update_plan call, and its result.
func isCarriedPlan(msgs []llm.Message) bool {
	return len(msgs) >= 2 && msgs[0].Role == llm.RoleAssistant && msgs[0].Content == "" &&
		len(msgs[0].ToolCalls) == 1 && msgs[0].ToolCalls[0].Name == UpdatePlanTool &&
		msgs[1].Role == llm.RoleTool && msgs[1].ToolCallID == msgs[0].ToolCalls[0].ID
}

// fold makes the buffer [system] [summary] [carry...] [hist[cut:]...]
// after a compaction folded hist[:cut] (the buffer's history) into
// summary; carry is a plan carried after the summary (carriedPlan).
func (b *buffers) fold(summary llm.Message, carry []llm.Message, cut int) {
	hist := b.history()
	kept := hist[cut:]
	n, old := 2+len(carry)+len(kept), len(b.msgs)
	if n > cap(b.msgs) {
		grown := make([]llm.Message, n, n+firstBufferCap)
		grown[0] = b.msgs[0]
		copy(grown[2+len(carry):], kept)
		clear(b.base[:b.dead+old])
		b.setBase(grown)
	} else {
		b.msgs = b.msgs[:n]
		copy(b.msgs[2+len(carry):], kept) // kept moves in place
		if n < old {
			clear(b.msgs[n:old])
		}
	}
	b.msgs[1] = summary
	copy(b.msgs[2:], carry)
}
