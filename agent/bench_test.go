package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/tool"
)

// The workload: a conversation of 5 tool turns with 3 parallel calls each,
// then a final answer, on a scripted model and zero-latency tools. The same
// model and tool functions serve valet and a hand-written bare loop, so the
// difference is the framework's own cost.

type benchWeatherIn struct {
	City string `json:"city" jsonschema:"description=City name"`
	Days int    `json:"days,omitempty" jsonschema:"minimum=1,maximum=7"`
}
type benchSearchIn struct {
	Query string `json:"query"`
	Limit int    `json:"limit,omitempty" jsonschema:"minimum=1,maximum=20"`
}
type benchCalcIn struct {
	Expression string `json:"expression"`
}

func benchWeather(_ context.Context, in benchWeatherIn) (string, error) {
	return "Sunny, 21°C in " + in.City, nil
}
func benchSearch(_ context.Context, in benchSearchIn) (string, error) {
	return "3 results for " + in.Query, nil
}
func benchCalc(_ context.Context, in benchCalcIn) (string, error) { return "42", nil }

const benchTurns, benchCalls = 5, 3

// benchModel answers by position: tool calls until benchTurns assistant
// messages follow the user's message, then a final text. Replies are built
// once, so the model itself costs (almost) nothing.
type benchModel struct {
	turns []*llm.Response
	final *llm.Response
	delay time.Duration
}

func newBenchModel(turns, calls int, names ...string) *benchModel {
	m := &benchModel{final: &llm.Response{Message: llm.AssistantMessage("All done: sunny, 3 results, 42."), Usage: llm.Usage{InputTokens: 500, OutputTokens: 20}}}
	args := map[string]string{
		"get_weather": `{"city":"Paris","days":3}`,
		"web_search":  `{"query":"flights to Paris","limit":5}`,
		"calculator":  `{"expression":"6*7"}`,
		"sleep":       `{}`,
	}
	for t := range turns {
		r := &llm.Response{Usage: llm.Usage{InputTokens: 400, OutputTokens: 30}}
		for c := range calls {
			name := names[c%len(names)]
			r.Message.ToolCalls = append(r.Message.ToolCalls, llm.ToolCall{
				ID: fmt.Sprintf("call_%d_%d", t, c), Name: name, Arguments: json.RawMessage(args[name]),
			})
		}
		r.Message.Role = llm.RoleAssistant
		m.turns = append(m.turns, r)
	}
	return m
}

func (m *benchModel) Complete(ctx context.Context, req llm.Request) (*llm.Response, error) {
	n := 0
	for i := len(req.Messages) - 1; i >= 0 && req.Messages[i].Role != llm.RoleUser; i-- {
		if req.Messages[i].Role == llm.RoleAssistant {
			n++
		}
	}
	if n < len(m.turns) {
		return m.turns[n], nil
	}
	return m.final, nil
}

func (m *benchModel) Stream(ctx context.Context, req llm.Request) iter.Seq2[llm.Chunk, error] {
	return func(yield func(llm.Chunk, error) bool) {
		r, err := m.Complete(ctx, req)
		yield(llm.Chunk{Response: r}, err)
	}
}

func benchTools() []tool.Tool {
	return []tool.Tool{
		tool.New("get_weather", "Current weather for a city", benchWeather),
		tool.New("web_search", "Search the web", benchSearch),
		tool.New("calculator", "Evaluate an arithmetic expression", benchCalc),
	}
}

// bareLoop is the hand-written baseline: the same model, the same tool
// functions, calls of a turn in parallel, arguments decoded into the same
// structs — and nothing else (no validation, timeouts, telemetry, history).
func bareLoop(ctx context.Context, model llm.Client, specs []llm.ToolSpec, text string) (string, error) {
	decode := func(raw json.RawMessage, v any) error { return json.Unmarshal(raw, v) }
	handlers := map[string]func(context.Context, json.RawMessage) (string, error){
		"get_weather": func(ctx context.Context, raw json.RawMessage) (string, error) {
			var in benchWeatherIn
			if err := decode(raw, &in); err != nil {
				return "", err
			}
			return benchWeather(ctx, in)
		},
		"web_search": func(ctx context.Context, raw json.RawMessage) (string, error) {
			var in benchSearchIn
			if err := decode(raw, &in); err != nil {
				return "", err
			}
			return benchSearch(ctx, in)
		},
		"calculator": func(ctx context.Context, raw json.RawMessage) (string, error) {
			var in benchCalcIn
			if err := decode(raw, &in); err != nil {
				return "", err
			}
			return benchCalc(ctx, in)
		},
	}
	msgs := []llm.Message{llm.SystemMessage("You are a benchmark."), llm.UserMessage(text)}
	for {
		resp, err := model.Complete(ctx, llm.Request{Messages: msgs, Tools: specs})
		if err != nil {
			return "", err
		}
		if len(resp.Message.ToolCalls) == 0 {
			return resp.Message.Content, nil
		}
		msgs = append(msgs, resp.Message)
		calls := resp.Message.ToolCalls
		out := make([]string, len(calls))
		var wg sync.WaitGroup
		for i, c := range calls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s, err := handlers[c.Name](ctx, c.Arguments)
				if err != nil {
					s = err.Error()
				}
				out[i] = s
			}()
		}
		wg.Wait()
		for i, c := range calls {
			msgs = append(msgs, llm.ToolResultMessage(c, out[i], false))
		}
	}
}

