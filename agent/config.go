package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/valetkit/valet/agent/skill"
	"github.com/valetkit/valet/budget"
	"github.com/valetkit/valet/clock"
	agentctx "github.com/valetkit/valet/context"
	"github.com/valetkit/valet/credentials"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/memory"
	"github.com/valetkit/valet/pool"
	"github.com/valetkit/valet/tool"
)

// Defaults of [LoopConfig]; a zero field takes its default.
const (
	DefaultMaxTurns            = 10
	DefaultToolTimeout         = 30 * time.Second
	DefaultAgentToolTimeout    = 120 * time.Second
	DefaultMaxParallelTools    = 16
	DefaultMaxToolResultShare  = agentctx.DefaultMaxToolResultShare
	DefaultMaxToolResultChars  = agentctx.DefaultMaxToolResultChars
	DefaultContextTokenLimit   = agentctx.DefaultTokenLimit
	DefaultTrimThreshold       = agentctx.DefaultTrimThreshold
	DefaultMaxHistoryMessages  = agentctx.DefaultMaxHistoryMessages
	DefaultLLMTimeout          = 2 * time.Minute
	DefaultLLMMaxRetries       = 2
	DefaultLLMRetryBaseDelay   = time.Second
	DefaultLLMMaxRetryDelay    = 30 * time.Second
	DefaultApprovalTimeout     = 30 * time.Minute
	DefaultInputTimeout        = 24 * time.Hour
	DefaultCompactKeepMessages = 10
	// DefaultMaxToolCallsPerReply matches llm/openai's MaxToolCallsPerReply.
	DefaultMaxToolCallsPerReply = 128
)

