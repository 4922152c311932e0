package agent_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/transcript"
	"github.com/valetkit/valet/credentials"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

type NotifyIn struct {
	Text string `json:"text" jsonschema:"description=Message"`
}

type failingTransport struct{}

func (failingTransport) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, errors.New("connection refused")
}

// A Telegram bot token lives in the request path
// (https://api.telegram.org/bot<token>/sendMessage), and net/http quotes
// the URL in every error it returns. A tool that takes the token from
// Config.Credentials and fails to reach the API returns that error: the
// credential reaches the model's history, ToolCallRecord.Error, the WARN
// line, the transcript and the span, though the orchestrator handed that
// very value to the tool from the credential store.
func TestCredentialFromTheStoreInAToolErrorIsMasked(t *testing.T) {
	const token = "7741234567:AAGxk29dQpLr8sTn3vWyZ0bC5eFhJmKqUo4"
	store := credentials.NewMemory()
	if err := store.Save(context.Background(), "acme", "telegram", "", map[string]string{"bot_token": token}); err != nil {
		t.Fatal(err)
	}
	notify := tool.New("notify", "Sends a Telegram message", func(ctx context.Context, in NotifyIn) (string, error) {
		ec := tool.ExecContextFrom(ctx)
		sec, err := ec.Credentials.Get(ctx, ec.TenantID, "telegram", "")
		if err != nil {
			return "", err
		}
		var c struct {
			BotToken string `json:"bot_token"`
		}
		if err := sec.Decode(&c); err != nil {
			return "", err
		}
		hc := &http.Client{Transport: failingTransport{}}
		resp, err := hc.Post("https://api.telegram.org/bot"+c.BotToken+"/sendMessage", "text/plain", strings.NewReader(in.Text))
		if err != nil {
			return "", err
		}
		_ = resp.Body.Close()
		return "sent", nil
	})
	tp, rec := recorder(t)
	var logs, tx bytes.Buffer
	obs, err := transcript.New(transcript.Config{Writer: &tx})
	if err != nil {
		t.Fatal(err)
	}
	s := llmtest.NewScript(
		llmtest.Calls(llm.ToolCall{ID: "c1", Name: "notify", Arguments: []byte(`{"text":"build passed"}`)}),
		llmtest.Text("I could not send it."),
	)
	o := newOrch(t, s, agent.Config{
		Tools: []tool.Tool{notify}, Credentials: store, TracerProvider: tp, Observer: obs,
		Telemetry: agent.TelemetryOptions{CaptureContent: true},
		Logger:    slog.New(slog.NewTextHandler(&logs, nil)),
	})
	res, err := o.HandleMessage(context.Background(), agent.Message{TenantID: "acme", ConversationID: "c1", Text: "Tell the team"})
	if err != nil {
		t.Fatal(err)
	}
	_ = obs.Close()
	where := map[string]string{"log": logs.String(), "transcript": tx.String()}
	for _, c := range res.ToolCalls {
		where["ToolCallRecord.Error"] += c.Error
	}
	for _, sp := range rec.Ended() {
		for _, kv := range sp.Attributes() {
			where["spans"] += string(kv.Key) + "=" + kv.Value.Emit() + "\n"
		}
	}
	if !strings.Contains(where["ToolCallRecord.Error"], "connection refused") {
		t.Fatalf("the tool did not fail as expected: %q", where["ToolCallRecord.Error"])
	}
	for _, k := range []string{"ToolCallRecord.Error", "log", "transcript", "spans"} {
		if strings.Contains(where[k], "AAGxk29dQpLr8sTn3vWyZ0bC5eFhJmKqUo4") {
			t.Errorf("%s holds the bot token", k)
		}
	}
}
