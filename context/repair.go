package context

import "github.com/valetkit/valet/llm"

// RepairPairing returns a copy of msgs that satisfies llm.CheckPairing,
// obtained only by removing things — it never invents a tool result or a
// call:
//
//   - a tool message that answers no call of the assistant message heading
//     its group (the run of tool messages right after an assistant message
//     with tool calls), or answers a call already answered, is dropped; so
//     is every tool message outside such a group;
//   - a tool call left without a result is removed from its assistant
//     message, as is a repeated call id; the message is dropped entirely
//     if that leaves it with neither content nor calls.
//
// Everything else is kept in order. The result is a new slice; msgs and the
// ToolCalls slices it refers to are not modified (a message whose calls
// change gets a new ToolCalls slice).
func RepairPairing(msgs []llm.Message) []llm.Message {
	out := make([]llm.Message, 0, len(msgs))
	for i := 0; i < len(msgs); {
		msg := msgs[i]
		if msg.Role == llm.RoleTool {
			i++ // a result outside any group answers nothing
			continue
		}
		if msg.Role != llm.RoleAssistant || len(msg.ToolCalls) == 0 {
			out = append(out, msg)
			i++
			continue
		}

		j := i + 1
		for j < len(msgs) && msgs[j].Role == llm.RoleTool {
			j++
		}
		calls := msg.ToolCalls
		// answered[c] is true when calls[c] got its (first) result; a
		// repeated id is matched only to its first occurrence, so its later
		// copies stay unanswered and are removed.
		answered := make([]bool, len(calls))
		results := make([]llm.Message, 0, j-i-1)
		for _, res := range msgs[i+1 : j] {
			for c := range calls {
				if calls[c].ID == res.ToolCallID {
					if !answered[c] {
						answered[c] = true
						results = append(results, res)
					}
					break
				}
			}
		}
		all := true
		for _, a := range answered {
			all = all && a
		}
		if !all {
			kept := make([]llm.ToolCall, 0, len(calls))
			for c := range calls {
				if answered[c] {
					kept = append(kept, calls[c])
				}
			}
			if len(kept) == 0 {
				kept = nil
			}
			msg.ToolCalls = kept
		}
		if len(msg.ToolCalls) > 0 || msg.Content != "" {
			out = append(out, msg)
			out = append(out, results...)
		}
		i = j
	}
	return out
}
