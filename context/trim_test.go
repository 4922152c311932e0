package context_test

import (
	"testing"

	agentctx "github.com/valetkit/valet/context"
	"github.com/valetkit/valet/llm"
)

func TestTrim(t *testing.T) {
	// Count limits: weights are 0, so every message costs only its overhead
	// and the token budget of 1000 never binds.
	byCount := agentctx.Config{TokenLimit: 1000, TrimThreshold: 1, MaxHistoryMessages: 4, CountTokens: weightTokens}
	// Token limits: budget 100; a message costs 4 + its weight (+3 per call).
	byTokens := agentctx.Config{TokenLimit: 100, TrimThreshold: 1, CountTokens: weightTokens}

	tests := []struct {
		name string
		cfg  agentctx.Config
		in   string
		want string
	}{
		{"empty", byCount, "", ""},
		{"only system messages", byCount, "s0 s1 s2 s3 s4 s5", "s0 s1 s2 s3 s4 s5"},
		{"within the limits", byCount, "s0 s1 u1 a1 u2 a2", "s0 s1 u1 a1 u2 a2"},
		{"keeps the newest", byCount, "s0 s1 u1 a1 u2 a2 u3 a3", "s0 s1 u2 a2 u3 a3"},
		{"no system message", byCount, "u1 a1 u2 a2 u3 a3", "u2 a2 u3 a3"},
		{"no user message", byCount, "s0 a1 a2 a3 a4 a5", "s0 a2 a3 a4 a5"},
		{"a later system message is history", byCount, "s0 u1 s1 a1 u2 a2", "s0 s1 a1 u2 a2"},
		{"a group the cut would split is dropped whole", byCount,
			"s0 u1 a1(x,y) t(x) t(y) u2 a2", "s0 u2 a2"},
		{"a group that fits is kept whole", byCount,
			"s0 u1 a1 u2 (x,y) t(x) t(y)", "s0 u2 (x,y) t(x) t(y)"},
		{"the last user message is kept beyond the window", byCount,
			"s0 u1 a1(x) t(x) a2(y) t(y) a3(z) t(z) a4", "s0 u1 a3(z) t(z) a4"},
		{"the last group is kept even when larger than the window", byCount,
			"s0 u1 a1 u2 (a,b,c,d,e) t(a) t(c) t(b) t(e) t(d)", "s0 u2 (a,b,c,d,e) t(a) t(c) t(b) t(e) t(d)"},
		{"a last group larger than the window, no user", byCount,
			"s0 a0 (a,b,c,d,e) t(a) t(b) t(c) t(d) t(e)", "s0 (a,b,c,d,e) t(a) t(b) t(c) t(d) t(e)"},

		{"under the budget", byTokens, "s0*20 u1*20 a1*20 u2*20", "s0*20 u1*20 a1*20 u2*20"},
		{"drops the oldest until within budget", byTokens,
			"s0*20 u1*20 a1*20 u2*20 a2*20", "s0*20 a1*20 u2*20 a2*20"}, // 120 → 96
		{"exactly the budget stays", byTokens, "s0*21 u1*21 a1*21 u2*21", "s0*21 u1*21 a1*21 u2*21"}, // 100
		{"multiple system messages are all kept", byTokens,
			"s0*30 s1*30 u1*10 a1*10 u2*10 a2*10", "s0*30 s1*30 u2*10 a2*10"}, // 124 → 110 → 96
		{"the pinned user stays while a group goes", byTokens,
			"s0 u1*30 a9*30(x) t(x)*30 a2*30", "s0 u1*30 a2*30"}, // 143 → 72
		{"a group goes whole for tokens too", byTokens,
			"s0 u1 a9*10(x,y) t(x)*30 t(y)*30 u2*30 a2*10", "s0 u2*30 a2*10"},
		{"a single huge message is kept", byTokens, "s0 u1 a1 u2*500", "s0 u2*500"},
		{"a huge system prompt is kept", byTokens, "s0*200 u1 a1 u2", "s0*200 u2"},
		{"a huge last group is kept", byTokens,
			"s0 u1 a1 u2 a9*10(x) t(x)*200", "s0 u2 a9*10(x) t(x)*200"},
		{"the pinned user and the last group are the floor", byTokens,
			"s0 u1*90 a1 a9*10(x) t(x)*90", "s0 u1*90 a9*10(x) t(x)*90"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := mustManager(t, tt.cfg)
			in := hist(tt.in)
			before := clone(in)
			out := m.Trim(in)
			assertUntouched(t, "Trim", before, in)
			assertPaired(t, "Trim", out)
			if got := render(out); got != tt.want {
				t.Fatalf("Trim(%s)\n got %s\nwant %s", tt.in, got, tt.want)
			}
			if len(out) == len(in) && len(in) > 0 && &out[0] != &in[0] {
				t.Fatal("Trim with nothing to drop should return its input")
			}
			if again := m.Trim(out); render(again) != render(out) {
				t.Fatalf("Trim is not idempotent: %s → %s", render(out), render(again))
			}
		})
	}
}

