// Package agent is valet's ReAct loop: the [Orchestrator] takes a user's
// message, lets the model call tools — many at once — until it can answer,
// and returns the answer with the telemetry of everything it did.
//
// # Wiring
//
//	o, err := agent.NewOrchestrator(agent.Config{
//		LLM:          client,               // any llm.Client: llm/openai, llm/llmtest, ...
//		SystemPrompt: "You are Koi, a concise personal assistant.",
//		Tools:        []tool.Tool{weather, search},
//	})
//	res, err := o.HandleMessage(ctx, agent.Message{TenantID: "u1", ConversationID: "c1", Text: "Weather in Paris?"})
//	fmt.Println(res.Response, res.Turns, res.Usage)
//
// Or stream the run, to show text as the model writes it and tool calls as
// they start and finish:
//
//	for ev, err := range o.Stream(ctx, msg) {
//		switch ev.Type {
//		case agent.EventMessageChunk:
//			fmt.Print(ev.Text)
//		case agent.EventMessageRetract:
//			// the model call broke off and is retried: erase ev.Text
//		case agent.EventExecutionEnd:
//			// ev.Result is the same Result HandleMessage returns; err is its error
//		}
//	}
//
// Tenant, conversation and task ids are at most [MaxIDLen] (255) bytes of
// UTF-8 without NUL, the limit of every valet package (memory, trigger,
// pool, credentials). HandleMessage, Stream, ResolveApproval, History,
// Forget and the pending-agent methods refuse others with [ErrInvalidID]
// before anything runs; an empty tenant is [ErrNoTenant].
//
// The clock comes from Config.Clock (and SpendLimitsConfig.Clock), a
// clock.Clock; nil is clock.System. Tests pass one clock/clocktest.Clock
// to everything they wire: the orchestrator, its memory, its pool and the
// trigger engine.
//
// # One message, step by step
//
// The ShouldProcess hook may decline the message. Messages of the same
// (tenant, conversation) wait for each other; other conversations run in
// parallel. The model is sent a system prompt (the persona, the current time
// in the user's time zone, the list of tools), the conversation's history and
// the message (the PrepareContext hook may edit them). Then each turn:
//
//   - the history is trimmed if it is past LoopConfig.TrimThreshold of the
//     window (tool calls keep their results);
//   - the model is called; failures are handled by kind through one table:
//     rate limits and 5xx back off exponentially, honouring Retry-After, up to
//     LLMMaxRetries; a timeout is retried once; a context overflow shrinks
//     the request straight to 90% of the window when the server stated its
//     window and the request's size (llm.Error.ContextLimit, ContextUsed),
//     and otherwise trims, then truncates every tool result, then keeps only
//     the last messages, then fails with ErrContextOverflow — every retry is
//     strictly smaller than the request that was rejected, and a defence
//     that would change nothing is skipped; an auth or bad-request error is
//     returned at once;
//   - no tool calls: that is the answer;
//   - otherwise every tool call runs concurrently (up to
//     LoopConfig.MaxParallelTools at once) with its own timeout. A reply
//     may ask for at most LoopConfig.MaxToolCallsPerReply calls (128),
//     whatever the client: the calls past it are dropped from the reply
//     and the model is told they did not run. A
//     failure — bad arguments, an unknown tool, an error, a panic, a timeout —
//     becomes an error tool result the model reads and can recover from; it
//     never aborts the loop. A panic of a tool or an Agent-Tool reads
//     "internal error" (its value and stack are logged through
//     Config.Logger, nowhere else); the text of any other failure has its
//     secret-looking spans masked (as in argument summaries: an
//     access_token=… in a URL, a bearer token) before it reaches the
//     model, the history, ToolCallRecord.Error and the stream's events.
//     Each result is cut to its share of the window.
//
// After LoopConfig.MaxTurns tool turns, one last call without tools asks for
// a final answer. The exchange is saved to the conversation's history and
// the PostProcess hook runs.
//
// # Invariants
//
// Every assistant tool call in what the model is sent has exactly one tool
// result after it, through trimming, overflow handling and cancellation. A
// cancelled ctx ends the run promptly (tools see it through their ctx) and
// leaves no goroutine behind; the Result then has StatusCancelled, and the
// completed turns are kept in the history. Tools must honour their ctx: a
// tool that ignores it keeps its message waiting until it returns, because
// the loop never abandons a running call. Arguments are summarised for
// telemetry with secret-looking fields masked.
//
// # Agent-Tools
//
// An Agent-Tool is a stateful agent the model calls like a tool. It may
// need more input, or the user's confirmation, before it acts:
//
//	type SendEmailIn struct {
//		To      string `json:"to" jsonschema:"description=Recipient,format=email"`
//		Subject string `json:"subject"`
//	}
//	type SendEmail struct{ /* deps */ }
//	func (SendEmail) Run(ctx context.Context, in SendEmailIn) (agent.Reply, error) { ... }
//	func (SendEmail) Approval(in SendEmailIn) *approval.Request {           // optional
//		return &approval.Request{ActionSummary: "Send an email to " + in.To, AllowModification: true}
//	}
//	func (SendEmail) Validate(in SendEmailIn) error { ... }                  // optional
//
//	reg := agent.NewRegistry()
//	err := agent.Register(reg, "send_email", "Send an email for the user", SendEmail{})
//	o, err := agent.NewOrchestrator(agent.Config{LLM: c, Agents: reg, Pool: store})
//
// The model sees the input struct's schema with every constraint written
// into the field descriptions (a `rule:"..."` tag adds a rule in words), a
// task_instruction field, no required list, and "[Requires user
// confirmation before execution]" when the agent has an Approval method.
// Valid arguments are adopted; invalid ones are dropped and reported;
// absent optional ones take their defaults. If a required field is missing
// or invalid, or Validate rejects one (see [InvalidField]), or Approval
// returns a request, the agent is parked in the pool ([pool.Store]): its
// tool call gets a result saying what it waits for, the loop ends, and the
// model phrases the question in one extra call without tools (or, with
// LoopConfig.DirectAgentPrompts, the agent's own prompt is the reply). The
// Result has StatusWaitingForInput or StatusWaitingForApproval, Waiting,
// PendingApprovals; Stream emits EventStateChange with them.
//
// The conversation's next message serves the waiting agents first:
//
//   - approvals: a bare yes / no with one approval pending decides it
//     with no model call; otherwise one call with the forced
//     resolve_approvals tool returns a decision per request. Approved
//     actions run in the order the user confirmed them; an edit is merged,
//     validated again, and runs (still invalid: it is asked again);
//     a cancelled one gives the result "User cancelled this action.";
//     expired ones are removed and the model is told. A reply decides the
//     action as the conversation last showed it: one changed since then
//     (its arguments edited by another writer of the pool) does not run;
//     the reply shows it as it is now (its listing follows the model's
//     text), and only then does a bare "yes" approve that version;
//   - input: one call constrained to the agent's schema extracts the
//     fields; a reply about something else falls through to the loop with
//     the waiting agent mentioned.
//
// A completed agent's result enters the conversation as a tool call with
// its result, and the loop goes on, so the model can follow up. UIs decide
// with [Orchestrator.ResolveApproval] and list with
// [Orchestrator.ListPendingApprovals]; [Orchestrator.PauseAgent],
// [Orchestrator.ResumeAgent] and [Orchestrator.CancelAgent] manage the
// pool. Every approved action runs exactly once: the pool's atomic Take
// lets one decision win, also across replicas sharing pool/redispool.
// Each entry carries its agent's schema version; an entry from an older
// schema is removed with a warning and never run.
//
// # Sub-agents
//
// With Config.SubAgents enabled the model is offered spawn_agent
// (SpawnAgentTool) to delegate a self-contained task:
//
//	o, err := agent.NewOrchestrator(agent.Config{LLM: c, Tools: tools,
//		SubAgents: agent.SubAgentOptions{Enabled: true, WorkerPrompt: "You research hotels."}})
//
// The model calls spawn_agent(task, context, budget_share). The sub-agent
// runs its own loop on a fresh context: the worker prompt, and the task
// and context as its one message — nothing of the conversation. It has the
// run's tools and exposed Agent-Tools, loads and appends no history,
// recalls nothing and runs no fact extraction. Its final message, with its turns, tokens, tool
// calls and duration, is the tool result; several spawns of one reply run
// concurrently, as tool calls do. Sub-agents nest down to
// SubAgentOptions.MaxDepth (2): at that depth spawn_agent is not among a
// sub-agent's tools, and a call of it anyway is an error result that
// starts nothing. A sub-agent is stopped after SubAgentOptions.Timeout
// (what it wrote is returned, marked). It spends from its parent's Budget
// (Result.Usage and Result.Consumed include it); budget_share gives it that
// share of what is left (without a Budget it has no effect), and when it
// has used it the sub-agent answers
// from what it has (or stops) and the result is marked, ResultStatus
// "budget_spent". Spawns of one reply each get their share of what was
// left when the reply's calls began, so shares that add up to more than 1
// may together overspend it: the parent's next call then finds the budget
// spent. A sub-agent's steps reach the Observer as a run of their own
// with Step.Path (the spawn calls' IDs from the top run), its events reach
// Stream with Event.Path, and its run span is a child of the spawn's
// execute_tool span.
//
// # Skills
//
// Config.Skills (agent/skill.Load: SKILL.md files from any fs.FS) makes
// the sub-agents specialists. The coordinator's system prompt lists the
// skill index — one line per skill, its name and description, never a
// body — and spawn_agent gains a skill argument:
//
//	skills, err := skill.Load(os.DirFS("skills"))
//	o, err := agent.NewOrchestrator(agent.Config{LLM: c, Tools: tools, Models: models,
//		SubAgents: agent.SubAgentOptions{Enabled: true}, Skills: skills})
//
// spawn_agent(skill: "research", task, context) starts a specialist: its
// system prompt is the worker prompt followed by "Instructions of skill
// research:" and the skill's body; its tools are exactly those the skill
// lists, in its order. A tool the skill does not list is not in the
// specialist's requests, and a call of it anyway is an "unknown tool"
// error result that runs nothing — the scope is structural, not an
// instruction. spawn_agent is among its tools only when the skill lists
// it and the depth allows it; an Agent-Tool it lists is offered (one
// needing approval parks the specialist: see below). A sub-agent a specialist starts without a skill gets
// the specialist's tools at most, at any depth, never the coordinator's;
// with a skill, that skill's tools (so listing spawn_agent lets a
// specialist delegate to the other skills). A skill's model runs the
// specialist through Config.Models; without one it runs on its parent's
// model. A specialist's steps carry Step.Skill.
//
// A spawn naming a skill there is none of is an error result listing the
// skills, and starts nothing. NewOrchestrator refuses skills without
// SubAgents.Enabled, and a skill listing a tool that is neither a plain
// tool, a visible Agent-Tool nor spawn_agent or naming a model
// Config.Models does not answer (ErrInvalidConfig with
// skill.ErrUnknownTool or skill.ErrUnknownModel). With Config.ToolSources
// a tool not found there may be a source's: it is looked for when a spawn
// starts the skill, and one the run's tools lack makes the spawn an error
// result naming it.
//
// # Approvals inside sub-agents
//
// A sub-agent cannot ask the user anything itself: an Agent-Tool it calls
// with missing or invalid fields is an error result naming them (it must
// supply them), and one that is complete and needs no approval runs at
// once. One that needs approval parks the sub-agent: its loop stops after
// the turn, and its state — the spawn call, depth, path, model, what its
// budget has left and what it used, its window (task, turns, the results
// of the turn's other calls) and the call that waits — goes into the
// Agent-Tool's pool entry (pool.Entry.SubAgent, one level per nesting
// level, outermost first, versioned; the window with credential shapes
// masked as RedactText masks them, in message texts, tool results and
// tool-call arguments, since a pool such as pool/redispool stores it: the
// resumed sub-agent sees them masked), which is otherwise made as for the
// coordinator's own call: same approval request, same fingerprint rules,
// in the coordinator's conversation. The coordinator's spawn_agent call
// waits like a parked Agent-Tool, so its run ends with
// StatusWaitingForApproval and Result.PendingApprovals holding the request
// the user sees; Waiting.Path tells it came from a sub-agent. Only one
// approval waits per sub-agent: when one turn has several calls needing
// approval, the first in call order parks and the others are error
// results telling the sub-agent to call them again after the decision.
// Two sub-agents of one reply may each park: two requests, decided apart.
//
// The decision (ResolveApproval, or the user's reply) takes the entry
// exactly once across replicas, as for any approval. Approve or Edit runs
// the action once, inside the innermost sub-agent (its events and steps
// carry its path), and its result answers that sub-agent's waiting call;
// Cancel answers it with "User cancelled this action.". The sub-agent's
// loop goes on — its prompt, tools and model rebuilt from the
// configuration (its skill's, for a specialist; with Config.ToolSources,
// the sources' tools, loaded before the decision), its remaining budget —
// and its answer is its parent
// sub-agent's spawn result, and so up to the coordinator, into whose
// conversation it enters as a resumed spawn_agent call with its result;
// the coordinator's loop then goes on. A resumed sub-agent that stops
// without answering (cancelled, timed out, its model failing) still
// reports the decided action's outcome in that result ("The approved
// action send_email ran: …"). A sub-agent that needs another
// approval parks again: a new request, and the run waits again. What the
// resumed sub-agents use counts in the deciding run's Result. Entries
// survive restarts with a shared pool (pool/redispool). An entry this
// orchestrator cannot resume as it parked — sub-agents disabled or
// shallower, another state format, a window whose tool results lack their
// calls, a skill gone or no longer listing the tool a level waits on, a
// model no longer in Config.Models — is checked before it is taken and
// discarded like one of a stale schema (ErrStaleAgent): nothing runs;
// CancelAgent stops the sub-agent with its action; Forget removes the
// conversation's pending agents, so a later decision is
// approval.ErrNotFound and nothing runs.
//
// # Plans
//
// With Config.Plan enabled the model is offered update_plan
// (UpdatePlanTool) to keep a plan of a task with several steps in view:
//
//	o, err := agent.NewOrchestrator(agent.Config{LLM: c, Tools: tools,
//		Plan: agent.PlanOptions{Enabled: true}})
//
// Its arguments are the whole plan: steps (each an id, a description and
// a status: pending, in_progress, done, blocked or skipped), the current
// focus and the approach. The tool result is the plan as a markdown
// checklist ([Plan.Markdown]; every text put on one line, so no text can
// forge a step); a call with an unknown status, duplicate step IDs, more
// than MaxPlanSteps steps or text past its bound is an error result the
// model reads (tool.ErrInvalidArguments or ErrInvalidPlan), and the
// previous plan stays.
// Result.Plan is the plan when the run ends, and Observers see each
// change as StepPlan.
//
// The plan belongs to the conversation and lives in its history as the
// update_plan call and its result: the next message's run starts from the
// newest one that succeeded (Result.Plan is set even when the model does
// not touch it). A compaction that folds that call into the summary puts
// it back right after the summary, so the model still sees the plan;
// without compaction, a run whose plan's call is about to leave the
// MaxHistoryMessages messages the next run loads repeats it after its
// user message in the turn it saves. A sub-agent may keep a plan of its
// own, which is thrown away with it.
//
// # Doom loops
//
// The loop watches for a model going round in circles: the same tool call
// (the same name and arguments, whatever the arguments' key order and
// spacing) LoopConfig.DoomRepeats (3) times among the run's latest
// DoomWindow (10) calls, or DoomFailures (5) failing calls in a row (one
// that succeeds starts the count again). The first time, a note
// (LoopConfig.NoteRole, never saved) asks the model to reconsider; the
// next times a firmer one; at DoomMaxInterventions (3) one last call
// without tools asks for an answer from what was found, which becomes
// Result.Response, and the run ends with ErrDoomLoop (Result.Status
// StatusError; the partial answer is saved to the history like any
// answer). After each intervention the detector starts afresh. Observers
// see each intervention as StepDoomLoop, and the run's span gets a
// valet.doom_loop event. LoopConfig.NoDoomLoop turns it off.
//
// # Risk
//
// Every plain tool call is classified before it runs. Its risk is the
// tool's declared one (tool.WithRisk; tool.RiskLow when none; an MCP tool's
// comes from its annotations, and one without is tool.RiskHigh), refined
// by LoopConfig.RiskPolicy, which gets the call and may decide from its
// arguments: the same shell tool can run `ls` freely, wait for the user
// on `rm` and refuse `rm -rf` or `sudo`. Without a RiskPolicy (the
// default) the declared risk stands. The policy runs on the loop's
// goroutine, in call order, before the turn's calls start.
//
//   - RiskLow: the call runs.
//   - RiskMedium: it runs, and an INFO line names the tool (never its
//     arguments).
//   - RiskHigh: it waits for the user's approval, like an Agent-Tool's
//     (see "Agent-Tools"): a pool entry named RiskToolPrefix + the tool's
//     name ("tool:shell") holds the call's arguments; its request's
//     ActionSummary and Details show the tool and its arguments with
//     secrets masked (RedactArguments), each on one line; its options are
//     approve and cancel (no edit). The model reads that the call waits.
//     The user's reply or ResolveApproval decides it with the same
//     fingerprint rules, across replicas and restarts: approved, it is
//     classified again with the RiskPolicy and the tool's declared risk
//     in force at the decision (an approval is consent to a high-risk
//     call, not a way round a denial): critical now, or the policy fails
//     or panics, it is denied — the request is settled, nothing runs, and
//     its result reads that the risk policy denied it; any other risk, it
//     runs once, with the arguments the model gave, and its result enters
//     the conversation as a resumed call;
//     cancelled, the model reads "User cancelled this action.". The tool
//     is looked up by name when the decision comes: a tool gone, or whose
//     description or schema changed, makes the request stale
//     (ErrStaleAgent) and nothing runs. Arguments that are not a JSON
//     object or fail the tool's schema are an error result, never a
//     request.
//   - RiskCritical (or any level above): the call is not run; the model
//     reads that the risk policy denied it (ErrRiskDenied, ResultStatus
//     "denied").
//
// A RiskPolicy that returns an error or panics denies the call the same
// way; the loop goes on, and the error or panic value is logged masked,
// never shown to the model. Calls of Agent-Tools and of spawn_agent are
// not classified: an Agent-Tool asks for approval itself.
//
// Inside a sub-agent a high-risk call reaches the user the way an
// Agent-Tool's approval there does (see "Approvals inside sub-agents"):
// the sub-agent parks, the coordinator waits, and once approved the call
// runs inside the sub-agent, which goes on. Only the first call of a turn
// that needs approval parks it; the others are told to call again.
//
// Observers see StepRisk for each call classified by a RiskPolicy or of a
// tool declared above low (its Risk and RiskDecision); the call's
// execute_tool span gets valet.tool.risk and valet.tool.risk.decision.
//
// # Delegation: durable results and background task graphs
//
// Every sub-agent's result is stored in SubAgentOptions.Engine's Results
// (agent/delegate; default an in-memory engine) before the spawn's tool
// result goes to the coordinator, and the tool result names it:
// "[stored as [agent_result:ID]: …]". When the write fails the tool result
// still carries the text, says it has no reference, and is no error. A
// spawn's task or context may hold [agent_result:ID] references instead
// of the text: each is read from the Results of the run's tenant and
// appended to the sub-agent's context in an <agent_result id="…"
// status="…"> block introduced as untrusted data; the text's line breaks
// are normalised, its control characters replaced, every "<" written
// "&lt;" (so no spacing, invisible character or case lets it open or
// close a tag), and it is cut at MaxInlinedResultBytes, saying so. A
// reference to no stored result — another tenant's included — or more
// than MaxResultRefs of them is an error result: nothing starts, no model
// call is made.
//
// The coordinator (depth 0) may also start background work:
// spawn_agent(task, background: true) or spawn_agent(tasks: [{id, skill,
// task, context, depends_on}, …]) submits a delegate.Graph to the engine
// and returns at once with the graph's id and its tasks' result ids
// ([agent_result:<graph>.<task>]). A graph that cannot run — a cycle,
// an unknown dependency or skill, a reference to a missing result — is an
// error result and nothing is stored; inside a sub-agent, background and
// tasks are error results, and so is a task holding more than
// MaxResultRefs references. The graph's Budget is budget_share of what
// the run's budget had left, fixed and reserved at spawn: later spawns of
// the run get a share of what is neither used nor reserved, so graphs
// cannot together get more than the run had (its own calls are not held
// back). Its Model is the message's. Its tasks run as sub-agents at depth
// 1 when their dependencies completed (in parallel up to the engine's
// limit; one at a time in a graph whose Budget caps tokens, cost or tool
// calls, so it spends at most that and one call), where
// [agent_result:<task id>] names a dependency's result; a failed task
// blocks its dependants. Each task is a run for Config.SpendGuard
// (checked before, recorded after). Forget drops the conversation's
// results and graphs: no delivery brings it back. When
// the graph ends its end is delivered to the conversation as a new
// message, the path a triggered run takes, listing the tasks' outcomes
// and their results framed as data; the coordinator's reaction goes to
// SubAgentOptions.OnBackground, so the user hears of it without asking.
// Delivery is at least once (see Orchestrator.TaskExecutor). A background
// task has no run of the coordinator to wait in: its specialist calling
// an Agent-Tool that needs approval is not parked, the action is not
// taken, and the task fails saying so — the coordinator can run it in the
// foreground, where the user is asked (a resumed sub-agent's result is
// stored like any other).
//
// The default engine is in memory and run by the orchestrator from the
// first background spawn until Close. An engine given in
// SubAgentOptions.Engine (delegate/pgdelegate keeps results and graphs in
// PostgreSQL, so a restart delivers what was left) is run by the host:
//
//	var eng delegate.Engine = … // a durable one, e.g. from agent/delegate/pgdelegate
//	o, err := agent.NewOrchestrator(agent.Config{…, SubAgents: agent.SubAgentOptions{Enabled: true, Engine: eng,
//		OnBackground: func(ctx context.Context, res *agent.Result) { notify(res.Response) }}})
//	go eng.Run(ctx, o.TaskExecutor())
//
// # Steering
//
// A user can correct, stop or pause a loop while it runs, from the same
// process or from another replica:
//
//   - [Orchestrator.Inject] hands the user's text to the conversation's
//     running loop, which sees it at its next turn boundary (once the tool
//     calls under way have returned) as a user message framed as written
//     while it worked, saved in the history in order. With no loop running
//     the text is queued, and the conversation's next message sees it
//     before its own text. The queue is bounded (16 texts, 64 KiB by
//     default); a full one fails with ErrQueueFull. Forget drops it. A
//     run a trigger or a delivery started (Message.Source other than
//     SourceUser) leaves the queue to the user's next message.
//   - [Orchestrator.Cancel] stops the loop now: its ctx is cancelled, so
//     the model call or the tools under way end (a tool's result reads
//     interrupted), sub-agents stop with it, the completed turns are saved
//     with every call paired with its result, and the run's HandleMessage
//     returns StatusCancelled with an error wrapping ErrCancelled. It
//     also stops the conversation's running background graphs, on
//     whichever replica their tasks run (delegate.Canceller: the default
//     engine and pgdelegate's): their sub-agents' ctx is cancelled, their
//     outputs dropped, nothing of them runs again, their end is not
//     delivered.
//   - [Orchestrator.Pause] stops it at the next turn boundary:
//     StatusPaused, a nil error, no Response, the turns (and the plan)
//     saved. The conversation's next message continues from them with a
//     note (LoopConfig.NoteRole, not saved) saying the task was paused:
//     the user's next message, not a triggered or delivered run's, which
//     leaves the pause in place; Forget drops it.
//     Sub-agents stop at their own next boundary. Background graphs run
//     on, and their end is delivered: Pause holds the foreground loop
//     only.
//
// Cancel with neither a loop nor a background graph running, and Pause
// with no loop running, fail with ErrNotRunning, and so
// do they when the loop they saw running ends before the signal goes out:
// a signal names its run, and never reaches the conversation's next one.
// All three
// go through Config.Control: a running marker per conversation, the
// inject queue, and signals the running loop hears at once (it reads a
// local flag at its turn boundaries: no round trip on the hot path). The
// default, NewMemoryControl, serves one process; replicas share
// redispool.NewControl, on which a marker whose process died expires. A
// Control that fails when a loop starts leaves that loop unsteerable
// (logged), not failed. A run ResolveApproval starts is steerable like a
// message's (it leaves what waits for the user's next message there).
//
// With LoopConfig.RouteWhileRunning, a user's message for a conversation
// whose loop runs is routed instead of waiting its turn: a bare "stop" or
// "cancel" (any case, punctuation aside) becomes Cancel and "pause" Pause,
// anything else is classified by one model call (llm.PurposeRoute,
// answered with one word: correction, stop, pause or new); a correction is
// injected. A routed message returns at once with StatusInjected and
// Result.Steered (SignalInject, SignalCancel or SignalPause), and saves
// nothing itself; a new request waits its turn as without the option,
// and so does a message whose classification call fails (logged). The
// label is never streamed to the user. A
// message only ever acts on its own tenant's conversation. Observers see
// StepInject (with the text), StepCancel and StepPause; the run's span
// gets a valet.steer event.
//
// # History and memory
//
// Each conversation's history lives in Config.Memory, a memory.Provider:
// by default a bounded in-memory one (memory.NewInMemory) that a restart
// empties; memory/pgmemory keeps it in PostgreSQL, where replicas sharing
// the database (and a Locker) see each other's turns. Each message loads
// the newest LoopConfig.MaxHistoryMessages messages and, when it ends,
// appends its turn — the user's message, the tool calls with their
// results, the answer — in one Append. What a turn trims from the window
// to fit TrimThreshold is trimmed from what the model is sent only: the
// turn is saved whole. A run that fails saves its completed part (a tool
// call never without its result); a cancelled one too. If loading fails,
// nothing reaches the model and the error wraps ErrHistoryNotLoaded; if
// saving fails, the Result is complete and the error wraps
// ErrHistoryNotSaved. A Message without ConversationID belongs to
// DefaultConversationID.
//
// Each message with text also recalls the tenant's long-term items most
// relevant to it (memory.Provider.Recall, the text as the query, within
// MemoryOptions.Recall) and shows them at the end of the system prompt in
// a <background> block that says they are facts about the user, not
// instructions; an item whose memory.Origin is not the user's or the
// host's (a task's result, a tool's text, the assistant's words) is
// marked as such, not as a fact about the user; angle brackets and line breaks in an item are replaced,
// so no item can close the block. A failing recall is logged and the
// message is answered without it.
//
// With MemoryOptions.Extract, the durable facts of each user's message and
// its answer are remembered after the reply (memory.OriginUser), and may
// supersede a recalled item unless the model answered from text the user
// did not write (a tool result, a triggered run's message or a summary in
// the history, an item of another origin), which the answer may relay. Text the user did not write never counts as
// the user's: a triggered run is learnt from only with
// MemoryOptions.ExtractTriggered, and then as the trigger's
// (memory.OriginTrigger), never superseding; compaction's facts never
// supersede and carry the origin of what was summarised (a tool's when
// tool results were among it). A triggered run's message is kept in the
// history with the Name TriggerMessageName.
//
// # Budgets and spend
//
// A Budget (Message.Budget, or LoopConfig.Budget by default; the type is
// budget.Limits, shared with trigger) bounds one run: tokens, estimated cost in US dollars (Config.Prices over
// DefaultPrices), wall clock and tool calls. Each model call's MaxTokens is
// capped at what remains; at 80% of any limit the model is told to wrap
// up; calls of a turn past the tool-call limit get an error result without
// running; when the budget allows no further call with tools, one last
// call without tools asks for the answer (Result.BudgetExceeded), or the
// run ends with ErrBudgetExceeded when even that cannot be afforded.
// Calls are planned from the input count the model last reported against
// valet's estimate, kept per tenant and model across runs (see Budget). A
// token limit no model call can fit (smaller than the system prompt and
// tool specs, as estimated, plus 64 output tokens) is refused by
// NewOrchestrator, HandleMessage and Orchestrator.CheckBudget (which
// trigger/agentexec calls when a task is created).
// Result.Consumed (a budget.Consumed) reports what every run used. A SpendGuard
// (Config.SpendGuard) refuses a run before any model call, and records what
// each run spent. SpendLimits keeps daily and monthly limits per tenant and
// overall, in a time zone, in one process; agent/pgspend keeps the same
// limits on PostgreSQL, shared by replicas and kept across restarts; both
// pass agent/spendtest's conformance suite. A guard that is a SpendReserver
// (both are) also reserves each model call's largest cost before the call
// (its estimated input and its MaxTokens of output, capped at
// ReserveOutputTokens when nothing else caps it, at the model's price) and
// settles it with the real cost after: calls in flight are counted, so a
// limit is passed by at most one call's reservation, on any number of
// replicas; a call refused stops the run as refused (StatusRefused,
// ErrSpendRefused), keeping what it consumed. Sub-agents' calls are
// reserved and settled the same way, and counted once. Message.Source and TaskID (a
// triggered run's) reach the Result, the logs and the approvals a run
// raises.
//
// [Orchestrator.History] returns what the next message would load;
// [Orchestrator.Forget] erases a conversation's history and the items it
// wrote.
//
// # Calls valet makes
//
// Every request the orchestrator sends the model says what it is for in
// llm.Request.Purpose. Clients do not send it to the model; test doubles
// script calls by it (llmtest.Script.On), and observability tells a run's
// calls apart by it:
//
//   - llm.PurposeLoop: a turn of the loop, with the tools;
//   - llm.PurposeFinal: the answer without tools once LoopConfig.MaxTurns
//     turns ran or the budget allows no further turn with tools;
//   - llm.PurposePhrase: the reply without tools that asks the user for
//     what waiting Agent-Tools need (none with DirectAgentPrompts);
//   - llm.PurposeResolveApprovals: the user's reply to pending approvals,
//     forcing approval.ResolveToolName (resolve_approvals);
//   - llm.PurposeProvideFields: the user's reply to an Agent-Tool waiting
//     for fields, forcing [ProvideFieldsToolName] (provide_fields);
//   - llm.PurposeCompact: compaction (LoopConfig.CompactThreshold),
//     forcing [CompactToolName] (compact_conversation);
//   - llm.PurposeRememberFacts: fact extraction (MemoryOptions.Extract),
//     forcing [RememberToolName] (remember_facts), in the background after
//     the reply: [Orchestrator.Close] waits for it;
//   - llm.PurposeRoute: the classification of a message that arrives
//     while its conversation's loop runs (LoopConfig.RouteWhileRunning),
//     without tools, answered with one word.
//
// The arguments the model answers each forced tool with:
//
//	resolve_approvals     {"decisions": [{"id": "<pending id>", "action": "approve" | "edit" | "cancel",
//	                                      "fields": {<changed fields, for edit>}, "reason": "<the user's>"}]}
//	provide_fields        {<the agent's input fields the reply gives>}, or {"unrelated": true}
//	compact_conversation  {"summary": "<what the older messages established>", "facts": [<fact>, ...]}
//	remember_facts        {"facts": [<fact>, ...]}
//
//	fact                  {"text": "The user's dentist is Dr. Kim.",
//	                       "kind": "fact" | "preference" | "person" | "date" | "other",
//	                       "supersedes": "<the id of a known item it replaces>"}
//
// resolve_approvals' ids are those of the pending approvals, listed in its
// schema (approval.ResolveTool); an empty list decides nothing.
// provide_fields' schema is the agent's input struct with every field
// optional: a reply gives only what the user said. An empty summary keeps
// the history as it was (trimmed instead). Of the facts of one call at
// most 10 are kept, each at most 300 characters; "supersedes" is honoured
// only for an item the call was shown (see "History and memory" for when
// it is not at all), and an empty list remembers nothing. In tests,
// llmtest.Decide, ApproveAll, CancelAll, ProvideFields, Unrelated, Summary
// and Remember build these replies.
//
// # Models by name, and fallbacks
//
// Config.Models (a [ModelRouter]; [ModelMap] is the map one) names the
// clients a message ([Message].Model), a trigger task (trigger.Task.Model)
// or a skill may ask for, so "fast" and "smart" mean what the host says.
// Config.Model names the default when Config.LLM is nil. A name no client
// answers is [ErrUnknownModel]: from NewOrchestrator for Config.Model,
// from agentexec when a task is created, else when the run starts.
//
// A client that is an llm.Fallback (a primary and the models to try when
// it is down) reports each switch to the run: a WARN line, a
// [StepModelFallback] step and a valet.llm.fallback span event on the
// run's and the call's spans. [Result].Models names the model that
// answered each call, and each call is priced at that model. The run
// names its tenant and conversation to the Fallback
// (llm.WithConversation), which keeps a conversation on the model that
// answered it. The orchestrator sees a Fallback given as Config.LLM or in
// a ModelMap (or any other ModelRouter); one wrapped inside a client of
// your own is not seen, and logs its switches itself. Runs whose clients
// hold no Fallback carry no such context values.
//
// # Runs and logs
//
// Each call of HandleMessage, Stream or ResolveApproval is one run, with
// a new unique Result.RunID whatever its outcome. Every line the run
// writes to Config.Logger, and every line a tool writes through its
// tool.ExecContext's Logger, carries the attributes "tenant",
// "conversation" and "run_id" (Result.RunID), before the line's own; the
// run's background fact extraction logs with the same three. All go to
// the one Config.Logger (slog.Default() when nil, taken once by
// NewOrchestrator); valet never logs through the global logger at log
// time.
//
// The levels:
//   - INFO: one line per run when it ends, "agent: run ended", with
//     status, turns, tool_calls, tokens_in, tokens_out, cost_usd,
//     duration, source (task_id when set) and err, masked, when it failed;
//   - WARN: each failed tool call, "agent: tool call failed" (tool,
//     call_id, status, duration, attempts, err masked as the model reads
//     it), and what the run worked around: a failed recall, compaction or
//     hook, a shortened context, dropped tool calls;
//   - ERROR: what was lost: a turn not saved, spend not recorded, a tool's
//     or an Observer's panic (its text masked);
//   - DEBUG: each model call, "agent: model call" (purpose, messages,
//     model, finish_reason, tokens, tool_calls, duration, err), each retry,
//     and each other tool call, "agent: tool call" (tool, call_id, status,
//     args as in ArgsSummary, result_chars, duration, attempts).
//
// A logger that drops a level costs a run nothing for that level's lines.
// Secrets are masked in every line (see RedactText).
//
// The package agent/transcript is an Observer that writes every step of
// every run as a redacted JSONL transcript, to a Writer or to one file per
// conversation, and reads it back into a summary per run.
//
// # Observing runs
//
// Config.Observer hears every step of every run, in order: the run's start
// and end, each model request and response (messages by reference, not
// copied), retries with their error kind, tool calls and results,
// approvals raised and decided, compactions, recalled items with their
// scores, notes valet gives the model, spend refusals. It is called on the
// run's goroutine and must return quickly; an observer that writes
// anywhere goes behind NewAsyncObserver, which copies each step and
// delivers it on its own goroutine, dropping (and counting) steps when it
// falls behind rather than holding a run up:
//
//	obs, err := agent.NewAsyncObserver(myObserver, agent.AsyncObserverConfig{})
//	o, err := agent.NewOrchestrator(agent.Config{LLM: model, Observer: obs})
//
// An observer's panic is recovered and logged once. Without an Observer a
// run builds no step at all; a no-op one costs a run no allocation.
//
// # Traces and metrics
//
// Config.TracerProvider and Config.MeterProvider take any OpenTelemetry
// provider (the SDK's, exporting to an OTLP collector); nil, the default,
// records nothing and costs a run nothing. valet imports only the
// OpenTelemetry API. Names follow the GenAI semantic conventions of the
// semantic-conventions-genai repository, v0.1.0 (Development status: they
// may still change); the attribute keys are valet's own constants.
//
// Spans: "invoke_agent {agent}" per run (HandleMessage, Stream,
// ResolveApproval), a child of the span in the caller's ctx, with
// gen_ai.conversation.id, valet.tenant.id, valet.run_id (Result.RunID),
// the run's token usage and, on failure, error.type; under it "chat
// {model}" per model call attempt (gen_ai.operation.name,
// gen_ai.provider.name, gen_ai.request.model, gen_ai.usage.input_tokens and
// output_tokens, gen_ai.response.finish_reasons, valet.llm.purpose for the
// calls made aside) and "execute_tool {name}" per tool or Agent-Tool call
// (gen_ai.tool.call.id, error.type on failure), whose ctx the tool gets, so
// its own spans nest under it. A retried model call is a failed chat span
// and a valet.llm.retry event on the run's span. An Agent-Tool parked in
// the pool keeps the W3C traceparent of the run that parked it
// (pool.Entry.TraceParent), so the run that decides its approval later, on
// any replica, links its span and the approved action's execute_tool span
// to it. A trigger.Engine with a TracerProvider makes each task run a span
// the run's invoke_agent span is a child of.
//
// Metrics: gen_ai.client.token.usage and gen_ai.client.operation.duration
// per model call, gen_ai.execute_tool.duration and valet.tool.errors per
// tool call, valet.cost.usd (by valet.tenant.id) per run.
//
// Prompts, completions, tool arguments and results are recorded only with
// TelemetryOptions.CaptureContent (gen_ai.input.messages,
// gen_ai.output.messages, gen_ai.tool.call.arguments,
// gen_ai.tool.call.result), with secrets masked as in
// ToolCallRecord.ArgsSummary; error texts on span statuses are masked the
// same way, and error.type is a short kind, never an error's text.
package agent
