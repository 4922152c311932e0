package openai

import (
	"bytes"
	"encoding/json"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/valetkit/valet/llm"
)

// RawArgumentsKey is the key under which tool-call arguments that are not a
// JSON object (invalid JSON, an array, a bare value) are kept, as a string,
// so that llm.ToolCall.Arguments is always an object and nothing the model
// wrote is lost: {"_raw_arguments": "<what the model wrote>"}. Schema
// validation then reports the call as invalid and the model can try again.
const RawArgumentsKey = "_raw_arguments"

// The wire types below are deliberately lenient: they decode what OpenAI and
// the servers that copy its API really send (see doc.go) rather than the
// documented schema. Unknown fields are ignored.

// wireCompletion is a chat.completion or one chat.completion.chunk.
type wireCompletion struct {
	ID      string          `json:"id"`
	Model   string          `json:"model"`
	Choices []wireChoice    `json:"choices"`
	Usage   *wireUsage      `json:"usage"`
	Error   json.RawMessage `json:"error"` // OpenRouter sends errors inside 200 bodies and chunks
}

func (w *wireCompletion) hasError() bool {
	e := bytes.TrimSpace(w.Error)
	return len(e) > 0 && !bytes.Equal(e, []byte("null"))
}

type wireChoice struct {
	Index        int         `json:"index"`
	Message      wireMessage `json:"message"`
	Delta        wireMessage `json:"delta"`
	FinishReason *string     `json:"finish_reason"`
}

type wireMessage struct {
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"` // string, null, or (rarely) an array of parts
	Refusal   *string         `json:"refusal"`
	ToolCalls wireToolCalls   `json:"tool_calls"`
}

// wireToolCalls decodes a list of tool calls, stopping one past
// MaxToolCallsPerReply: a longer list is refused anyway (see tooMany), and
// decoding all of it would turn a body of "{}," into 100 bytes of memory
// for every 3 bytes read.
type wireToolCalls []wireToolCall

func (l *wireToolCalls) UnmarshalJSON(b []byte) error {
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		*l = nil
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil {
		return err
	} else if d, ok := tok.(json.Delim); !ok || d != '[' {
		return &json.UnmarshalTypeError{Value: "non-array", Type: reflect.TypeFor[wireToolCalls](), Field: "tool_calls"}
	}
	var out wireToolCalls
	for dec.More() && len(out) <= MaxToolCallsPerReply {
		var tc wireToolCall
		if err := dec.Decode(&tc); err != nil {
			return err
		}
		out = append(out, tc)
	}
	*l = out
	return nil
}

// tooMany reports whether the list holds more than MaxToolCallsPerReply
// entries (it was cut one past the cap).
func (l wireToolCalls) tooMany() bool { return len(l) > MaxToolCallsPerReply }

type wireToolCall struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"` // a string as documented, or an object
	} `json:"function"`
}

type wireUsage struct {
	PromptTokens     flexInt `json:"prompt_tokens"`
	CompletionTokens flexInt `json:"completion_tokens"`
}

func (u *wireUsage) usage() llm.Usage {
	if u == nil {
		return llm.Usage{}
	}
	return llm.Usage{InputTokens: int(u.PromptTokens), OutputTokens: int(u.CompletionTokens)}
}

// flexInt decodes an integer written as a number (possibly 12.0) or a string.
type flexInt int

func (n *flexInt) UnmarshalJSON(b []byte) error {
	s := strings.Trim(strings.TrimSpace(string(b)), `"`)
	if s == "" || s == "null" {
		*n = 0
		return nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		*n = 0
		return nil // a usage count we cannot read is not worth failing a reply
	}
	*n = flexInt(f)
	return nil
}

// first returns the choice with index 0 (or the first one listed).
func (w *wireCompletion) first() *wireChoice {
	for i := range w.Choices {
		if w.Choices[i].Index == 0 {
			return &w.Choices[i]
		}
	}
	if len(w.Choices) > 0 {
		return &w.Choices[0]
	}
	return nil
}

