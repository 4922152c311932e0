package llmtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/valetkit/valet/llm"
)

// ErrScriptExhausted is returned (wrapped, with the call's number and the
// purpose its request gives, e.g. "llmtest: script exhausted: call 4
// (phrase) had no reply (3 scripted)") when a [Script] is asked for more
// replies than it was given, in order or for a purpose ([Script.On]).
var ErrScriptExhausted = errors.New("llmtest: script exhausted")

// ErrReplyMismatch is returned (wrapped, with the call's number and what is
// wrong) when a scripted reply that is made from its request cannot answer
// the request it got: [Decide] or [ApproveAll] when the request has no
// resolve_approvals tool or no approval at a position, [ProvideFields] when
// it has no provide_fields tool or no such field, [Remember] and [Summary]
// when it does not force their tool.
var ErrReplyMismatch = errors.New("llmtest: reply does not fit the request")

// Reply is one scripted answer of a [Script]. [Text], [Calls] and [Fail]
// make fixed replies; [Decide], [ApproveAll], [CancelAll], [ProvideFields],
// [Unrelated], [Remember] and [Summary] make replies that are built from
// the request they answer.
type Reply struct {
	Text      string         // assistant text
	ToolCalls []llm.ToolCall // tool calls; empty IDs become "call_<n>"
	Usage     llm.Usage      // reported usage; zero means an estimate from lengths
	Err       error          // returned instead of a response when non-nil
	Delay     time.Duration  // wait before answering (honours ctx)

	// build, when set, makes the reply from the request it answers (see
	// Decide and ProvideFields); an error fails the call with
	// ErrReplyMismatch.
	build func(req llm.Request) (Reply, error)
}

// Text returns a reply that answers with text only.
func Text(s string) Reply { return Reply{Text: s} }

// Calls returns a reply that makes the given tool calls.
func Calls(calls ...llm.ToolCall) Reply { return Reply{ToolCalls: calls} }

// Fail returns a reply that fails with err.
func Fail(err error) Reply { return Reply{Err: err} }

// Call builds a tool call; args is any value that encodes to a JSON object
// (a string or []byte is taken as JSON text as it is).
func Call(name string, args any) llm.ToolCall {
	raw, err := rawJSON(args)
	if err != nil {
		panic("llmtest.Call: " + err.Error()) // test-construction error, like regexp.MustCompile
	}
	return llm.ToolCall{Name: name, Arguments: raw}
}

// rawJSON encodes v as Call takes its args: a string, []byte or
// json.RawMessage as JSON text as it is, nil as {}, anything else with
// json.Marshal.
func rawJSON(v any) (json.RawMessage, error) {
	switch a := v.(type) {
	case string:
		return json.RawMessage(a), nil
	case []byte:
		return json.RawMessage(a), nil
	case json.RawMessage:
		return a, nil
	case nil:
		return json.RawMessage(`{}`), nil
	}
	return json.Marshal(v)
}

// Script is an [llm.Client] that answers from a list of replies in order, or
// from a function of the request, and records every request it receives. It
// is safe for concurrent use.
//
// A call after the replies ran out fails with [ErrScriptExhausted], and a
// reply that does not fit its request (e.g. [Decide] when no approval is
// pending) with [ErrReplyMismatch]. Both are also recorded: [Script.Err]
// returns them, and a strict script ([Script.Strict], [NewStrictScript])
// fails the test with them at its end, and with the replies left unused.
//
// Replies given to NewScript answer calls in order, whatever they are for;
// [Script.On] gives the calls of one [llm.Purpose] replies of their own
// (see "Scripting by purpose" in the package documentation).
type Script struct {
	mu       sync.Mutex
	replies  []Reply
	fn       func(llm.Request) Reply
	next     int
	asides   map[llm.Purpose]*queue // by On
	requests []llm.Request
	ids      int
	problems []error
}

// NewScript returns a Script that answers with replies, in order.
func NewScript(replies ...Reply) *Script { return &Script{replies: replies} }

// NewScriptFunc returns a Script that answers each request with fn(request).
func NewScriptFunc(fn func(req llm.Request) Reply) *Script { return &Script{fn: fn} }

// Requests returns copies of the requests received so far.
func (s *Script) Requests() []llm.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]llm.Request, len(s.requests))
	copy(out, s.requests)
	return out
}

// Calls returns the number of requests received so far.
func (s *Script) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}

// Remaining returns how many scripted replies have not been used, those
// given to [Script.On] included (0 for a [NewScriptFunc] script without
// On).
func (s *Script) Remaining() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.replies) - s.next
	for _, q := range s.asides {
		n += len(q.replies) - q.next
	}
	return n
}

// Err returns what went wrong so far, nil when nothing did: every call that
// came after the replies ran out ([ErrScriptExhausted]) and every reply that
// did not fit its request ([ErrReplyMismatch]), joined with [errors.Join]
// in call order. Replies not used yet are not an error here, since more
// calls may come: check [Script.Remaining] at the end of a test, or let
// [Script.Strict] check both.
func (s *Script) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return errors.Join(s.problems...)
}

