package transcript_test

import (
	"cmp"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/transcript"
	"github.com/valetkit/valet/llm/llmtest"
)

// In Dir mode each conversation has one file, named from a hash of its
// tenant and conversation ids — never the ids, even ones holding "../",
// "/" or NUL — appended to run after run.
func TestTranscriptDirOneFilePerConversation(t *testing.T) {
	dir := t.TempDir()
	obs := newObserver(t, transcript.Config{Dir: dir})
	o := newOrch(t, llmtest.NewScript(llmtest.Text("1"), llmtest.Text("2"), llmtest.Text("3"), llmtest.Text("4"), llmtest.Text("5")), obs, agent.Config{})
	convs := []agent.Message{
		{TenantID: "../../etc", ConversationID: "/passwd", Text: "hi"},
		{TenantID: "u/..", ConversationID: "c", Text: "hi"},
		{TenantID: "u", ConversationID: "../c", Text: "hi"},
		{TenantID: "u\x00", ConversationID: "c", Text: "hi"},
		{TenantID: "u", ConversationID: "\x00c", Text: "hi"}, // not the same file as the one before
		{TenantID: "u", Text: "hi"},                          // the default conversation
	}
	for _, m := range convs {
		if strings.Contains(m.TenantID+m.ConversationID, "\x00") { // the orchestrator refuses NUL: straight to the Observer
			for _, k := range []agent.StepKind{agent.StepRunStart, agent.StepRunEnd} {
				obs.Observe(context.Background(), agent.Step{Kind: k, RunID: "run_" + m.TenantID, TenantID: m.TenantID, ConversationID: m.ConversationID, Result: &agent.Result{}})
			}
			continue
		}
		if _, err := o.HandleMessage(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := o.HandleMessage(context.Background(), convs[0]); err != nil { // a second run of the first conversation
		t.Fatal(err)
	}
	flush(t, obs)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(convs) {
		t.Fatalf("%d files for %d conversations: %v", len(entries), len(convs), entries)
	}
	for i, m := range convs {
		name := transcript.FileName(m.TenantID, m.ConversationID)
		if len(name) != 32+len(".jsonl") || strings.ContainsAny(strings.TrimSuffix(name, ".jsonl"), "/\x00.") {
			t.Errorf("file name %q", name)
		}
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		recs, err := transcript.Read(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		runs := transcript.Summarize(recs)
		want := 1
		if i == 0 {
			want = 2
		}
		if len(runs) != want {
			t.Fatalf("%q: %d runs, want %d", name, len(runs), want)
		}
		for _, r := range runs {
			if r.Tenant != m.TenantID || r.Conversation != cmp.Or(m.ConversationID, agent.DefaultConversationID) || !r.Ended {
				t.Errorf("%q holds run %+v of another conversation", name, r)
			}
		}
	}
	if transcript.FileName("u", "") != transcript.FileName("u", agent.DefaultConversationID) {
		t.Error(`FileName("u", "") is not the default conversation's`)
	}
	// Nothing was written outside dir.
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "passwd")); err == nil {
		t.Error("a file was written outside the directory")
	}
}

// A directory that cannot be written: runs complete, the failure is
// logged once, lines are counted lost, nothing panics.
func TestTranscriptDirNotWritable(t *testing.T) {
	blocker := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	logs := newRecordLog()
	obs := newObserver(t, transcript.Config{Dir: filepath.Join(blocker, "transcripts"), Logger: slog.New(logs)}) // under a file: never a directory
	o := newOrch(t, llmtest.NewScript(llmtest.Text("one"), llmtest.Text("two")), obs, agent.Config{})
	for range 2 {
		res, err := o.HandleMessage(context.Background(), msg("hi"))
		if err != nil || res.Status != agent.StatusCompleted {
			t.Fatalf("res %+v, err %v", res, err)
		}
		flush(t, obs)
	}
	if n := len(logs.records()); n != 1 {
		t.Fatalf("%d log lines, want 1: %v", n, logs.records())
	}
	if r := logs.records()[0]; r["level"] != "ERROR" || !strings.Contains(r["error"], "not a directory") {
		t.Errorf("log line %v", r)
	}
	if obs.Failed() == 0 {
		t.Error("Failed() = 0, want the lines lost")
	}
}

// A directory removed while the Observer runs is made again.
func TestTranscriptDirRecreated(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t")
	obs := newObserver(t, transcript.Config{Dir: dir})
	o := newOrch(t, llmtest.NewScript(llmtest.Text("one"), llmtest.Text("two")), obs, agent.Config{})
	for range 2 {
		if _, err := o.HandleMessage(context.Background(), msg("hi")); err != nil {
			t.Fatal(err)
		}
		flush(t, obs)
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
	}
	if obs.Failed() != 0 {
		t.Errorf("Failed() = %d", obs.Failed())
	}
}
