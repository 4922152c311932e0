package transcript_test

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/transcript"
	"github.com/valetkit/valet/clock/clocktest"
	"github.com/valetkit/valet/llm"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// syncBuffer is a Writer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// newObserver returns an Observer closed when the test ends.
func newObserver(t *testing.T, cfg transcript.Config) *transcript.Observer {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	obs, err := transcript.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = obs.Close() })
	return obs
}

// newOrch returns an orchestrator on model, observed by obs.
func newOrch(t *testing.T, model llm.Client, obs agent.Observer, cfg agent.Config) *agent.Orchestrator {
	t.Helper()
	cfg.LLM, cfg.Observer = model, obs
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = clocktest.New(time.Date(2026, 11, 20, 9, 30, 0, 0, time.UTC))
	}
	o, err := agent.NewOrchestrator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func flush(t *testing.T, obs *transcript.Observer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := obs.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

func msg(text string) agent.Message {
	return agent.Message{TenantID: "u1", ConversationID: "c1", Text: text}
}
