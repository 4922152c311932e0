package llm_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"
	"testing"
	"time"

	"github.com/valetkit/valet/llm"
)

func TestKindOf(t *testing.T) {
	rl := &llm.Error{Kind: llm.KindRateLimited, StatusCode: 429, RetryAfter: 3 * time.Second}
	cases := []struct {
		err       error
		kind      llm.ErrorKind
		retryable bool
		after     time.Duration
	}{
		{nil, llm.KindUnknown, false, 0},
		{errors.New("boom"), llm.KindUnknown, false, 0},
		{rl, llm.KindRateLimited, true, 3 * time.Second},
		{fmt.Errorf("wrapped: %w", rl), llm.KindRateLimited, true, 3 * time.Second},
		{&llm.Error{Kind: llm.KindUnavailable}, llm.KindUnavailable, true, 0},
		{&llm.Error{Kind: llm.KindTimeout}, llm.KindTimeout, true, 0},
		{context.DeadlineExceeded, llm.KindTimeout, true, 0},
		{context.Canceled, llm.KindUnknown, false, 0},
		{&llm.Error{Kind: llm.KindTimeout, Err: context.Canceled}, llm.KindTimeout, false, 0},
		{&llm.Error{Kind: llm.KindAuth}, llm.KindAuth, false, 0},
		{&llm.Error{Kind: llm.KindContextOverflow}, llm.KindContextOverflow, false, 0},
		{&llm.Error{Kind: llm.KindBadRequest}, llm.KindBadRequest, false, 0},
	}
	for _, c := range cases {
		if got := llm.KindOf(c.err); got != c.kind {
			t.Errorf("KindOf(%v) = %v, want %v", c.err, got, c.kind)
		}
		if got := llm.IsRetryable(c.err); got != c.retryable {
			t.Errorf("IsRetryable(%v) = %v, want %v", c.err, got, c.retryable)
		}
		if got := llm.RetryAfter(c.err); got != c.after {
			t.Errorf("RetryAfter(%v) = %v, want %v", c.err, got, c.after)
		}
	}
}

func TestErrorText(t *testing.T) {
	e := &llm.Error{Kind: llm.KindContextOverflow, StatusCode: 400, Code: "context_length_exceeded", Message: "too long"}
	if got := e.Error(); got != "llm: context_overflow (400) [context_length_exceeded]: too long" {
		t.Fatalf("Error() = %q", got)
	}
	cause := errors.New("connection reset")
	e = &llm.Error{Kind: llm.KindUnavailable, Err: cause}
	if !strings.Contains(e.Error(), "connection reset") || !errors.Is(e, cause) {
		t.Fatalf("Error() = %q, Is(cause) = %v", e.Error(), errors.Is(e, cause))
	}
	if got := llm.ErrorKind(42).String(); got != "ErrorKind(42)" {
		t.Fatalf("String() = %q", got)
	}
}

func call(id, name string) llm.ToolCall {
	return llm.ToolCall{ID: id, Name: name, Arguments: []byte(`{}`)}
}

func TestCheckPairing(t *testing.T) {
	sys, user := llm.SystemMessage("s"), llm.UserMessage("u")
	a := llm.AssistantMessage("", call("1", "x"), call("2", "y"))
	r1 := llm.ToolResultMessage(call("1", "x"), "ok", false)
	r2 := llm.ToolResultMessage(call("2", "y"), "ok", false)
	cases := []struct {
		name string
		msgs []llm.Message
		ok   bool
	}{
		{"empty", nil, true},
		{"plain", []llm.Message{sys, user, llm.AssistantMessage("hi")}, true},
		{"paired", []llm.Message{sys, user, a, r1, r2, llm.AssistantMessage("done")}, true},
		{"results in other order", []llm.Message{user, a, r2, r1}, true},
		{"missing result", []llm.Message{user, a, r1, llm.AssistantMessage("done")}, false},
		{"missing at end", []llm.Message{user, a}, false},
		{"orphan result", []llm.Message{user, r1}, false},
		{"duplicate result", []llm.Message{user, a, r1, r1, r2}, false},
		{"result after a user message", []llm.Message{user, a, r1, user, r2}, false},
		{"repeated call id", []llm.Message{user, llm.AssistantMessage("", call("1", "x"), call("1", "x")), r1}, false},
	}
	for _, c := range cases {
		err := llm.CheckPairing(c.msgs)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, llm.ErrPairing)) {
			t.Errorf("%s: CheckPairing = %v, want ok=%v", c.name, err, c.ok)
		}
	}
}

func seq(chunks []llm.Chunk, err error) iter.Seq2[llm.Chunk, error] {
	return func(yield func(llm.Chunk, error) bool) {
		for _, c := range chunks {
			if !yield(c, nil) {
				return
			}
		}
		if err != nil {
			yield(llm.Chunk{}, err)
		}
	}
}

func TestCollect(t *testing.T) {
	final := &llm.Response{Message: llm.AssistantMessage("hello world")}
	got, err := llm.Collect(seq([]llm.Chunk{{Text: "hello "}, {Text: "world"}, {Response: final}}, nil))
	if err != nil || got != final {
		t.Fatalf("Collect = %v, %v", got, err)
	}
	boom := &llm.Error{Kind: llm.KindUnavailable}
	if _, err := llm.Collect(seq([]llm.Chunk{{Text: "hel"}}, boom)); !errors.Is(err, boom) {
		t.Fatalf("Collect error = %v", err)
	}
	if _, err := llm.Collect(seq([]llm.Chunk{{Text: "cut off"}}, nil)); llm.KindOf(err) != llm.KindUnavailable {
		t.Fatalf("a stream without a final response: %v", err)
	}
}

func TestUsage(t *testing.T) {
	u := llm.Usage{InputTokens: 10, OutputTokens: 5}.Add(llm.Usage{InputTokens: 1, OutputTokens: 2})
	if u != (llm.Usage{InputTokens: 11, OutputTokens: 7}) || u.Total() != 18 {
		t.Fatalf("usage = %+v total %d", u, u.Total())
	}
}
