package agenthttp_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/agenthttp"
	"github.com/valetkit/valet/llm/llmtest"
)

// Passes: two approvals of one request sent at once (a double click, two
// tabs) run the action once; exactly one is answered 200.
func TestApprovalDecidedTwiceAtOnceRunsOnce(t *testing.T) {
	e := newEnv(t, llmtest.NewScript(llmtest.Calls(llmtest.Call("send_email", `{"to":"team@example.com","subject":"Plan"}`)),
		llmtest.Text("Sent."), llmtest.Text("Sent.")), agent.Config{}, agenthttp.Config{})
	req := draftEmail(t, e, "ann")
	body := fmt.Sprintf(`{"action":"approve","fingerprint":%q}`, req.Fingerprint)
	const n = 4
	var wg sync.WaitGroup
	statuses := make([]int, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i] = decide(e, "ann", req.ID, body).status
		}()
	}
	wg.Wait()
	ok := 0
	for _, s := range statuses {
		if s == http.StatusOK {
			ok++
		}
	}
	if sent := e.outbox.list(); len(sent) != 1 || ok != 1 {
		t.Fatalf("statuses %v; sent %d emails; want one 200 and one email", statuses, len(sent))
	}
}
