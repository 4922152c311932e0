package agent_test

import (
	"context"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

// The doom-loop detector compares calls by their arguments as JSON values
// (canonical JSON): the same city written with a unicode escape, and the
// same number written as 2, 2.0 and 2e0, is the same call. A model that
// varies only the spelling of its arguments is still going round in
// circles and must get the note.
func TestDoomLoopSameValueSpelledDifferently(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		args [3]string
	}{
		{"numbers", [3]string{`{"city":"Paris","days":2}`, `{"city":"Paris","days":2.0}`, `{"city":"Paris","days":2e0}`}},
		{"unicode escapes", [3]string{`{"city":"Paris","days":2}`, `{"city":"\u0050aris","days":2}`, `{"city":"P\u0061ris","days":2}`}},
		{"escaped slash", [3]string{`{"city":"Paris/Nord","days":2}`, `{"city":"Paris\/Nord","days":2}`, `{"city":"Paris\u002fNord","days":2}`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := llmtest.NewStrictScript(t,
				llmtest.Calls(llmtest.Call("get_weather", tc.args[0])),
				llmtest.Calls(llmtest.Call("get_weather", tc.args[1])),
				llmtest.Calls(llmtest.Call("get_weather", tc.args[2])),
				llmtest.Text("Sunny."),
			)
			o := newOrch(t, s, agent.Config{Tools: []tool.Tool{weatherTool()}})
			if _, err := o.HandleMessage(ctx, msg("Weather in Paris?")); err != nil {
				t.Fatal(err)
			}
			reqs := s.Requests()
			if n := notesWith(reqs[3].Messages, "same arguments 3 times"); n != 1 {
				t.Fatalf("the same call spelled three ways got %d doom-loop notes, want 1 (args %q)", n, tc.args)
			}
		})
	}
}

// A model alternating two calls A, B, A, B, A, B repeats each of them
// three times within the last 10 calls: the detector notes it.
func TestDoomLoopAlternatingCallsNoted(t *testing.T) {
	ctx := context.Background()
	a, b := `{"city":"Paris"}`, `{"city":"Oslo"}`
	s := llmtest.NewStrictScript(t,
		llmtest.Calls(llmtest.Call("get_weather", a)),
		llmtest.Calls(llmtest.Call("get_weather", b)),
		llmtest.Calls(llmtest.Call("get_weather", a)),
		llmtest.Calls(llmtest.Call("get_weather", b)),
		llmtest.Calls(llmtest.Call("get_weather", a)),
		llmtest.Text("Done."),
	)
	o := newOrch(t, s, agent.Config{Tools: []tool.Tool{weatherTool()}})
	if _, err := o.HandleMessage(ctx, msg("Weather?")); err != nil {
		t.Fatal(err)
	}
	if n := notesWith(s.Requests()[5].Messages, "same arguments 3 times"); n != 1 {
		t.Fatalf("A,B,A,B,A: %d notes in the 6th request, want 1", n)
	}
}