func TestTrimAfterNeedsTrim(t *testing.T) {
	m := mustManager(t, agentctx.Config{TokenLimit: 100, TrimThreshold: 0.5, MaxHistoryMessages: 6, CountTokens: weightTokens})
	in := hist("s0*10 u1*5 a1*5(x) t(x)*20 u2*5 a2*5(y,z) t(z) t(y) a3 u3")
	if !m.NeedsTrim(in) {
		t.Fatal("NeedsTrim should be true")
	}
	out := m.Trim(in)
	if m.NeedsTrim(out) {
		t.Fatalf("NeedsTrim still true after Trim: %s (%d tokens)", render(out), m.Tokens(out))
	}
	// History 9 > 6: the window keeps u2 … u3 (54 tokens > 50), then u2 goes.
	if got, want := render(out), "s0*10 a2*5(y,z) t(z) t(y) a3 u3"; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}

func TestForceTrim(t *testing.T) {
	m := mustManager(t, agentctx.Config{CountTokens: weightTokens}) // ForceTrimKeep 5
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", ""},
		{"only system", "s0 s1", "s0 s1"},
		{"short history", "s0 u1 a1", "s0 u1 a1"},
		{"keeps the last five", "s0 s1 u1 a1 u2 a2 u3 a3 u4 a4", "s0 s1 a2 u3 a3 u4 a4"},
		{"tokens do not matter", "s0*1000000 u1*5000 a1*90000", "s0*1000000 u1*5000 a1*90000"},
		{"the last user message is kept", "s0 u1 a1(x) t(x) a2(y) t(y) a3(z) t(z) a4", "s0 u1 a3(z) t(z) a4"},
		{"a split group is dropped", "s0 a0 a1(x,y) t(x) t(y) a2 a3", "s0 a1(x,y) t(x) t(y) a2 a3"},
		{"a split group is dropped with the pin", "s0 u1 a1(x,y) t(x) t(y) a2 a3", "s0 u1 a2 a3"},
		{"the last group is kept whole", "s0 u1 a1 u2 (a,b,c,d,e,f) t(a) t(b) t(c) t(d) t(e) t(f)",
			"s0 u2 (a,b,c,d,e,f) t(a) t(b) t(c) t(d) t(e) t(f)"},
		{"a malformed history is repaired", "s0 t(q) u1 a1(x,y) t(x) a2", "s0 u1 a1(x) t(x) a2"},
		{"stray results in the window are repaired", "s0 u1 a1(x) t(x) t(y) a2", "s0 u1 a1(x) t(x) a2"},
		{"a malformed group the cut would split goes whole", "s0 u1 a1(x) t(x) t(x) t(y) a2", "s0 u1 a2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := hist(tt.in)
			before := clone(in)
			out := m.ForceTrim(in)
			assertUntouched(t, "ForceTrim", before, in)
			assertPaired(t, "ForceTrim", out)
			if got := render(out); got != tt.want {
				t.Fatalf("ForceTrim(%s)\n got %s\nwant %s", tt.in, got, tt.want)
			}
			if len(out) > 0 && len(in) > 0 && &out[0] == &in[0] {
				t.Fatal("ForceTrim should return a new slice")
			}
		})
	}

	keep2 := mustManager(t, agentctx.Config{ForceTrimKeep: 2})
	if got := render(keep2.ForceTrim(hist("s0 u1 a1 u2 a2 u3 a3"))); got != "s0 u3 a3" {
		t.Fatalf("ForceTrimKeep 2: got %s", got)
	}
}