// LoopConfig holds every number of the ReAct loop. A zero field takes the
// documented default; a negative one is rejected by [NewOrchestrator].
type LoopConfig struct {
	// MaxTurns is the number of model calls that may ask for tools; when it
	// is reached one last call without tools asks for a final answer.
	// Default DefaultMaxTurns (10).
	MaxTurns int
	// ToolTimeout bounds one plain tool call unless the tool sets its own
	// (tool.WithTimeout). Default DefaultToolTimeout (30s).
	ToolTimeout time.Duration
	// AgentToolTimeout bounds one Agent-Tool run. Default 120s.
	AgentToolTimeout time.Duration
	// MaxParallelTools caps how many tool calls of one turn run at the same
	// time; further calls wait for a free slot. Default 16.
	MaxParallelTools int
	// MaxToolCallsPerReply caps the tool calls of one model reply, for
	// every llm.Client: the first MaxToolCallsPerReply calls are kept and
	// run, the others are dropped from the reply before it enters the
	// conversation (so every call kept has its result), and the model is
	// told in a note how many were not run. Default
	// DefaultMaxToolCallsPerReply (128, llm/openai's own limit).
	MaxToolCallsPerReply int
	// MaxToolResultShare is the largest share of ContextTokenLimit a single
	// tool result may take before it is truncated. Default 0.3.
	MaxToolResultShare float64
	// MaxToolResultChars caps a single tool result in characters. Default 400000.
	MaxToolResultChars int
	// ContextTokenLimit is the model's context window in tokens. Default 128000.
	ContextTokenLimit int
	// TrimThreshold is the share of ContextTokenLimit past which the history
	// is trimmed before a model call. Default 0.8.
	TrimThreshold float64
	// MaxHistoryMessages is the number of past messages of a conversation
	// kept and sent to the model. Default 40.
	MaxHistoryMessages int
	// LLMTimeout bounds one model call (a stream included); a call that
	// times out is retried once. Default 2m.
	LLMTimeout time.Duration
	// LLMMaxRetries is how many times a rate-limited or unavailable model
	// call is retried. Default 2. A timed-out call is retried once.
	LLMMaxRetries int
	// LLMRetryBaseDelay is the first backoff delay, doubled per retry; a
	// server's Retry-After wins when longer. Default 1s.
	LLMRetryBaseDelay time.Duration
	// LLMMaxRetryDelay caps one backoff wait, Retry-After included. Default 30s.
	LLMMaxRetryDelay time.Duration
	// ApprovalTimeout is how long an approval request stays open. Default 30m.
	ApprovalTimeout time.Duration
	// InputTimeout is how long an Agent-Tool waits in the pool for missing
	// fields. Default 24h.
	InputTimeout time.Duration
	// CompactThreshold turns compaction on: when the system prompt, the
	// loaded history and the user's message pass this share of
	// ContextTokenLimit, the older part of the history is replaced by a
	// summary, written by one model call (forcing compact_conversation)
	// that also returns durable facts about the user, which are
	// remembered. The newest CompactKeepMessages messages stay verbatim;
	// tool calls keep their results. The summary is saved as a history
	// message (memory.IsSummary) from which the provider's History
	// starts, so it is computed once. While compaction is on,
	// MaxHistoryMessages does not apply (up to 1000 messages since the
	// newest summary are loaded) and trimming to TrimThreshold remains the
	// fallback, also when the summary call fails. Result.Compactions
	// counts it. 0 (the default) is off; it must be at most 1, and below
	// TrimThreshold to act before trimming does.
	CompactThreshold float64
	// CompactKeepMessages is how many of the newest messages a compaction
	// keeps verbatim. Default DefaultCompactKeepMessages (10).
	CompactKeepMessages int
	// Budget is the default Budget of a run whose Message sets none. Zero:
	// unlimited.
	Budget Budget
	// NoteRole is the role of the notes the loop adds for the model (the
	// budget's wrap-up, the last call's instructions, waiting agents, the
	// doom-loop detector's):
	// llm.RoleSystem (the default) or llm.RoleUser, for models that
	// follow system messages only at the start. Notes are never saved to
	// the history.
	NoteRole llm.Role
	// DoomWindow is how many of the run's latest tool calls the doom-loop
	// detector looks at: the same call (name and arguments, whatever
	// their key order and spacing) DoomRepeats times among them is a
	// loop. Default DefaultDoomWindow (10).
	DoomWindow int
	// DoomRepeats is how many identical calls within DoomWindow make a
	// loop; at least 2 and at most DoomWindow. Default DefaultDoomRepeats
	// (3).
	DoomRepeats int
	// DoomFailures is how many failing tool calls in a row make a loop; a
	// call that succeeds starts the count again. Default
	// DefaultDoomFailures (5).
	DoomFailures int
	// DoomMaxInterventions is how many times a loop is found before the
	// run is stopped: each time before the last, a note asks the model
	// to reconsider (the second and later ones more firmly); the last
	// time, one call without tools asks for an answer from what was
	// found, which becomes Result.Response, and the run ends with
	// ErrDoomLoop. The detector starts afresh after each time. Default
	// DefaultDoomMaxInterventions (3).
	DoomMaxInterventions int
	// NoDoomLoop turns the doom-loop detector off.
	NoDoomLoop bool
	// RiskPolicy refines the risk of each plain tool call before it runs:
	// it gets the call and the tool's declared risk (tool.WithRisk;
	// tool.RiskLow when none) and returns the call's risk. Nil (the
	// default) keeps the declared risk. A low call runs; a medium one
	// runs and is logged (INFO, the tool's name only); a high one waits
	// for the user's approval as a pending request (see "Risk" in the
	// package documentation); a critical one is not run: the model reads
	// that the risk policy denied it. A policy that returns an error or
	// panics denies the call the same way, and the loop goes on. It is
	// called on the loop's goroutine, in call order, before the turn's
	// calls start; calls of Agent-Tools and spawn_agent are not
	// classified (an Agent-Tool asks for approval itself).
	RiskPolicy func(ctx context.Context, call llm.ToolCall, declared tool.Risk) (tool.Risk, error)
	// RouteWhileRunning routes a user's message (SourceUser) that arrives
	// while its conversation's loop runs (Config.Control's marker), instead
	// of having it wait its turn: a bare "stop" or "cancel" cancels the
	// loop (Orchestrator.Cancel), "pause" pauses it, anything else is
	// classified by one model call (llm.PurposeRoute) as a correction
	// (injected into the loop, Orchestrator.Inject), stop, pause, or a
	// new request, which waits its turn as without this option. A routed
	// message returns at once with StatusInjected and Result.Steered; its
	// run saves nothing. Default false.
	RouteWhileRunning bool
	// DirectAgentPrompts makes the reply of a run that ends with agents
	// waiting the agents' own prompt (the missing fields, the approval
	// listing) instead of a text the model phrases in the persona with one
	// extra call without tools.
	DirectAgentPrompts bool
}

