package agent_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/valetkit/valet/agent"
)

// Tool results and failures are text: a file a filesystem tool read (an
// MCP filesystem server's read_file), an API's JSON answer, an HTTP
// tool's dump of the request it sent. The transcript, the spans' content
// and the logs mask them with RedactText. Secrets in the common shapes of
// such text are masked there as they are in arguments: RedactArguments
// masks {"name":"Authorization","value":...}, so RedactText of the same
// JSON must not show it.
func TestRedactTextMasksSecretsInStructuredText(t *testing.T) {
	const secret = "hunter2zq"
	basic := "Basic YW5uOmh1bnRlcjJ6cQ==" // ann:hunter2zq
	for name, text := range map[string]string{
		"HAR headers (JSON)": `{"request":{"headers":[{"name":"Authorization","value":"` + basic + `"}]}}`,
		"name/value API key": `{"headers":[{"name":"X-Api-Key","value":"hunter2zq"}]}`,
		"Maven settings.xml": "<server>\n  <id>repo</id>\n  <username>ann</username>\n  <password>hunter2zq</password>\n</server>",
		".NET web.config":    `<appSettings><add key="ApiKey" value="hunter2zq" /></appSettings>`,
	} {
		got := agent.RedactText(text)
		if strings.Contains(got, secret) || strings.Contains(got, "YW5uOmh1bnRlcjJ6cQ") {
			t.Errorf("%s: RedactText leaves the secret:\n%s", name, got)
		}
	}
	// The same header as a tool argument is masked: the two disagree.
	args := agent.RedactArguments(json.RawMessage(`{"headers":[{"name":"Authorization","value":"` + basic + `"}]}`))
	if strings.Contains(args, "YW5uOmh1bnRlcjJ6cQ") {
		t.Fatalf("RedactArguments: %s", args)
	}
}
