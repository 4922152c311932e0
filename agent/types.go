package agent

import (
	"time"

	"github.com/valetkit/valet/llm"
)

// Message is one incoming user message.
type Message struct {
	TenantID       string // required: whose message this is
	ConversationID string // the conversation; "" is the tenant's default one
	Text           string // required: what the user wrote
	// Location is the user's time zone, shown to the model with the current
	// time. Nil falls back to Config.Location.
	Location *time.Location
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
	StatusRefused            Status = "refused" // the ShouldProcess hook declined the message
)

// Result reports what handling one message did. It is returned also when
// handling fails, so telemetry is never lost.
type Result struct {
	Response  string           // the answer for the user
	Status    Status           // how handling ended
	Turns     int              // model calls that were part of the loop
	ToolCalls []ToolCallRecord // every tool call, in the order the model made them
	Usage     llm.Usage        // tokens of every model call
	Duration  time.Duration    // wall time of the whole message
}

// ToolCallRecord is the telemetry of one tool call. It never holds secrets:
// ArgsSummary masks secret-looking fields and cuts long strings.
type ToolCallRecord struct {
	ID           string
	Name         string
	ArgsSummary  string
	Duration     time.Duration
	Success      bool
	ResultStatus string    // for Agent-Tools: completed, waiting_for_input, waiting_for_approval, error
	ResultChars  int       // size of the result before truncation
	Truncated    bool      // the result was cut to fit the context window
	Error        string    // why the call failed, when it did
	Usage        llm.Usage // usage of the model call that asked for this tool
}

// EventType says what an [Event] reports.
type EventType string

// The events of [Orchestrator.Stream], in the order they can occur.
const (
	EventMessageStart  EventType = "message_start"   // the model starts writing text
	EventMessageChunk  EventType = "message_chunk"   // a piece of that text (Event.Text)
	EventMessageEnd    EventType = "message_end"     // the text is complete (Event.Text holds all of it)
	EventToolCallStart EventType = "tool_call_start" // a tool call begins (Event.ToolCall: name, args summary)
	EventToolResult    EventType = "tool_result"     // a tool call ended (Event.ToolCall complete)
	EventStateChange   EventType = "state_change"    // the conversation waits for input or approval (Event.State)
	EventExecutionEnd  EventType = "execution_end"   // always last; Event.Result is set
)

// Event is one step of a streamed run.
type Event struct {
	Type     EventType
	Text     string
	ToolCall *ToolCallRecord
	State    Status
	Result   *Result
}
