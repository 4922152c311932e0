package memorytest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/memory"
)

// NewProvider makes an empty provider for one subtest. It isolates the
// provider from every other one it makes (a schema, a key prefix) and
// removes what it leaves behind with t.Cleanup. Subtests run in parallel,
// so it is called concurrently.
type NewProvider = func(t *testing.T) memory.Provider

// timeSlack is how far a time read back may be from the one written.
const timeSlack = time.Millisecond

var bg = context.Background()

// Run checks that the providers newProvider makes behave as
// [memory.Provider] documents, with [memory.TenantDeleter] when they
// implement it. Each check is a parallel subtest with a provider of its
// own.
func Run(t *testing.T, newProvider NewProvider) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, p memory.Provider)
	}{
		{"HistoryOrder", testHistoryOrder},
		{"HistoryPairing", testHistoryPairing},
		{"HistoryRoundTrip", testHistoryRoundTrip},
		{"HistoryFromSummary", testHistoryFromSummary},
		{"AppendCopies", testAppendCopies},
		{"AppendInvalid", testAppendInvalid},
		{"TenantIsolation", testTenantIsolation},
		{"Remember", testRemember},
		{"RememberInvalid", testRememberInvalid},
		{"RecallRelevance", testRecallRelevance},
		{"RecallNormalises", testRecallNormalises},
		{"RecallStopWordsOnly", testRecallStopWords},
		{"RecallBudget", testRecallBudget},
		{"Supersedes", testSupersedes},
		{"Forget", testForget},
		{"ForgetInvalid", testForgetInvalid},
		{"DeleteTenant", testDeleteTenant},
		{"CancelledContext", testCancelled},
		{"Concurrent", testConcurrent},
		{"Origin", testOrigin},
		{"ItemLimit", testItemLimit},
		{"QueryLimit", testQueryLimit},
		{"LargeHistoryMessage", testLargeHistoryMessage},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newProvider(t))
		})
	}
}

// --- helpers ---

func call(id string) llm.ToolCall {
	return llm.ToolCall{ID: id, Name: "lookup", Arguments: json.RawMessage(`{"q":"` + id + `"}`)}
}

// chat is a turn without tools: the user's message and the answer.
func chat(user, answer string) []llm.Message {
	return []llm.Message{llm.UserMessage(user), llm.AssistantMessage(answer)}
}

// toolTurn is a turn in which the model calls tools with the given IDs in
// one message, gets their results, then answers.
func toolTurn(user, answer string, ids ...string) []llm.Message {
	calls := make([]llm.ToolCall, len(ids))
	for i, id := range ids {
		calls[i] = call(id)
	}
	msgs := []llm.Message{llm.UserMessage(user), llm.AssistantMessage("", calls...)}
	for _, c := range calls {
		msgs = append(msgs, llm.ToolResultMessage(c, "result of "+c.ID, false))
	}
	return append(msgs, llm.AssistantMessage(answer))
}

func appendTurn(t *testing.T, p memory.Provider, tenant, conv string, msgs []llm.Message) {
	t.Helper()
	if err := p.Append(bg, tenant, conv, msgs...); err != nil {
		t.Fatalf("Append(%q, %q): %v", tenant, conv, err)
	}
}

func history(t *testing.T, p memory.Provider, tenant, conv string, limit int) []llm.Message {
	t.Helper()
	h, err := p.History(bg, tenant, conv, limit)
	if err != nil {
		t.Fatalf("History(%q, %q, %d): %v", tenant, conv, limit, err)
	}
	return h
}

func remember(t *testing.T, p memory.Provider, tenant string, items ...memory.Item) []string {
	t.Helper()
	ids, err := p.Remember(bg, tenant, items...)
	if err != nil {
		t.Fatalf("Remember(%q): %v", tenant, err)
	}
	if len(ids) != len(items) {
		t.Fatalf("Remember(%q) of %d items returned %d IDs", tenant, len(items), len(ids))
	}
	return ids
}

func recall(t *testing.T, p memory.Provider, tenant, query string, b memory.Budget) []memory.Item {
	t.Helper()
	items, err := p.Recall(bg, tenant, query, b)
	if err != nil {
		t.Fatalf("Recall(%q, %q, %+v): %v", tenant, query, b, err)
	}
	return items
}

func forget(t *testing.T, p memory.Provider, tenant string, by memory.Provenance) int {
	t.Helper()
	n, err := p.Forget(bg, tenant, by)
	if err != nil {
		t.Fatalf("Forget(%q, %+v): %v", tenant, by, err)
	}
	return n
}

func texts(items []memory.Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.Text
	}
	return out
}

// render shows messages compactly: role, content and tool-call IDs.
func render(msgs []llm.Message) string {
	var b strings.Builder
	for i, m := range msgs {
		if i > 0 {
			b.WriteString(" | ")
		}
		fmt.Fprintf(&b, "%s:%q", m.Role, m.Content)
		for _, c := range m.ToolCalls {
			fmt.Fprintf(&b, " call(%s)", c.ID)
		}
		if m.ToolCallID != "" {
			fmt.Fprintf(&b, " for(%s)", m.ToolCallID)
		}
	}
	return "[" + b.String() + "]"
}

// sameMessages compares messages field by field, tool-call arguments by
// their JSON meaning, nil and empty slices alike.
func sameMessages(want, got []llm.Message) bool {
	if len(want) != len(got) {
		return false
	}
	for i := range want {
		w, g := want[i], got[i]
		if w.Role != g.Role || w.Content != g.Content || w.ToolCallID != g.ToolCallID || w.Name != g.Name || w.IsError != g.IsError || len(w.ToolCalls) != len(g.ToolCalls) {
			return false
		}
		for j := range w.ToolCalls {
			wc, gc := w.ToolCalls[j], g.ToolCalls[j]
			if wc.ID != gc.ID || wc.Name != gc.Name || !sameJSON(wc.Arguments, gc.Arguments) {
				return false
			}
		}
	}
	return true
}

func sameJSON(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return string(a) == string(b)
	}
	return reflect.DeepEqual(x, y)
}

func wantMessages(t *testing.T, what string, want, got []llm.Message) {
	t.Helper()
	if !sameMessages(want, got) {
		t.Errorf("%s:\n got %s\nwant %s", what, render(got), render(want))
	}
}

func wantInvalid(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, memory.ErrInvalid) {
		t.Errorf("%s: got error %v, want memory.ErrInvalid", what, err)
	}
}