func (c LoopConfig) withDefaults() (LoopConfig, error) {
	share := func(v float64) bool { return !(v >= 0 && v <= 1) } // NaN too
	if c.MaxTurns < 0 || c.ToolTimeout < 0 || c.AgentToolTimeout < 0 || c.MaxParallelTools < 0 || share(c.MaxToolResultShare) ||
		c.MaxToolResultChars < 0 || c.ContextTokenLimit < 0 || share(c.TrimThreshold) || c.MaxHistoryMessages < 0 || c.LLMTimeout < 0 || c.LLMMaxRetries < 0 || c.LLMRetryBaseDelay < 0 ||
		c.LLMMaxRetryDelay < 0 || c.ApprovalTimeout < 0 || c.InputTimeout < 0 || share(c.CompactThreshold) ||
		c.CompactKeepMessages < 0 || c.MaxToolCallsPerReply < 0 || c.DoomWindow < 0 || c.DoomRepeats < 0 || c.DoomFailures < 0 || c.DoomMaxInterventions < 0 {
		return c, fmt.Errorf("%w: LoopConfig has a negative value or a share above 1: %+v", ErrInvalidConfig, c)
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	defD := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	defF := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.MaxTurns, DefaultMaxTurns)
	defD(&c.ToolTimeout, DefaultToolTimeout)
	defD(&c.AgentToolTimeout, DefaultAgentToolTimeout)
	def(&c.MaxParallelTools, DefaultMaxParallelTools)
	def(&c.MaxToolCallsPerReply, DefaultMaxToolCallsPerReply)
	defF(&c.MaxToolResultShare, DefaultMaxToolResultShare)
	def(&c.MaxToolResultChars, DefaultMaxToolResultChars)
	def(&c.ContextTokenLimit, DefaultContextTokenLimit)
	defF(&c.TrimThreshold, DefaultTrimThreshold)
	def(&c.MaxHistoryMessages, DefaultMaxHistoryMessages)
	defD(&c.LLMTimeout, DefaultLLMTimeout)
	def(&c.LLMMaxRetries, DefaultLLMMaxRetries)
	defD(&c.LLMRetryBaseDelay, DefaultLLMRetryBaseDelay)
	defD(&c.LLMMaxRetryDelay, DefaultLLMMaxRetryDelay)
	defD(&c.ApprovalTimeout, DefaultApprovalTimeout)
	defD(&c.InputTimeout, DefaultInputTimeout)
	def(&c.CompactKeepMessages, DefaultCompactKeepMessages)
	if err := c.doomDefaults(); err != nil { // doomloop.go
		return c, err
	}
	if err := c.Budget.Check(); err != nil {
		return c, fmt.Errorf("%w: LoopConfig.Budget: %w", ErrInvalidConfig, err)
	}
	switch c.NoteRole {
	case "":
		c.NoteRole = llm.RoleSystem
	case llm.RoleSystem, llm.RoleUser:
	default:
		return c, fmt.Errorf("%w: LoopConfig.NoteRole %q: want system or user", ErrInvalidConfig, c.NoteRole)
	}
	return c, nil
}

// Defaults of [MemoryOptions].
const (
	DefaultRecallTokens  = 800
	DefaultRecallEntries = 10
	DefaultRecallTimeout = 5 * time.Second
)

