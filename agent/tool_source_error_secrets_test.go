package agent_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

type failingSource struct{ err error }

func (s failingSource) Tools(context.Context) ([]tool.Tool, error) { return nil, s.err }

type panickingSource struct{}

func (panickingSource) Tools(context.Context) ([]tool.Tool, error) {
	panic("dial postgres://ann:hunter2pw@db/app failed")
}

// A tool source that fails (a plugin store, an MCP server behind a
// connection string) may say why with a credential in the text. The WARN
// line the run writes for it masks secret spans like every other line of
// the run (the run-end line, a failed tool call's line).
func TestToolSourceFailureLineMasksSecrets(t *testing.T) {
	for name, src := range map[string]agent.ToolSource{
		"error": failingSource{errors.New("connecting to postgres://ann:hunter2pw@db/app: refused; Authorization: Bearer abcdef0123456789abcdef")},
		"panic": panickingSource{},
	} {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
			o := newOrch(t, llmtest.NewScript(llmtest.Reply{Text: "Hi."}), agent.Config{
				Logger:      log,
				ToolSources: []agent.ToolSource{src},
			})
			if _, err := o.HandleMessage(context.Background(), agent.Message{TenantID: "acme", ConversationID: "c1", Text: "Hi"}); err != nil {
				t.Fatal(err)
			}
			out := buf.String()
			if !strings.Contains(out, "tool source") {
				t.Fatalf("no WARN line about the source:\n%s", out)
			}
			for _, secret := range []string{"hunter2pw", "abcdef0123456789abcdef"} {
				if strings.Contains(out, secret) {
					t.Errorf("the log holds %q:\n%s", secret, out)
				}
			}
		})
	}
}
