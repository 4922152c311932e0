package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/valetkit/valet/internal/textsafe"

	"github.com/valetkit/valet/agent/delegate"
	"github.com/valetkit/valet/agent/skill"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/tool"
)

// SpawnAgentTool is the name of the tool that starts a sub-agent
// (Config.SubAgents).
const SpawnAgentTool = "spawn_agent"

// Defaults of [SubAgentOptions].
const (
	DefaultSubAgentMaxDepth = 2
	DefaultSubAgentTimeout  = 5 * time.Minute
	DefaultWorkerPrompt     = "You are a worker agent. Carry out the task you are given with the tools you have, " +
		"then answer with the result only: your answer is handed to the agent that gave you the task, not to a person."
)

// SubAgentOptions offers the model the spawn_agent tool (SpawnAgentTool):
// a sub-agent that runs its own loop on a fresh context — the worker
// prompt as its system prompt, the task and context as its one message —
// with the run's tools and exposed Agent-Tools (one needing approval parks
// the sub-agent until the user decides; see the package documentation),
// and whose final message is the tool result. Several spawns of one reply
// run concurrently, like any tool calls. A sub-agent loads and appends no history, recalls nothing
// and runs no fact extraction. The zero value offers no tool.
type SubAgentOptions struct {
	// Enabled offers spawn_agent to the model. Default false.
	Enabled bool
	// WorkerPrompt is a sub-agent's system prompt. Default
	// DefaultWorkerPrompt.
	WorkerPrompt string
	// MaxDepth is how deep sub-agents may nest: the coordinator's are at
	// depth 1, theirs at 2. At MaxDepth a sub-agent is not offered
	// spawn_agent (it is not in its tools), and a call of it anyway is an
	// error result with nothing started. Default DefaultSubAgentMaxDepth
	// (2).
	MaxDepth int
	// Timeout bounds one sub-agent's run, whatever LoopConfig.ToolTimeout;
	// what it wrote so far is returned, marked. Default
	// DefaultSubAgentTimeout (5m).
	Timeout time.Duration
	// Engine keeps sub-agents' results (each stored before the spawn's
	// tool result is returned, and named there as [agent_result:ID]) and
	// runs background task graphs (spawn_agent's background and tasks
	// arguments). Default nil: an in-memory engine (delegate.NewMemory)
	// the orchestrator runs itself once background work is started,
	// stopped by Orchestrator.Close; it keeps results for
	// delegate.DefaultRetention (24h) in process memory and loses them,
	// and unfinished graphs, with the process. An engine given here (such
	// as agent/delegate/pgdelegate's) is run by the host:
	// go engine.Run(ctx, o.TaskExecutor()).
	Engine delegate.Engine
	// OnBackground is handed the coordinator's Result of each delivery:
	// the run a background graph's end started in its conversation (a
	// new message, the path a triggered run takes), so the host can tell
	// the user what came of it without being asked. Called after the
	// Result is saved, on the engine's goroutine; at least once per
	// graph (see Orchestrator.TaskExecutor). Optional.
	OnBackground func(ctx context.Context, res *Result)
}

func (s SubAgentOptions) withDefaults() (SubAgentOptions, error) {
	if s.MaxDepth < 0 || s.Timeout < 0 {
		return s, fmt.Errorf("%w: SubAgents: negative MaxDepth or Timeout", ErrInvalidConfig)
	}
	if s.MaxDepth == 0 {
		s.MaxDepth = DefaultSubAgentMaxDepth
	}
	if s.Timeout == 0 {
		s.Timeout = DefaultSubAgentTimeout
	}
	if strings.TrimSpace(s.WorkerPrompt) == "" {
		s.WorkerPrompt = DefaultWorkerPrompt
	}
	return s, nil
}

// spawnArgs are spawn_agent's arguments.
type spawnArgs struct {
	Task        string          `json:"task,omitempty" jsonschema:"description=The task for the sub-agent: what to do and what to answer with; required unless tasks is given"`
	Context     string          `json:"context,omitempty" jsonschema:"description=What the sub-agent needs to know: it sees nothing of this conversation"`
	BudgetShare float64         `json:"budget_share,omitempty" jsonschema:"description=Share (0 to 1) of what is left of this request's budget the sub-agent may use; default all of it,minimum=0,maximum=1"`
	Background  bool            `json:"background,omitempty" jsonschema:"description=Run the task in the background: the call returns at once and the result comes to this conversation as a new message when it is done"`
	Tasks       []spawnTaskArgs `json:"tasks,omitempty" jsonschema:"description=Instead of task: several tasks run in the background as a graph; a task starts when the tasks it depends_on completed and its context may refer to their results as [agent_result:<task id>]"`
}

