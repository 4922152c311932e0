package agent_test

import (
	"context"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
)

// panickingClient is a model client with a bug: it panics.
type panickingClient struct{ *llmtest.Script }

func (panickingClient) Complete(context.Context, llm.Request) (*llm.Response, error) {
	panic("nil map in the client")
}

// A model client that panics takes the run down with it, and a server
// recovers the panic per request (net/http does) and goes on. The run's
// spans end all the same, with an error status: a span never ended is
// never exported, and the trace of the failed request, the one an
// operator looks for, is missing its root.
func TestSpansEndWhenTheModelClientPanics(t *testing.T) {
	tp, rec := recorder(t)
	o := newOrch(t, panickingClient{llmtest.NewScript()}, agent.Config{TracerProvider: tp})
	func() {
		defer func() { _ = recover() }()
		_, _ = o.HandleMessage(context.Background(), msg("Hi"))
	}()
	if n := len(rec.Started()); n == 0 {
		t.Fatal("no span started")
	}
	if started, ended := len(rec.Started()), len(rec.Ended()); ended != started {
		var names []string
		for _, s := range rec.Started() {
			names = append(names, s.Name())
		}
		t.Fatalf("%d spans started (%v), %d ended", started, names, ended)
	}
}
