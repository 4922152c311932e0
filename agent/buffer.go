package agent

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/valetkit/valet/llm"
)

// A run's messages live in one buffer, taken from the orchestrator's pool
// of buffers and given back when the run ends: slot 0 holds the system
// prompt, then come the history loaded from the memory provider and the
// run's own messages. In the common case the window the model is sent is
// that buffer itself, so a run copies the history once (from the provider
// into the buffer, with no allocation once the buffer has room): new
// messages are appended once, the running token total makes the per-turn
// trim check O(1), and a trim moves no messages: the buffer's start moves
// forward past what is dropped, and the messages move back to the front
// only when the buffer is full at the end.
//
// The run's own messages (from fresh on in the buffer, plus early: those a
// trim dropped from the buffer) are what is appended to the provider as
// the turn. A PrepareContext hook, a note for the model or an overflow
// defence gives the window contents the history must not keep; the window
// is then a slice of its own ("apart"), new messages go to both, and the
// window is trimmed by agentctx's functions as before.

// buffers is a run's message buffer, reused by later runs.
type buffers struct {
	msgs   []llm.Message // msgs[0] is the system prompt, msgs[1:] the history
	base   []llm.Message // msgs' backing array from its first slot (len = cap)
	dead   int           // slots of base before msgs, dropped by trims
	tokens int           // the history's token total
	// recs holds the run's Result.ToolCalls while it runs (announceCalls);
	// the Result gets an exact copy when the buffer goes back to the pool
	// (releaseBuffers), so a run of 15 calls allocates 15 records once
	// instead of 1, 2, 4, 8 and 16 as they come.
	recs []ToolCallRecord
}

// maxPooledRecords is the largest record array given back to the pool.
const maxPooledRecords = 256

// maxPooledBuffer is the largest buffer (in messages) given back to the
// pool; a larger one, from an exceptional run, is left to the collector.
const maxPooledBuffer = 1024

// firstBufferCap is the capacity of a new buffer: the system prompt, the
// user's message, a first turn of three calls and the answer fit without
// growing it (about 700 bytes).
const firstBufferCap = 7

func (o *Orchestrator) getBuffers() *buffers {
	if b, ok := o.bufs.Get().(*buffers); ok {
		return b
	}
	return new(buffers)
}

// releaseBuffers gives the run's buffer back to the pool, and the Result
// its own copy of the tool-call records first: the buffer's next run
// reuses the array they lived in.
func (r *run) releaseBuffers() {
	b := r.buf
	if b == nil {
		return
	}
	r.buf, r.window, r.early = nil, nil, nil
	if recs := r.res.ToolCalls; len(recs) > 0 {
		r.res.ToolCalls = slices.Clone(recs)
		clear(recs)
		if cap(recs) <= maxPooledRecords {
			b.recs = recs[:0]
		}
	}
	r.o.putBuffers(b)
}

func (o *Orchestrator) putBuffers(b *buffers) {
	clear(b.base[:b.dead+len(b.msgs)])
	b.msgs, b.dead, b.tokens = b.base[:0], 0, 0
	if cap(b.base) <= maxPooledBuffer {
		o.bufs.Put(b)
	}
}

// setBase makes msgs the buffer, starting at its first slot.
func (b *buffers) setBase(msgs []llm.Message) {
	b.msgs, b.base, b.dead = msgs, msgs[:cap(msgs)], 0
}

// history returns the history in the buffer (aliasing it).
func (b *buffers) history() []llm.Message { return b.msgs[1:] }

// add appends msgs to the history and to its token total.
func (o *Orchestrator) addToBuffer(b *buffers, msgs ...llm.Message) {
	for i := range msgs {
		b.tokens += o.ctxm.MessageTokens(msgs[i])
	}
	if len(b.msgs)+len(msgs) > cap(b.msgs) && b.dead > 0 {
		// Full at the end but with slots dropped at the front: move the
		// messages to the front instead of growing the buffer.
		n := copy(b.base, b.msgs)
		clear(b.base[n : b.dead+len(b.msgs)])
		b.msgs, b.dead = b.base[:n], 0
	}
	before := cap(b.msgs)
	b.msgs = append(b.msgs, msgs...)
	if cap(b.msgs) != before { // grown: a new backing array
		b.setBase(b.msgs)
	}
}

// dropFront drops the first k slots of the buffer without moving the rest:
// they are cleared for the collector and reused when the buffer fills.
func (b *buffers) dropFront(k int) {
	clear(b.msgs[:k])
	b.msgs = b.msgs[k:]
	b.dead += k
}

