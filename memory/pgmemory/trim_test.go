package pgmemory_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/memory/pgmemory"
)

// contents returns the contents of msgs.
func contents(msgs []llm.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Content
	}
	return out
}

// TestTrimUnnumberedHistory: messages without a number — written before
// the pos column existed, or since by a replica of an earlier release
// that does not set it — are numbered at the conversation's next Append,
// and trimming then keeps exactly the newest MaxMessages, none lost and
// none kept too many, in order.
func TestTrimUnnumberedHistory(t *testing.T) {
	db := testDB(t)
	schema := newSchema(t, db)
	history := pgx.Identifier{schema, "memory_history"}.Sanitize()
	p := open(t, db, pgmemory.Config{Schema: schema, MaxMessages: 6})
	oldInsert := func(conv, content string) {
		t.Helper()
		raw, err := pgmemory.EncodeMessage(llm.UserMessage(content))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(bg, `INSERT INTO `+history+` (tenant_id, conversation_id, role, message) VALUES ('t', $1, 'user', $2::json)`, conv, raw); err != nil {
			t.Fatal(err)
		}
	}
	// A conversation of an earlier release: 4 unnumbered messages.
	for i := range 4 {
		oldInsert("legacy", fmt.Sprintf("old %d", i))
	}
	if err := p.Append(bg, "t", "legacy", llm.UserMessage("new 0"), llm.AssistantMessage("new 1")); err != nil {
		t.Fatal(err)
	}
	h, err := p.History(bg, "t", "legacy", 0)
	if got := fmt.Sprint(contents(h)); err != nil || got != "[old 0 old 1 old 2 old 3 new 0 new 1]" {
		t.Fatalf("History = %s, %v; want all 6, in order", got, err)
	}
	// An earlier release's replica appends in between: its message has
	// no number, and the next Append numbers it and trims by count.
	oldInsert("legacy", "between")
	if err := p.Append(bg, "t", "legacy", llm.UserMessage("new 2"), llm.AssistantMessage("new 3")); err != nil {
		t.Fatal(err)
	}
	h, err = p.History(bg, "t", "legacy", 0)
	if got := fmt.Sprint(contents(h)); err != nil || got != "[old 3 new 0 new 1 between new 2 new 3]" {
		t.Fatalf("History = %s, %v; want the newest 6", got, err)
	}
	var rows, unnumbered int
	if err := db.QueryRow(bg, `SELECT count(*), count(*) FILTER (WHERE pos IS NULL) FROM `+history+` WHERE conversation_id = 'legacy'`).Scan(&rows, &unnumbered); err != nil {
		t.Fatal(err)
	}
	if rows != 6 || unnumbered != 0 {
		t.Errorf("%d rows (%d unnumbered) kept; want 6, all numbered", rows, unnumbered)
	}
}

// TestTrimLongConversation: at the cap every Append trims exactly what
// it adds, turn after turn, a cut never starting at a tool result, so
// History always holds the newest MaxMessages (or fewer, after a cut
// moved past tool results).
func TestTrimLongConversation(t *testing.T) {
	db := testDB(t)
	p := open(t, db, pgmemory.Config{MaxMessages: 7})
	var all []llm.Message
	for i := range 30 {
		call := llm.ToolCall{ID: fmt.Sprintf("c%d", i), Name: "lookup", Arguments: []byte(`{}`)}
		turn := []llm.Message{llm.UserMessage(fmt.Sprintf("q%d", i)), llm.AssistantMessage(fmt.Sprintf("call%d", i), call),
			llm.ToolResultMessage(call, fmt.Sprintf("r%d", i), false), llm.AssistantMessage(fmt.Sprintf("a%d", i))}
		if i%3 == 0 {
			turn = []llm.Message{llm.UserMessage(fmt.Sprintf("q%d", i)), llm.AssistantMessage(fmt.Sprintf("a%d", i))}
		}
		if err := p.Append(bg, "t", "c", turn...); err != nil {
			t.Fatal(err)
		}
		all = append(all, turn...)
		// What the cap keeps: the newest 7, after any tool result at
		// their start.
		want := all[max(0, len(all)-7):]
		for len(want) > 0 && want[0].Role == llm.RoleTool {
			want = want[1:]
		}
		h, err := p.History(bg, "t", "c", 0)
		if err != nil || fmt.Sprint(contents(h)) != fmt.Sprint(contents(want)) {
			t.Fatalf("after turn %d: History = %q, %v; want %q", i, contents(h), err, contents(want))
		}
	}
}

// TestAppendConcurrentNumbers: replicas appending to one conversation at
// once never give two messages one number, and the cap holds.
func TestAppendConcurrentNumbers(t *testing.T) {
	db := testDB(t)
	schema := newSchema(t, db)
	var wg sync.WaitGroup
	for w := range 4 {
		p := open(t, db, pgmemory.Config{Schema: schema, MaxMessages: 20}) // a replica each
		wg.Go(func() {
			for i := range 10 {
				if err := p.Append(bg, "t", "c", llm.UserMessage(fmt.Sprintf("w%d q%d", w, i)), llm.AssistantMessage("a")); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	var rows, numbers, span int
	if err := db.QueryRow(bg, `SELECT count(*), count(DISTINCT pos), max(pos) - min(pos) + 1 FROM `+pgx.Identifier{schema, "memory_history"}.Sanitize()).Scan(&rows, &numbers, &span); err != nil {
		t.Fatal(err)
	}
	if rows != 20 || numbers != 20 || span != 20 {
		t.Errorf("%d rows, %d numbers spanning %d; want 20, 20, 20", rows, numbers, span)
	}
}
