package agent

import (
	"errors"
	"fmt"

	"github.com/valetkit/valet/tool"
)

// The failure of a tool or an Agent-Tool reaches the model, the history,
// ToolCallRecord.Error and the stream's events. What a panic said (a URL
// with its access token, a connection string) goes to the logger only,
// its secret spans masked: everywhere else a panic is "internal error". Any other failure text is
// shown with its secret spans masked, as summarizeArgs masks them in
// arguments, so the model still learns what failed.

// internalError is what a panic becomes outside the logger.
const internalError = "internal error"

// agentFailure is the tool result of an Agent-Tool whose own code (Run,
// Validate or Approval) failed with err.
func (r *run) agentFailure(name string, err error) string {
	var pe *tool.PanicError
	if errors.As(err, &pe) {
		r.logPanic(pe)
		return fmt.Sprintf("agent %q failed: %s", name, internalError)
	}
	return maskText(fmt.Sprintf("agent %q failed: %s", name, err))
}

// scrubToolResult masks the credential values the run's tool calls read
// from the store in a plain tool call's text and error (see seenCreds),
// masks the secret spans of a failed call's text and logs a panic, masked
// (the registry already hides its text from the result).
func (r *run) scrubToolResult(res *tool.Result) {
	if seen := seenIn(r.creds); seen != nil {
		res.Content = seen.mask(res.Content)
		res.Err = seen.maskErr(res.Err)
	}
	if !res.IsError {
		return
	}
	var pe *tool.PanicError
	if errors.As(res.Err, &pe) {
		r.logPanic(pe)
	}
	res.Content = maskText(res.Content)
}

// logPanic logs what a tool or an Agent-Tool panicked with, and where,
// with its secret spans masked.
func (r *run) logPanic(pe *tool.PanicError) {
	r.log().ErrorContext(r.ctx, "agent: a tool panicked", "tool", pe.Tool,
		"source", r.msg.Source, "task_id", r.msg.TaskID,
		"panic", r.maskSeen(maskText(fmt.Sprint(pe.Value))), "stack", string(pe.Stack))
}

// maskSeen masks in s the credential values the run's tool calls read
// from the store (see seenCreds).
func (r *run) maskSeen(s string) string {
	if seen := seenIn(r.creds); seen != nil {
		return seen.mask(s)
	}
	return s
}
