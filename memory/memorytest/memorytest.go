package memorytest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
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

// --- history ---

func testHistoryOrder(t *testing.T, p memory.Provider) {
	var all []llm.Message
	for i := range 3 {
		turn := chat(fmt.Sprintf("question %d", i), fmt.Sprintf("answer %d", i))
		appendTurn(t, p, "alice", "c1", turn)
		all = append(all, turn...)
	}
	wantMessages(t, "History(0)", all, history(t, p, "alice", "c1", 0))
	for limit := 1; limit <= len(all)+2; limit++ {
		want := all[max(0, len(all)-limit):]
		wantMessages(t, fmt.Sprintf("History(%d)", limit), want, history(t, p, "alice", "c1", limit))
	}
	if h := history(t, p, "alice", "unknown", 0); len(h) != 0 {
		t.Errorf("History of an unknown conversation: %s, want nothing", render(h))
	}
	if err := p.Append(bg, "alice", "c2"); err != nil {
		t.Errorf("Append of no messages: %v", err)
	}
	if h := history(t, p, "alice", "c2", 0); len(h) != 0 {
		t.Errorf("History after Append of no messages: %s, want nothing", render(h))
	}
}

// testHistoryFromSummary: History starts at the newest summary message
// (memory.IsSummary) among the newest limit messages; a system message of
// another name is no summary, and one of another conversation does not
// count.
func testHistoryFromSummary(t *testing.T, p memory.Provider) {
	summary := func(s string) llm.Message {
		return llm.Message{Role: llm.RoleSystem, Name: memory.SummaryName, Content: s}
	}
	other := llm.Message{Role: llm.RoleSystem, Name: "note", Content: "not a summary"}
	appendTurn(t, p, "alice", "c1", chat("q1", "a1"))
	appendTurn(t, p, "alice", "c1", append([]llm.Message{summary("s1")}, chat("q2", "a2")...))
	appendTurn(t, p, "alice", "c1", toolTurn("q3", "a3", "t1"))
	appendTurn(t, p, "alice", "c2", append([]llm.Message{summary("other conversation")}, chat("x", "y")...))
	s2 := append([]llm.Message{summary("s2")}, toolTurn("q3", "a3", "t1")...)
	s2 = append(s2, other)
	appendTurn(t, p, "alice", "c1", s2)
	tail := chat("q4", "a4")
	appendTurn(t, p, "alice", "c1", tail)
	want := append(append([]llm.Message(nil), s2...), tail...)
	wantMessages(t, "History(0) after two summaries", want, history(t, p, "alice", "c1", 0))
	wantMessages(t, "History(100)", want, history(t, p, "alice", "c1", 100))
	wantMessages(t, "History(3)", want[len(want)-3:], history(t, p, "alice", "c1", 3))
	wantMessages(t, "History of c2", append([]llm.Message{summary("other conversation")}, chat("x", "y")...), history(t, p, "alice", "c2", 0))
}

func testHistoryPairing(t *testing.T, p memory.Provider) {
	var all []llm.Message
	for _, turn := range [][]llm.Message{
		chat("hello", "hi"),
		toolTurn("find two things", "found both", "c1", "c2"),
		toolTurn("find one more", "found it", "c3"),
	} {
		appendTurn(t, p, "alice", "conv", turn)
		all = append(all, turn...)
	}
	// all: 0 u, 1 a, 2 u, 3 a(c1,c2), 4 t(c1), 5 t(c2), 6 a, 7 u, 8 a(c3), 9 t(c3), 10 a
	for limit := 0; limit <= len(all)+1; limit++ {
		got := history(t, p, "alice", "conv", limit)
		start := 0
		if limit > 0 {
			start = max(0, len(all)-limit)
		}
		for start < len(all) && all[start].Role == llm.RoleTool {
			start++
		}
		wantMessages(t, fmt.Sprintf("History(%d)", limit), all[start:], got)
		if err := llm.CheckPairing(got); err != nil {
			t.Errorf("History(%d) breaks pairing: %v: %s", limit, err, render(got))
		}
	}
	// A window of 6 would start with the second result of the two calls:
	// it starts after the results instead.
	if got := history(t, p, "alice", "conv", 6); len(got) != 5 || got[0].Content != "found both" {
		t.Errorf("History(6) = %s, want the 5 messages from \"found both\"", render(got))
	}
	if got := history(t, p, "alice", "conv", 2); len(got) != 1 || got[0].Content != "found it" {
		t.Errorf("History(2) = %s, want only \"found it\"", render(got))
	}
}