// MemoryOptions says how the orchestrator uses Config.Memory beyond the
// history. The zero value recalls items for every message.
type MemoryOptions struct {
	// Recall bounds the long-term items recalled for each message (the
	// user's text is the query) and put in the system prompt, inside a
	// delimited block that says they are facts about the user, not
	// instructions. Zero fields take DefaultRecallTokens (800) and
	// DefaultRecallEntries (10).
	Recall memory.Budget
	// NoRecall turns recall off: no Recall call per message.
	NoRecall bool
	// RecallTimeout bounds a recall (and the storing of a compaction's
	// facts): past it the message is answered without recalled items.
	// Default DefaultRecallTimeout (5s).
	RecallTimeout time.Duration
	// Extract learns from each answered message of the user: after the
	// reply, in the background, one model call (forcing the
	// remember_facts tool) reads the user's message and the answer —
	// never tool results — and the durable facts it finds (preferences,
	// people, dates) are remembered with the conversation as their
	// provenance and memory.OriginUser as their origin. A new fact may
	// supersede one of the items recalled for the message, which it then
	// replaces in recall — but not when the model answered from text the
	// user did not write, which the answer may relay: a tool result (a
	// mail, a web page), a triggered run's message or a summary in the
	// history, an item recalled of another origin. When tools ran in the
	// turn itself, its facts are stored with memory.OriginAssistant
	// (recall marks them as not the user's own words), since they may
	// come from the tools' text. At most 10 facts of at most 300 characters per
	// turn; 4 extractions run at once and at most 256 wait (more are
	// skipped with a warning). Each is one model call, which a
	// Config.SpendGuard checks and, as a SpendReserver, reserves like a
	// run's (refused, the extraction is skipped). Failures are logged and
	// never fail a reply. Orchestrator.Close waits for extractions under way.
	// Triggered runs are learnt from only with ExtractTriggered.
	Extract bool
	// ExtractTriggered lets Extract learn from triggered runs too
	// (Message.Source SourceTrigger), whose text is a task's instruction
	// with event data or another task's output: text anyone may have
	// written. Their facts are extracted from that text presented as a
	// task's, never as the user's words, are stored with
	// memory.OriginTrigger (recall marks them as not facts about the
	// user), and never supersede an item. Default false: a triggered run
	// is not learnt from.
	//
	// Compaction (LoopConfig.CompactThreshold) also remembers the facts
	// it finds, and never lets them supersede an item: they are stored
	// with memory.OriginUser only when the summarised messages are the
	// user's and the answers alone; with a tool result among them as
	// memory.OriginTool, else with a triggered run's message as
	// memory.OriginTrigger, else with an earlier summary as
	// memory.OriginAssistant.
	ExtractTriggered bool
}

func (m MemoryOptions) withDefaults() (MemoryOptions, error) {
	if err := memory.CheckBudget(m.Recall); err != nil {
		return m, fmt.Errorf("%w: MemoryOptions.Recall: %w", ErrInvalidConfig, err)
	}
	if m.RecallTimeout < 0 {
		return m, fmt.Errorf("%w: MemoryOptions.RecallTimeout %v is negative", ErrInvalidConfig, m.RecallTimeout)
	}
	if m.RecallTimeout == 0 {
		m.RecallTimeout = DefaultRecallTimeout
	}
	if m.Recall.MaxTokens == 0 {
		m.Recall.MaxTokens = DefaultRecallTokens
	}
	if m.Recall.MaxEntries == 0 {
		m.Recall.MaxEntries = DefaultRecallEntries
	}
	return m, nil
}

// Hooks are optional callbacks around each message. Nil fields do nothing.
type Hooks struct {
	// ShouldProcess runs first. Returning false skips the message: the
	// Result has Status StatusRefused and Response set to reason. An error
	// aborts the message.
	ShouldProcess func(ctx context.Context, msg Message) (ok bool, reason string, err error)
	// PrepareContext may edit the messages sent to the model on the first
	// turn (system prompt, history, the user's message) and returns them.
	PrepareContext func(ctx context.Context, msg Message, msgs []llm.Message) ([]llm.Message, error)
	// PostProcess runs after the history is saved, with the final Result.
	// Its error is logged; the Result is still returned.
	PostProcess func(ctx context.Context, msg Message, res *Result) error
	// Decided runs at the end of every run that settled approval requests
	// (Result.Decided: decided by the user, by a reply or ResolveApproval,
	// or found expired), with the run's Result; res.Response is what the
	// run answered (the user was told it when Decided[i].InReply is set).
	// trigger/agentexec uses it to tell the trigger engine how its runs'
	// approvals ended.
	Decided func(ctx context.Context, res *Result)
}

