package agent_test

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/memory"
)

// withDefaults rejects a CompactThreshold below 0 or above 1 with two
// comparisons, which NaN passes (strconv.ParseFloat("NaN") from an env var
// or flag gives one). With NaN, maybeCompact's "under the threshold"
// test (x <= NaN) is always false, so every message with more than
// CompactKeepMessages of history makes a compaction call, however short
// the conversation, while compactQuota (NaN > 0 is false) leaves count
// trimming and the MaxHistoryMessages load limit on: neither mode as
// documented.
func TestCompactThresholdNaNIsRejected(t *testing.T) {
	loop := agent.LoopConfig{CompactThreshold: math.NaN(), CompactKeepMessages: 2}
	_, err := agent.NewOrchestrator(agent.Config{LLM: llmtest.NewScript(), Loop: loop})
	if errors.Is(err, agent.ErrInvalidConfig) {
		return
	}
	t.Errorf("CompactThreshold NaN: err = %v, want ErrInvalidConfig", err)
	mem := newMem(t, memory.Config{})
	seedTurns(t, mem, 2) // a few hundred tokens of a 128k window
	s := llmtest.NewScript(compactReply("s", `[]`), llmtest.Text("ok"))
	o := newOrch(t, s, agent.Config{Memory: mem, Loop: loop})
	res, err := o.HandleMessage(context.Background(), msg("hi"))
	if err != nil {
		t.Fatal(err)
	}
	t.Errorf("and a 6-message conversation in a 128k window was compacted: Compactions = %d", res.Compactions)
}
