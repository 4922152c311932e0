package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/valetkit/valet/credentials"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/memory"
)

// run is the state of handling one message.
type run struct {
	o     *Orchestrator
	llm   llm.Client // the client of the run (Message.Model); nil: o.llm (router.go)
	mctx  modelCtx   // the ctx of model calls (fallback.go)
	ctx   context.Context
	msg   Message
	emit  func(Event) bool // nil when not streaming
	res   Result
	start time.Time
	// noHistory: a triggered message without a conversation of its own
	// loads none (see Message.ConversationID); its turn is still saved.
	noHistory bool
	// untrusted: the model was sent text the user did not write (a tool
	// result, a triggered run's message, a summary, an item recalled from
	// elsewhere), which its answer may relay (see untrustedIn).
	untrusted bool

	window    []llm.Message // what the model is sent; trimmed as needed (see buffer.go)
	apart     bool          // window is not the buffer
	sysTokens int           // tokens of the system prompt in the window
	buf       *buffers      // system prompt, history, the run's messages (buffer.go)
	fresh     int           // where the run's own messages start in buf's history
	early     []llm.Message // the run's own messages a trim dropped from buf
	saved     int           // the run's own messages at the end of the last complete turn
	saveErr   error         // saving the turn failed (the run itself did not)
	recalled  []memory.Item // the long-term items shown to the model
	meter     *meter        // the run's Budget; nil when it has none
	// toolCtx is the parent of tool and Agent-Tool calls: ctx, or with a
	// wall-clock budget ctx ending with it (wallCancel releases it).
	toolCtx    context.Context
	wallCancel context.CancelFunc
	guarded    bool // the SpendGuard allowed the run: Record it
	// reserver: the SpendGuard reserves each model call (spend_reserve.go);
	// settledUSD is what its settled reservations already counted.
	reserver   SpendReserver
	settledUSD float64

	// toolset: with Config.ToolSources, the run's tools (toolsource.go).
	toolset *runToolset

	clock   callClock         // bounds each model call by LLMTimeout
	aside   bool              // a model call outside the conversation is under way
	lastEnd string            // the text of the last streamed model call, when it wrote one
	creds   credentials.Store // Config.Credentials bound to the message's tenant, made on first use

	// Agent-Tools: those parked in the pool by this run, and those of the
	// conversation still waiting from earlier runs.
	parked  []Waiting
	pending []Waiting

	// The run's logger (log): Config.Logger adding tenant, conversation
	// and Result.RunID to every line (runlog.go).
	logh   runHandler
	logger slog.Logger
	obs    observing // Config.Observer's state (observe.go)
	tel    *runTel   // OpenTelemetry state; nil without (telemetry.go)
	sub    *subRun   // a sub-agent's run; nil for a top run (spawn.go)
	// spawned adds up what the turn's sub-agents consumed; nil when the
	// turn started none (spawn.go).
	spawned *spawnTally
	doom    doomState // the doom-loop detector (doomloop.go)
	plan    planState // the plan's call in the history (plan.go)
	// graph: the run is a graph's task's parent (delegation_exec.go).
	graph *graphTask
	// steer: Config.Control's state for the run (steer.go); a sub-agent
	// shares its parent's. steerSt holds a top run's.
	steer   *steering
	steerSt steering
	// turnSt is the state of the run's tool turn, reused turn after turn
	// (tools.go).
	turnSt turn
}

func (o *Orchestrator) newRun(ctx context.Context, msg Message, emit func(Event) bool) *run {
	noHistory := msg.Source == SourceTrigger && msg.ConversationID == ""
	msg.ConversationID = conversationOf(msg.ConversationID)
	if msg.Source == "" {
		msg.Source = SourceUser
	}
	if o.spawn != nil && emit != nil {
		emit = lockEmit(emit) // sub-agents emit from their goroutines (spawn.go)
	}
	r := &run{o: o, ctx: ctx, toolCtx: ctx, msg: msg, emit: emit, start: time.Now(), clock: callClock{parent: ctx, d: o.loop.LLMTimeout}, noHistory: noHistory}
	r.res.Source, r.res.TaskID = msg.Source, msg.TaskID
	r.initLog()
	return r
}

func (r *run) execute(body func(*run) error) (*Result, error) {
	r.begin()
	return r.conclude(body(r))
}