func TestRepairPairing(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", ""},
		{"valid stays", "s0 u1 a1(x,y) t(y) t(x) a2 (z) t(z)", "s0 u1 a1(x,y) t(y) t(x) a2 (z) t(z)"},
		{"orphan result at the front", "t(x) u1", "u1"},
		{"orphan result after a user message", "u1 a1(x) t(x) u2 t(x)", "u1 a1(x) t(x) u2"},
		{"result for another call", "u1 a1(x) t(y)", "u1 a1"},
		{"missing result removes the call", "u1 (x,y) t(x)", "u1 (x) t(x)"},
		{"empty assistant is dropped", "u1 (x) u2", "u1 u2"},
		{"assistant with text keeps its text", "u1 a1(x) u2", "u1 a1 u2"},
		{"duplicate result", "u1 a1(x) t(x) t(x)", "u1 a1(x) t(x)"},
		{"duplicate call id", "u1 a1(x,x) t(x)", "u1 a1(x) t(x)"},
		{"duplicate call id, two results", "u1 a1(x,x) t(x) t(x)", "u1 a1(x) t(x)"},
		{"result separated by a system message", "a1(x) s1 t(x)", "a1 s1"},
		{"results answer only their own group", "(x) t(x) (y) t(x)", "(x) t(x)"},
		{"only orphans", "t(a) t(b)", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := hist(tt.in)
			before := clone(in)
			out := agentctx.RepairPairing(in)
			assertUntouched(t, "RepairPairing", before, in)
			assertPaired(t, "RepairPairing", out)
			if got := render(out); got != tt.want {
				t.Fatalf("RepairPairing(%s)\n got %s\nwant %s", tt.in, got, tt.want)
			}
			if out == nil {
				t.Fatal("RepairPairing returned nil")
			}
		})
	}
	in := []llm.Message{llm.UserMessage("x")}
	if out := agentctx.RepairPairing(in); &out[0] == &in[0] {
		t.Fatal("RepairPairing should return a new slice")
	}
}

func TestTrimToTokens(t *testing.T) {
	// No message quota binds here (MaxHistoryMessages 4 would, for Trim):
	// only the budget given to TrimToTokens. A message costs 4 + its weight.
	m := mustManager(t, agentctx.Config{TokenLimit: 10000, TrimThreshold: 1, MaxHistoryMessages: 4, CountTokens: weightTokens})
	tests := []struct {
		name   string
		in     string
		budget int
		want   string
	}{
		{"fits already", "s0*20 u1*20 a1*20 u2*20 a2*20 u3*20", 1000, "s0*20 u1*20 a1*20 u2*20 a2*20 u3*20"},
		{"drops the oldest until within", "s0*20 u1*20 a1*20 u2*20 a2*20 u3*20", 90, "s0*20 a2*20 u3*20"},
		{"a group goes whole", "s0 u1 a9*10(x,y) t(x)*30 t(y)*30 u2*30 a2*10", 60, "s0 u2*30 a2*10"},
		{"the floor is kept even over budget", "s0*50 u1*50 a1 u2*50", 10, "s0*50 u2*50"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := hist(tt.in)
			before := clone(in)
			got := m.TrimToTokens(in, tt.budget)
			if r := render(got); r != tt.want {
				t.Fatalf("TrimToTokens(%q, %d) = %q, want %q", tt.in, tt.budget, r, tt.want)
			}
			assertUntouched(t, "TrimToTokens", before, in)
			assertPaired(t, "TrimToTokens", got)
		})
	}
}
