package agent_test

import (
	"context"
	"strings"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

// Step.Retry is 1 for the first retry of a model call, whatever the
// defence: a context overflow answered by truncating tool results (the
// trim before it would not have shortened the request, so it was skipped)
// is still the call's first retry.
func TestObserverFirstOverflowRetryIsRetry1(t *testing.T) {
	big := tool.New("read_page", "Read a web page", func(ctx context.Context, in WeatherIn) (string, error) {
		return strings.Repeat("lorem ipsum dolor sit amet ", 4000), nil
	})
	overflowed := false
	s := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		last := req.Messages[len(req.Messages)-1]
		switch {
		case last.Role == llm.RoleUser:
			return llmtest.Calls(llmtest.Call("read_page", `{"city":"x"}`))
		case !overflowed:
			overflowed = true
			return llmtest.Fail(&llm.Error{Kind: llm.KindContextOverflow, Message: "maximum context length exceeded"})
		}
		return llmtest.Text("It is about lorem ipsum.")
	})
	var log stepLog
	o := newOrch(t, s, agent.Config{Tools: []tool.Tool{big}, Observer: &log})
	if _, err := o.HandleMessage(context.Background(), msg("Summarise the page")); err != nil {
		t.Fatal(err)
	}
	retries := log.of(agent.StepModelRetry)
	short := log.of(agent.StepContextShortened)
	if len(retries) != 1 || len(short) != 1 {
		t.Fatalf("retries %+v, shortened %+v", retries, short)
	}
	if r := retries[0]; r.Retry != 1 || r.ErrorKind != llm.KindContextOverflow {
		t.Fatalf("the first retry of call %d (defence %q) has Retry %d, kind %s; want Retry 1", r.Call, short[0].Text, r.Retry, r.ErrorKind)
	}
}
