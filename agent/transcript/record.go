package transcript

import (
	"cmp"
	"encoding/json"
	"math"
	"time"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
)

// Record is one line of a transcript: one step of a run (see agent.Step),
// with every text redacted (agent.RedactText) and every tool argument
// redacted in full (agent.RedactArguments). Which fields are set depends
// on Kind; the others are left out of the line.
type Record struct {
	// Kind is written as its name ("model_request"); a kind this version
	// does not know reads back as it was written ("step_15").
	Kind agent.StepKind `json:"kind"`
	Seq  int            `json:"seq"`
	Time time.Time      `json:"time"`
	// RunID, Tenant and Conversation are the run's (Result.RunID and the
	// message's ids, as given; "" is agent.DefaultConversationID).
	RunID        string `json:"run_id"`
	Tenant       string `json:"tenant,omitempty"`
	Conversation string `json:"conversation,omitempty"`
	// Path is a sub-agent's: the spawn calls from the top run down to it
	// (agent.Step.Path); empty for the top run.
	Path []string `json:"path,omitempty"`

	// Source and TaskID are the message's (run_start).
	Source string `json:"source,omitempty"`
	TaskID string `json:"task_id,omitempty"`
	// Call numbers the run's model calls (model_request, model_response,
	// model_retry).
	Call    int    `json:"call,omitempty"`
	Purpose string `json:"purpose,omitempty"`
	Model   string `json:"model,omitempty"`
	// MessageCount is how many messages a model request sent; Messages
	// are the new ones (those after its last assistant message, system
	// messages left out), or all of them with Config.FullRequests.
	MessageCount int       `json:"message_count,omitempty"`
	Messages     []Message `json:"messages,omitempty"`
	// Tools are the names of the tools a request offered.
	Tools []string `json:"tools,omitempty"`
	// ToolChoice is a request's forced tool, if any.
	ToolChoice string `json:"tool_choice,omitempty"`
	// Response is a model call's reply (model_response).
	Response *Response `json:"response,omitempty"`
	// Retry, ErrorKind and DelayMS: a retried model call (model_retry);
	// ErrorKind also names the kind of a failed model_response.
	Retry     int     `json:"retry,omitempty"`
	ErrorKind string  `json:"error_kind,omitempty"`
	DelayMS   float64 `json:"delay_ms,omitempty"`
	// FallbackFrom and FallbackTo: the models of a switch (model_fallback);
	// ErrorKind is the kind of the failure that caused it.
	FallbackFrom string `json:"fallback_from,omitempty"`
	FallbackTo   string `json:"fallback_to,omitempty"`
	// Risk and RiskDecision: a classified tool call's risk and what became
	// of it (risk; ToolCall is the call).
	Risk         string `json:"risk,omitempty"`
	RiskDecision string `json:"risk_decision,omitempty"`
	// ToolCall is the call as the model made it (tool_call, tool_result).
	ToolCall *ToolCall `json:"tool_call,omitempty"`
	// ToolRecord is the call's outcome (tool_result).
	ToolRecord *ToolRecord `json:"tool_record,omitempty"`
	// Approval is the request raised (approval_raised).
	Approval *Approval `json:"approval,omitempty"`
	// Decided is the decision (approval_decided).
	Decided *Decided `json:"decided,omitempty"`
	// Recalled are the items recalled (recall).
	Recalled []Recalled `json:"recalled,omitempty"`
	// Text: the message (run_start), a tool's result (tool_result), a
	// note, a compaction's summary, a defence, a refusal's reason.
	Text string `json:"text,omitempty"`
	// Truncated is set when Text was cut to Config.MaxText.
	Truncated bool `json:"truncated,omitempty"`
	// Count: messages folded (compaction) or left (context_shortened).
	Count int `json:"count,omitempty"`
	// DurationMS: of the model call, the tool call or the run.
	DurationMS float64 `json:"duration_ms,omitempty"`
	// Error is a model call's, a tool's or the run's failure.
	Error string `json:"error,omitempty"`
	// Result is the run's result (run_end).
	Result *Result `json:"result,omitempty"`
}

