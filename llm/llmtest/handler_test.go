package llmtest_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/valetkit/valet/llm/llmtest"
)

// mounted serves h under /fake/ beside another route, on a server the test
// starts itself, and returns the base URL a client would use.
func mounted(t *testing.T, h http.Handler) (base string, client *http.Client) {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("/fake/", http.StripPrefix("/fake", h))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "the app") })
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return ts.URL + "/fake/v1", ts.Client()
}

func chat(t *testing.T, client *http.Client, url, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

const hiBody = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Hi"}]}`

func TestHandlerMountedUnderAPrefix(t *testing.T) {
	model := llmtest.NewStrictScript(t, llmtest.Text("Hello from under /fake."), llmtest.Text("Hello again."), llmtest.Text("cut"))
	h := llmtest.NewHandler(model)
	base, client := mounted(t, h)

	// A scripted reply.
	resp := chat(t, client, base+"/chat/completions", hiBody)
	var out struct {
		Object  string
		Choices []struct {
			Message      struct{ Role, Content string }
			FinishReason string `json:"finish_reason"`
		}
		Error struct{ Code string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || out.Object != "chat.completion" || len(out.Choices) != 1 ||
		out.Choices[0].Message.Content != "Hello from under /fake." || out.Choices[0].FinishReason != "stop" ||
		!strings.HasPrefix(resp.Header.Get("x-request-id"), "req_llmtest") {
		t.Fatalf("%d %+v", resp.StatusCode, out)
	}

	// An injected fault, then the request after it is served.
	h.Inject(llmtest.RateLimited(3 * time.Second))
	if h.PendingFaults() != 1 {
		t.Fatalf("PendingFaults = %d", h.PendingFaults())
	}
	resp = chat(t, client, base+"/chat/completions", hiBody)
	out.Error.Code = ""
	_ = json.NewDecoder(resp.Body).Decode(&out)
	if resp.StatusCode != 429 || out.Error.Code != "rate_limit_exceeded" || resp.Header.Get("Retry-After") != "3" {
		t.Fatalf("fault: %d %q retry-after %q", resp.StatusCode, out.Error.Code, resp.Header.Get("Retry-After"))
	}
	resp = chat(t, client, base+"/chat/completions", hiBody)
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 200 || !strings.Contains(string(b), "Hello again.") {
		t.Fatalf("after the fault: %d %s", resp.StatusCode, b)
	}

	// A dropped stream: cut after two events, without [DONE].
	h.Inject(llmtest.DropStream(2))
	resp = chat(t, client, base+"/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"Hi"}]}`)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	events := 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "data: ") {
			if sc.Text() == "data: [DONE]" {
				t.Fatal("a dropped stream sent [DONE]")
			}
			events++
		}
	}
	if events != 2 || sc.Err() == nil {
		t.Fatalf("dropped stream: %d events, read error %v", events, sc.Err())
	}

	// Other paths under the prefix are OpenAI's 404; the rest of the app is untouched.
	resp = chat(t, client, base+"/moderations", hiBody)
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 404 || !strings.Contains(string(b), "Invalid URL (POST /v1/moderations)") {
		t.Fatalf("unknown path: %d %s", resp.StatusCode, b)
	}
	app, err := client.Get(strings.TrimSuffix(base, "/fake/v1") + "/other")
	if err != nil {
		t.Fatal(err)
	}
	defer app.Body.Close()
	if b, _ := io.ReadAll(app.Body); string(b) != "the app" {
		t.Fatalf("app route = %q", b)
	}

	// The handler recorded what it saw, with the path after the prefix.
	reqs := h.Requests()
	if len(reqs) != 5 {
		t.Fatalf("%d requests recorded", len(reqs))
	}
	for i, want := range []int{200, 429, 200, 200, 404} {
		if reqs[i].Status != want {
			t.Errorf("request %d: status %d, want %d", i, reqs[i].Status, want)
		}
	}
	if r := reqs[0]; r.Path != "/v1/chat/completions" || r.Request.Model != "gpt-4o-mini" || len(r.Request.Messages) != 1 {
		t.Errorf("first request = %+v", r)
	}
}

// A Server's handler can be mounted elsewhere too; both share the model,
// the faults and the recorded requests.
func TestServerHandlerIsShared(t *testing.T) {
	srv := newServer(t, llmtest.NewStrictScript(t, llmtest.Text("one"), llmtest.Text("two")), llmtest.WithAPIKey("sk-test"))
	base, client := mounted(t, srv.Handler())
	srv.Inject(llmtest.Unavailable(503))

	req := func(url string) int {
		r, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(hiBody))
		if err != nil {
			t.Fatal(err)
		}
		r.Header.Set("Authorization", "Bearer sk-test")
		resp, err := client.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := req(base + "/chat/completions"); got != 503 {
		t.Fatalf("mounted, first: %d, want the fault injected on the Server", got)
	}
	if got := req(base + "/chat/completions"); got != 200 {
		t.Fatalf("mounted, second: %d", got)
	}
	if got := req(srv.URL + "/chat/completions"); got != 200 {
		t.Fatalf("listener: %d", got)
	}
	if n := len(srv.Requests()); n != 3 {
		t.Fatalf("the Server recorded %d requests, want all 3", n)
	}
}

// Close ends the waits of a handler served by someone else's server.
func TestHandlerCloseEndsWaits(t *testing.T) {
	h := llmtest.NewHandler(llmtest.NewScript(llmtest.Text("late")), llmtest.WithLatency(time.Hour))
	base, client := mounted(t, h)
	errc := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, base+"/chat/completions", strings.NewReader(hiBody))
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	for len(h.Requests()) == 0 {
		time.Sleep(time.Millisecond)
	}
	h.Close()
	h.Close() // idempotent
	if err := <-errc; err == nil {
		t.Fatal("a request waiting in a closed handler was answered")
	}
	if st := h.Requests()[0].Status; st != llmtest.StatusClientClosedRequest {
		t.Errorf("status = %d, want %d", st, llmtest.StatusClientClosedRequest)
	}
}
