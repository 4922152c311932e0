package context_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	agentctx "github.com/valetkit/valet/context"
	"github.com/valetkit/valet/llm"
)

// genHistory returns a random conversation that satisfies llm.CheckPairing.
// Every message's content starts with a unique label, so messages can be
// told apart.
func genHistory(rng *rand.Rand) []llm.Message {
	n := 0
	text := func(kind string) string {
		n++
		size := rng.IntN(400)
		if rng.IntN(20) == 0 {
			size = 2000 + rng.IntN(8000)
		}
		return fmt.Sprintf("%s%d ", kind, n) + strings.Repeat("x", size)
	}
	var msgs []llm.Message
	for range rng.IntN(4) {
		msgs = append(msgs, llm.SystemMessage(text("s")))
	}
	for range rng.IntN(40) {
		switch r := rng.IntN(100); {
		case r < 30:
			msgs = append(msgs, llm.UserMessage(text("u")))
		case r < 50:
			msgs = append(msgs, llm.AssistantMessage(text("a")))
		case r < 95:
			content := ""
			if rng.IntN(2) == 0 {
				content = text("a")
			} else {
				n++
			}
			group := n
			calls := make([]llm.ToolCall, 1+rng.IntN(4))
			for i := range calls {
				calls[i] = llm.ToolCall{
					ID:        fmt.Sprintf("call_%d_%d", group, i),
					Name:      "tool",
					Arguments: json.RawMessage(`{"q":"` + strings.Repeat("y", rng.IntN(100)) + `"}`),
				}
			}
			msgs = append(msgs, llm.AssistantMessage(content, calls...))
			for _, i := range rng.Perm(len(calls)) {
				msgs = append(msgs, llm.ToolResultMessage(calls[i], text("t"), rng.IntN(5) == 0))
			}
		default:
			msgs = append(msgs, llm.SystemMessage(text("s")))
		}
	}
	return msgs
}

// corrupt breaks a history in random ways: messages deleted, duplicated,
// swapped, and stray tool results inserted.
func corrupt(rng *rand.Rand, msgs []llm.Message) []llm.Message {
	out := clone(msgs)
	for range 1 + rng.IntN(4) {
		if len(out) == 0 {
			out = append(out, llm.Message{Role: llm.RoleTool, ToolCallID: "stray", Content: "stray"})
			continue
		}
		i := rng.IntN(len(out))
		switch rng.IntN(4) {
		case 0:
			out = append(out[:i], out[i+1:]...)
		case 1:
			out = append(out[:i+1], out[i:]...)
		case 2:
			j := rng.IntN(len(out))
			out[i], out[j] = out[j], out[i]
		default:
			stray := llm.Message{Role: llm.RoleTool, ToolCallID: fmt.Sprintf("call_%d_0", rng.IntN(40)), Content: "stray"}
			out = append(out[:i], append([]llm.Message{stray}, out[i:]...)...)
		}
	}
	return out
}

func genConfig(rng *rand.Rand) agentctx.Config {
	return agentctx.Config{
		TokenLimit:         100 + rng.IntN(5000),
		TrimThreshold:      0.3 + 0.7*rng.Float64(),
		MaxHistoryMessages: 1 + rng.IntN(20),
		ForceTrimKeep:      1 + rng.IntN(8),
	}
}

