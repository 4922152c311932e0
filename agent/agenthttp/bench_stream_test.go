package agenthttp_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/agenthttp"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
)

// BenchmarkStream compares a run of 50 streamed words read straight from
// Orchestrator.Stream (the baseline) with the same run over HTTP as
// Server-Sent Events, so the ratio is what the handler adds: the JSON of
// each event, the writes and flushes, the loopback socket.
func BenchmarkStream(b *testing.B) {
	text := strings.TrimSpace(strings.Repeat("word ", 50))
	model := llmtest.NewScriptFunc(func(llm.Request) llmtest.Reply { return llmtest.Text(text) })
	o, err := agent.NewOrchestrator(agent.Config{LLM: model, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = o.Close(context.Background()) })

	b.Run("direct", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			for ev, err := range o.Stream(context.Background(), agent.Message{TenantID: "ann", ConversationID: "d" + strconv.Itoa(i), Text: "talk"}) {
				if ev.Type == agent.EventExecutionEnd && err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("sse", func(b *testing.B) {
		h, err := agenthttp.New(o, agenthttp.Config{Tenant: headerTenant, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		srv := httptest.NewServer(h)
		defer srv.Close()
		client := srv.Client()
		for i := 0; b.Loop(); i++ {
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/conversations/s"+strconv.Itoa(i)+"/messages", strings.NewReader(`{"text":"talk"}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Tenant", "ann")
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := io.Copy(io.Discard, resp.Body); err != nil || resp.StatusCode != http.StatusOK {
				b.Fatal(resp.StatusCode, err)
			}
			resp.Body.Close()
		}
	})
}