func testHistoryRoundTrip(t *testing.T, p memory.Provider) {
	calls := []llm.ToolCall{
		{ID: "call_1", Name: "search", Arguments: json.RawMessage(`{"q": "ünïcødé ✓ \"quoted\" <tag> & more", "n": 2, "nested": {"x": [1, 2.5, null, true]}}`)},
		{ID: "call_2", Name: "fail", Arguments: json.RawMessage(`{}`)},
	}
	turn := []llm.Message{
		llm.SystemMessage("a summary of what came before"),
		llm.UserMessage("find it\nplease\t✓"),
		{Role: llm.RoleAssistant, Content: "let me look", ToolCalls: calls},
		{Role: llm.RoleTool, Content: `{"found": true}`, ToolCallID: "call_1", Name: "search"},
		{Role: llm.RoleTool, Content: "boom", ToolCallID: "call_2", Name: "fail", IsError: true},
		llm.AssistantMessage("found it, though one lookup failed"),
	}
	appendTurn(t, p, "alice", "conv", turn)
	wantMessages(t, "History", turn, history(t, p, "alice", "conv", 0))
}

func testAppendCopies(t *testing.T, p memory.Provider) {
	turn := toolTurn("question", "answer", "c1")
	want := toolTurn("question", "answer", "c1")
	appendTurn(t, p, "alice", "conv", turn)
	turn[0].Content = "changed"
	turn[1].ToolCalls[0].Name = "changed"
	turn[1].ToolCalls[0].Arguments[2] = 'X'
	turn[2].Content = "changed"
	wantMessages(t, "History after the caller changed what it appended", want, history(t, p, "alice", "conv", 0))

	h := history(t, p, "alice", "conv", 0)
	h[0].Content = "changed"
	h[1].ToolCalls[0].Name = "changed"
	h[1].ToolCalls[0].Arguments[2] = 'X'
	slices.Reverse(h)
	wantMessages(t, "History after the caller changed what History returned", want, history(t, p, "alice", "conv", 0))
}

func testAppendInvalid(t *testing.T, p memory.Provider) {
	good := chat("hello", "hi")
	appendTurn(t, p, "alice", "conv", good)

	long := strings.Repeat("x", memory.MaxIDLen+1)
	for _, tc := range []struct {
		name         string
		tenant, conv string
	}{
		{"empty tenant", "", "conv"},
		{"empty conversation", "alice", ""},
		{"long tenant", long, "conv"},
		{"long conversation", "alice", long},
		{"tenant not UTF-8", "al\xffice", "conv"},
		{"conversation with NUL", "alice", "co\x00nv"},
	} {
		wantInvalid(t, "Append with "+tc.name, p.Append(bg, tc.tenant, tc.conv, good...))
		_, err := p.History(bg, tc.tenant, tc.conv, 0)
		wantInvalid(t, "History with "+tc.name, err)
	}
	if _, err := p.History(bg, "alice", "conv", -1); !errors.Is(err, memory.ErrInvalid) {
		t.Errorf("History with a negative limit: got %v, want memory.ErrInvalid", err)
	}
	if id := strings.Repeat("x", memory.MaxIDLen); p.Append(bg, id, id, good...) != nil {
		t.Errorf("Append with IDs of MaxIDLen bytes failed")
	}

	orphan := llm.ToolResultMessage(call("c9"), "result", false)
	for _, tc := range []struct {
		name string
		turn []llm.Message
	}{
		{"a tool result answering no call", []llm.Message{llm.UserMessage("q"), orphan, llm.AssistantMessage("a")}},
		{"a tool result first", []llm.Message{orphan, llm.AssistantMessage("a")}},
		{"a call without its result", []llm.Message{llm.UserMessage("q"), llm.AssistantMessage("", call("c1"), call("c2")), llm.ToolResultMessage(call("c1"), "r", false)}},
		{"a message without a role", []llm.Message{llm.UserMessage("q"), {Content: "who am I"}}},
		{"an unknown role", []llm.Message{{Role: "narrator", Content: "meanwhile"}}},
	} {
		wantInvalid(t, "Append of "+tc.name, p.Append(bg, "alice", "conv", tc.turn...))
		wantInvalid(t, "Append to a new conversation of "+tc.name, p.Append(bg, "alice", "new", tc.turn...))
	}
	wantMessages(t, "History after rejected Appends", good, history(t, p, "alice", "conv", 0))
	if h := history(t, p, "alice", "new", 0); len(h) != 0 {
		t.Errorf("History of a conversation whose every Append was rejected: %s", render(h))
	}
}

// --- isolation ---

