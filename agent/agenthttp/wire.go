package agenthttp

import (
	"encoding/json"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/llm"
)

// Event is the JSON data of one Server-Sent Event of a streamed run: one
// per agent.Event, named by its Type in the SSE "event:" field. Which
// fields are set depends on Type:
//
//   - message_start: none; the model starts writing text.
//   - message_chunk: Text, a piece of that text, to append.
//   - message_retract: Text, the text since message_start, to erase: the
//     model call broke off and is retried.
//   - message_end: Text, the whole message.
//   - tool_call_start: ToolCall (id, name, args).
//   - tool_result: ToolCall complete (status, success, duration_ms, error).
//   - state_change: State ("waiting_for_input" or "waiting_for_approval"),
//     Waiting, and Approvals to show with their buttons.
//   - execution_end: always last; Result, and Error when the run failed.
//
// Path is set on a sub-agent's events. Text is the model's or a tool's,
// as written: show it as text (textContent), never as HTML.
type Event struct {
	Type      string             `json:"type"`
	Text      string             `json:"text,omitempty"`
	ToolCall  *ToolCall          `json:"tool_call,omitempty"`
	State     string             `json:"state,omitempty"`
	Waiting   []Waiting          `json:"waiting,omitempty"`
	Approvals []approval.Request `json:"approvals,omitempty"`
	Result    *Result            `json:"result,omitempty"`
	Error     *Error             `json:"error,omitempty"`
	Path      []string           `json:"path,omitempty"`
}

// ToolCall is one tool call of a run (agent.ToolCallRecord): Args is its
// arguments summarised with secrets masked; Status, Success, Error and
// DurationMS are set once it ended (tool_result).
type ToolCall struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Args        string `json:"args,omitempty"`
	Status      string `json:"status,omitempty"` // completed, error, interrupted, waiting_for_input, waiting_for_approval
	Success     bool   `json:"success"`
	Error       string `json:"error,omitempty"`
	DurationMS  int64  `json:"duration_ms"`
	ResultChars int    `json:"result_chars,omitempty"`
	Truncated   bool   `json:"truncated,omitempty"`
	Resumed     bool   `json:"resumed,omitempty"`
}

// Waiting is an Agent-Tool that waits for the user (agent.Waiting).
type Waiting struct {
	AgentID   string   `json:"agent_id"`
	AgentName string   `json:"agent_name"`
	Status    string   `json:"status"`
	Missing   []string `json:"missing,omitempty"`
	Problems  []string `json:"problems,omitempty"`
	Path      []string `json:"path,omitempty"`
}

// Result is what a run did (agent.Result): the execution_end event's, and
// the answer to an approval's decision.
type Result struct {
	RunID            string             `json:"run_id"`
	Status           string             `json:"status"` // agent.Status: completed, waiting_for_approval, injected…
	Response         string             `json:"response,omitempty"`
	Turns            int                `json:"turns"`
	ToolCalls        []ToolCall         `json:"tool_calls,omitempty"`
	Usage            llm.Usage          `json:"usage"`
	DurationMS       int64              `json:"duration_ms"`
	PendingApprovals []approval.Request `json:"pending_approvals,omitempty"`
	Waiting          []Waiting          `json:"waiting,omitempty"`
	// Steered is set with status "injected": what the message did to the
	// conversation's running loop ("inject", "cancel" or "pause").
	Steered        string `json:"steered,omitempty"`
	BudgetExceeded bool   `json:"budget_exceeded,omitempty"`
}

// Message is one message of a conversation's history (GET
// …/conversations/{id}/messages), for a client that reconnects: the
// user's, the assistant's (with its tool calls, arguments masked), a tool
// result answering ToolCallID.
type Message struct {
	Role       string            `json:"role"`
	Content    string            `json:"content,omitempty"`
	Name       string            `json:"name,omitempty"`
	ToolCalls  []HistoryToolCall `json:"tool_calls,omitempty"`
	ToolCallID string            `json:"tool_call_id,omitempty"`
	IsError    bool              `json:"is_error,omitempty"`
}

// HistoryToolCall is a tool call of an assistant Message; Arguments is
// JSON text with secrets masked (agent.RedactArguments).
type HistoryToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

func eventOf(ev agent.Event, err error) Event {
	out := Event{Type: string(ev.Type), Text: ev.Text, State: string(ev.State), Path: ev.Path,
		Waiting: waitingOf(ev.Waiting), Approvals: ev.Approvals}
	if ev.ToolCall != nil {
		tc := toolCallOf(*ev.ToolCall)
		out.ToolCall = &tc
	}
	if ev.Result != nil {
		out.Result = resultOf(ev.Result)
	}
	if err != nil {
		out.Error = errorFor(err)
	}
	return out
}

func toolCallOf(r agent.ToolCallRecord) ToolCall {
	return ToolCall{ID: r.ID, Name: r.Name, Args: r.ArgsSummary, Status: r.ResultStatus, Success: r.Success,
		Error: r.Error, DurationMS: r.Duration.Milliseconds(), ResultChars: r.ResultChars, Truncated: r.Truncated, Resumed: r.Resumed}
}

func waitingOf(ws []agent.Waiting) []Waiting {
	if len(ws) == 0 {
		return nil
	}
	out := make([]Waiting, len(ws))
	for i, w := range ws {
		out[i] = Waiting{AgentID: w.AgentID, AgentName: w.AgentName, Status: string(w.Status), Missing: w.Missing, Problems: w.Problems, Path: w.Path}
	}
	return out
}

func resultOf(r *agent.Result) *Result {
	if r == nil {
		return nil
	}
	out := &Result{RunID: r.RunID, Status: string(r.Status), Response: r.Response, Turns: r.Turns, Usage: r.Usage,
		DurationMS: r.Duration.Milliseconds(), PendingApprovals: r.PendingApprovals, Waiting: waitingOf(r.Waiting),
		Steered: string(r.Steered), BudgetExceeded: r.BudgetExceeded}
	for _, tc := range r.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, toolCallOf(tc))
	}
	return out
}

func messageOf(m llm.Message) Message {
	out := Message{Role: string(m.Role), Content: m.Content, Name: m.Name, ToolCallID: m.ToolCallID, IsError: m.IsError}
	for _, c := range m.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, HistoryToolCall{ID: c.ID, Name: c.Name, Arguments: agent.RedactArguments(c.Arguments)})
	}
	return out
}

// mustJSON encodes v; the types above always encode.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(Event{Type: "error", Error: &Error{Code: CodeInternal, Message: "encoding the event failed"}})
	}
	return b
}
