package agent

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/tool"
)

type fuzzIn struct {
	N int `json:"n"`
}

type fuzzModel struct {
	mu        sync.Mutex
	rng       *rand.Rand
	t         *testing.T
	reqs      [][]llm.Message
	fail      float64
	ovf       float64
	seq       int
	lastCalls []string
}

func (m *fuzzModel) Complete(ctx context.Context, req llm.Request) (*llm.Response, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cp := append([]llm.Message(nil), req.Messages...)
	m.reqs = append(m.reqs, cp)
	if err := llm.CheckPairing(cp); err != nil {
		m.t.Errorf("request %d: pairing: %v\n%s", len(m.reqs), err, render(cp))
	}
	if cp[0].Role != llm.RoleSystem || !strings.Contains(cp[0].Content, "Current time") {
		m.t.Errorf("request %d: first message is not the system prompt: %+v", len(m.reqs), cp[0])
	}
	for i, x := range cp[1:] {
		if x.Role == llm.RoleSystem && !strings.Contains(x.Content, "every step") && !strings.Contains(x.Content, "note") && i+2 != len(cp) {
			// notes only
		}
		if x.Role == "" {
			m.t.Errorf("request %d: empty message at %d", len(m.reqs), i+1)
		}
	}
	if len(req.Tools) > 0 && len(m.lastCalls) > 0 {
		for _, id := range m.lastCalls {
			ok := false
			for _, x := range cp {
				if x.Role == llm.RoleTool && x.ToolCallID == id {
					ok = true
				}
			}
			if !ok {
				m.t.Errorf("request %d lacks the result of the previous turn's call %s:\n%s", len(m.reqs), id, render(cp))
			}
		}
	}
	m.lastCalls = nil
	r := m.rng.Float64()
	switch {
	case r < m.fail:
		return nil, &llm.Error{Kind: llm.KindAuth, Message: "nope"}
	case r < m.fail+m.ovf:
		if m.rng.IntN(2) == 0 {
			return nil, &llm.Error{Kind: llm.KindContextOverflow, Message: "too long", ContextLimit: 1000, ContextUsed: 1000 + m.rng.IntN(3000)}
		}
		return nil, &llm.Error{Kind: llm.KindContextOverflow, Message: "too long"}
	}
	if len(req.Tools) > 0 && m.rng.IntN(3) > 0 {
		k := 1 + m.rng.IntN(4)
		var calls []llm.ToolCall
		for range k {
			m.seq++
			calls = append(calls, llm.ToolCall{ID: fmt.Sprintf("id%d", m.seq), Name: "echo", Arguments: []byte(fmt.Sprintf(`{"n":%d}`, m.rng.IntN(600)))})
		}
		for _, c := range calls {
			m.lastCalls = append(m.lastCalls, c.ID)
		}
		return &llm.Response{Message: llm.Message{Role: llm.RoleAssistant, ToolCalls: calls}}, nil
	}
	m.seq++
	return &llm.Response{Message: llm.AssistantMessage(fmt.Sprintf("answer %d %s", m.seq, strings.Repeat("a", m.rng.IntN(300))))}, nil
}

type fuzzClient struct{ *fuzzModel }

func (c fuzzClient) Stream(ctx context.Context, req llm.Request) iter.Seq2[llm.Chunk, error] {
	return func(yield func(llm.Chunk, error) bool) {
		resp, err := c.Complete(ctx, req)
		if err != nil {
			yield(llm.Chunk{}, err)
			return
		}
		yield(llm.Chunk{Response: resp}, nil)
	}
}

func TestFuzzRuns(t *testing.T) {
	echo := tool.New("echo", "echo", func(ctx context.Context, in fuzzIn) (string, error) {
		return strings.Repeat("r", in.N*4), nil
	})
	for seed := range uint64(1500) {
		rng := rand.New(rand.NewPCG(seed, 7))
		m := &fuzzModel{rng: rng, t: t, fail: 0.05, ovf: 0.1}
		hook := rng.IntN(3) == 0
		cfg := Config{LLM: fuzzClient{m}, Tools: []tool.Tool{echo}, Logger: slog.New(slog.DiscardHandler),
			Loop: LoopConfig{MaxHistoryMessages: 2 + rng.IntN(30), ContextTokenLimit: 1500 + rng.IntN(6000), MaxTurns: 1 + rng.IntN(5)}}
		if hook {
			cfg.Hooks.PrepareContext = func(ctx context.Context, msg Message, msgs []llm.Message) ([]llm.Message, error) {
				return msgs, nil
			}
		}
		o, err := NewOrchestrator(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for step := range 30 {
			txt := fmt.Sprintf("user %d/%d %s", seed, step, strings.Repeat("u", rng.IntN(200)))
			before := len(m.reqs)
			m.lastCalls = nil
			var err error
			if rng.IntN(2) == 0 {
				_, err = o.HandleMessage(context.Background(), Message{TenantID: "t", ConversationID: "c", Text: txt})
			} else {
				for ev, e := range o.Stream(context.Background(), Message{TenantID: "t", ConversationID: "c", Text: txt}) {
					_ = ev
					err = e
				}
			}
			h, _ := o.History(context.Background(), "t", "c")
			if err := llm.CheckPairing(h); err != nil {
				t.Fatalf("seed %d step %d: history pairing: %v", seed, step, err)
			}
			if len(h) > cfg.Loop.MaxHistoryMessages {
				t.Fatalf("seed %d step %d: history %d > %d", seed, step, len(h), cfg.Loop.MaxHistoryMessages)
			}
			for _, x := range h {
				if x.Role == llm.RoleSystem || x.Role == "" {
					t.Fatalf("seed %d step %d: history holds %q message", seed, step, x.Role)
				}
			}
			// every request of the run ends with this run's user message or later messages of it
			for _, rq := range m.reqs[before:] {
				found := false
				for _, x := range rq {
					if x.Role == llm.RoleUser && x.Content == txt {
						found = true
					}
				}
				if !found {
					t.Fatalf("seed %d step %d: a request lacks the run's user message:\n%s", seed, step, render(rq))
				}
			}
			if err == nil && len(h) > 0 && h[len(h)-1].Role != llm.RoleAssistant {
				t.Fatalf("seed %d step %d: successful run's history does not end with the answer", seed, step)
			}
			o.mu.Lock()
			held := len(o.convs)
			o.mu.Unlock()
			if held != 0 {
				t.Fatalf("seed %d step %d: %d conversations still held after the run", seed, step, held)
			}
			if t.Failed() {
				t.FailNow()
			}
		}
	}
}