// begin starts the run's telemetry and its Observer steps.
//
// begin, conclude, admit and prepare are kept apart from the functions that
// stay on the goroutine's stack for the whole run (execute, handle): their
// temporaries would otherwise be part of those frames all along, making the
// stack of every waiting conversation deeper, and with it the stack the
// runtime starts every new goroutine of the process with (adaptive stack
// start averages the stacks in use). See BenchmarkScale.
//
//go:noinline
func (r *run) begin() {
	if r.o.tel != nil {
		r.startTelemetry()
	}
	if r.o.obs != nil && !r.obs.late {
		r.startStep()
	}
}

// conclude ends the run that body returned err for: the Result's status,
// duration and spend, the Observer's last step, telemetry and the log line.
//
//go:noinline
func (r *run) conclude(err error) (*Result, error) {
	if r.wallCancel != nil {
		r.wallCancel()
	}
	res := &r.res
	res.Duration = time.Since(r.start)
	res.Consumed.Wall = res.Duration
	r.recordSpend()
	if h := r.o.hooks.Decided; h != nil && len(res.Decided) > 0 {
		h(r.ctx, res)
	}
	switch {
	case err == nil, r.saveErr != nil && err == r.saveErr: // answered; only saving failed
	case r.ctx.Err() != nil, errors.Is(err, ErrCancelled): // the caller's ctx ended (or a Stream consumer left), or Orchestrator.Cancel
		res.Status = StatusCancelled
	case res.Status == StatusRefused && errors.Is(err, ErrSpendRefused): // Response says why
	default:
		res.Status = StatusError
	}
	if r.o.obs != nil {
		r.step(Step{Kind: StepRunEnd, Result: res, Err: err, Duration: res.Duration})
		if e := r.obs.ended; e != nil {
			e.seq, e.calls = r.obs.seq, r.obs.calls
			close(e.done)
		}
	}
	if r.o.tel != nil {
		r.endTelemetry(res, err)
	}
	r.logEnd(res, err) // INFO (runlog_levels.go)
	return res, err
}

func (r *run) handle() (err error) {
	parent := r.ctx
	r.steerStart() // steer.go
	defer func() { err = r.steerFinish(parent, err) }()
	if done, err := r.admit(); done {
		return err
	}

	o, msg := r.o, &r.msg
	key := convKey{msg.TenantID, msg.ConversationID}
	c, err := o.acquire(r.ctx, key)
	if err != nil {
		return err
	}
	defer o.release(key, c)
	begun := r.beginSteer()
	defer r.endSteer()

	if err := r.prepare(begun); err != nil {
		return r.end(err)
	}
	err = r.serveThenLoop()
	if err == errPaused {
		r.steer.paused = true
		err = r.end(nil)
		r.res.Status, r.res.Response = StatusPaused, ""
		return err
	}
	return r.end(err)
}

// admit checks the message and asks the hooks, budget and SpendGuard
// whether it may run; done reports that the run ends here, with err (nil
// when a hook refused it: Result says why) or after routing the message
// to a running loop.
//
//go:noinline
func (r *run) admit() (done bool, err error) {
	o, ctx, msg := r.o, r.ctx, r.msg
	res := &r.res
	if err := checkMessage(&msg); err != nil {
		return true, err
	}
	if err := r.route(); err != nil {
		return true, err
	}
	if strings.TrimSpace(msg.Text) == "" {
		return true, ErrEmptyMessage
	}
	if err := ctx.Err(); err != nil {
		return true, err
	}
	if err := r.startBudget(); err != nil {
		return true, err
	}
	if h := o.hooks.ShouldProcess; h != nil {
		ok, reason, err := h(ctx, msg)
		if err != nil {
			return true, fmt.Errorf("agent: should-process hook: %w", err)
		}
		if !ok {
			res.Status, res.Response = StatusRefused, reason
			return true, nil
		}
	}
	if err := r.checkSpend(); err != nil {
		return true, err
	}
	if o.loop.RouteWhileRunning && msg.Source == SourceUser {
		if done, err := r.routeRunning(); done { // steer.go
			return true, err
		}
	}
	return false, nil
}

// prepare builds the context the model is sent: persona, time,
// capabilities, recalled items, history, the texts injected while no loop
// ran and the message.
//
//go:noinline
func (r *run) prepare(begun Begun) error {
	o, ctx, msg := r.o, r.ctx, r.msg
	if err := r.open(); err != nil {
		return err
	}
	r.setSystem(r.systemPrompt())
	for _, t := range begun.Queued { // injected while no loop ran
		r.steerEvent(SignalInject, t)
		r.push(injected(t))
	}
	user := llm.UserMessage(msg.Text)
	if msg.Source != SourceUser {
		user.Name = TriggerMessageName // the history tells it from the user's words
	}
	r.maybeCompact(o.ctxm.MessageTokens(user))
	r.push(user)
	if h := o.hooks.PrepareContext; h != nil {
		// The hook gets a copy: what it changes is sent, not kept.
		w, err := h(ctx, msg, slices.Clone(r.window))
		if err != nil {
			// The message is not kept; the history stays as it was.
			return fmt.Errorf("agent: prepare-context hook: %w", err)
		}
		r.setWindow(w)
	}
	r.commit()
	if begun.Paused {
		r.addNote(pausedNote)
	}
	return nil
}