// response normalises a non-streamed completion. It fails with
// ErrTooManyToolCalls for more than MaxToolCallsPerReply calls.
func (w *wireCompletion) response() (*llm.Response, error) {
	r := &llm.Response{Message: llm.Message{Role: llm.RoleAssistant}, Usage: w.Usage.usage(), Model: w.Model}
	ch := w.first()
	if ch == nil {
		return r, nil
	}
	if ch.Message.ToolCalls.tooMany() {
		return nil, ErrTooManyToolCalls
	}
	if ch.FinishReason != nil {
		r.FinishReason = *ch.FinishReason
	}
	r.Message.Content = contentText(ch.Message.Content)
	if r.Message.Content == "" && ch.Message.Refusal != nil {
		r.Message.Content = *ch.Message.Refusal
	}
	calls := make([]llm.ToolCall, 0, len(ch.Message.ToolCalls))
	for _, tc := range ch.Message.ToolCalls {
		calls = append(calls, llm.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: argumentsText(tc.Function.Arguments)})
	}
	r.Message.ToolCalls = finishCalls(calls)
	return r, nil
}

// contentText reads message content: a string, null, or an array of parts
// whose text is concatenated.
func contentText(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) == nil {
		var b strings.Builder
		for _, p := range parts {
			if p.Type == "" || p.Type == "text" || p.Type == "output_text" {
				b.WriteString(p.Text)
			}
		}
		return b.String()
	}
	return ""
}

// argumentsText returns the text of a tool call's arguments as sent: the
// content of a JSON string, or the JSON of anything else (an object sent by
// servers that do not encode arguments as a string).
func argumentsText(raw json.RawMessage) json.RawMessage {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return json.RawMessage(s)
		}
	}
	return append(json.RawMessage(nil), raw...)
}

// normalizeArguments turns what the model wrote into a JSON object: empty →
// {}, an object → itself (compacted), anything else → {RawArgumentsKey: text}.
func normalizeArguments(text json.RawMessage) json.RawMessage {
	t := bytes.TrimSpace(text)
	if len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return json.RawMessage("{}")
	}
	if t[0] == '{' && json.Valid(t) {
		var b bytes.Buffer
		if json.Compact(&b, t) == nil {
			return b.Bytes()
		}
	}
	// Some servers encode the object twice: "{\"a\":1}" inside the string.
	if t[0] == '"' {
		var s string
		if json.Unmarshal(t, &s) == nil {
			if inner := bytes.TrimSpace([]byte(s)); len(inner) > 0 && inner[0] == '{' && json.Valid(inner) {
				return normalizeArguments(inner)
			}
		}
	}
	b, _ := json.Marshal(map[string]string{RawArgumentsKey: string(text)})
	return b
}

// finishCalls normalises arguments and gives every call a unique id: calls
// whose id is empty, or repeats an earlier one, get "call_<n>" (n is the
// call's position, bumped until it collides with no id of the reply).
func finishCalls(calls []llm.ToolCall) []llm.ToolCall {
	if len(calls) == 0 {
		return nil
	}
	taken := make(map[string]bool, len(calls))
	for _, c := range calls {
		if c.ID != "" {
			taken[c.ID] = true
		}
	}
	seen := make(map[string]bool, len(calls))
	for i := range calls {
		calls[i].Arguments = normalizeArguments(calls[i].Arguments)
		if calls[i].ID != "" && !seen[calls[i].ID] {
			seen[calls[i].ID] = true
			continue
		}
		for n := i; ; n++ {
			id := "call_" + strconv.Itoa(n)
			if !taken[id] {
				calls[i].ID = id
				taken[id], seen[id] = true, true
				break
			}
		}
	}
	return calls
}

// callBuilder accumulates one streamed tool call.
type callBuilder struct {
	index int // the wire index (or one past the largest, for calls without one)
	seq   int // creation order, to order calls that share an index
	id    string
	name  string
	// args holds the argument fragments as they were written inside their
	// JSON strings, still escaped, so that a character split across two
	// deltas (raw UTF-8 bytes, or the halves of a \ud83d\ude00 pair) is
	// decoded whole at the end instead of becoming U+FFFD twice.
	args bytes.Buffer
	obj  json.RawMessage // arguments sent whole as an object
}

