// Package context keeps a conversation inside a model's context window: it
// estimates tokens, truncates oversized tool results, trims long histories,
// and repairs tool-call pairing, all without ever separating a tool call
// from its result.
//
// The package name collides with the standard library's context, which
// every caller also needs, so import it under the name agentctx (the SDK
// does so everywhere):
//
//	import agentctx "github.com/valetkit/valet/context"
//
// # The Manager
//
// A [Manager] holds the limits of one model, set by a [Config] whose zero
// fields take the documented defaults (a 128,000-token window, trimming past
// 80% of it or past 40 messages, one tool result at most 30% of the window
// and 400,000 bytes, 5 messages kept by a force trim):
//
//	cm, err := agentctx.NewManager(agentctx.Config{TokenLimit: 32000})
//
// A Manager is immutable and safe for concurrent use; one per model is
// enough.
//
// # Counting tokens
//
// By default tokens are estimated as ceil(len(text) / 4): a quarter of the
// UTF-8 byte length, close for English and code, on the high side for most
// other text. [Manager.MessageTokens] adds the content, name, tool-call ids,
// names and arguments of a message plus a small fixed framing cost
// ([MessageOverheadTokens], [ToolCallOverheadTokens]). The estimate only sums
// lengths, so [Manager.Tokens] and [Manager.NeedsTrim] do not allocate and
// can run on every turn. Set Config.CharsPerToken to tune the ratio, or
// Config.CountTokens to plug in a real tokenizer.
//
// # Three defences against overflow
//
// A ReAct loop grows its history every turn, and a single tool can return a
// megabyte. The Manager offers three defences, applied in order of growing
// loss:
//
//  1. On arrival, every tool result goes through
//     [Manager.TruncateToolResult], which cuts it to
//     [Manager.ToolResultLimit] bytes at a line boundary and appends a marker
//     such as "…[truncated: showed 12,000 of 98,765 characters]", so the
//     model knows it saw only part.
//
//  2. Before every model call, [Manager.NeedsTrim] checks the history and
//     [Manager.Trim] cuts it back under TrimThreshold × TokenLimit and
//     MaxHistoryMessages, dropping the oldest messages while keeping the
//     system messages, the last user message and the newest group.
//
//  3. When the model still rejects a request as too long
//     (llm.KindContextOverflow: token estimates are only estimates), the
//     loop retries with [Manager.TruncateToolResults], which cuts every
//     tool result in the history to a tenth of the single-result limit,
//     and, if that is not enough either, with [Manager.ForceTrim], which
//     keeps only the system messages, the last user message and the last
//     few messages. If the model still refuses, the loop gives up with a
//     clear error.
//
// In code, the loop of package agent does roughly:
//
//	msgs = cm.Trim(msgs) // returns msgs itself when nothing needs to go
//	resp, err := client.Complete(ctx, llm.Request{Messages: msgs})
//	if llm.KindOf(err) == llm.KindContextOverflow {
//		msgs = cm.TruncateToolResults(msgs, 0)
//		resp, err = client.Complete(ctx, llm.Request{Messages: msgs})
//	}
//	if llm.KindOf(err) == llm.KindContextOverflow {
//		msgs = cm.ForceTrim(msgs)
//		resp, err = client.Complete(ctx, llm.Request{Messages: msgs})
//	}
//
// # Tool-call pairing
//
// Chat APIs reject a request in which an assistant tool call has no result
// or a tool result answers no call (llm.CheckPairing states the rule). Trim
// and ForceTrim therefore cut only between groups — an assistant message
// with tool calls and its results go together — and when a limit falls
// inside a group they drop the whole group rather than keep half of it. The
// group holding the last message is the exception: it is always kept whole.
// [RepairPairing] makes any history valid by removing unanswered calls and
// unmatched results; ForceTrim applies it to its output.
//
// No function of this package modifies the slice it is given.
package context
