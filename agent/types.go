package agent

import (
	"time"

	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/llm"
)

// Message is one incoming user message.
type Message struct {
	TenantID string // required: whose message this is
	// ConversationID is the conversation; "" is the tenant's default one,
	// DefaultConversationID. A triggered message (SourceTrigger) with no
	// ConversationID loads none of that conversation's history — it is
	// the user's, and holds other tasks' runs, whose output is not this
	// run's to read outside the blocks its text frames — but its turn is
	// saved there, where the user sees it.
	ConversationID string
	Text           string // required: what the user wrote
	// Location is the user's time zone, shown to the model with the current
	// time. Nil falls back to Config.Location.
	Location *time.Location
	// Source says who started the run: SourceUser (the default, for "")
	// or SourceTrigger. It is carried into the Result, the logs and the
	// pool entries (and approval requests) the run creates.
	Source string
	// TaskID is the trigger task of a triggered run, carried like Source.
	TaskID string
	// Budget bounds this run; each zero limit takes LoopConfig.Budget's.
	Budget Budget
	// Model names the model this run uses, through Config.Models
	// ("fast", "smart"). Default "": Config's model. A name Models does
	// not answer fails the run with ErrUnknownModel before any model
	// call.
	Model string
}

// The sources of a Message.
const (
	SourceUser    = approval.SourceUser    // a user's message
	SourceTrigger = approval.SourceTrigger // a triggered (proactive) run
)

// TriggerMessageName is the Name of a triggered run's message
// (SourceTrigger) in the history: a user-role message whose text is a
// task's, not the user's words. Compaction's transcript shows it as a
// triggered task's, and the facts taken from it are not the user's (see
// MemoryOptions.ExtractTriggered). llm/openai does not send it.
const TriggerMessageName = "valet_trigger"

// isTriggered reports whether m is a triggered run's message.
func isTriggered(m *llm.Message) bool { return m.Role == llm.RoleUser && m.Name == TriggerMessageName }

// DefaultConversationID names the conversation of a Message with no
// ConversationID: the Result, the pool's entries and the memory provider
// see this ID.
const DefaultConversationID = "default"

// conversationOf returns id, or DefaultConversationID for "".
func conversationOf(id string) string {
	if id == "" {
		return DefaultConversationID
	}
	return id
}

// Status is the outcome of handling a message.
type Status string

// The statuses of a [Result].
const (
	StatusCompleted          Status = "completed"
	StatusWaitingForInput    Status = "waiting_for_input"
	StatusWaitingForApproval Status = "waiting_for_approval"
	StatusError              Status = "error"
	StatusCancelled          Status = "cancelled"
	// StatusRefused: the ShouldProcess hook declined the message (with a
	// nil error), or the SpendGuard refused the run (with an error
	// wrapping ErrSpendRefused); Result.Response says why, for the user.
	StatusRefused Status = "refused"
	// StatusPaused: Orchestrator.Pause stopped the run at a turn boundary;
	// its turns are saved and the conversation's next message continues
	// the task. Response is empty.
	StatusPaused Status = "paused"
	// StatusInjected: the message was handed to its conversation's
	// running loop (LoopConfig.RouteWhileRunning) as Result.Steered says:
	// injected as a correction, or a Cancel or Pause. Response is empty.
	StatusInjected Status = "injected"
)

// Result reports what handling one message did. It is returned also when
// handling fails, so telemetry is never lost.
type Result struct {
	// RunID identifies this run: a new unique ID ("run_" and 24 hex
	// digits) for each call of HandleMessage, Stream or ResolveApproval,
	// set whatever the outcome (answered, waiting, refused, error,
	// cancelled). Every log line of the run carries it as "run_id", and
	// the trigger engine's run records as trigger.Run.AgentRunID.
	RunID     string
	Response  string           // the answer for the user; with StatusRefused, why the run was refused (to show as it is)
	Status    Status           // how handling ended
	Turns     int              // model calls that were part of the loop
	ToolCalls []ToolCallRecord // every tool call, in the order the model made them
	Usage     llm.Usage        // tokens of every model call
	Duration  time.Duration    // wall time of the whole message
	// Compactions is how many times the older history was replaced by a
	// summary (LoopConfig.CompactThreshold): 0 or 1 per message.
	Compactions int
	// Consumed is what the run used: tokens (estimated for a model call
	// that reports no usage), their estimated cost (Config.Prices; 0 for a
	// model with no price), wall clock, tool calls run.
	Consumed Consumed
	// BudgetExceeded is set when the run's Budget was spent and the answer
	// came from one last call without tools.
	BudgetExceeded bool
	// Source and TaskID are the message's.
	Source, TaskID string
	// PendingApprovals are the approvals the conversation waits for, all
	// those raised in this run and still open ones from earlier, oldest
	// first (those of one turn in the order the model called them): the
	// order of ListPendingApprovals, and the order in which a reply's
	// approvals are put to the model.
	PendingApprovals []approval.Request
	// Waiting lists the Agent-Tools of the conversation that wait for the
	// user (input or approval) when the run ends.
	Waiting []Waiting
	// Decided lists the approval requests this run settled: decided by
	// the user (a reply, or ResolveApproval), or found expired. Hooks.Decided
	// hears of them too.
	Decided []Decided
	// Plan is the conversation's plan when the run ends (Config.Plan):
	// as the model last set it with update_plan, in this run or an
	// earlier one. Nil when it never set one.
	Plan *Plan
	// Models names the model that answered each model call of the run
	// that got an answer, in order (those not part of the loop, such as
	// an approval's resolution, included): the response's Model, else
	// the request's, else the client's. With an llm.Fallback it shows
	// which calls a fallback answered; StepModelFallback says why.
	Models []string
	// Steered is set with StatusInjected: what the message did to the
	// running loop (SignalInject, SignalCancel or SignalPause).
	Steered Signal
}

