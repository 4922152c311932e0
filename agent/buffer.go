package agent

import (
	"slices"

	"github.com/valetkit/valet/llm"
)

// The run's messages live in one buffer, the conversation's msgs: slot 0
// holds the system prompt of the current run and msgs[1:] is the history.
// In the common case the window the model is sent is that buffer itself,
// so a run copies no history: new messages are appended once, the running
// token total makes the per-turn trim check O(1), and a trim moves no
// messages: the buffer's start moves forward past what is dropped, and the
// messages move back to the front only when the buffer is full at the end.
//
// A PrepareContext hook, a note for the model or an overflow defence gives
// the window contents the history must not keep; the window is then a slice
// of its own ("apart"), new messages go to both, and the window is trimmed
// by agentctx's functions as before.

// history returns the conversation's history (aliasing the buffer).
func (c *conversation) history() []llm.Message {
	if len(c.msgs) == 0 {
		return nil
	}
	return c.msgs[1:]
}

// appendHistory adds msgs to the history and to its token total.
func (o *Orchestrator) appendHistory(c *conversation, msgs ...llm.Message) {
	if len(c.msgs) == 0 {
		c.setBuffer(newBuffer())
	}
	for i := range msgs {
		c.tokens += o.ctxm.MessageTokens(msgs[i])
	}
	if len(c.msgs)+len(msgs) > cap(c.msgs) && c.dead > 0 {
		// Full at the end but with slots dropped at the front: move the
		// messages to the front instead of growing the buffer.
		n := copy(c.base, c.msgs)
		clear(c.base[n : c.dead+len(c.msgs)])
		c.msgs, c.dead = c.base[:n], 0
	}
	before := cap(c.msgs)
	c.msgs = append(c.msgs, msgs...)
	if cap(c.msgs) != before { // grown: a new backing array
		c.setBuffer(c.msgs)
	}
}

// setBuffer makes msgs the conversation's buffer, starting at its first
// slot.
func (c *conversation) setBuffer(msgs []llm.Message) {
	c.msgs, c.base, c.dead = msgs, msgs[:cap(msgs)], 0
}

// dropFront drops the first k slots of the buffer without moving the rest:
// they are cleared for the collector and reused when the buffer fills.
func (c *conversation) dropFront(k int) {
	clear(c.msgs[:k])
	c.msgs = c.msgs[k:]
	c.dead += k
}

// firstBufferCap is the capacity of a new conversation's buffer: the
// system prompt, the user's message, a first turn of three calls and the
// answer fit without growing it (about 700 bytes).
const firstBufferCap = 7

func newBuffer() []llm.Message {
	return append(make([]llm.Message, 0, firstBufferCap), llm.Message{Role: llm.RoleSystem})
}

// open makes the conversation's buffer the run's window, with the system
// prompt (of sysTokens tokens) in slot 0.
func (r *run) open(c *conversation, system string, sysTokens int) {
	if len(c.msgs) == 0 {
		c.setBuffer(newBuffer())
	}
	c.msgs[0] = llm.Message{Role: llm.RoleSystem, Content: system}
	r.conv, r.sysTokens = c, sysTokens
	r.window, r.apart = c.msgs, false
	r.saved = len(c.msgs) - 1
}

// push appends msgs to the history and to the window.
func (r *run) push(msgs ...llm.Message) {
	r.o.appendHistory(r.conv, msgs...)
	if r.apart {
		r.window = append(r.window, msgs...)
	} else {
		r.window = r.conv.msgs
	}
}

// commit marks everything pushed so far as complete: it is kept in the
// history even if the run fails later.
func (r *run) commit() { r.saved = len(r.conv.msgs) - 1 }

// setWindow makes w the window from now on, apart from the history. w must
// not share its backing array with the buffer beyond the buffer's length.
func (r *run) setWindow(w []llm.Message) { r.window, r.apart = w, true }