// Config configures an [Orchestrator]. LLM is required; every other field
// is optional.
type Config struct {
	// LLM is the model client. Required unless Models and Model name
	// it.
	LLM llm.Client
	// Models maps model names ("fast", "smart") to clients, so that a
	// message (Message.Model), a trigger task (trigger.Task.Model) or a
	// skill can ask for a model by name and the host decides what it
	// means. Optional: without it, a message naming a model is refused
	// with ErrUnknownModel. See ModelRouter and ModelMap.
	Models ModelRouter
	// Model names, in Models, the client used when LLM is nil. A name
	// Models does not answer is refused by NewOrchestrator
	// (ErrUnknownModel). Default "": LLM is used.
	Model string
	// SystemPrompt is the persona; the orchestrator adds the current time,
	// the tenant's time zone and the list of capabilities after it.
	SystemPrompt string
	// Control steers running loops (Orchestrator.Inject, Cancel, Pause):
	// their running markers, inject queues and signals. Replicas share one
	// (redispool.NewControl) so that a replica reaches the loop another
	// runs. Default nil: a MemoryControl of this orchestrator's own.
	Control Control
	// Tools are the plain tools the model may call.
	Tools []tool.Tool
	// ToolSources supply more tools, read once at the start of each run,
	// so a changed list (an MCP server's: tool/mcptool) reaches the model
	// from the next run on. A source that fails, or a tool named like
	// one already there (in Tools, an Agent-Tool or an earlier source),
	// is left out of that run with a WARN line. Optional: none by
	// default, and then a run reads nothing.
	ToolSources []ToolSource
	// Agents are the Agent-Tools: stateful agents the model calls like
	// tools, which may wait for the user's input or approval.
	Agents *Registry
	// SubAgents offers the model the spawn_agent tool, to delegate a
	// task to a sub-agent with a fresh context. Default: off.
	SubAgents SubAgentOptions
	// Skills are the specialists spawn_agent can start (agent/skill.Load):
	// the coordinator's system prompt lists their index (names and
	// descriptions, never a body), and spawn_agent's skill argument starts
	// a sub-agent whose system prompt is the worker prompt followed by
	// the skill's body, whose tools are exactly those the skill lists (a
	// tool not listed does not exist for it), on the skill's model
	// (Models) when it names one. Needs SubAgents.Enabled. NewOrchestrator
	// refuses a skill naming a tool or a model that does not exist
	// (ErrInvalidConfig with skill.ErrUnknownTool or
	// skill.ErrUnknownModel); with ToolSources, a tool not found among
	// Tools and Agents is looked for in the run's tools when a spawn
	// starts the skill. Nil or empty: no skills.
	Skills *skill.Set
	// Plan offers the model the update_plan tool, to keep a plan of a
	// longer task per conversation (see PlanOptions). Default: off.
	Plan PlanOptions
	// Pool keeps the Agent-Tools that wait. Nil → an in-memory pool,
	// pool.NewMemory(pool.MemoryConfig{Clock: Clock}); use pool/sqlitepool
	// (one process, one file; see sqlitedb) to survive restarts, or
	// pool/redispool to survive them and share the pool between replicas.
	Pool pool.Store
	// Locker serialises the messages of one conversation across replicas
	// (pool/redispool.NewLocker). Nil → serialised within this process
	// only, which is enough for a single replica.
	Locker pool.Locker
	// Credentials reaches tools through tool.ExecContextFrom(ctx), bound to
	// the message's tenant (credentials.ForTenant): a tool asking for
	// another tenant's credentials gets credentials.ErrNotFound. The run
	// records the string values of 8 bytes or more its tools read or write
	// there (up to 64 values, 64 KiB) and masks them as "***" in those
	// tools' results and errors, wherever they go next: the model, the
	// ToolCallRecords, logs, spans, observers. Optional.
	Credentials credentials.Store
	// Memory keeps each conversation's history and the tenant's long-term
	// items, recalled into the system prompt of each message. Nil → a
	// bounded in-memory provider, memory.NewInMemory(memory.Config{Clock:
	// Clock}), whose history is lost on restart; memory/pgmemory keeps it
	// in PostgreSQL, shared by replicas.
	Memory memory.Provider
	// MemoryOptions says how Memory is used beyond history.
	MemoryOptions MemoryOptions
	// Prices prices model calls for Result.Consumed and cost budgets,
	// over DefaultPrices (an entry here replaces the default one of that
	// name). The model is the one a response names, else the request's,
	// else the client's own when it has a Model() string method (as
	// llm/openai's Client does).
	Prices Prices
	// SpendGuard limits spending across runs: Check before a run (an error
	// refuses the run before any model call), Record after it; a
	// SpendReserver also reserves each model call before it is made. See
	// SpendLimits for the in-memory one, agent/pgspend for one shared by
	// replicas. Nil: no limit across runs.
	SpendGuard SpendGuard
	// Loop holds every number of the loop; zero fields take defaults.
	Loop LoopConfig
	// Hooks are optional lifecycle callbacks.
	Hooks Hooks
	// Location is the default time zone of tenants whose messages carry
	// none. Default UTC.
	Location *time.Location
	// CountTokens replaces the chars/4 token estimate with a real tokenizer.
	CountTokens func(text string) int
	// Logger receives warnings and debug traces. Default slog.Default().
	Logger *slog.Logger
	// Observer hears every step of every run, including what Stream never
	// yields (model requests and responses, retries, recall, compaction).
	// Nil: none, at no cost. See Observer.
	Observer Observer
	// TracerProvider receives a span per run (invoke_agent), per model
	// call (chat) and per tool call (execute_tool), following the GenAI
	// semantic conventions (see "Traces and metrics" in the package
	// documentation). Nil: no spans, at no cost.
	TracerProvider trace.TracerProvider
	// MeterProvider receives the metrics gen_ai.client.token.usage,
	// gen_ai.client.operation.duration, gen_ai.execute_tool.duration,
	// valet.tool.errors and valet.cost.usd. Nil: no metrics, at no cost.
	MeterProvider metric.MeterProvider
	// Telemetry says what the spans hold (the agent's name, the provider,
	// content capture, off by default).
	Telemetry TelemetryOptions
	// Clock gives the time: the orchestrator's, and that of the
	// in-memory pool and memory made when Pool or Memory is nil. Nil:
	// clock.System. Tests pass one clock/clocktest.Clock to everything
	// they wire.
	Clock clock.Clock
}

