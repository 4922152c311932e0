package agent_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

// Each call of HandleMessage is a run of its own, with its own RunID.
func TestRunIDNewPerRun(t *testing.T) {
	s := llmtest.NewScript(llmtest.Text("one"), llmtest.Text("two"))
	o := newOrch(t, s, agent.Config{})
	a, err := o.HandleMessage(context.Background(), msg("hi"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := o.HandleMessage(context.Background(), msg("again"))
	if err != nil {
		t.Fatal(err)
	}
	if a.RunID == "" || b.RunID == "" || a.RunID == b.RunID {
		t.Fatalf("run IDs %q and %q: want two different non-empty IDs", a.RunID, b.RunID)
	}
}

// A streamed run's final Result carries its RunID.
func TestRunIDOnStream(t *testing.T) {
	o := newOrch(t, llmtest.NewScript(llmtest.Text("hello")), agent.Config{})
	var res *agent.Result
	for ev, err := range o.Stream(context.Background(), msg("hi")) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == agent.EventExecutionEnd {
			res = ev.Result
		}
	}
	if res == nil || res.RunID == "" {
		t.Fatalf("final Result %+v: want a RunID", res)
	}
}

// A refused run and a failed run carry a RunID too.
func TestRunIDOnRefusedAndFailedRuns(t *testing.T) {
	o := newOrch(t, llmtest.NewScript(), agent.Config{Hooks: agent.Hooks{
		ShouldProcess: func(context.Context, agent.Message) (bool, string, error) { return false, "no", nil },
	}})
	res, err := o.HandleMessage(context.Background(), msg("hi"))
	if err != nil || res.Status != agent.StatusRefused || res.RunID == "" {
		t.Fatalf("refused run: %+v, %v; want StatusRefused with a RunID", res, err)
	}
	boom := errors.New("boom")
	o = newOrch(t, llmtest.NewScript(llmtest.Fail(boom)), agent.Config{})
	res, err = o.HandleMessage(context.Background(), msg("hi"))
	if err == nil || res == nil || res.Status != agent.StatusError || res.RunID == "" {
		t.Fatalf("failed run: %+v, %v; want StatusError with a RunID", res, err)
	}
	res, err = o.HandleMessage(context.Background(), agent.Message{Text: "no tenant"})
	if err == nil || res == nil || res.RunID == "" {
		t.Fatalf("invalid message: %+v, %v; want an error and a RunID", res, err)
	}
}

// recordLog keeps every record written through it (and its derived
// handlers), with the attributes added by With.
type recordLog struct {
	mu    *sync.Mutex
	recs  *[]map[string]string
	attrs []slog.Attr
}

func newRecordLog() recordLog {
	return recordLog{mu: new(sync.Mutex), recs: new([]map[string]string)}
}

func (h recordLog) Enabled(context.Context, slog.Level) bool { return true }

func (h recordLog) Handle(_ context.Context, r slog.Record) error {
	m := map[string]string{"msg": r.Message, "level": r.Level.String()}
	for _, a := range h.attrs {
		m[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool {
		m[a.Key] = a.Value.String()
		return true
	})
	h.mu.Lock()
	*h.recs = append(*h.recs, m)
	h.mu.Unlock()
	return nil
}

func (h recordLog) WithAttrs(as []slog.Attr) slog.Handler {
	h.attrs = append(append([]slog.Attr(nil), h.attrs...), as...)
	return h
}

func (h recordLog) WithGroup(string) slog.Handler { return h }

func (h recordLog) records() []map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]map[string]string(nil), *h.recs...)
}

// Every line a run logs (its own, a tool's through its ExecContext, one
// derived from it with With and WithGroup) carries the run's tenant,
// conversation and RunID.
func TestRunLogLinesCarryRunID(t *testing.T) {
	h := newRecordLog()
	logging := tool.New("note", "Writes a note", func(ctx context.Context, in struct {
		Text string `json:"text"`
	}) (string, error) {
		log := tool.ExecContextFrom(ctx).Logger
		log.WarnContext(ctx, "tool line")
		log.With("k", "v").WithGroup("g").InfoContext(ctx, "derived tool line")
		return "noted", nil
	})
	s := llmtest.NewScript(
		llmtest.Calls(llmtest.Call("note", `{"text":"x"}`)),
		llmtest.Text("done"),
	)
	o := newOrch(t, s, agent.Config{Logger: slog.New(h), Tools: []tool.Tool{logging}})
	res, err := o.HandleMessage(context.Background(), msg("take a note"))
	if err != nil {
		t.Fatal(err)
	}
	recs := h.records()
	want := map[string]bool{"tool line": false, "derived tool line": false}
	for _, m := range recs {
		if m["run_id"] != res.RunID || m["tenant"] != "u1" || m["conversation"] != "c1" {
			t.Errorf("log line %v: want run_id %q, tenant u1, conversation c1", m, res.RunID)
		}
		if _, ok := want[m["msg"]]; ok {
			want[m["msg"]] = true
		}
	}
	for line, seen := range want {
		if !seen {
			t.Errorf("no log line %q in %v", line, recs)
		}
	}
}