// Message is a message of a model request.
type Message struct {
	Role       string     `json:"role"`
	Content    string     `json:"content,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	Name       string     `json:"name,omitempty"`
	IsError    bool       `json:"is_error,omitempty"`
}

// ToolCall is a tool call the model made; Arguments is
// agent.RedactArguments of what it wrote.
type ToolCall struct {
	ID        string `json:"id,omitempty"`
	Name      string `json:"name"`
	Arguments string `json:"arguments,omitempty"`
}

// Response is a model's reply.
type Response struct {
	Content      string     `json:"content,omitempty"`
	ToolCalls    []ToolCall `json:"tool_calls,omitempty"`
	FinishReason string     `json:"finish_reason,omitempty"`
	Model        string     `json:"model,omitempty"`
	Usage        llm.Usage  `json:"usage"`
}

// ToolRecord is a tool call's outcome: agent.ToolCallRecord.
type ToolRecord struct {
	ID          string  `json:"id,omitempty"`
	Name        string  `json:"name"`
	ArgsSummary string  `json:"args_summary,omitempty"`
	Status      string  `json:"status,omitempty"`
	Success     bool    `json:"success"`
	Error       string  `json:"error,omitempty"`
	Attempts    int     `json:"attempts,omitempty"`
	ResultChars int     `json:"result_chars,omitempty"`
	Truncated   bool    `json:"truncated,omitempty"`
	Resumed     bool    `json:"resumed,omitempty"`
	DurationMS  float64 `json:"duration_ms,omitempty"`
}

// Approval is an approval request raised; Details is
// agent.RedactArguments of the request's details as JSON.
type Approval struct {
	ID                string    `json:"id"`
	AgentName         string    `json:"agent_name,omitempty"`
	ActionSummary     string    `json:"action_summary,omitempty"`
	Details           string    `json:"details,omitempty"`
	Options           []string  `json:"options,omitempty"`
	AllowModification bool      `json:"allow_modification,omitempty"`
	ExpiresAt         time.Time `json:"expires_at,omitzero"`
}

// Decided is an approval request settled.
type Decided struct {
	ID      string `json:"id"`
	Action  string `json:"action,omitempty"`
	Expired bool   `json:"expired,omitempty"`
	InReply bool   `json:"in_reply,omitempty"`
}

// Recalled is a long-term item recalled into the system prompt.
type Recalled struct {
	ID    string  `json:"id,omitempty"`
	Kind  string  `json:"kind,omitempty"`
	Text  string  `json:"text,omitempty"`
	Score float64 `json:"score"`
}

// Result is a run's result (agent.Result).
type Result struct {
	Status         string       `json:"status"`
	Response       string       `json:"response,omitempty"`
	Turns          int          `json:"turns"`
	Usage          llm.Usage    `json:"usage"`
	Tokens         int          `json:"tokens,omitempty"`
	CostUSD        float64      `json:"cost_usd,omitempty"`
	ToolCallsRun   int          `json:"tool_calls_run,omitempty"`
	ToolCalls      []ToolRecord `json:"tool_calls,omitempty"`
	Compactions    int          `json:"compactions,omitempty"`
	BudgetExceeded bool         `json:"budget_exceeded,omitempty"`
	// PendingApprovals are the ids of the approvals the conversation waits
	// for; Waiting counts the Agent-Tools that wait for the user.
	PendingApprovals []string `json:"pending_approvals,omitempty"`
	Waiting          int      `json:"waiting,omitempty"`
	DurationMS       float64  `json:"duration_ms,omitempty"`
}

// Duration is DurationMS as a time.Duration.
func (r *Record) Duration() time.Duration { return fromMS(r.DurationMS) }

// redactor turns steps into records.
type redactor struct {
	full    bool
	maxText int // < 0: no limit
}

// record builds the Record of s, redacting every text.
func (x redactor) record(s agent.Step) Record {
	r := Record{
		Kind: s.Kind, Seq: s.Seq, Time: s.Time, RunID: s.RunID, Tenant: s.TenantID,
		Conversation: cmp.Or(s.ConversationID, agent.DefaultConversationID),
		Call:         s.Call, Count: s.Count, DurationMS: ms(s.Duration),
		Path: s.Path,
	}
	r.Text, r.Truncated = x.text(s.Text)
	if s.Err != nil {
		r.Error = agent.RedactText(s.Err.Error())
	}
	switch s.Kind {
	case agent.StepRunStart:
		if m := s.Message; m != nil {
			r.Text, r.Truncated = x.text(m.Text)
			r.Source, r.TaskID = m.Source, m.TaskID
		}
	case agent.StepModelRequest:
		r.Purpose, r.Model, r.ToolChoice = string(s.Request.Purpose), s.Request.Model, string(s.Request.ToolChoice)
		r.MessageCount = len(s.Request.Messages)
		r.Messages = x.messages(s.Request.Messages)
		for _, t := range s.Request.Tools {
			r.Tools = append(r.Tools, t.Name)
		}
	case agent.StepModelResponse:
		r.Purpose = string(s.Request.Purpose)
		if s.Err != nil {
			r.ErrorKind = llm.KindOf(s.Err).String()
		}
		if p := s.Response; p != nil {
			content, _ := x.text(p.Message.Content)
			r.Response = &Response{Content: content, ToolCalls: toolCalls(p.Message.ToolCalls),
				FinishReason: p.FinishReason, Model: p.Model, Usage: p.Usage}
			r.Model = p.Model
		}
	case agent.StepModelRetry:
		r.Retry, r.ErrorKind, r.DelayMS = s.Retry, s.ErrorKind.String(), ms(s.Delay)
	case agent.StepModelFallback:
		r.FallbackFrom, r.FallbackTo, r.ErrorKind = agent.RedactText(s.From), agent.RedactText(s.To), s.ErrorKind.String()
	case agent.StepToolCall:
		r.ToolCall = toolCall(s.ToolCall)
	case agent.StepRisk:
		r.ToolCall = toolCall(s.ToolCall)
		r.Risk, r.RiskDecision = s.Risk.String(), string(s.RiskDecision)
	case agent.StepToolResult:
		r.ToolCall = toolCall(s.ToolCall)
		tr := toolRecord(s.Record)
		r.ToolRecord = &tr
	case agent.StepApprovalRaised:
		if a := s.Approval; a != nil {
			r.Approval = &Approval{ID: a.ID, AgentName: a.AgentName, ActionSummary: agent.RedactText(a.ActionSummary),
				Options: a.Options, AllowModification: a.AllowModification, ExpiresAt: a.ExpiresAt}
			if len(a.Details) > 0 {
				b, err := json.Marshal(a.Details)
				if err != nil {
					r.Approval.Details = "(unprintable details)"
				} else {
					r.Approval.Details = agent.RedactArguments(b)
				}
			}
		}
	case agent.StepApprovalDecided:
		d := s.Decided
		r.Decided = &Decided{ID: d.ID, Action: string(d.Action), Expired: d.Expired, InReply: d.InReply}
	case agent.StepRecall:
		for _, it := range s.Recalled {
			text, _ := x.text(it.Text)
			r.Recalled = append(r.Recalled, Recalled{ID: it.ID, Kind: it.Kind, Text: text, Score: finite(it.Score)})
		}
	case agent.StepRunEnd:
		if res := s.Result; res != nil {
			r.Result = x.result(res)
		}
	}
	return r
}

// text is s redacted, cut to maxText bytes (and whether it was).
func (x redactor) text(s string) (string, bool) {
	s = agent.RedactText(s)
	if x.maxText < 0 || len(s) <= x.maxText {
		return s, false
	}
	n := x.maxText
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 { // not inside a rune
		n--
	}
	return s[:n] + "…", true
}

// messages are the messages of a request a record keeps (see
// Record.Messages).
func (x redactor) messages(ms []llm.Message) []Message {
	from := 0
	if !x.full {
		for i := len(ms) - 1; i >= 0; i-- {
			if ms[i].Role == llm.RoleAssistant {
				from = i + 1
				break
			}
		}
	}
	var out []Message
	for _, m := range ms[from:] {
		if !x.full && m.Role == llm.RoleSystem {
			continue
		}
		content, _ := x.text(m.Content)
		out = append(out, Message{Role: string(m.Role), Content: content, ToolCalls: toolCalls(m.ToolCalls),
			ToolCallID: m.ToolCallID, Name: m.Name, IsError: m.IsError})
	}
	return out
}

func (x redactor) result(res *agent.Result) *Result {
	response, _ := x.text(res.Response)
	out := &Result{
		Status: string(res.Status), Response: response, Turns: res.Turns, Usage: res.Usage,
		Tokens: res.Consumed.Tokens, CostUSD: finite(res.Consumed.CostUSD), ToolCallsRun: res.Consumed.ToolCalls,
		Compactions: res.Compactions, BudgetExceeded: res.BudgetExceeded, Waiting: len(res.Waiting),
		DurationMS: ms(res.Duration),
	}
	for _, c := range res.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, toolRecord(c))
	}
	for _, p := range res.PendingApprovals {
		out.PendingApprovals = append(out.PendingApprovals, p.ID)
	}
	return out
}

func toolCall(c llm.ToolCall) *ToolCall {
	return &ToolCall{ID: c.ID, Name: c.Name, Arguments: agent.RedactArguments(c.Arguments)}
}

func toolCalls(cs []llm.ToolCall) []ToolCall {
	if len(cs) == 0 {
		return nil
	}
	out := make([]ToolCall, len(cs))
	for i, c := range cs {
		out[i] = *toolCall(c)
	}
	return out
}

// toolRecord copies a ToolCallRecord: its ArgsSummary and Error are
// masked already (masking "password=***" again would eat what follows).
func toolRecord(c agent.ToolCallRecord) ToolRecord {
	return ToolRecord{ID: c.ID, Name: c.Name, ArgsSummary: c.ArgsSummary, Status: c.ResultStatus,
		Success: c.Success, Error: c.Error, Attempts: c.Attempts, ResultChars: c.ResultChars,
		Truncated: c.Truncated, Resumed: c.Resumed, DurationMS: ms(c.Duration)}
}

// ms is d in milliseconds, to the microsecond.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func fromMS(v float64) time.Duration { return time.Duration(math.Round(v*1000)) * time.Microsecond }

// finite is v, or 0 when JSON cannot hold it (NaN, ±Inf).
func finite(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	return v
}