// reference computes what Trim (tokens=true) or ForceTrim (tokens=false)
// must return for a valid history, from the definition rather than the
// implementation: keep the leading system messages, the last user message,
// and the longest suffix of the history that starts at a group boundary and
// respects the limits; when none does, the last group.
func reference(m *agentctx.Manager, msgs []llm.Message, quota int, tokens bool) []llm.Message {
	p := 0
	for p < len(msgs) && msgs[p].Role == llm.RoleSystem {
		p++
	}
	hist := msgs[p:]
	if len(hist) == 0 {
		return msgs
	}
	pin := -1
	for i, msg := range hist {
		if msg.Role == llm.RoleUser {
			pin = i
		}
	}
	build := func(s int) []llm.Message {
		out := append([]llm.Message(nil), msgs[:p]...)
		if pin >= 0 && pin < s {
			out = append(out, hist[pin])
		}
		return append(out, hist[s:]...)
	}
	last := 0
	for s := range hist {
		if hist[s].Role != llm.RoleTool { // in a valid history, every group starts at a non-tool message
			last = s
		}
	}
	for s := range hist {
		if hist[s].Role == llm.RoleTool {
			continue
		}
		out := build(s)
		if len(out)-p <= quota && (!tokens || m.Tokens(out) <= m.TrimBudget()) {
			return out
		}
	}
	return build(last)
}

// isSubsequence reports whether every message of sub appears in msgs in
// the same order, allowing a message to have lost tool calls.
func isSubsequence(sub, msgs []llm.Message) bool {
	j := 0
	for _, s := range sub {
		for j < len(msgs) && !derived(s, msgs[j]) {
			j++
		}
		if j == len(msgs) {
			return false
		}
		j++
	}
	return true
}

func derived(s, m llm.Message) bool {
	if s.Role != m.Role || s.Content != m.Content || s.ToolCallID != m.ToolCallID || s.Name != m.Name || s.IsError != m.IsError {
		return false
	}
	k := 0
	for _, c := range s.ToolCalls {
		for k < len(m.ToolCalls) && !reflect.DeepEqual(c, m.ToolCalls[k]) {
			k++
		}
		if k == len(m.ToolCalls) {
			return false
		}
		k++
	}
	return true
}

func lastUserOf(msgs []llm.Message) (llm.Message, bool) {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == llm.RoleUser {
			return msgs[i], true
		}
	}
	return llm.Message{}, false
}

// TestPropertiesOnValidHistories runs every operation on many random valid
// histories under random limits and checks pairing, immutability of the
// input, and the exact keep/drop rule against a reference.
func TestPropertiesOnValidHistories(t *testing.T) {
	rng := rand.New(rand.NewPCG(2024, 6))
	var changed, atFloor, pinned int
	for iter := range 2000 {
		cfg := genConfig(rng)
		m := mustManager(t, cfg)
		in := genHistory(rng)
		if err := llm.CheckPairing(in); err != nil {
			t.Fatalf("generator made an invalid history: %v", err)
		}
		before := clone(in)
		where := fmt.Sprintf("iteration %d, config %+v, history %d messages", iter, cfg, len(in))

		trimmed := m.Trim(in)
		assertUntouched(t, "Trim", before, in)
		assertPaired(t, "Trim "+where, trimmed)
		if want := reference(m, in, cfg.MaxHistoryMessages, true); !reflect.DeepEqual(trimmed, want) && !(len(trimmed) == 0 && len(want) == 0) {
			t.Fatalf("%s: Trim kept %d messages, the rule keeps %d", where, len(trimmed), len(want))
		}
		if len(in) > 0 {
			if !reflect.DeepEqual(trimmed[len(trimmed)-1], in[len(in)-1]) {
				t.Fatalf("%s: Trim lost the last message", where)
			}
			if u, ok := lastUserOf(in); ok {
				if got, _ := lastUserOf(trimmed); !reflect.DeepEqual(got, u) {
					t.Fatalf("%s: Trim lost the last user message", where)
				}
			}
		}
		if !isSubsequence(trimmed, in) {
			t.Fatalf("%s: Trim output is not a subsequence of its input", where)
		}
		if len(trimmed) < len(in) {
			changed++
			// Count the cases where the last user message was kept although
			// the messages right after it were dropped.
			if u, ok := lastUserOf(in); ok {
				i, j := indexOf(trimmed, u), indexOf(in, u)
				if i+1 < len(trimmed) && !reflect.DeepEqual(trimmed[i+1], in[j+1]) {
					pinned++
				}
			}
		}
		if m.NeedsTrim(trimmed) {
			// Allowed only when Trim is down to its floor.
			floor := reference(m, in, 0, false)
			atFloor++
			if !reflect.DeepEqual(trimmed, floor) {
				t.Fatalf("%s: NeedsTrim still true after Trim, yet Trim is not at its floor", where)
			}
		}
		if again := m.Trim(trimmed); !reflect.DeepEqual(again, trimmed) {
			t.Fatalf("%s: Trim is not idempotent", where)
		}

		cut := m.TruncateToolResults(trimmed, rng.IntN(300))
		assertPaired(t, "TruncateToolResults "+where, cut)

		forced := m.ForceTrim(cut)
		assertPaired(t, "ForceTrim "+where, forced)
		if want := reference(m, cut, cfg.ForceTrimKeep, false); !reflect.DeepEqual(forced, want) && !(len(forced) == 0 && len(want) == 0) {
			t.Fatalf("%s: ForceTrim kept %d messages, the rule keeps %d", where, len(forced), len(want))
		}

		repaired := agentctx.RepairPairing(in)
		if !reflect.DeepEqual(repaired, in) && len(in) > 0 {
			t.Fatalf("%s: RepairPairing changed a valid history", where)
		}
		assertUntouched(t, "all operations", before, in)
	}
	// The generator must reach the interesting cases.
	if changed < 500 || atFloor < 50 || pinned < 50 {
		t.Fatalf("too few interesting cases: %d trimmed, %d at the floor, %d with the user message pinned", changed, atFloor, pinned)
	}
	t.Logf("%d trimmed, %d at the floor, %d with the user message pinned", changed, atFloor, pinned)
}