func runBare(b *testing.B) {
	model := newBenchModel(benchTurns, benchCalls, "get_weather", "web_search", "calculator")
	reg, err := tool.NewRegistry(benchTools()...)
	if err != nil {
		b.Fatal(err)
	}
	specs := reg.Specs()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := bareLoop(ctx, model, specs, "Plan my trip to Paris"); err != nil {
			b.Fatal(err)
		}
	}
}

func runValet(b *testing.B) {
	model := newBenchModel(benchTurns, benchCalls, "get_weather", "web_search", "calculator")
	o, err := agent.NewOrchestrator(agent.Config{LLM: model, SystemPrompt: "You are a benchmark.", Tools: benchTools()})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	m := agent.Message{TenantID: "bench", ConversationID: "c", Text: "Plan my trip to Paris"}
	b.ReportAllocs()
	for b.Loop() {
		res, err := o.HandleMessage(ctx, m)
		if err != nil || res.Turns != benchTurns+1 || len(res.ToolCalls) != benchTurns*benchCalls {
			b.Fatalf("res=%+v err=%v", res, err)
		}
		if err := o.Forget(ctx, m.TenantID, m.ConversationID); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkConversation prints the bare loop and valet side by side, and in
// "ratio" valet's cost as a multiple of the bare loop's, measured in
// alternating blocks of the same run (x-time, x-allocs, x-bytes):
//
//	go test -run '^$' -bench BenchmarkConversation -benchtime 2s ./agent/
func BenchmarkConversation(b *testing.B) {
	b.Run("bare", runBare)
	b.Run("valet", runValet)
	b.Run("ratio", func(b *testing.B) {
		model := newBenchModel(benchTurns, benchCalls, "get_weather", "web_search", "calculator")
		o, err := agent.NewOrchestrator(agent.Config{LLM: model, SystemPrompt: "You are a benchmark.", Tools: benchTools()})
		if err != nil {
			b.Fatal(err)
		}
		specs := o.Tools()
		ctx := context.Background()
		m := agent.Message{TenantID: "bench", ConversationID: "c", Text: "Plan my trip to Paris"}
		const block = 100
		var bareT, valetT time.Duration
		var bareA, valetA, bareB, valetB uint64
		var ms runtime.MemStats
		measure := func(f func()) (time.Duration, uint64, uint64) {
			runtime.ReadMemStats(&ms)
			a0, b0 := ms.Mallocs, ms.TotalAlloc
			t0 := time.Now()
			for range block {
				f()
			}
			d := time.Since(t0)
			runtime.ReadMemStats(&ms)
			return d, ms.Mallocs - a0, ms.TotalAlloc - b0
		}
		for b.Loop() {
			d, a, by := measure(func() {
				if _, err := bareLoop(ctx, model, specs, m.Text); err != nil {
					b.Fatal(err)
				}
			})
			bareT, bareA, bareB = bareT+d, bareA+a, bareB+by
			d, a, by = measure(func() {
				if _, err := o.HandleMessage(ctx, m); err != nil {
					b.Fatal(err)
				}
				_ = o.Forget(ctx, m.TenantID, m.ConversationID)
			})
			valetT, valetA, valetB = valetT+d, valetA+a, valetB+by
		}
		n := float64(b.N * block)
		b.ReportMetric(float64(bareT)/n, "bare-ns/conv")
		b.ReportMetric(float64(valetT)/n, "valet-ns/conv")
		b.ReportMetric(float64(valetT)/float64(bareT), "x-time")
		b.ReportMetric(float64(valetA)/float64(bareA), "x-allocs")
		b.ReportMetric(float64(valetB)/float64(bareB), "x-bytes")
	})
}

// BenchmarkParallelTools: 3 turns of 5 tools that each take 20 ms. Run one
// after another that is 300 ms; fully parallel it is the 60 ms ideal.
// ms/conv is the wall time of one conversation, x-ideal its ratio to 60 ms.
func BenchmarkParallelTools(b *testing.B) {
	const turns, calls, latency = 3, 5, 20 * time.Millisecond
	sleep := tool.New("sleep", "waits 20ms", func(ctx context.Context, in struct{}) (string, error) {
		t := time.NewTimer(latency)
		defer t.Stop()
		select {
		case <-t.C:
			return "slept", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	})
	model := newBenchModel(turns, calls, "sleep")
	o, err := agent.NewOrchestrator(agent.Config{LLM: model, Tools: []tool.Tool{sleep}})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	m := agent.Message{TenantID: "bench", ConversationID: "p", Text: "go"}
	start := time.Now()
	for b.Loop() {
		if _, err := o.HandleMessage(ctx, m); err != nil {
			b.Fatal(err)
		}
		_ = o.Forget(ctx, m.TenantID, m.ConversationID)
	}
	per := time.Since(start) / time.Duration(b.N)
	b.ReportMetric(float64(per)/float64(time.Millisecond), "ms/conv")
	b.ReportMetric(float64(per)/float64(turns*latency), "x-ideal")
}