// Waiting describes an Agent-Tool parked in the pool.
type Waiting struct {
	AgentID   string            // the pool entry (and approval request) ID
	AgentName string            // the registered agent
	Status    Status            // StatusWaitingForInput or StatusWaitingForApproval
	Missing   []string          // required fields not given yet
	Problems  []string          // why given values were rejected
	Approval  *approval.Request // set when Status is StatusWaitingForApproval
	// Path is set when a sub-agent called the Agent-Tool (Config.SubAgents):
	// the path of that sub-agent, as Step.Path and Event.Path. Nil when the
	// coordinator called it.
	Path []string

	created time.Time // the entry's CreatedAt: waits are listed in the pool's order
	changed bool      // an approval whose action changed since a reply last showed it
	sub     *subPark  // a sub-agent's park on its way up, in a callOutcome (spawn_park.go)
}

// ToolCallRecord is the telemetry of one tool call. It never holds secrets:
// ArgsSummary masks secret-looking fields and cuts long strings.
//
// A field is masked, nested objects and arrays included, when its name
// (JSON-unescaped, split into words at separators and camelCase) has a
// word such as key, token, secret, password, passphrase, credential, auth,
// authorization, cookie, session, private or signature, unless its last
// word is a qualifier (count, type, name, length, len, size, expires,
// expiry, ttl, kind, url): api-key, X-Api-Key, accessKey and session_id are
// masked; keyword, author, tokenizer and session_count are not. Arguments
// that are invalid JSON with such a field are withheld altogether.
type ToolCallRecord struct {
	ID           string
	Name         string
	ArgsSummary  string
	Duration     time.Duration
	ResultStatus string // completed, error, or interrupted (the run was cancelled while the call ran); for Agent-Tools also waiting_for_input, waiting_for_approval
	ResultChars  int    // size of the result before truncation
	// Error is why the call failed, when it did: the text the model read,
	// with secret-looking spans masked; a panic reads "internal error"
	// (what it said is logged through Config.Logger only).
	Error string
	Usage llm.Usage // usage of the model call that asked for this tool
	// Attempts is how many times a plain tool ran: more than 1 when a
	// transient failure was retried (tool.WithRetries), 0 when it never ran
	// (unknown tool, arguments rejected) and for Agent-Tools.
	Attempts  int
	Success   bool // the call succeeded
	Truncated bool // the result was cut to fit the context window
	// Resumed is true for an Agent-Tool taken from the pool and run (or
	// cancelled) by the user's decision or input: the model made its call
	// in an earlier message.
	Resumed bool
}

// EventType says what an [Event] reports.
type EventType string

// The events of [Orchestrator.Stream], in the order they can occur.
//
// Showing text: a message is the EventMessageChunk texts since its
// EventMessageStart. It ends with either EventMessageEnd (complete; its
// Text holds all of it) or EventMessageRetract (abandoned: the model call
// failed part way and is retried or the run fails; discard what was shown
// of it). A run may write several messages (text beside tool calls, then
// the answer). When a run ends with a Result.Response (completed, or
// waiting for input or approval), the last message ended with
// EventMessageEnd is exactly Result.Response.
const (
	EventMessageStart   EventType = "message_start"   // the model starts writing text
	EventMessageChunk   EventType = "message_chunk"   // a piece of that text (Event.Text)
	EventMessageRetract EventType = "message_retract" // discard the text since EventMessageStart (Event.Text holds it)
	EventMessageEnd     EventType = "message_end"     // the text is complete (Event.Text holds all of it)
	EventToolCallStart  EventType = "tool_call_start" // a tool call begins (Event.ToolCall: name, args summary)
	EventToolResult     EventType = "tool_result"     // a tool call ended (Event.ToolCall complete)
	EventStateChange    EventType = "state_change"    // the conversation waits for input or approval (Event.State)
	EventExecutionEnd   EventType = "execution_end"   // always last; Event.Result is set
)

// Event is one step of a streamed run.
type Event struct {
	Type     EventType
	Text     string
	ToolCall *ToolCallRecord
	State    Status // for EventStateChange: what the conversation waits for
	// Waiting and Approvals are set with EventStateChange: the agents that
	// wait, and the approvals the user is asked for.
	Waiting   []Waiting
	Approvals []approval.Request
	Result    *Result
	// Path is set on the events of a sub-agent (Config.SubAgents): the
	// IDs of the spawn_agent calls from the streamed run down to the
	// sub-agent that emitted it. Nil for the streamed run's own events.
	Path []string
}

// Decided is an approval request a run settled.
type Decided struct {
	// ID is the request's (the pool entry's) ID; TaskID, the trigger task
	// of the run that raised it, if any.
	ID, TenantID, TaskID string
	// Action is the user's decision; empty when the request expired.
	Action approval.Action
	// Expired is set when the request was found expired, and nothing
	// ran.
	Expired bool
	// InReply is set when the user's own message (HandleMessage or
	// Stream) settled it: the Result's Response, the reply to that
	// message, tells the user the outcome, so nothing else needs to
	// (trigger/agentexec does not have the engine notify it again). It is
	// false for ResolveApproval (a decision from a UI; the host may not
	// show the Result) and for a triggered run's message.
	InReply bool
}