// credentials returns the credential store the run's tool calls get: the
// configured one bound to the message's tenant (credentials.ForTenant), so
// no tool can reach another tenant's secrets. Nil when none is configured.
func (r *run) credentials() credentials.Store {
	if r.creds == nil && r.o.cfg.Credentials != nil {
		r.creds = watchCredentials(credentials.ForTenant(r.o.cfg.Credentials, r.msg.TenantID)) // secretseen.go
	}
	return r.creds
}

// serveThenLoop serves the conversation's waiting Agent-Tools first, then
// runs the loop unless serving ended the run.
func (r *run) serveThenLoop() error {
	if len(r.o.agents) > 0 || r.o.riskPark {
		done, err := r.servePending()
		if err != nil || done {
			return err
		}
	}
	return r.loop()
}

// end closes a run that held the conversation: timers stop, what is
// complete of the turn is saved, and the status is set.
func (r *run) end(err error) error {
	o, res := r.o, &r.res
	r.clock.close()
	serr := r.save()
	r.untrusted = untrustedIn(r.window, r.recalled)
	if r.buf != nil && !r.untrusted {
		r.untrusted = untrustedIn(r.buf.msgs, nil) // also what a trimmed window no longer holds
	}
	if r.buf != nil {
		r.releaseBuffers()
	}
	if err != nil {
		if serr != nil {
			return errors.Join(err, serr)
		}
		return err
	}
	r.settle()
	if serr != nil {
		r.saveErr = serr // the Result stands: the user has the answer
	} else {
		r.scheduleExtraction()
	}
	if h := o.hooks.PostProcess; h != nil && r.msg.Text != "" {
		if err := h(r.ctx, r.msg, res); err != nil {
			r.log().WarnContext(r.ctx, "agent: post-process hook failed", "source", r.msg.Source, "task_id", r.msg.TaskID, "err", err)
		}
	}
	return serr
}

// saveTimeout bounds saving a turn, on a context of its own: a turn is
// saved even when the caller's ctx ends.
const saveTimeout = 10 * time.Second

// save appends the run's complete messages to the conversation's history
// in the memory provider. The error wraps ErrHistoryNotSaved.
func (r *run) save() error {
	turn := r.carryPlan(r.turn()) // plan.go
	if len(turn) == 0 {
		return nil
	}
	// The turn happened (tools ran, an answer may be out): it is saved
	// whatever becomes of the caller's ctx meanwhile, within saveTimeout.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), saveTimeout)
	defer cancel()
	if err := r.o.mem.Append(ctx, r.msg.TenantID, r.msg.ConversationID, turn...); err != nil {
		r.log().ErrorContext(r.ctx, "agent: saving the turn failed", "source", r.msg.Source, "task_id", r.msg.TaskID, "messages", len(turn), "err", err)
		return fmt.Errorf("%w: %w", ErrHistoryNotSaved, err)
	}
	return nil
}