func testTenantIsolation(t *testing.T, p memory.Provider) {
	appendTurn(t, p, "alice", "c1", chat("alice asks", "alice hears"))
	appendTurn(t, p, "bob", "c1", chat("bob asks", "bob hears"))
	// Names that a naive key would confuse.
	appendTurn(t, p, "a", "b/c", chat("one", "1"))
	appendTurn(t, p, "a/b", "c", chat("two", "2"))
	appendTurn(t, p, "a:b", "c", chat("three", "3"))
	appendTurn(t, p, "a", "b:c", chat("four", "4"))

	wantMessages(t, "alice's history", chat("alice asks", "alice hears"), history(t, p, "alice", "c1", 0))
	wantMessages(t, "bob's history", chat("bob asks", "bob hears"), history(t, p, "bob", "c1", 0))
	wantMessages(t, "a b/c", chat("one", "1"), history(t, p, "a", "b/c", 0))
	wantMessages(t, "a/b c", chat("two", "2"), history(t, p, "a/b", "c", 0))
	wantMessages(t, "a:b c", chat("three", "3"), history(t, p, "a:b", "c", 0))
	wantMessages(t, "a b:c", chat("four", "4"), history(t, p, "a", "b:c", 0))
	if h := history(t, p, "carol", "c1", 0); len(h) != 0 {
		t.Errorf("carol sees %s", render(h))
	}

	aliceIDs := remember(t, p, "alice", memory.Item{Text: "Alice's dentist is Dr. Kim", Source: memory.Provenance{ConversationID: "c1", TaskID: "t1", SkillID: "s1"}})
	remember(t, p, "bob", memory.Item{Text: "Bob's dentist is Dr. Lee", Supersedes: aliceIDs[0], Source: memory.Provenance{ConversationID: "c1"}})

	if got := texts(recall(t, p, "alice", "dentist", memory.Budget{})); !slices.Equal(got, []string{"Alice's dentist is Dr. Kim"}) {
		t.Errorf("alice recalls %q, want only her own item (bob's Supersedes must not hide it)", got)
	}
	if got := texts(recall(t, p, "bob", "dentist", memory.Budget{})); !slices.Equal(got, []string{"Bob's dentist is Dr. Lee"}) {
		t.Errorf("bob recalls %q, want only his own item", got)
	}
	if got := recall(t, p, "carol", "dentist", memory.Budget{}); len(got) != 0 {
		t.Errorf("carol recalls %q", texts(got))
	}

	// Forget and DeleteTenant of bob leave alice alone.
	if n := forget(t, p, "bob", memory.Provenance{ConversationID: "c1"}); n != 3 {
		t.Errorf("Forget of bob's c1 removed %d, want 3 (1 item, 2 messages)", n)
	}
	for _, by := range []memory.Provenance{{TaskID: "t1"}, {SkillID: "s1"}} {
		if n := forget(t, p, "bob", by); n != 0 {
			t.Errorf("Forget(bob, %+v) removed %d, want 0", by, n)
		}
	}
	if d, ok := p.(memory.TenantDeleter); ok {
		if _, err := d.DeleteTenant(bg, "bob"); err != nil {
			t.Fatalf("DeleteTenant(bob): %v", err)
		}
		if _, err := d.DeleteTenant(bg, "a"); err != nil {
			t.Fatalf("DeleteTenant(a): %v", err)
		}
		wantMessages(t, "a/b c after DeleteTenant(a)", chat("two", "2"), history(t, p, "a/b", "c", 0))
		wantMessages(t, "a:b c after DeleteTenant(a)", chat("three", "3"), history(t, p, "a:b", "c", 0))
	}
	wantMessages(t, "alice's history after bob was forgotten", chat("alice asks", "alice hears"), history(t, p, "alice", "c1", 0))
	if got := texts(recall(t, p, "alice", "dentist", memory.Budget{})); !slices.Equal(got, []string{"Alice's dentist is Dr. Kim"}) {
		t.Errorf("alice recalls %q after bob was forgotten", got)
	}
}

// --- items ---

