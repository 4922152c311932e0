package transcript_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/transcript"
	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/memory"
)

// hostile holds what could break one-object-per-line framing or a reader:
// line breaks of every kind, NUL, invalid UTF-8, a fake record.
const hostile = "a\nb\rc\vd\fe\u2028f\u2029g\x00h\xff\xfei\u0085j\"}\n{\"kind\":\"run_end\"}"

// Hostile text in any field of any step never breaks the framing: the
// transcript has one line per step, each a JSON object that reads back.
func TestTranscriptFramingSurvivesHostileText(t *testing.T) {
	var out syncBuffer
	obs := newObserver(t, transcript.Config{Writer: &out, FullRequests: true})
	call := llm.ToolCall{ID: hostile, Name: hostile, Arguments: json.RawMessage(hostile)}
	m := agent.Message{TenantID: hostile, ConversationID: hostile, Text: hostile, Source: hostile, TaskID: hostile}
	base := agent.Step{RunID: hostile, TenantID: hostile, ConversationID: hostile, Time: time.Unix(0, 0), Text: hostile, Err: errors.New(hostile)}
	msgs := []llm.Message{{Role: llm.Role(hostile), Content: hostile, ToolCalls: []llm.ToolCall{call}, ToolCallID: hostile, Name: hostile}}
	steps := []agent.Step{
		{Kind: agent.StepRunStart, Message: &m},
		{Kind: agent.StepModelRequest, Request: llm.Request{Messages: msgs, Tools: []llm.ToolSpec{{Name: hostile}}, Model: hostile, Purpose: llm.Purpose(hostile)}},
		{Kind: agent.StepModelResponse, Response: &llm.Response{Message: msgs[0], FinishReason: hostile, Model: hostile}},
		{Kind: agent.StepToolCall, ToolCall: call},
		{Kind: agent.StepToolResult, ToolCall: call, Record: agent.ToolCallRecord{ID: hostile, Name: hostile, ArgsSummary: hostile, Error: hostile, ResultStatus: hostile}},
		{Kind: agent.StepApprovalRaised, Approval: &approval.Request{ID: hostile, AgentName: hostile, ActionSummary: hostile, Details: map[string]any{hostile: hostile}, Options: []string{hostile}}},
		{Kind: agent.StepApprovalDecided, Decided: agent.Decided{ID: hostile, Action: approval.Action(hostile)}},
		{Kind: agent.StepRecall, Recalled: []memory.Item{{ID: hostile, Kind: hostile, Text: hostile}}},
		{Kind: agent.StepRunEnd, Result: &agent.Result{Response: hostile, Status: agent.Status(hostile), ToolCalls: []agent.ToolCallRecord{{Name: hostile}}}},
		{Kind: agent.StepKind(200)},
	}
	for i, s := range steps {
		k, seq := s.Kind, i+1
		s2 := base
		s2.Kind, s2.Seq = k, seq
		s2.Message, s2.Request, s2.Response, s2.ToolCall, s2.Record = s.Message, s.Request, s.Response, s.ToolCall, s.Record
		s2.Approval, s2.Decided, s2.Recalled, s2.Result = s.Approval, s.Decided, s.Recalled, s.Result
		obs.Observe(context.Background(), s2)
	}
	flush(t, obs)
	text := out.String()
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, 1<<20)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if !json.Valid([]byte(line)) {
			t.Errorf("line %d is not one JSON value: %q", n, line)
		}
		for _, bad := range []string{"\r", "\v", "\f", "\u2028", "\u2029", "\x00", "\u0085"} {
			if strings.Contains(line, bad) {
				t.Errorf("line %d holds %q raw: %q", n, bad, line)
			}
		}
	}
	if n != len(steps) {
		t.Fatalf("%d lines for %d steps:\n%s", n, len(steps), text)
	}
	recs, err := transcript.Read(strings.NewReader(text))
	if err != nil || len(recs) != len(steps) {
		t.Fatalf("Read: %d records, %v", len(recs), err)
	}
	for i, r := range recs {
		if r.Kind != steps[i].Kind || r.Seq != i+1 || r.Tenant != strings.ReplaceAll(hostile, "\xff\xfe", "\uFFFD\uFFFD") {
			t.Errorf("record %d: kind %v seq %d tenant %q", i, r.Kind, r.Seq, r.Tenant)
		}
	}
	if recs[len(recs)-1].Kind.String() != "step_200" {
		t.Errorf("an unknown kind reads back as %q", recs[len(recs)-1].Kind)
	}
}