// spawner is the orchestrator's sub-agent state; nil when SubAgents is
// not enabled.
type spawner struct {
	opts SubAgentOptions
	del  delegation // results and background graphs (delegation.go)
}

// newSpawner adds spawn_agent to reg when opts enable it, with the skill
// argument when skills are configured (spawn_skill.go).
func newSpawner(opts SubAgentOptions, reg *tool.Registry, skills *skill.Set) (*spawner, error) {
	if !opts.Enabled {
		if _, err := opts.withDefaults(); err != nil {
			return nil, err
		}
		if opts.Engine != nil || opts.OnBackground != nil {
			return nil, fmt.Errorf("%w: SubAgents: Engine and OnBackground need Enabled", ErrInvalidConfig)
		}
		return nil, nil
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	t := tool.New(SpawnAgentTool,
		"Start a sub-agent on a self-contained task and get its answer. It starts with a fresh context: "+
			"give it everything it needs in task and context. Several spawns in one reply run at the same time.",
		func(context.Context, spawnArgs) (string, error) {
			return "", errors.New("agent: spawn_agent runs only inside the orchestrator's loop")
		})
	if hasSkills(skills) {
		t = skillSpawnTool()
	}
	if err := reg.Add(t); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return &spawner{opts: opts}, nil
}

// subRun is what makes a run a sub-agent's.
type subRun struct {
	depth int
	path  []string // the spawn_agent call IDs from the top run to this one
	specs []llm.ToolSpec
	// reg holds the tools it may run when its scope is its own (a
	// specialist's, or inherited from one); nil: the run's (spawn_skill.go).
	reg    *tool.Registry
	tokens int    // of specs
	prompt string // its system prompt
	skill  string // the skill it runs; "" for a worker

	// Approvals inside sub-agents (spawn_park.go, spawn_resume.go).
	callID string          // the spawn_agent call that started it
	args   json.RawMessage // its arguments
	plan   *subPlan        // the current turn's Agent-Tool calls
	park   *subPark        // set when it parked for an approval
	prior  *subLevel       // when resumed: its state when it parked
	// decided, when resumed: the decision that resumed it, reported if it
	// stops without answering (spawn_resume.go).
	decided *subDecision
	// resume, when set, fills the window of a resumed sub-agent and runs
	// its loop, in place of the task message.
	resume func(*run) error
}

// path returns the run's path: nil for a top run.
func (r *run) path() []string {
	if r.sub == nil {
		return nil
	}
	return r.sub.path
}

// spawnTally adds up what the sub-agents of a turn consumed, from their
// goroutines; it is added to the run's Result once the turn's calls are
// done, so the Result is not written while they run.
type spawnTally struct {
	mu       sync.Mutex
	usage    llm.Usage
	consumed Consumed
	settled  float64 // what the sub-agents' settled reservations counted
}

// prepareSpawns gives the run a tally when calls, a turn's, start a
// sub-agent. It runs on the loop's goroutine before the calls.
func (r *run) prepareSpawns(calls []llm.ToolCall) {
	for _, c := range calls {
		if c.Name == SpawnAgentTool {
			r.spawned = new(spawnTally)
			return
		}
	}
}

// addSpawned adds the turn's sub-agents' consumption to the run's Result
// (and so to its budget's meter), once the turn's calls are done.
func (r *run) addSpawned() {
	s := r.spawned
	if s == nil {
		return
	}
	r.spawned = nil
	r.res.Usage = r.res.Usage.Add(s.usage)
	r.settledUSD += s.settled
	c := &r.res.Consumed
	c.Tokens += s.consumed.Tokens
	c.CostUSD += s.consumed.CostUSD
	c.ToolCalls += s.consumed.ToolCalls
}

// tally adds a sub-agent's consumption to the turn's, and what its
// settled reservations already counted (ch.settledUSD), so that the
// run's Record does not count it again.
func (s *spawnTally) add(res *Result, ch *run) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settled += ch.settledUSD
	s.usage = s.usage.Add(res.Usage)
	s.consumed.Tokens += res.Consumed.Tokens
	s.consumed.CostUSD += res.Consumed.CostUSD
	s.consumed.ToolCalls += res.Consumed.ToolCalls
}

// lockEmit serialises emit: a run with sub-agents emits from their
// goroutines too.
func lockEmit(emit func(Event) bool) func(Event) bool {
	var mu sync.Mutex
	return func(ev Event) bool {
		mu.Lock()
		defer mu.Unlock()
		return emit(ev)
	}
}

