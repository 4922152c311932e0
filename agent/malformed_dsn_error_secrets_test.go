package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/url"
	"strings"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/transcript"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

type QueryIn struct {
	SQL string `json:"sql" jsonschema:"description=Query"`
}

// A generated database password often holds '/', '?' or '#'. Put in a
// connection URL without percent-encoding, it makes url.Parse fail with
// an error that quotes the whole URL, password included:
//
//	parse "postgres://ann:Zx9/kq+Lm2Qw@db:5432/app": invalid port ":Zx9" after host
//
// A tool that reads such a DSN from its credentials and returns that
// error must not put the password in front of the model, in the
// ToolCallRecord, in a span, in a log line or in the transcript.
func TestPasswordInAMalformedURLErrorIsMasked(t *testing.T) {
	const password = "Zx9/kq+Lm2Qw"
	dsn := "postgres://ann:" + password + "@db:5432/app"
	query := tool.New("query", "Runs SQL", func(ctx context.Context, in QueryIn) (string, error) {
		_, err := url.Parse(dsn)
		return "", err
	})
	tp, rec := recorder(t)
	var logs, tx bytes.Buffer
	obs, err := transcript.New(transcript.Config{Writer: &tx})
	if err != nil {
		t.Fatal(err)
	}
	s := llmtest.NewScript(
		llmtest.Calls(llm.ToolCall{ID: "c1", Name: "query", Arguments: []byte(`{"sql":"select 1"}`)}),
		llmtest.Text("The database is unreachable."),
	)
	o := newOrch(t, s, agent.Config{
		Tools: []tool.Tool{query}, TracerProvider: tp, Observer: obs,
		Telemetry: agent.TelemetryOptions{CaptureContent: true},
		Logger:    slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	res, err := o.HandleMessage(context.Background(), msg("How many users?"))
	if err != nil {
		t.Fatal(err)
	}
	if err := obs.Close(); err != nil {
		t.Fatal(err)
	}

	where := map[string]string{"log": logs.String(), "transcript": tx.String()}
	for _, c := range res.ToolCalls {
		where["ToolCallRecord.Error"] += c.Error
	}
	for _, r := range s.Requests() {
		b, _ := json.Marshal(r.Messages)
		where["model request"] += string(b)
	}
	for _, sp := range rec.Ended() {
		where["spans"] += sp.Name() + " " + sp.Status().Description + "\n"
		for _, kv := range sp.Attributes() {
			where["spans"] += string(kv.Key) + "=" + kv.Value.Emit() + "\n"
		}
	}
	if !strings.Contains(where["ToolCallRecord.Error"], "invalid port") {
		t.Fatalf("the tool did not fail as expected: %q", where["ToolCallRecord.Error"])
	}
	for _, k := range []string{"ToolCallRecord.Error", "model request", "spans", "log", "transcript"} {
		if strings.Contains(where[k], "kq+Lm2Qw") {
			t.Errorf("%s holds the password:\n%s", k, where[k])
		}
	}
}
