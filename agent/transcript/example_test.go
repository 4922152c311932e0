package transcript_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/transcript"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

type weatherIn struct {
	City string `json:"city"`
}

// An orchestrator writes its transcript to a buffer; reading it back sums
// up the run. The key the user pasted is redacted.
func Example() {
	var buf bytes.Buffer
	tx, err := transcript.New(transcript.Config{Writer: &buf})
	if err != nil {
		panic(err)
	}
	weather := tool.New("weather", "Weather of a city", func(ctx context.Context, in weatherIn) (string, error) {
		return "sunny, 21°C", nil
	})
	model := llmtest.NewScript(
		llmtest.Reply{ToolCalls: []llm.ToolCall{llmtest.Call("weather", `{"city":"Paris"}`)}, Usage: llm.Usage{InputTokens: 120, OutputTokens: 15}},
		llmtest.Reply{Text: "Sunny in Paris, 21°C.", Usage: llm.Usage{InputTokens: 160, OutputTokens: 12}},
	)
	o, err := agent.NewOrchestrator(agent.Config{LLM: model, Tools: []tool.Tool{weather}, Observer: tx, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	if _, err := o.HandleMessage(context.Background(), agent.Message{TenantID: "ann", Text: "Weather in Paris? My key is sk-" + "proj-abcdefghijklmnopqrstuvwxyz0123"}); err != nil {
		panic(err)
	}
	if err := tx.Close(); err != nil {
		panic(err)
	}

	recs, err := transcript.Read(&buf)
	if err != nil {
		panic(err)
	}
	fmt.Println("first line:", recs[0].Kind, recs[0].Text)
	for _, r := range transcript.Summarize(recs) {
		fmt.Println("status:", r.Status, "turns:", r.Turns, "model calls:", r.ModelCalls)
		fmt.Println("tools:", r.Tools)
		fmt.Println("tokens:", r.InputTokens, "in,", r.OutputTokens, "out")
	}
	// Output:
	// first line: run_start Weather in Paris? My key is ***
	// status: completed turns: 2 model calls: 2
	// tools: map[weather:{1 0}]
	// tokens: 280 in, 27 out
}
