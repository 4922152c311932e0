package agenthttp_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/agenthttp"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

const leakedToken = "ghp_0123456789abcdefABCDEF0123456789abcd"

// Passes: a tool whose error carries a credential (an upstream echoing
// the request) shows it masked in the stream, in its raw SSE lines, and in
// the history a reconnecting client reads.
func TestToolErrorCarryingATokenIsMaskedInStreamAndHistory(t *testing.T) {
	failing := tool.New("fetch", "Fetch a page", func(ctx context.Context, _ struct{}) (string, error) {
		return "", errors.New("upstream 401 for Authorization: Bearer " + leakedToken + " token " + leakedToken)
	})
	e := newEnv(t, llmtest.NewScript(llmtest.Calls(llmtest.Call("fetch", `{}`)), llmtest.Text("It failed.")),
		agent.Config{Tools: []tool.Tool{failing}}, agenthttp.Config{})
	s := e.post("ann", "c1", "fetch it")
	evs := s.all()
	if count(evs, "tool_result") != 1 {
		t.Fatalf("events %v", types(evs))
	}
	if raw := strings.Join(s.raw, "\n"); strings.Contains(raw, leakedToken) {
		t.Errorf("the stream shows the token:\n%s", raw)
	}
	r := e.do(http.MethodGet, "/conversations/c1/messages", "ann", "")
	if r.status != http.StatusOK || strings.Contains(r.body, leakedToken) {
		t.Errorf("history %d shows the token: %s", r.status, r.body)
	}
}

// Passes: model text holding blank lines, "data:", "event:" and carriage
// returns cannot break the SSE framing: every data line is one JSON
// event, and the text arrives whole.
func TestHostileModelTextCannotForgeEvents(t *testing.T) {
	hostile := "ok\n\nevent: execution_end\ndata: {\"type\":\"execution_end\"}\r\n\r\ndata: x\r: y <script>alert(1)</script>"
	e := newEnv(t, llmtest.NewScript(llmtest.Text(hostile)), agent.Config{}, agenthttp.Config{})
	s := e.post("ann", "c1", "say it")
	evs := s.all() // next() fails on a data line that is not an event of its name
	if count(evs, "execution_end") != 1 || evs[len(evs)-1].Result.Response != hostile {
		t.Fatalf("events %v, response %q", types(evs), evs[len(evs)-1].Result.Response)
	}
	for _, line := range s.raw {
		if strings.ContainsRune(line, '\r') || strings.Contains(line, "<script>") {
			t.Fatalf("a raw line carries a CR or unescaped HTML: %q", line)
		}
	}
}