// spawnHandles reports whether call c is the spawner's: spawn_agent, or an
// Agent-Tool called inside a sub-agent.
func (r *run) spawnHandles(c llm.ToolCall) bool {
	if c.Name == SpawnAgentTool {
		return true
	}
	return r.sub != nil && r.o.callable[c.Name] != nil
}

// spawnCall runs call c (spawnHandles); parent carries the call's span.
func (r *run) spawnCall(parent context.Context, c llm.ToolCall) callOutcome {
	o := r.o
	fail := func(format string, a ...any) callOutcome {
		return callOutcome{result: tool.Result{Content: fmt.Sprintf(format, a...), IsError: true}}
	}
	if out, refused := r.scopeRefuses(c.Name); refused {
		return out
	}
	if c.Name != SpawnAgentTool {
		return r.subAgentTool(o.callable[c.Name], c) // spawn_park.go
	}
	depth := 1
	if r.sub != nil {
		depth = r.sub.depth + 1
	}
	if depth > o.spawn.opts.MaxDepth {
		return fail("unknown tool %q: sub-agents at depth %d cannot start sub-agents", c.Name, o.spawn.opts.MaxDepth)
	}
	var in spawnSkillArgs
	if err := json.Unmarshal([]byte(c.Arguments), &in); err != nil {
		return fail("spawn_agent: invalid arguments: %s", maskText(err.Error()))
	}
	if in.Background || in.Tasks != nil {
		return r.spawnBackground(parent, in) // delegation_graph.go
	}
	if strings.TrimSpace(in.Task) == "" {
		return fail("spawn_agent: task is required")
	}
	if in.BudgetShare < 0 || in.BudgetShare > 1 || in.BudgetShare != in.BudgetShare {
		return fail("spawn_agent: budget_share must be between 0 and 1")
	}
	sub, model, refusal := r.childScope(depth, in.Skill)
	if refusal != "" {
		return fail("%s", refusal)
	}
	b, ok := r.childBudget(in.BudgetShare)
	if !ok {
		return fail("spawn_agent: this request's budget is spent; no sub-agent was started")
	}

	refs, refusal := r.resolveRefs(parent, in.Task, in.Context) // delegation_refs.go
	if refusal != "" {
		return fail("%s", refusal)
	}

	ctx, cancel := context.WithTimeout(parent, o.spawn.opts.Timeout)
	defer cancel()
	text := in.Task
	if strings.TrimSpace(in.Context) != "" || refs != "" {
		text = "Task:\n" + in.Task + "\n\nContext:\n" + in.Context + refs
	}
	msg := Message{
		TenantID: r.msg.TenantID, ConversationID: r.msg.ConversationID, Text: text,
		Source: r.msg.Source, TaskID: r.msg.TaskID, Model: r.msg.Model, Location: r.msg.Location,
		Budget: b,
	}
	if model != "" {
		msg.Model = model
	}
	ch := o.newRun(ctx, msg, nil)
	ch.toolset = r.toolset
	ch.steer = r.steer       // paused with its parent (cancelled through ctx)
	ch.reserver = r.reserver // its model calls are reserved like its parent's
	path := make([]string, len(r.path())+1)
	copy(path, r.path())
	path[len(path)-1] = textsafe.Line(c.ID) // the model wrote it; a UI shows it on one line
	sub.path = path
	sub.callID, sub.args = c.ID, c.Arguments
	ch.sub = &sub
	if emit := r.emit; emit != nil {
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
	if p := ch.sub.park; p != nil && err == nil { // it waits for the user's approval (spawn_park.go)
		if r.sub != nil {
			return callOutcome{result: tool.Result{Content: "The sub-agent waits for the user's confirmation."}, status: string(StatusWaitingForApproval), wait: &Waiting{sub: p}}
		}
		if r.graph != nil { // a background task cannot wait for the user (delegation_exec.go)
			return r.graphParkRefused(p)
		}
		return r.parkSub(p, o.now())
	}
	return r.subResult(ctx, ch, res, err, partial)
}

// partialText introduces what a stopped sub-agent had written, if anything.
func partialText(p string) string {
	if p == "" {
		return ""
	}
	return "Partial output of the sub-agent:\n" + p + "\n\n"
}

// childBudget is a sub-agent's budget: share (0: all) of what the run's
// budget has left — neither used nor reserved for a background graph. ok
// is false when a limit is spent.
func (r *run) childBudget(share float64) (b Budget, ok bool) {
	return r.takeBudget(share, false)
}

// reserveBudget is a background graph's budget (childBudget), reserved:
// counted as committed for the run, so what later spawns (of the same
// turn too) and the run's own calls have left is less by it. Give it
// back with releaseBudget when the graph does not start.
func (r *run) reserveBudget(share float64) (b Budget, ok bool) {
	return r.takeBudget(share, true)
}

// releaseBudget gives back what reserveBudget took for a graph that did
// not start.
func (r *run) releaseBudget(b Budget) {
	if m := r.meter; m != nil {
		m.mu.Lock()
		m.reserved.Tokens -= b.MaxTokens
		m.reserved.CostUSD -= b.MaxCostUSD
		m.reserved.ToolCalls -= b.MaxToolCalls
		m.mu.Unlock()
	}
}

func (r *run) takeBudget(share float64, reserve bool) (b Budget, ok bool) {
	m := r.meter
	if m == nil {
		return b, true
	}
	if share == 0 {
		share = 1
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if reserve {
		defer func() {
			if ok {
				m.reserved.Tokens += b.MaxTokens
				m.reserved.CostUSD += b.MaxCostUSD
				m.reserved.ToolCalls += b.MaxToolCalls
			}
		}()
	}
	u := r.res.Consumed
	u.Tokens += m.reserved.Tokens
	u.CostUSD += m.reserved.CostUSD
	u.ToolCalls += m.reserved.ToolCalls
	if m.b.MaxTokens > 0 {
		if b.MaxTokens = int(float64(m.b.MaxTokens-u.Tokens) * share); b.MaxTokens <= 0 {
			return b, false
		}
	}
	if m.b.MaxCostUSD > 0 {
		if b.MaxCostUSD = (m.b.MaxCostUSD - u.CostUSD) * share; b.MaxCostUSD <= 0 {
			return b, false
		}
	}
	if m.b.MaxToolCalls > 0 {
		if b.MaxToolCalls = int(float64(m.b.MaxToolCalls-u.ToolCalls) * share); b.MaxToolCalls <= 0 {
			return b, false
		}
	}
	if m.b.MaxWall > 0 {
		if b.MaxWall = m.b.MaxWall - time.Since(m.start); b.MaxWall <= 0 {
			return b, false
		}
	}
	return b, true
}

// childSpecs are the tools of a sub-agent at depth: those skill sk lists,
// in its order, or without sk the run's; of them, the tools and exposed
// Agent-Tools, and spawn_agent below MaxDepth.
func (r *run) childSpecs(depth int, sk *skill.Skill) []llm.ToolSpec {
	all := r.specs()
	if sk != nil {
		all = make([]llm.ToolSpec, 0, len(sk.Tools))
		base := r.baseTools()
		for _, n := range sk.Tools {
			if t, ok := base.Get(n); ok {
				all = append(all, t.Spec())
			}
		}
	}
	out := make([]llm.ToolSpec, 0, len(all))
	for _, sp := range all {
		if sp.Name == SpawnAgentTool && depth >= r.o.spawn.opts.MaxDepth {
			continue
		}
		out = append(out, sp)
	}
	return out
}

// handleSub is a sub-agent's run: the worker prompt and the task, then the
// loop; no history, recall, saving or extraction. partial gets the last
// text the sub-agent wrote.
func (r *run) handleSub(partial *string) error {
	if err := r.route(); err != nil {
		return err
	}
	if b := r.msg.Budget; !b.IsZero() {
		r.meter = &meter{b: b, start: r.start, used: &r.res.Consumed, price: r.o.price}
		if b.MaxWall > 0 {
			r.toolCtx, r.wallCancel = context.WithDeadline(r.ctx, r.start.Add(b.MaxWall))
		}
	}
	r.noHistory = true
	if err := r.open(); err != nil {
		return err
	}
	defer func() {
		r.clock.close()
		for i := len(r.window) - 1; i >= 0; i-- {
			if m := r.window[i]; m.Role == llm.RoleAssistant && strings.TrimSpace(m.Content) != "" {
				*partial = m.Content
				break
			}
		}
		r.releaseBuffers()
	}()
	p := r.sub.prompt
	r.setSystem(p, r.o.ctxm.MessageTokens(llm.Message{Role: llm.RoleSystem, Content: p}))
	if r.sub.resume != nil { // a parked sub-agent the user's decision resumes (spawn_resume.go)
		return r.sub.resume(r)
	}
	r.push(llm.UserMessage(r.msg.Text))
	r.commit()
	return r.loop()
}