func indexOf(msgs []llm.Message, msg llm.Message) int {
	for i := range msgs {
		if reflect.DeepEqual(msgs[i], msg) {
			return i
		}
	}
	return -1
}

// TestPropertiesOnBrokenHistories feeds corrupted histories to RepairPairing
// and ForceTrim, which must always return a valid history made only of what
// was there.
func TestPropertiesOnBrokenHistories(t *testing.T) {
	rng := rand.New(rand.NewPCG(99, 1))
	broken := 0
	for iter := range 2000 {
		m := mustManager(t, genConfig(rng))
		in := corrupt(rng, genHistory(rng))
		if llm.CheckPairing(in) != nil {
			broken++
		}
		before := clone(in)
		where := fmt.Sprintf("iteration %d", iter)

		repaired := agentctx.RepairPairing(in)
		assertUntouched(t, "RepairPairing", before, in)
		assertPaired(t, "RepairPairing "+where, repaired)
		if !isSubsequence(repaired, in) {
			t.Fatalf("%s: RepairPairing invented something", where)
		}
		if again := agentctx.RepairPairing(repaired); !reflect.DeepEqual(again, repaired) {
			t.Fatalf("%s: RepairPairing is not idempotent", where)
		}
		for _, msg := range in {
			if msg.Role == llm.RoleUser || (msg.Role == llm.RoleAssistant && len(msg.ToolCalls) == 0) {
				if !isSubsequence([]llm.Message{msg}, repaired) {
					t.Fatalf("%s: RepairPairing dropped a %s message without tool calls", where, msg.Role)
				}
			}
		}

		forced := m.ForceTrim(in)
		assertUntouched(t, "ForceTrim", before, in)
		assertPaired(t, "ForceTrim "+where, forced)
		if !isSubsequence(forced, in) {
			t.Fatalf("%s: ForceTrim invented something", where)
		}

		trimmed := m.Trim(in)
		assertUntouched(t, "Trim", before, in)
		if !isSubsequence(trimmed, in) {
			t.Fatalf("%s: Trim invented something", where)
		}
		assertPaired(t, "RepairPairing after Trim "+where, agentctx.RepairPairing(trimmed))
	}
	if broken < 1000 {
		t.Fatalf("only %d of 2000 corrupted histories were invalid; the generator is too gentle", broken)
	}
}