// Errors returned by the orchestrator; check them with errors.Is.
var (
	ErrInvalidConfig   = errors.New("agent: invalid config")
	ErrNoLLM           = errors.New("agent: Config.LLM is nil")
	ErrEmptyMessage    = errors.New("agent: message text is empty")
	ErrNoTenant        = errors.New("agent: message has no TenantID")
	ErrEmptyReply      = errors.New("agent: the model replied with neither text nor tool calls")
	ErrContextOverflow = errors.New("agent: the conversation does not fit the model's context window even after trimming")
	// ErrInvalidBudget: a Budget with a negative or non-finite limit, or
	// a MaxTokens no model call fits (Orchestrator.CheckBudget). It is
	// budget.ErrInvalid itself, the error Budget.Check wraps.
	ErrInvalidBudget = budget.ErrInvalid
	// ErrBudgetExceeded: the run's Budget was spent and not even the last
	// call without tools could be afforded.
	ErrBudgetExceeded = errors.New("agent: the run's budget is spent")
	// ErrNoPrice: a cost budget on a model Config.Prices does not price.
	ErrNoPrice = errors.New("agent: a cost budget needs the model's price")
	// ErrSpendRefused wraps the error of a SpendGuard that refused a run;
	// the Result returned with it has StatusRefused and the reason for
	// the user as its Response (see SpendGuard).
	ErrSpendRefused = errors.New("agent: the spend guard refused the run")
	// ErrDoomLoop: the run went round in circles — the same tool call
	// repeated, or tool calls failing in a row — past
	// LoopConfig.DoomMaxInterventions notes; Result.Response holds a
	// partial answer when the model could give one.
	ErrDoomLoop = errors.New("agent: the run was stopped going round in circles")
	// ErrHistoryNotLoaded: the memory provider failed to load the
	// conversation's history; nothing was sent to the model.
	ErrHistoryNotLoaded = errors.New("agent: the conversation's history could not be loaded")
	// ErrHistoryNotSaved: the run answered (the Result is complete, with
	// its Status and Response), but its turn could not be appended to the
	// history, so the next message will not see it.
	ErrHistoryNotSaved = errors.New("agent: the turn could not be saved to the conversation's history")
)