// open gives the run its buffer with the conversation's history loaded
// (at most MaxHistoryMessages messages); the system prompt is set later
// (setSystem).
func (r *run) open() error {
	o := r.o
	b := o.getBuffers()
	r.buf = b
	if cap(b.base) == 0 {
		b.setBase(make([]llm.Message, 0, firstBufferCap))
	}
	msgs := append(b.base[:0], llm.Message{Role: llm.RoleSystem})
	var err error
	switch ha, ok := o.mem.(historyAppender); {
	case r.noHistory: // a triggered message of no conversation: none is its own
	case ok:
		msgs, err = ha.AppendHistory(r.ctx, msgs, r.msg.TenantID, r.msg.ConversationID, o.historyLimit())
	default:
		var h []llm.Message
		h, err = o.mem.History(r.ctx, r.msg.TenantID, r.msg.ConversationID, o.historyLimit())
		msgs = append(msgs, h...)
	}
	if cap(msgs) != cap(b.base) {
		b.setBase(msgs)
	} else {
		b.msgs = msgs
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrHistoryNotLoaded, err)
	}
	for i := range b.msgs[1:] {
		b.tokens += o.ctxm.MessageTokens(b.msgs[1+i])
	}
	r.fresh = len(b.msgs) - 1
	r.window, r.apart = b.msgs, false
	return nil
}

// historyLimit is how many messages a run loads: MaxHistoryMessages, or
// with compaction on up to compactLoadLimit since the newest summary.
func (o *Orchestrator) historyLimit() int {
	if o.loop.CompactThreshold > 0 {
		return compactLoadLimit
	}
	return o.loop.MaxHistoryMessages
}

// historyQuota is how many history messages the window may hold before a
// trim: unbounded while compaction is on.
func (o *Orchestrator) historyQuota() int {
	return cmp.Or(compactQuota(o.loop), o.loop.MaxHistoryMessages)
}

// compactQuota is the message quota while compaction is on (no count-based
// trimming), or 0 when it is off.
func compactQuota(loop LoopConfig) int {
	if loop.CompactThreshold > 0 {
		return math.MaxInt32
	}
	return 0
}

// historyAppender is a memory.Provider that loads history into a given
// slice (memory.InMemory does): a run then copies its history once.
type historyAppender interface {
	AppendHistory(ctx context.Context, dst []llm.Message, tenantID, conversationID string, limit int) ([]llm.Message, error)
}

// setSystem puts the system prompt (of tokens tokens) in slot 0.
func (r *run) setSystem(system string, tokens int) {
	r.buf.msgs[0] = llm.Message{Role: llm.RoleSystem, Content: system}
	r.sysTokens = tokens
	if !r.apart {
		r.window = r.buf.msgs
	}
}

// push appends msgs to the history and to the window.
func (r *run) push(msgs ...llm.Message) {
	r.o.addToBuffer(r.buf, msgs...)
	if r.apart {
		r.window = append(r.window, msgs...)
	} else {
		r.window = r.buf.msgs
	}
}

// commit marks everything pushed so far as complete: it is saved even if
// the run fails later.
func (r *run) commit() { r.saved = len(r.early) + len(r.buf.msgs) - 1 - r.fresh }

// turn returns the run's complete messages: what is saved.
func (r *run) turn() []llm.Message {
	if r.buf == nil {
		return nil
	}
	own := r.buf.msgs[1+r.fresh:]
	if len(r.early) == 0 {
		return own[:r.saved]
	}
	return append(r.early, own...)[:r.saved]
}

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
	c := r.buf
	hist := c.msgs[1:]
	n, quota, budget := len(hist), o.historyQuota(), o.ctxm.TrimBudget()
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
	// The run's own messages among those dropped are kept aside: the turn
	// is saved whole.
	keptPin := pinned(from) == 1
	if from > r.fresh {
		r.early = append(r.early, hist[r.fresh:from]...)
		r.fresh = from
	}
	r.fresh -= from
	if keptPin {
		r.fresh++ // the pinned copy comes first and is not the run's own
	}
	// Drop the front without moving what is kept: the system prompt (and
	// the pinned user message) are written into the slots just before it,
	// and the buffer starts there. The dropped slots are cleared for the
	// collector; the next growth of the buffer leaves them behind.
	start := from // the slot of hist[from-1], just before the kept part
	if keptPin {
		c.msgs[start] = hist[pin]
		start--
	}
	c.msgs[start] = c.msgs[0]
	c.dropFront(start)
	c.tokens -= dropped
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