// trim shortens the window before a model call when it holds more than
// MaxHistoryMessages messages after the system prompt or more tokens than
// the trim budget, with the rules of agentctx.Manager.Trim: the last user
// message is kept, tool calls keep their results, the newest group is kept
// whole.
func (r *run) trim() {
	o := r.o
	if r.apart {
		if o.ctxm.NeedsTrim(r.window) {
			r.setWindow(o.ctxm.Trim(r.window))
		}
		return
	}
	c := r.conv
	hist := c.msgs[1:]
	n, quota, budget := len(hist), o.loop.MaxHistoryMessages, o.ctxm.TrimBudget()
	if n <= quota && r.sysTokens+c.tokens <= budget {
		return
	}
	if n == 0 {
		return
	}
	pin := lastUserIndex(hist)
	pinned := func(s int) int { // 1 when the pinned message lies before s
		if pin >= 0 && pin < s {
			return 1
		}
		return 0
	}
	// Count: the newest group always, then older ones while they fit.
	from := unitBefore(hist, n)
	for from > 0 {
		s := unitBefore(hist, from)
		if n-s+pinned(s) > quota {
			break
		}
		from = s
	}
	// Tokens: drop the oldest kept groups while over the budget.
	dropped := 0 // tokens of hist[:from], the pinned message excluded
	for i := range from {
		if i != pin {
			dropped += o.ctxm.MessageTokens(hist[i])
		}
	}
	total := r.sysTokens + c.tokens - dropped
	last := unitBefore(hist, n)
	for total > budget && from < last {
		e := unitAfter(hist, from)
		for i := from; i < e; i++ {
			if i != pin {
				t := o.ctxm.MessageTokens(hist[i])
				total -= t
				dropped += t
			}
		}
		from = e
	}
	if from == 0 {
		return
	}
	// Drop the front without moving what is kept: the system prompt (and
	// the pinned user message) are written into the slots just before it,
	// and the buffer starts there. The dropped slots are cleared for the
	// collector; the next growth of the buffer leaves them behind.
	keptPin := pinned(from) == 1
	start := from // the slot of hist[from-1], just before the kept part
	if keptPin {
		c.msgs[start] = hist[pin]
		start--
	}
	c.msgs[start] = c.msgs[0]
	c.dropFront(start)
	c.tokens -= dropped
	removed := min(r.saved, from) // r.saved counts history messages
	if keptPin && pin < r.saved {
		removed--
	}
	r.saved -= removed
	r.window = c.msgs
}

// lastUserIndex returns the index of the last user message, or -1.
func lastUserIndex(hist []llm.Message) int {
	for i := len(hist) - 1; i >= 0; i-- {
		if hist[i].Role == llm.RoleUser {
			return i
		}
	}
	return -1
}

// unitBefore returns the start of the group that ends just before e (e >
// 0): an assistant message with tool calls together with its results, or
// one message. A tool result with no call before its run is a group of its
// own.
func unitBefore(hist []llm.Message, e int) int {
	i := e - 1
	if hist[i].Role != llm.RoleTool {
		return i
	}
	j := i
	for j > 0 && hist[j-1].Role == llm.RoleTool {
		j--
	}
	if j > 0 && hist[j-1].Role == llm.RoleAssistant && len(hist[j-1].ToolCalls) > 0 {
		return j - 1
	}
	return i
}

// unitAfter returns the end of the group that starts at s.
func unitAfter(hist []llm.Message, s int) int {
	e := s + 1
	if hist[s].Role == llm.RoleAssistant && len(hist[s].ToolCalls) > 0 {
		for e < len(hist) && hist[e].Role == llm.RoleTool {
			e++
		}
	}
	return e
}

// keepHistory ends a run's changes to the conversation: what follows the
// last complete turn (saved history messages) is dropped, and only the
// newest MaxHistoryMessages messages are kept, cut between groups so tool
// calls stay paired.
func (o *Orchestrator) keepHistory(c *conversation, saved int) {
	if len(c.msgs) == 0 {
		return
	}
	if end := 1 + saved; len(c.msgs) > end {
		for i := end; i < len(c.msgs); i++ {
			c.tokens -= o.ctxm.MessageTokens(c.msgs[i])
		}
		clear(c.msgs[end:])
		c.msgs = c.msgs[:end]
	}
	hist := c.msgs[1:]
	if max := o.loop.MaxHistoryMessages; len(hist) > max {
		cut := len(hist) - max
		for cut < len(hist) && hist[cut].Role == llm.RoleTool {
			cut++ // its call is dropped: so is it
		}
		for i := range cut {
			c.tokens -= o.ctxm.MessageTokens(hist[i])
		}
		c.msgs[cut] = c.msgs[0] // the slot before the kept part, as in trim
		c.dropFront(cut)
	}
	c.msgs[0] = llm.Message{} // the system prompt is rebuilt by each run
	if len(c.msgs) == 1 {
		c.forget()
	} else if cap(c.base) > 2*len(c.msgs)+8 {
		c.setBuffer(slices.Clip(slices.Clone(c.msgs))) // an idle conversation holds no spare room
	}
}

// forget drops the history.
func (c *conversation) forget() {
	clear(c.base)
	c.msgs, c.base, c.dead, c.tokens = nil, nil, 0, 0
}