// loop runs turns until the model answers without tool calls.
func (r *run) loop() error {
	o := r.o
	emptyRetried := false
	r.loadSources()
	if o.cfg.Plan.Enabled {
		r.restorePlan() // plan.go
	}
	for r.res.Turns < o.loop.MaxTurns {
		if st := r.steer; st != nil && st.flags.Load() != 0 {
			if err := r.atBoundary(); err != nil { // steer.go
				return err
			}
		}
		r.trim()
		req := llm.Request{Messages: r.window, Tools: r.specs(), Purpose: llm.PurposeLoop}
		if r.meter != nil && !r.budgetAllows(&req) {
			return r.lastCall(budgetSpentNote, true)
		}
		resp, err := r.callLLM(req)
		if err != nil {
			return err
		}
		r.res.Turns++
		m := resp.Message
		m.Role = llm.RoleAssistant
		if len(m.ToolCalls) == 0 {
			if strings.TrimSpace(m.Content) == "" {
				if !emptyRetried {
					emptyRetried = true
					continue
				}
				return ErrEmptyReply
			}
			r.finish(m)
			return nil
		}
		asked := len(m.ToolCalls)
		if asked > o.loop.MaxToolCallsPerReply {
			m.ToolCalls = m.ToolCalls[:o.loop.MaxToolCallsPerReply:o.loop.MaxToolCallsPerReply]
		}
		m.ToolCalls = uniqueCallIDs(m.ToolCalls, r.res.Turns)
		r.push(m)
		base := len(r.res.ToolCalls)
		r.runTools(m.ToolCalls, resp.Usage)
		r.commit()
		if o.cfg.Plan.Enabled {
			r.applyPlans(m.ToolCalls, base)
		}
		if asked > len(m.ToolCalls) {
			r.tooManyCalls(asked, len(m.ToolCalls))
		}
		if err := r.ctx.Err(); err != nil {
			return err
		}
		if len(r.parked) > 0 {
			// An Agent-Tool waits for the user: the loop ends here.
			return r.replyWaiting()
		}
		if r.sub != nil && r.sub.park != nil {
			// A sub-agent waits for the user's approval (spawn_park.go).
			return r.stopParked()
		}
		if !o.loop.NoDoomLoop {
			if err := r.watchDoom(m.ToolCalls, base); err != nil { // doomloop.go
				return err
			}
		}
	}
	// Out of turns: one last call without tools asks for the answer.
	return r.lastCall(maxTurnsNote, false)
}

// lastCall asks for the answer in one call without tools, with note (for
// the model) after the window. With a budget the call must be affordable,
// or the run ends with ErrBudgetExceeded.
func (r *run) lastCall(note string, budget bool) error {
	final := append(r.window[:len(r.window):len(r.window)], r.note(note))
	if r.o.obs != nil {
		r.step(Step{Kind: StepNote, Text: note})
	}
	resp, err := r.callLLM(llm.Request{Messages: final, Purpose: llm.PurposeFinal}) // with a budget: capped, or ErrBudgetExceeded
	if err != nil {
		return err
	}
	m := resp.Message
	m.Role, m.ToolCalls = llm.RoleAssistant, nil
	if strings.TrimSpace(m.Content) == "" {
		return ErrEmptyReply
	}
	r.res.BudgetExceeded = budget
	r.finish(m)
	return nil
}

// note is a note for the model, in LoopConfig.NoteRole.
func (r *run) note(text string) llm.Message {
	return llm.Message{Role: r.o.loop.NoteRole, Content: text}
}

// tooManyCalls tells the model (and the log) that of the asked tool calls
// of its last reply only the first kept ran: the others were dropped from
// the reply.
func (r *run) tooManyCalls(asked, kept int) {
	r.log().WarnContext(r.ctx, "agent: a model reply asked for more tool calls than LoopConfig.MaxToolCallsPerReply; the others were dropped",
		"asked", asked, "run", kept)
	r.addNote(fmt.Sprintf("Your last reply asked for %d tool calls; at most %d are run per reply, so only the first %d ran and the other %d were not run. "+
		"Call again only those still needed.", asked, kept, kept, asked-kept))
}

const maxTurnsNote = "You have used every step available for this request. Do not call tools. " +
	"Answer the user now with what you have found, and say briefly what is still missing."

// finish ends the run with m as the answer. When streaming, an answer the
// model did not just stream (the agents' own prompt) is streamed now, so
// the last message a consumer shows is always Result.Response.
func (r *run) finish(m llm.Message) {
	if r.emit != nil && m.Content != "" && m.Content != r.lastEnd &&
		r.emit(Event{Type: EventMessageStart}) && r.emit(Event{Type: EventMessageChunk, Text: m.Content}) {
		r.emit(Event{Type: EventMessageEnd, Text: m.Content})
	}
	r.lastEnd = ""
	r.push(m)
	r.commit()
	r.res.Response = m.Content
}

// uniqueCallIDs gives every call of a turn a non-empty ID that no other call
// of the turn has, so each result can answer exactly one call. Clients
// normally do this; a custom one may not. The slice is copied only when an
// ID changes.
func uniqueCallIDs(calls []llm.ToolCall, turn int) []llm.ToolCall {
	ok := true
	for i, c := range calls {
		if c.ID == "" {
			ok = false
			break
		}
		for _, d := range calls[:i] {
			if d.ID == c.ID {
				ok = false
				break
			}
		}
	}
	if ok {
		return calls
	}
	out := make([]llm.ToolCall, len(calls))
	seen := make(map[string]bool, len(calls))
	for i, c := range calls {
		if c.ID == "" || seen[c.ID] {
			c.ID = fmt.Sprintf("call_t%d_%d", turn, i)
		}
		seen[c.ID] = true
		out[i] = c
	}
	return out
}