func testRemember(t *testing.T, p memory.Provider) {
	created := time.Date(2024, 3, 1, 12, 30, 45, 123_000_000, time.UTC)
	src := memory.Provenance{ConversationID: "c1", TaskID: "t1", SkillID: "s1"}
	before := time.Now()
	ids := remember(t, p, "alice",
		memory.Item{Text: "The user's dentist is Dr. Kim.", Kind: "fact", Source: src, CreatedAt: created},
		memory.Item{Text: "The user prefers aisle seats.", Kind: "preference", Tokens: 999, Score: 5},
		memory.Item{Text: "ünïcødé ✓ — the user's café is Zoë's"},
	)
	after := time.Now()
	seen := map[string]bool{}
	for _, id := range ids {
		if id == "" || seen[id] {
			t.Errorf("Remember returned IDs %q: want non-empty, distinct", ids)
		}
		seen[id] = true
	}
	more := remember(t, p, "alice", memory.Item{Text: "The user's dentist is in Springfield."})
	if seen[more[0]] {
		t.Errorf("a later Remember reused ID %q", more[0])
	}

	got := recall(t, p, "alice", "dentist", memory.Budget{})
	i := slices.IndexFunc(got, func(it memory.Item) bool { return it.ID == ids[0] })
	if i < 0 {
		t.Fatalf("Recall(dentist) = %q, does not hold item %s", texts(got), ids[0])
	}
	it := got[i]
	if it.Text != "The user's dentist is Dr. Kim." || it.Kind != "fact" || it.Source != src {
		t.Errorf("item read back as %+v", it)
	}
	if d := it.CreatedAt.Sub(created); d >= timeSlack || d <= -timeSlack {
		t.Errorf("CreatedAt read back as %v, want %v", it.CreatedAt, created)
	}
	if want := memory.EstimateTokens(it.Text); it.Tokens != want || want != 10 {
		t.Errorf("Tokens = %d, want %d (30 bytes at 3 per token)", it.Tokens, want)
	}
	if it.Score <= 0 {
		t.Errorf("Score = %v, want > 0", it.Score)
	}

	got = recall(t, p, "alice", "aisle", memory.Budget{})
	if len(got) != 1 || got[0].ID != ids[1] {
		t.Fatalf("Recall(aisle) = %q, want item %s", texts(got), ids[1])
	}
	if got[0].Tokens != memory.EstimateTokens("The user prefers aisle seats.") {
		t.Errorf("Tokens = %d: the caller's value was kept, want the estimate %d", got[0].Tokens, memory.EstimateTokens("The user prefers aisle seats."))
	}
	if c := got[0].CreatedAt; c.Before(before.Add(-time.Minute)) || c.After(after.Add(time.Minute)) {
		t.Errorf("CreatedAt = %v for an item written between %v and %v without one", c, before, after)
	}
	got = recall(t, p, "alice", "CAFÉ", memory.Budget{})
	if len(got) != 1 || got[0].ID != ids[2] || got[0].Text != "ünïcødé ✓ — the user's café is Zoë's" {
		t.Errorf("Recall(CAFÉ) = %q, want item %s intact", texts(got), ids[2])
	}
	if got[0].Tokens != memory.EstimateTokens(got[0].Text) {
		t.Errorf("Tokens of a multi-byte text = %d, want %d (bytes / 3)", got[0].Tokens, memory.EstimateTokens(got[0].Text))
	}
}

func testRememberInvalid(t *testing.T, p memory.Provider) {
	good := memory.Item{Text: "The user's dentist is Dr. Kim."}
	for _, tc := range []struct {
		name   string
		tenant string
		item   memory.Item
	}{
		{"an empty tenant", "", good},
		{"a tenant with NUL", "al\x00ice", good},
		{"no text", "alice", memory.Item{Kind: "fact"}},
		{"blank text", "alice", memory.Item{Text: " \n\t "}},
		{"text with NUL", "alice", memory.Item{Text: "dentist \x00"}},
		{"text not UTF-8", "alice", memory.Item{Text: "dentist \xff"}},
		{"an ID", "alice", memory.Item{ID: "mine", Text: "dentist"}},
	} {
		_, err := p.Remember(bg, tc.tenant, good, tc.item)
		wantInvalid(t, "Remember of "+tc.name, err)
	}
	if got := recall(t, p, "alice", "dentist", memory.Budget{}); len(got) != 0 {
		t.Errorf("rejected Remembers stored %q", texts(got))
	}
	_, err := p.Recall(bg, "", "dentist", memory.Budget{})
	wantInvalid(t, "Recall of an empty tenant", err)
	for _, b := range []memory.Budget{{MaxTokens: -1}, {MaxEntries: -1}} {
		_, err := p.Recall(bg, "alice", "dentist", b)
		wantInvalid(t, fmt.Sprintf("Recall with budget %+v", b), err)
	}
	ids, err := p.Remember(bg, "alice")
	if err != nil || len(ids) != 0 {
		t.Errorf("Remember of no items = %q, %v; want nothing, nil", ids, err)
	}
}

// facts are the items of the recall checks.
var facts = []string{
	"The user's dentist is Dr. Kim, on Main Street.",                       // 0
	"The user prefers window seats on long flights.",                       // 1
	"The user's sister Ana has her birthday on March 3.",                   // 2
	"A dentist appointment every six months; the clinic sends a reminder.", // 3
	"The user is running a marathon in October.",                           // 4
}

func rememberFacts(t *testing.T, p memory.Provider, tenant string) []string {
	t.Helper()
	items := make([]memory.Item, len(facts))
	for i, f := range facts {
		items[i] = memory.Item{Text: f, Kind: "fact"}
	}
	return remember(t, p, tenant, items...)
}

