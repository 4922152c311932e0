package agent_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

// linesAt are the records (see recordLog) at level with message msg.
func linesAt(recs []map[string]string, level, msg string) []map[string]string {
	var out []map[string]string
	for _, r := range recs {
		if r["level"] == level && r["msg"] == msg {
			out = append(out, r)
		}
	}
	return out
}

// A run writes one INFO line when it ends (status, turns, tool calls,
// tokens, duration), a WARN line per failed tool call (tool, call id,
// error masked), a DEBUG line per model call and per other tool call;
// each carries tenant, conversation and run_id.
func TestRunLogLevels(t *testing.T) {
	s := llmtest.NewScript(
		llmtest.Reply{ToolCalls: []llm.ToolCall{
			{ID: "c_ok", Name: "ok", Arguments: []byte(`{"what":"x"}`)},
			{ID: "c_bad", Name: "bad", Arguments: []byte(`{"what":"x"}`)},
		}, Usage: llm.Usage{InputTokens: 10, OutputTokens: 2}},
		llmtest.Reply{Text: "done", Usage: llm.Usage{InputTokens: 20, OutputTokens: 3}},
	)
	logs := newRecordLog()
	o := newOrch(t, s, agent.Config{Logger: slog.New(logs), Tools: []tool.Tool{
		tool.New("ok", "Works", func(ctx context.Context, in FetchIn) (string, error) { return "fine", nil }),
		tool.New("bad", "Fails", func(ctx context.Context, in FetchIn) (string, error) {
			return "", errors.New("GET https://h/?access_token=" + leakySecret + " refused")
		}),
	}})
	res, err := o.HandleMessage(context.Background(), msg("go"))
	if err != nil {
		t.Fatal(err)
	}
	recs := logs.records()
	for _, r := range recs {
		if r["tenant"] != "u1" || r["conversation"] != "c1" || r["run_id"] != res.RunID {
			t.Errorf("line without the run's attributes: %v", r)
		}
		for k, v := range r {
			if strings.Contains(v, leakySecret) {
				t.Errorf("line leaks the secret in %s: %v", k, r)
			}
		}
	}
	end := linesAt(recs, "INFO", "agent: run ended")
	if len(end) != 1 {
		t.Fatalf("%d run-end lines, want 1: %v", len(end), recs)
	}
	if e := end[0]; e["status"] != "completed" || e["turns"] != "2" || e["tool_calls"] != "2" || e["tokens_in"] != "30" || e["tokens_out"] != "5" || e["duration"] == "" {
		t.Errorf("run-end line %v", e)
	}
	warn := linesAt(recs, "WARN", "agent: tool call failed")
	if len(warn) != 1 || warn[0]["tool"] != "bad" || warn[0]["call_id"] != "c_bad" || !strings.Contains(warn[0]["err"], "access_token=***") {
		t.Errorf("tool failure lines %v", warn)
	}
	if d := linesAt(recs, "DEBUG", "agent: tool call"); len(d) != 1 || d[0]["tool"] != "ok" || d[0]["call_id"] != "c_ok" {
		t.Errorf("tool call debug lines %v", d)
	}
	if d := linesAt(recs, "DEBUG", "agent: model call"); len(d) != 2 || d[0]["purpose"] != "loop" || d[1]["tokens_out"] != "3" {
		t.Errorf("model call debug lines %v", d)
	}
	for _, r := range recs {
		if r["level"] == "INFO" && r["msg"] != "agent: run ended" || r["level"] == "ERROR" {
			t.Errorf("unexpected line %v", r)
		}
	}
}

// A failed run's end line says so, its error masked.
func TestRunLogEndOfFailedRun(t *testing.T) {
	logs := newRecordLog()
	o := newOrch(t, llmtest.NewScript(llmtest.Fail(errors.New("dial https://x/?api_key="+leakySecret))), agent.Config{Logger: slog.New(logs)})
	if _, err := o.HandleMessage(context.Background(), msg("go")); err == nil {
		t.Fatal("no error")
	}
	end := linesAt(logs.records(), "INFO", "agent: run ended")
	if len(end) != 1 || end[0]["status"] != "error" || !strings.Contains(end[0]["err"], "api_key=***") || strings.Contains(end[0]["err"], leakySecret) {
		t.Errorf("run-end lines %v", end)
	}
}

// The line an AsyncObserver writes when it drops steps carries the
// step's tenant, conversation and run.
func TestAsyncObserverDropLineCarriesTheRun(t *testing.T) {
	logs := newRecordLog()
	release := make(chan struct{})
	a, err := agent.NewAsyncObserver(agent.ObserverFunc(func(context.Context, agent.Step) { <-release }),
		agent.AsyncObserverConfig{Buffer: 1, Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	s := agent.Step{Kind: agent.StepNote, RunID: "run_x", TenantID: "u1", ConversationID: "c1"}
	for range 3 { // one delivered (blocked), one queued, one dropped at least
		a.Observe(context.Background(), s)
	}
	close(release)
	if err := a.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	recs := logs.records()
	if a.Dropped() == 0 || len(recs) != 1 || recs[0]["tenant"] != "u1" || recs[0]["conversation"] != "c1" || recs[0]["run_id"] != "run_x" {
		t.Errorf("dropped %d, lines %v", a.Dropped(), recs)
	}
}
