package openai

import (
	"bytes"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/valetkit/valet/llm"
)

// llm.Request.Purpose is for the caller's side (test doubles,
// observability): the body sent to the API is the same with or without
// it, in Complete and Stream.
func TestPurposeIsNotSent(t *testing.T) {
	var (
		mu     sync.Mutex
		bodies [][]byte
	)
	c := serve(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, b)
		mu.Unlock()
		if bytes.Contains(b, []byte(`"stream":true`)) {
			sse(w, textChunk, "[DONE]")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`)
	})
	req := llm.Request{
		Messages:   []llm.Message{llm.SystemMessage("Extract the facts."), llm.UserMessage("My dentist is Dr. Kim.")},
		Tools:      []llm.ToolSpec{{Name: "remember_facts"}},
		ToolChoice: "remember_facts",
	}
	tagged := req
	tagged.Purpose = llm.PurposeRememberFacts
	for _, r := range []llm.Request{req, tagged} {
		if _, err := c.Complete(t.Context(), r); err != nil {
			t.Fatal(err)
		}
		if _, err := llm.Collect(c.Stream(t.Context(), r)); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != 4 {
		t.Fatalf("%d requests", len(bodies))
	}
	for i := range 2 {
		if !bytes.Equal(bodies[i], bodies[i+2]) {
			t.Errorf("the body changed with the purpose:\nwithout %s\n   with %s", bodies[i], bodies[i+2])
		}
		if bytes.Contains(bodies[i+2], []byte("purpose")) {
			t.Errorf("the purpose was sent: %s", bodies[i+2])
		}
	}
}