// wantRecall checks that query recalls exactly the facts with the given
// indexes, in any order, with positive scores, most relevant first.
func wantRecall(t *testing.T, p memory.Provider, query string, want ...int) []memory.Item {
	t.Helper()
	got := recall(t, p, "alice", query, memory.Budget{})
	var wantTexts []string
	for _, i := range want {
		wantTexts = append(wantTexts, facts[i])
	}
	gotTexts := texts(got)
	if !sameSet(gotTexts, wantTexts) {
		t.Errorf("Recall(%q) = %q, want %q", query, gotTexts, wantTexts)
	}
	checkScores(t, query, got)
	return got
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func checkScores(t *testing.T, query string, got []memory.Item) {
	t.Helper()
	for i, it := range got {
		if it.Score <= 0 {
			t.Errorf("Recall(%q): item %q has Score %v, want > 0", query, it.Text, it.Score)
		}
		if i > 0 && it.Score > got[i-1].Score {
			t.Errorf("Recall(%q): scores not in descending order: %v then %v", query, got[i-1].Score, it.Score)
		}
	}
}

func testRecallRelevance(t *testing.T, p memory.Provider) {
	rememberFacts(t, p, "alice")
	// The user's message as typed: "what's", "my", "again" are stop
	// words, "name" is in no item, "dentist's" is "dentist".
	wantRecall(t, p, "What's my dentist's name again?", 0, 3)
	// The item holding both words comes first.
	got := wantRecall(t, p, "dentist appointment", 0, 3)
	if len(got) == 2 && got[0].Text != facts[3] {
		t.Errorf("Recall(dentist appointment): %q first, want the item holding both words", got[0].Text)
	}
	// Any word matches; the item matching two of them comes first.
	got = wantRecall(t, p, "Who is my dentist on Main Street? Or the zebra?", 0, 3)
	if len(got) == 2 && got[0].Text != facts[0] {
		t.Errorf("Recall(dentist on Main Street): %q first, want the item holding all three words", got[0].Text)
	}
	wantRecall(t, p, "zebra giraffe")
	got = wantRecall(t, p, "user dentist", 0, 1, 2, 3, 4)
	if len(got) == 5 && got[0].Text != facts[0] {
		t.Errorf("Recall(user dentist): %q first, want the one item holding both words", got[0].Text)
	}
}

func testRecallNormalises(t *testing.T, p memory.Provider) {
	rememberFacts(t, p, "alice")
	wantRecall(t, p, "dentists", 0, 3)
	wantRecall(t, p, "DENTIST", 0, 3)
	wantRecall(t, p, "flight", 1)
	wantRecall(t, p, "I preferred a seat", 1)
	wantRecall(t, p, "birthdays", 2)
	wantRecall(t, p, "runs", 4)
	wantRecall(t, p, "appointments reminders", 3)
	wantRecall(t, p, "(dentist)!", 0, 3)
}

func testRecallStopWords(t *testing.T, p memory.Provider) {
	rememberFacts(t, p, "alice")
	remember(t, p, "alice", memory.Item{Text: "what is it? the and of"}) // an item of stop words only
	for _, q := range []string{"", "   ", "What is it?", "?!... ---", "the and of", "Is it what it is?"} {
		got, err := p.Recall(bg, "alice", q, memory.Budget{})
		if err != nil || len(got) != 0 {
			t.Errorf("Recall(%q) = %q, %v; want nothing, nil", q, texts(got), err)
		}
	}
}

func testRecallBudget(t *testing.T, p memory.Provider) {
	big := "budget " + strings.Repeat("budget figures and other long numbers ", 10) // 387 bytes: 129 tokens
	small := []string{"budget alpha", "budget beta", "budget gamma"}                // 4 tokens each, equally relevant
	remember(t, p, "alice", memory.Item{Text: big})
	for _, s := range small {
		remember(t, p, "alice", memory.Item{Text: s})
	}
	all := recall(t, p, "alice", "budget", memory.Budget{})
	if len(all) != 4 {
		t.Fatalf("Recall(budget) without a budget = %q, want all 4 items", texts(all))
	}
	checkScores(t, "budget", all)
	// Equally relevant items come newest first.
	var order []string
	for _, it := range all {
		if it.Text != big {
			order = append(order, it.Text)
		}
	}
	if want := []string{"budget gamma", "budget beta", "budget alpha"}; !slices.Equal(order, want) {
		t.Errorf("equally relevant items in the order %q, want the newest first: %q", order, want)
	}

	for entries := 1; entries <= 5; entries++ {
		got := recall(t, p, "alice", "budget", memory.Budget{MaxEntries: entries})
		if len(got) != min(entries, 4) {
			t.Errorf("MaxEntries %d: got %d items", entries, len(got))
			continue
		}
		if !slices.Equal(texts(got), texts(all[:len(got)])) {
			t.Errorf("MaxEntries %d: got %q, want the first of %q", entries, texts(got), texts(all))
		}
	}

	// The big item is larger than the whole budget: skipped, not
	// truncated; the small ones are taken whatever their rank.
	got := recall(t, p, "alice", "budget", memory.Budget{MaxTokens: 100})
	if !sameSet(texts(got), small) {
		t.Errorf("MaxTokens 100: got %q, want the three small items", texts(got))
	}
	got = recall(t, p, "alice", "budget", memory.Budget{MaxTokens: 9})
	if len(got) != 2 || slices.Contains(texts(got), big) {
		t.Errorf("MaxTokens 9: got %q, want two small items (4 tokens each)", texts(got))
	}
	got = recall(t, p, "alice", "budget", memory.Budget{MaxTokens: 3})
	if len(got) != 0 {
		t.Errorf("MaxTokens 3: got %q, want nothing (every item is larger)", texts(got))
	}
	got = recall(t, p, "alice", "budget", memory.Budget{MaxTokens: 1000, MaxEntries: 2})
	if !slices.Equal(texts(got), texts(all[:2])) {
		t.Errorf("MaxTokens 1000, MaxEntries 2: got %q, want %q", texts(got), texts(all[:2]))
	}
	for _, b := range []memory.Budget{{MaxTokens: 9}, {MaxTokens: 140}, {MaxTokens: 137, MaxEntries: 3}} {
		total := 0
		for _, it := range recall(t, p, "alice", "budget", b) {
			if it.Tokens != memory.EstimateTokens(it.Text) {
				t.Errorf("item %q has Tokens %d, want %d", it.Text, it.Tokens, memory.EstimateTokens(it.Text))
			}
			total += it.Tokens
		}
		if total > b.MaxTokens {
			t.Errorf("budget %+v: recalled %d tokens", b, total)
		}
	}
}

func testSupersedes(t *testing.T, p memory.Provider) {
	old := remember(t, p, "alice", memory.Item{Text: "The user's dentist is Dr. Kim.", Source: memory.Provenance{ConversationID: "c1"}})
	remember(t, p, "alice", memory.Item{Text: "The user's barber is Sam."})
	newer := remember(t, p, "alice", memory.Item{Text: "The user's dentist is now Dr. Lee.", Supersedes: old[0], Source: memory.Provenance{ConversationID: "c2"}})

	got := recall(t, p, "alice", "dentist", memory.Budget{})
	if len(got) != 1 || got[0].ID != newer[0] || got[0].Supersedes != old[0] {
		t.Errorf("Recall(dentist) = %+v, want only the superseding item", got)
	}
	if got := recall(t, p, "alice", "Kim", memory.Budget{}); len(got) != 0 {
		t.Errorf("Recall(Kim) = %q: a superseded item was recalled", texts(got))
	}
	if got := texts(recall(t, p, "alice", "barber", memory.Budget{})); !slices.Equal(got, []string{"The user's barber is Sam."}) {
		t.Errorf("Recall(barber) = %q", got)
	}
	// Supersedes naming no item hides nothing and is kept.
	ghost := remember(t, p, "alice", memory.Item{Text: "The user's cat is Tom.", Supersedes: "no-such-item"})
	if got := recall(t, p, "alice", "cat", memory.Budget{}); len(got) != 1 || got[0].ID != ghost[0] {
		t.Errorf("Recall(cat) = %q, want the item superseding nothing", texts(got))
	}
	// Once the superseding item is gone, the old one is recalled again.
	if n := forget(t, p, "alice", memory.Provenance{ConversationID: "c2"}); n != 1 {
		t.Errorf("Forget(c2) removed %d, want 1", n)
	}
	got = recall(t, p, "alice", "dentist", memory.Budget{})
	if len(got) != 1 || got[0].ID != old[0] {
		t.Errorf("Recall(dentist) after the superseding item was forgotten = %q, want the old item", texts(got))
	}
}

// --- forget ---

func testForget(t *testing.T, p memory.Provider) {
	appendTurn(t, p, "alice", "c1", chat("hello", "hi"))
	appendTurn(t, p, "alice", "c1", toolTurn("look it up", "done", "x1"))
	appendTurn(t, p, "alice", "c2", chat("other", "conversation"))
	item := func(text string, src memory.Provenance) memory.Item { return memory.Item{Text: text, Source: src} }
	remember(t, p, "alice",
		item("note one from c1", memory.Provenance{ConversationID: "c1"}),
		item("note two from c1 by task t1", memory.Provenance{ConversationID: "c1", TaskID: "t1"}),
		item("note three from c1 by skill s1", memory.Provenance{ConversationID: "c1", SkillID: "s1"}),
		item("note four from c2", memory.Provenance{ConversationID: "c2"}),
		item("note five by task t1", memory.Provenance{TaskID: "t1"}),
		item("note six by skill s1", memory.Provenance{SkillID: "s1"}),
		item("note seven by task t2 with skill s1", memory.Provenance{TaskID: "t2", SkillID: "s1"}),
		item("note eight from nowhere", memory.Provenance{}),
	)
	notes := func() []string {
		got := texts(recall(t, p, "alice", "note", memory.Budget{}))
		slices.Sort(got)
		return got
	}
	gone := func(by memory.Provenance, want int, left ...string) {
		t.Helper()
		if n := forget(t, p, "alice", by); n != want {
			t.Errorf("Forget(%+v) removed %d, want %d", by, n, want)
		}
		slices.Sort(left)
		if got := notes(); !slices.Equal(got, left) {
			t.Errorf("after Forget(%+v) the items are %q, want %q", by, got, left)
		}
	}
	c1 := history(t, p, "alice", "c1", 0)
	c2 := history(t, p, "alice", "c2", 0)

	// Every non-empty field must match; a task or skill leaves histories.
	gone(memory.Provenance{ConversationID: "c2", TaskID: "t1"}, 0,
		"note one from c1", "note two from c1 by task t1", "note three from c1 by skill s1", "note four from c2",
		"note five by task t1", "note six by skill s1", "note seven by task t2 with skill s1", "note eight from nowhere")
	gone(memory.Provenance{TaskID: "t1"}, 2,
		"note one from c1", "note three from c1 by skill s1", "note four from c2",
		"note six by skill s1", "note seven by task t2 with skill s1", "note eight from nowhere")
	gone(memory.Provenance{TaskID: "t2", SkillID: "s1"}, 1,
		"note one from c1", "note three from c1 by skill s1", "note four from c2",
		"note six by skill s1", "note eight from nowhere")
	gone(memory.Provenance{SkillID: "s1"}, 2,
		"note one from c1", "note four from c2", "note eight from nowhere")
	wantMessages(t, "c1 after Forget by task and skill", c1, history(t, p, "alice", "c1", 0))

	// A conversation: its items and its history (2 + 4 messages).
	gone(memory.Provenance{ConversationID: "c1"}, 1+len(c1), "note four from c2", "note eight from nowhere")
	if h := history(t, p, "alice", "c1", 0); len(h) != 0 {
		t.Errorf("c1's history after Forget: %s", render(h))
	}
	wantMessages(t, "c2 after Forget of c1", c2, history(t, p, "alice", "c2", 0))
	gone(memory.Provenance{ConversationID: "c1"}, 0, "note four from c2", "note eight from nowhere")

	// A conversation with history but no items.
	appendTurn(t, p, "alice", "c3", chat("only", "history"))
	gone(memory.Provenance{ConversationID: "c3"}, 2, "note four from c2", "note eight from nowhere")
	// A conversation with an ID of nothing else.
	gone(memory.Provenance{ConversationID: "nothing"}, 0, "note four from c2", "note eight from nowhere")
	// History can be written again after Forget.
	appendTurn(t, p, "alice", "c1", chat("back", "again"))
	wantMessages(t, "c1 written after Forget", chat("back", "again"), history(t, p, "alice", "c1", 0))
}

func testForgetInvalid(t *testing.T, p memory.Provider) {
	appendTurn(t, p, "alice", "c1", chat("hello", "hi"))
	remember(t, p, "alice", memory.Item{Text: "a note", Source: memory.Provenance{ConversationID: "c1"}})
	_, err := p.Forget(bg, "alice", memory.Provenance{})
	wantInvalid(t, "Forget with an empty Provenance", err)
	_, err = p.Forget(bg, "", memory.Provenance{ConversationID: "c1"})
	wantInvalid(t, "Forget with an empty tenant", err)
	if got := recall(t, p, "alice", "note", memory.Budget{}); len(got) != 1 {
		t.Errorf("after rejected Forgets: %q", texts(got))
	}
	wantMessages(t, "history after rejected Forgets", chat("hello", "hi"), history(t, p, "alice", "c1", 0))
}

func testDeleteTenant(t *testing.T, p memory.Provider) {
	d, ok := p.(memory.TenantDeleter)
	if !ok {
		t.Skip("the provider is not a memory.TenantDeleter")
	}
	for _, tenant := range []string{"alice", "bob"} {
		appendTurn(t, p, tenant, "c1", chat("hello", "hi"))
		appendTurn(t, p, tenant, "c2", toolTurn("look", "done", "x"))
		remember(t, p, tenant,
			memory.Item{Text: "first note", Source: memory.Provenance{ConversationID: "c1"}},
			memory.Item{Text: "second note", Source: memory.Provenance{TaskID: "t"}},
			memory.Item{Text: "third note"},
		)
	}
	n, err := d.DeleteTenant(bg, "alice")
	if err != nil || n != 3+2+4 {
		t.Errorf("DeleteTenant(alice) = %d, %v; want 9 (3 items, 6 messages), nil", n, err)
	}
	if got := recall(t, p, "alice", "note", memory.Budget{}); len(got) != 0 {
		t.Errorf("alice recalls %q after DeleteTenant", texts(got))
	}
	for _, conv := range []string{"c1", "c2"} {
		if h := history(t, p, "alice", conv, 0); len(h) != 0 {
			t.Errorf("alice's %s after DeleteTenant: %s", conv, render(h))
		}
		if h := history(t, p, "bob", conv, 0); len(h) == 0 {
			t.Errorf("bob's %s is gone after DeleteTenant(alice)", conv)
		}
	}
	if got := recall(t, p, "bob", "note", memory.Budget{}); len(got) != 3 {
		t.Errorf("bob recalls %q after DeleteTenant(alice), want his 3 items", texts(got))
	}
	if n, err := d.DeleteTenant(bg, "alice"); err != nil || n != 0 {
		t.Errorf("second DeleteTenant(alice) = %d, %v; want 0, nil", n, err)
	}
	_, err = d.DeleteTenant(bg, "")
	wantInvalid(t, "DeleteTenant of an empty tenant", err)
	// The tenant can start again.
	appendTurn(t, p, "alice", "c1", chat("new", "start"))
	remember(t, p, "alice", memory.Item{Text: "fresh note"})
	if got := texts(recall(t, p, "alice", "note", memory.Budget{})); !slices.Equal(got, []string{"fresh note"}) {
		t.Errorf("alice recalls %q after starting again", got)
	}
}

// --- context and concurrency ---

func testCancelled(t *testing.T, p memory.Provider) {
	appendTurn(t, p, "alice", "c1", chat("hello", "hi"))
	remember(t, p, "alice", memory.Item{Text: "a note", Source: memory.Provenance{ConversationID: "c1"}})
	ctx, cancel := context.WithCancel(bg)
	cancel()
	want := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a cancelled ctx: got %v, want context.Canceled", what, err)
		}
	}
	_, err := p.History(ctx, "alice", "c1", 0)
	want("History", err)
	want("Append", p.Append(ctx, "alice", "c1", chat("more", "text")...))
	_, err = p.Remember(ctx, "alice", memory.Item{Text: "another note"})
	want("Remember", err)
	_, err = p.Recall(ctx, "alice", "note", memory.Budget{})
	want("Recall", err)
	_, err = p.Forget(ctx, "alice", memory.Provenance{ConversationID: "c1"})
	want("Forget", err)
	if d, ok := p.(memory.TenantDeleter); ok {
		_, err = d.DeleteTenant(ctx, "alice")
		want("DeleteTenant", err)
	}
	wantMessages(t, "history after cancelled calls", chat("hello", "hi"), history(t, p, "alice", "c1", 0))
	if got := texts(recall(t, p, "alice", "note", memory.Budget{})); !slices.Equal(got, []string{"a note"}) {
		t.Errorf("items after cancelled calls: %q", got)
	}
}