// arguments returns the text of the call's arguments.
func (b *callBuilder) arguments() json.RawMessage {
	if b.obj != nil {
		return b.obj
	}
	if b.args.Len() == 0 {
		return nil
	}
	var s string
	if json.Unmarshal(append(append([]byte{'"'}, b.args.Bytes()...), '"'), &s) == nil {
		return json.RawMessage(s)
	}
	return json.RawMessage(b.args.String()) // cannot happen: each piece was a valid string
}

// complete reports whether the call's arguments already form a JSON object.
func (b *callBuilder) complete() bool {
	if b.obj != nil {
		return true
	}
	// Cheap test first: this runs on every delta of servers that repeat the
	// name, and decoding the whole text each time would be quadratic.
	if raw := bytes.TrimRight(b.args.Bytes(), " \t\r\n"); len(raw) == 0 || raw[len(raw)-1] != '}' {
		return false
	}
	t := bytes.TrimSpace(b.arguments())
	return len(t) > 0 && t[0] == '{' && json.Valid(t)
}

// accumulator assembles a streamed reply.
type accumulator struct {
	model   string
	text    strings.Builder
	refusal strings.Builder
	finish  string
	usage   *wireUsage
	calls   []*callBuilder
	byIndex map[int]*callBuilder    // the latest call opened at each wire index
	byID    map[string]*callBuilder // the latest call with each id
	last    *callBuilder
	// size counts the bytes of text, refusal, tool-call ids, names and
	// arguments accumulated, plus callCost for every call opened, to hold
	// the reply to Config.MaxResponseBytes.
	size int64
	// err is ErrTooManyToolCalls once a chunk brings more calls than
	// MaxToolCallsPerReply; nothing more is added then.
	err error
}

// callCost is what opening a tool call adds to accumulator.size, so that
// calls carrying little or nothing (index-only deltas) are not free: about
// what a call with empty fields takes in a non-streamed body,
// {"id":"","type":"function","function":{"name":"","arguments":""}} (62
// bytes), and less than the memory the call takes here.
const callCost = 64

// add folds one chunk in and returns the text it carried.
func (a *accumulator) add(w *wireCompletion) string {
	if w.Model != "" {
		a.model = w.Model
	}
	if w.Usage != nil {
		a.usage = w.Usage
	}
	ch := w.first()
	if ch == nil {
		return ""
	}
	if ch.FinishReason != nil && *ch.FinishReason != "" {
		a.finish = *ch.FinishReason
	}
	d := &ch.Delta
	if len(d.Content) == 0 && len(d.ToolCalls) == 0 && (len(ch.Message.Content) > 0 || len(ch.Message.ToolCalls) > 0) {
		d = &ch.Message // a server that answers a stream with whole messages
	}
	text := contentText(d.Content)
	a.text.WriteString(text)
	a.size += int64(len(text))
	if d.Refusal != nil {
		a.refusal.WriteString(*d.Refusal)
		a.size += int64(len(*d.Refusal))
	}
	if d.ToolCalls.tooMany() {
		a.err = ErrTooManyToolCalls
		return text
	}
	for _, tc := range d.ToolCalls {
		if !a.addCall(tc) {
			break
		}
	}
	return text
}

// startsNew reports whether delta tc opens a call other than b: it names
// another id, or b's arguments are complete and tc brings a named call with
// arguments of its own, with no id or b's id again (servers that send
// parallel calls whole, with one index for all or none, or one id for all).
// A complete JSON object cannot be continued, so this never splits a call.
func startsNew(b *callBuilder, tc *wireToolCall) bool {
	if tc.ID != "" && b.id != "" && tc.ID != b.id {
		return true
	}
	return (tc.ID == "" || tc.ID == b.id) && tc.Function.Name != "" && hasArguments(tc.Function.Arguments) && b.complete()
}