// Reset forgets the recorded requests and problems and starts the replies
// (those given to [Script.On] too) from the top.
func (s *Script) Reset() {
	s.mu.Lock()
	s.next, s.requests, s.ids, s.problems = 0, nil, 0, nil
	for _, q := range s.asides {
		q.next, q.calls = 0, 0
	}
	s.mu.Unlock()
}

func (s *Script) take(req llm.Request) (Reply, error) {
	req.Messages = append([]llm.Message(nil), req.Messages...)
	s.mu.Lock()
	s.requests = append(s.requests, req)
	call := len(s.requests)
	fn := s.fn
	q := s.asides[req.Purpose]
	var r Reply
	switch {
	case q != nil:
		q.calls++
		if q.next == len(q.replies) {
			defer s.mu.Unlock()
			err := fmt.Errorf("%w: call %d (%s call %d) had no reply (%d scripted)", ErrScriptExhausted, call, req.Purpose, q.calls, len(q.replies))
			s.problems = append(s.problems, err)
			return Reply{}, err
		}
		r = q.replies[q.next]
		q.next++
	case fn != nil:
		// Call fn without the lock, so that it may use the Script (e.g.
		// s.Calls()) to decide, and so that a panic in it (or a t.FailNow)
		// leaves the Script usable.
		s.mu.Unlock()
		r = fn(req)
		s.mu.Lock()
	case req.Purpose == llm.PurposeRememberFacts:
		// In the background after a reply: it has no place among the
		// others, and remembers nothing unless scripted with On.
		r = rememberNothing
	case s.next < len(s.replies):
		r = s.replies[s.next]
		s.next++
	default:
		defer s.mu.Unlock()
		err := fmt.Errorf("%w: call %d%s had no reply (%d scripted)", ErrScriptExhausted, call, purposeNote(req.Purpose), len(s.replies))
		s.problems = append(s.problems, err)
		return Reply{}, err
	}
	defer s.mu.Unlock()
	if r.build != nil {
		built, err := r.build(req)
		if err != nil {
			err = fmt.Errorf("%w: call %d%s: %w", ErrReplyMismatch, call, purposeNote(req.Purpose), err)
			s.problems = append(s.problems, err)
			return Reply{}, err
		}
		if built.Delay == 0 {
			built.Delay = r.Delay
		}
		r = built
	}
	if len(r.ToolCalls) > 0 {
		calls := make([]llm.ToolCall, len(r.ToolCalls))
		for i, c := range r.ToolCalls {
			if c.ID == "" {
				s.ids++
				c.ID = "call_" + strconv.Itoa(s.ids)
			}
			if len(c.Arguments) == 0 {
				c.Arguments = json.RawMessage(`{}`)
			}
			calls[i] = c
		}
		r.ToolCalls = calls
	}
	return r, nil
}

func wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (r Reply) response(req llm.Request) *llm.Response {
	u := r.Usage
	if u == (llm.Usage{}) {
		n := 0
		for _, m := range req.Messages {
			n += len(m.Content)
			for _, c := range m.ToolCalls {
				n += len(c.Arguments)
			}
		}
		u = llm.Usage{InputTokens: n/4 + 1, OutputTokens: len(r.Text)/4 + 1}
	}
	finish := "stop"
	if len(r.ToolCalls) > 0 {
		finish = "tool_calls"
	}
	return &llm.Response{
		Message:      llm.Message{Role: llm.RoleAssistant, Content: r.Text, ToolCalls: r.ToolCalls},
		FinishReason: finish,
		Usage:        u,
		Model:        ModelName,
	}
}

// ModelName is the model a Script names (Script.Model, llm.Response.Model),
// so tests can price it: agent.Config{Prices: agent.Prices{llmtest.ModelName: ...}}.
const ModelName = "llmtest"

// Model returns ModelName.
func (s *Script) Model() string { return ModelName }

// Complete implements [llm.Client].
func (s *Script) Complete(ctx context.Context, req llm.Request) (*llm.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r, err := s.take(req)
	if err != nil {
		return nil, err
	}
	if err := wait(ctx, r.Delay); err != nil {
		return nil, err
	}
	if r.Err != nil {
		return nil, r.Err
	}
	return r.response(req), nil
}

// Stream implements [llm.Client]: the text arrives word by word, then the
// final chunk carries the whole response.
func (s *Script) Stream(ctx context.Context, req llm.Request) iter.Seq2[llm.Chunk, error] {
	return func(yield func(llm.Chunk, error) bool) {
		if err := ctx.Err(); err != nil {
			yield(llm.Chunk{}, err)
			return
		}
		r, err := s.take(req)
		if err == nil {
			err = wait(ctx, r.Delay)
		}
		if err == nil {
			err = r.Err
		}
		if err != nil {
			yield(llm.Chunk{}, err)
			return
		}
		rest := r.Text
		for rest != "" {
			if err := ctx.Err(); err != nil {
				yield(llm.Chunk{}, err)
				return
			}
			i := strings.IndexByte(rest[min(1, len(rest)):], ' ')
			piece := rest
			if i >= 0 {
				piece = rest[:i+1]
			}
			rest = rest[len(piece):]
			if !yield(llm.Chunk{Text: piece}, nil) {
				return
			}
		}
		yield(llm.Chunk{Response: r.response(req)}, nil)
	}
}
