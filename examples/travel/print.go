package main

// Printing the conversation: what a chat UI would show.

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/approval"
)

// send streams the handling of one message to w: the user's line, tool
// calls as they start and finish, the reply as the model writes it, the
// state the conversation is left in and the approvals it waits for.
func send(ctx context.Context, w io.Writer, o *agent.Orchestrator, msg agent.Message) (*agent.Result, error) {
	fmt.Fprintf(w, "\nyou> %s\n", msg.Text)
	for ev, err := range o.Stream(ctx, msg) {
		switch ev.Type {
		case agent.EventMessageStart:
			fmt.Fprint(w, "bot> ")
		case agent.EventMessageChunk:
			fmt.Fprint(w, strings.ReplaceAll(ev.Text, "\n", "\n     "))
		case agent.EventMessageEnd:
			fmt.Fprintln(w)
		case agent.EventToolCallStart:
			if ev.ToolCall.Resumed {
				// A pooled agent resumed by the user's decision: its call
				// was made in an earlier message (or process).
				fmt.Fprintf(w, "  ↻ %s decided by your reply %s\n", ev.ToolCall.Name, ev.ToolCall.ArgsSummary)
			} else {
				fmt.Fprintf(w, "  → %s %s\n", ev.ToolCall.Name, ev.ToolCall.ArgsSummary)
			}
		case agent.EventToolResult:
			printToolResult(w, ev.ToolCall)
		case agent.EventStateChange:
			fmt.Fprintf(w, "  … the conversation is now %s\n", ev.State)
			if len(ev.Approvals) > 0 {
				printApprovals(w, ev.Approvals)
			}
		case agent.EventExecutionEnd:
			printResult(w, ev.Result)
			return ev.Result, err
		}
	}
	return nil, ctx.Err() // not reached: the stream always ends with EventExecutionEnd
}

func printToolResult(w io.Writer, c *agent.ToolCallRecord) {
	switch {
	case !c.Success:
		fmt.Fprintf(w, "  ✗ %s failed: %s\n", c.Name, firstLine(c.Error))
	case c.ResultStatus == string(agent.StatusWaitingForApproval) || c.ResultStatus == string(agent.StatusWaitingForInput):
		fmt.Fprintf(w, "  ⏸ %s parked in the pool: %s\n", c.Name, c.ResultStatus)
	case c.Duration == 0: // resumed agents are not timed
		fmt.Fprintf(w, "  ✓ %s done (%d chars)\n", c.Name, c.ResultChars)
	default:
		fmt.Fprintf(w, "  ✓ %s done in %s (%d chars)\n", c.Name, round(c.Duration), c.ResultChars)
	}
}

// printApprovals shows pending approvals as approval.Present writes them
// for the user (and the model).
func printApprovals(w io.Writer, reqs []approval.Request) {
	for _, r := range reqs {
		fmt.Fprintf(w, "  approval %s (%s) waits for the user:\n", r.ID, r.AgentName)
	}
	printQuoted(w, approval.Present(reqs))
}

// listApprovals is the short form: one line per request.
func listApprovals(w io.Writer, reqs []approval.Request) {
	for _, r := range reqs {
		fmt.Fprintf(w, "  - %s (%s): %s, expires %s\n", r.ID, r.AgentName, r.ActionSummary, r.ExpiresAt.UTC().Format(approval.ExpiryLayout))
	}
}

// printQuoted prints text as a "  | " block.
func printQuoted(w io.Writer, text string) {
	for line := range strings.Lines(strings.TrimRight(text, "\n")) {
		fmt.Fprintln(w, strings.TrimRight("  | "+strings.TrimRight(line, "\n"), " "))
	}
}

func printResult(w io.Writer, r *agent.Result) {
	fmt.Fprintf(w, "  [%s · %s · %s · %d tokens in, %d out · %s]\n",
		r.Status, plural(r.Turns, "turn"), plural(len(r.ToolCalls), "tool call"), r.Usage.InputTokens, r.Usage.OutputTokens, round(r.Duration))
}

// printOutbox lists what was really sent.
func printOutbox(w io.Writer, o *Outbox) {
	sent := o.Sent()
	fmt.Fprintf(w, "\noutbox: %s sent\n", plural(len(sent), "email"))
	for _, m := range sent {
		fmt.Fprintf(w, "  %s\n    from:    %s\n    to:      %s\n    subject: %s\n", m.ID, m.From, m.To, m.Subject)
		printQuoted(w, m.Body)
	}
}

func toolNames(o *agent.Orchestrator) string {
	var names []string
	for _, t := range o.Tools() {
		names = append(names, t.Name)
	}
	return strings.Join(names, ", ")
}

func round(d time.Duration) time.Duration {
	if d >= time.Millisecond {
		return d.Round(time.Millisecond)
	}
	return d.Round(time.Microsecond)
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