func hasArguments(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && !bytes.Equal(raw, []byte("null")) && !bytes.Equal(raw, []byte(`""`))
}

// addCall folds one tool-call delta in. It reports false, with a.err set,
// when the delta would open a call past MaxToolCallsPerReply.
func (a *accumulator) addCall(tc wireToolCall) bool {
	if a.byIndex == nil {
		a.byIndex = make(map[int]*callBuilder)
		a.byID = make(map[string]*callBuilder)
	}
	var b *callBuilder
	switch {
	case tc.Index != nil:
		// The index says which call a delta belongs to (OpenAI puts it on
		// every delta, the id only on the first), even when two calls share
		// an id. Indexes are not always unique either: Ollama sends every
		// parallel call with index 0; a new id at a used index is a new call.
		b = a.byIndex[*tc.Index]
		if b == nil || startsNew(b, &tc) {
			b = a.open(*tc.Index)
		}
	case tc.ID != "" && a.byID[tc.ID] != nil && !startsNew(a.byID[tc.ID], &tc):
		b = a.byID[tc.ID] // no index: an id seen before continues its call, wherever it is sent
	case a.last != nil && (tc.ID == "" || tc.ID == a.last.id) && (tc.Function.Name == "" || tc.Function.Name == a.last.name) && !startsNew(a.last, &tc):
		b = a.last // a continuation without an index
	default:
		n := 0
		for _, c := range a.calls {
			if c.index >= n {
				n = c.index + 1
			}
		}
		b = a.open(n)
	}
	if b == nil {
		return false
	}
	a.last = b
	if tc.ID != "" && b.id == "" {
		b.id = tc.ID
	}
	if tc.ID != "" && tc.ID == b.id {
		a.byID[tc.ID] = b // the latest call with this id
	}
	// The id counts on every delta that brings it, like the name: a
	// server may repeat both; each distinct id opens a call of its own.
	a.size += int64(len(tc.ID) + len(tc.Function.Name) + len(tc.Function.Arguments))
	if tc.Function.Name != "" {
		if b.name == "" || b.name == tc.Function.Name {
			b.name = tc.Function.Name
		} else {
			b.name += tc.Function.Name // a name split across deltas
		}
	}
	raw := bytes.TrimSpace(tc.Function.Arguments)
	switch {
	case len(raw) == 0 || bytes.Equal(raw, []byte("null")):
	case raw[0] == '"':
		var s string
		if json.Unmarshal(raw, &s) == nil { // a valid string: keep its escaped text
			b.args.Write(raw[1 : len(raw)-1])
		}
	default:
		b.obj = append(json.RawMessage(nil), raw...)
	}
	return true
}

// open starts a call at wire index i, or returns nil and sets a.err if the
// reply already has MaxToolCallsPerReply calls.
func (a *accumulator) open(i int) *callBuilder {
	if len(a.calls) >= MaxToolCallsPerReply {
		a.err = ErrTooManyToolCalls
		return nil
	}
	a.size += callCost
	b := &callBuilder{index: i, seq: len(a.calls)}
	a.calls = append(a.calls, b)
	a.byIndex[i] = b
	return b
}

func (a *accumulator) response() *llm.Response {
	r := &llm.Response{
		Message:      llm.Message{Role: llm.RoleAssistant, Content: a.text.String()},
		FinishReason: a.finish,
		Usage:        a.usage.usage(),
		Model:        a.model,
	}
	if r.Message.Content == "" {
		r.Message.Content = a.refusal.String()
	}
	order := append([]*callBuilder(nil), a.calls...)
	sort.SliceStable(order, func(i, j int) bool { return order[i].index < order[j].index })
	calls := make([]llm.ToolCall, 0, len(order))
	for _, b := range order {
		calls = append(calls, llm.ToolCall{ID: b.id, Name: b.name, Arguments: b.arguments()})
	}
	r.Message.ToolCalls = finishCalls(calls)
	return r
}
