package agenthttp_test

import (
	"bufio"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/agenthttp"
	"github.com/valetkit/valet/llm/llmtest"
)

// Mount the handler under /api behind the host's authentication, then
// stream a message as a browser would.
func Example_mount() {
	o, err := agent.NewOrchestrator(agent.Config{LLM: llmtest.NewScript(llmtest.Text("Hello there!"))})
	if err != nil {
		log.Fatal(err)
	}
	h, err := agenthttp.New(o, agenthttp.Config{
		Prefix: "/api",
		// The host's own authentication decides the tenant: here a header
		// its proxy sets; a session cookie or a JWT claim in a real host.
		Tenant: func(r *http.Request) (string, error) {
			if u := r.Header.Get("X-User"); u != "" {
				return u, nil
			}
			return "", errors.New("not logged in")
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/api/", h)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/api/conversations/c1/messages", strings.NewReader(`{"text":"hi"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-User", "ann")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if name, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
			fmt.Println(name)
		}
		if strings.Contains(sc.Text(), `"execution_end"`) {
			fmt.Println(strings.Contains(sc.Text(), `"response":"Hello there!"`))
		}
	}
	// Output:
	// message_start
	// message_chunk
	// message_chunk
	// message_end
	// execution_end
	// true
}
