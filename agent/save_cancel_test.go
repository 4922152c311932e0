package agent_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/memory"
	"github.com/valetkit/valet/tool"
)

// cancelOnAppend cancels the caller's ctx as Append starts: the client
// disconnects (HTTP request ctx) while the turn is being written, which on
// PostgreSQL takes a round trip or more.
type cancelOnAppend struct {
	memory.Provider
	cancel context.CancelFunc
}

func (c *cancelOnAppend) Append(ctx context.Context, tenant, conv string, msgs ...llm.Message) error {
	c.cancel()
	return c.Provider.Append(ctx, tenant, conv, msgs...)
}

// run.save detaches from the caller's ctx only when that ctx has already
// ended when the save starts. A cancellation that lands during the Append
// aborts it: the tools ran (the mail went out), the user may even have the
// answer, but the turn is not in the history, so the next message's model
// does not know the mail was sent. The completed turn must be saved
// whatever happens to the caller's ctx after the run is done.
func TestCancelDuringSaveLosesCompletedTurn(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inner := newMem(t, memory.Config{})
	mem := &cancelOnAppend{Provider: inner, cancel: cancel}
	var sent atomic.Int32
	send := tool.New("send_mail", "Send a mail", func(ctx context.Context, in struct {
		To string `json:"to"`
	}) (string, error) {
		sent.Add(1)
		return "sent to " + in.To, nil
	})
	s := llmtest.NewStrictScript(t,
		llmtest.Calls(llmtest.Call("send_mail", `{"to":"bob@example.com"}`)),
		llmtest.Text("Sent to Bob."),
	)
	o := newOrch(t, s, agent.Config{Memory: mem, Tools: []tool.Tool{send}})
	res, err := o.HandleMessage(ctx, msg("Mail Bob"))
	if sent.Load() != 1 {
		t.Fatalf("the tool ran %d times", sent.Load())
	}
	h, herr := inner.History(context.Background(), "u1", "c1", 0)
	if herr != nil {
		t.Fatal(herr)
	}
	if len(h) != 4 {
		t.Fatalf("the mail was sent but the history holds %d messages (want the 4 of the turn); HandleMessage: status %s, err %v (ErrHistoryNotSaved: %v)",
			len(h), res.Status, err, errors.Is(err, agent.ErrHistoryNotSaved))
	}
}
