package context

import "github.com/valetkit/valet/llm"

// A history (the messages after the leading system messages) is cut only
// between units. A unit is either one message, or an assistant message with
// tool calls together with the run of tool messages right after it (its
// results). Cutting between units can never separate a call from its result,
// so a history that satisfies llm.CheckPairing still does after any suffix of
// its units is kept.

// unitStarts returns the index in hist where each unit begins, oldest first.
func unitStarts(hist []llm.Message) []int {
	starts := make([]int, 0, len(hist))
	for i := 0; i < len(hist); {
		starts = append(starts, i)
		j := i + 1
		if hist[i].Role == llm.RoleAssistant && len(hist[i].ToolCalls) > 0 {
			for j < len(hist) && hist[j].Role == llm.RoleTool {
				j++
			}
		}
		i = j
	}
	return starts
}

// lastUser returns the index of the last user message in hist, or -1.
func lastUser(hist []llm.Message) int {
	for i := len(hist) - 1; i >= 0; i-- {
		if hist[i].Role == llm.RoleUser {
			return i
		}
	}
	return -1
}

// window picks the units to keep under a message quota. It returns k, the
// index in starts of the oldest kept unit: units k.. are kept, and so is the
// pinned message hist[pin] when pin >= 0 and it falls before them. The newest
// unit is always kept, whatever its size; older units are added while the
// kept messages (counting the pinned one) stay within quota.
func window(n int, starts []int, pin, quota int) int {
	k := len(starts) - 1
	for k > 0 {
		s := starts[k-1]
		cost := n - s
		if pin >= 0 && pin < s {
			cost++
		}
		if cost > quota {
			break
		}
		k--
	}
	return k
}

// assemble builds sys + [hist[pin]] + hist[from:], or returns msgs itself
// when that is all of msgs.
func assemble(msgs []llm.Message, p int, hist []llm.Message, pin, from int) []llm.Message {
	withPin := pin >= 0 && pin < from
	size := p + len(hist) - from
	if withPin {
		size++
	}
	if size == len(msgs) {
		return msgs
	}
	out := make([]llm.Message, 0, size)
	out = append(out, msgs[:p]...)
	if withPin {
		out = append(out, hist[pin])
	}
	return append(out, hist[from:]...)
}

// Trim shortens a history that [Manager.NeedsTrim] flagged. It never
// modifies msgs: it returns a new slice when it drops anything and msgs
// itself when there is nothing to drop.
//
// What is kept, in order:
//
//   - every leading system message (persona, instructions, recalled memory);
//     system messages later in the history count as ordinary messages;
//   - the last user message — the request the loop is working on — even when
//     it is older than the kept window (it then counts toward
//     MaxHistoryMessages like any kept message, and the messages between it
//     and the window are dropped);
//   - at most the newest MaxHistoryMessages non-system messages, and then
//     fewer, dropping the oldest first, until the estimate is within
//     TrimThreshold × TokenLimit.
//
// Cuts fall only between groups: an assistant message with tool calls and
// the tool results answering it are kept or dropped together. When the cut
// would fall inside such a group, it moves forward so the whole group is
// dropped — never leaving results without their call at the front, and
// never exceeding the limits to keep a half group. The one exception is the
// group holding the last message, which is always kept whole, even if it is
// larger than MaxHistoryMessages or the token budget on its own.
//
// Trim never drops the leading system messages, the last user message or
// the last message's group. When those alone exceed the budget (a single
// huge message), Trim returns them anyway: shrinking content is the job of
// the overflow defences, [Manager.TruncateToolResults] and
// [Manager.ForceTrim].
//
// A history that satisfies llm.CheckPairing still does after Trim. Trim
// does not repair a history that is already broken; [RepairPairing] does.
func (m *Manager) Trim(msgs []llm.Message) []llm.Message {
	return m.trim(msgs, m.cfg.MaxHistoryMessages, m.budget)
}

// TrimToTokens is [Manager.Trim] with a token budget of its own and no
// message quota: it drops the oldest groups until the estimate of the
// result is at most maxTokens, keeping what Trim keeps (the leading system
// messages, the last user message and the last message's group), so the
// result may still exceed maxTokens when those alone do. It is how a loop
// shrinks a request straight to the size a model said it accepts. Like
// Trim it never modifies msgs and keeps pairing intact.
func (m *Manager) TrimToTokens(msgs []llm.Message, maxTokens int) []llm.Message {
	return m.trim(msgs, len(msgs), maxTokens)
}

func (m *Manager) trim(msgs []llm.Message, quota, budget int) []llm.Message {
	p := leadingSystem(msgs)
	hist := msgs[p:]
	if len(hist) == 0 {
		return msgs
	}
	starts := unitStarts(hist)
	pin := lastUser(hist)
	k := window(len(hist), starts, pin, quota)

	// Token phase: drop the oldest kept units while over budget.
	total := m.Tokens(msgs[:p]) + m.Tokens(hist[starts[k]:])
	if pin >= 0 && pin < starts[k] {
		total += m.MessageTokens(hist[pin])
	}
	for total > budget && k < len(starts)-1 {
		s, e := starts[k], starts[k+1]
		if s != pin { // the pinned user message stays, so its tokens too
			total -= m.Tokens(hist[s:e])
		}
		k++
	}
	return assemble(msgs, p, hist, pin, starts[k])
}

// ForceTrim is the third overflow defence, for when the model still rejects
// the request as too long after [Manager.TruncateToolResults]: it keeps the
// leading system messages, the last user message and the newest
// ForceTrimKeep messages after them, whatever their tokens.
//
// Like [Manager.Trim] it cuts only between groups, dropping a group the cut
// would split, and always keeps the group holding the last message whole. It
// then runs [RepairPairing] on the result, so even a malformed history comes
// out satisfying llm.CheckPairing. It returns a new slice and never modifies
// msgs.
func (m *Manager) ForceTrim(msgs []llm.Message) []llm.Message {
	p := leadingSystem(msgs)
	hist := msgs[p:]
	if len(hist) == 0 {
		return RepairPairing(msgs)
	}
	starts := unitStarts(hist)
	pin := lastUser(hist)
	k := window(len(hist), starts, pin, m.cfg.ForceTrimKeep)
	return RepairPairing(assemble(msgs, p, hist, pin, starts[k]))
}
