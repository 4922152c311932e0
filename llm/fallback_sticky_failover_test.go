package llm_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/valetkit/valet/clock/clocktest"
	"github.com/valetkit/valet/llm"
)

// A conversation stuck on the fallback that answered it must not be left
// with no model when that fallback goes down while the primary is back:
// stickiness picks where a call starts, it must not cut the chain short.
// Today the call starts at the last client, has nowhere to move on to,
// and the conversation fails for StickFor (an hour by default) although
// the primary answers.
func TestFallbackStuckConversationMovesOnWhenItsModelFails(t *testing.T) {
	clk := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	a := &stubModel{name: "a", errs: []error{errLongRL}} // rate-limited for a minute on the first call
	b := &stubModel{name: "b"}
	f := newFallback(t, llm.FallbackConfig{Primary: a, Fallbacks: []llm.Client{b}, Clock: clk, Logger: slog.New(slog.DiscardHandler)})
	conv := llm.WithConversation(context.Background(), "t1\x00c1")
	if r, err := f.Complete(conv, llm.Request{}); err != nil || r.Model != "b" {
		t.Fatalf("first turn: %v %v, want b", r, err)
	}
	// a has recovered; now b is rate-limited past MaxWait.
	b.mu.Lock()
	b.always = errLongRL // and rate-limited past MaxWait
	b.mu.Unlock()
	r, err := f.Complete(conv, llm.Request{})
	if err != nil {
		t.Fatalf("second turn failed although the primary answers (a calls %d, b calls %d): %v", a.Calls(), b.Calls(), err)
	}
	if r.Model != "a" {
		t.Fatalf("second turn answered by %q, want a", r.Model)
	}
}

// A fallback list holding a client that is already inside the primary (a
// Fallback) calls that client twice per failed call, with its retries, and
// reports a switch to a model already found down: NewFallback refuses one
// client twice, and must see through a nested Fallback.
func TestFallbackRefusesAClientAlreadyInsideItsPrimary(t *testing.T) {
	a, b := &stubModel{name: "a"}, &stubModel{name: "b"}
	inner := newFallback(t, llm.FallbackConfig{Primary: a, Fallbacks: []llm.Client{b}})
	_, err := llm.NewFallback(llm.FallbackConfig{Primary: inner, Fallbacks: []llm.Client{a}})
	if !errors.Is(err, llm.ErrFallbackSelf) {
		t.Fatalf("NewFallback(inner(a, b), a) = %v, want ErrFallbackSelf", err)
	}
}