func testConcurrent(t *testing.T, p memory.Provider) {
	const writers, turns = 5, 5 // 5 × 5 turns of 4 messages: 100 messages
	var wg sync.WaitGroup
	ids := make([][]string, writers)
	errs := make(chan error, writers*turns*4)
	for w := range writers {
		wg.Go(func() {
			for i := range turns {
				tag := fmt.Sprintf("w%d-%d", w, i)
				if err := p.Append(bg, "alice", "shared", toolTurn("ask "+tag, "answer "+tag, "call-"+tag)...); err != nil {
					errs <- err
				}
				got, err := p.Remember(bg, "alice", memory.Item{Text: "concurrent note " + tag})
				if err != nil {
					errs <- err
				}
				ids[w] = append(ids[w], got...)
				if _, err := p.History(bg, "alice", "shared", 6); err != nil {
					errs <- err
				}
				if _, err := p.Recall(bg, "alice", "concurrent note", memory.Budget{MaxEntries: 3}); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	h := history(t, p, "alice", "shared", 0)
	if len(h) != writers*turns*4 {
		t.Errorf("History holds %d messages, want %d", len(h), writers*turns*4)
	}
	if err := llm.CheckPairing(h); err != nil {
		t.Errorf("History breaks pairing: %v", err)
	}
	for i := 0; i+4 <= len(h); i += 4 { // each turn whole, not interleaved
		tag := strings.TrimPrefix(h[i].Content, "ask ")
		if h[i+1].ToolCalls[0].ID != "call-"+tag || h[i+3].Content != "answer "+tag {
			t.Errorf("turn at %d is not whole: %s", i, render(h[i:i+4]))
			break
		}
	}
	all := slices.Concat(ids...)
	slices.Sort(all)
	if n := len(slices.Compact(all)); n != writers*turns {
		t.Errorf("concurrent Remembers returned %d distinct IDs, want %d", n, writers*turns)
	}
	if got := recall(t, p, "alice", "concurrent", memory.Budget{}); len(got) != writers*turns {
		t.Errorf("Recall finds %d of the %d concurrent items", len(got), writers*turns)
	}
}
