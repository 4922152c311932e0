package agent_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/memory"
	"github.com/valetkit/valet/tool"
)

// noteIn returns the notes (system messages after the first) of msgs
// that contain sub.
func notesWith(msgs []llm.Message, sub string) int {
	n := 0
	for i, m := range msgs {
		if i > 0 && m.Role == llm.RoleSystem && strings.Contains(m.Content, sub) {
			n++
		}
	}
	return n
}

// The same call three times — its arguments' keys in another order, with
// other spacing — gets a note asking the model to reconsider in its next
// request; the note is never saved. Calls that differ (an array's order,
// a value) are not the same call.
func TestDoomLoopRepeatedCallNoted(t *testing.T) {
	ctx := context.Background()
	mem := newMem(t, memory.Config{})
	s := llmtest.NewStrictScript(t,
		llmtest.Calls(llmtest.Call("get_weather", `{"city":"Paris","days":2}`)),
		llmtest.Calls(llmtest.Call("get_weather", `{"days":2,"city":"Paris"}`)),
		llmtest.Calls(llmtest.Call("get_weather", "{ \"city\" :\n \"Paris\" , \"days\": 2 }")),
		llmtest.Text("Sunny in Paris."),
	)
	var steps []agent.Step
	o := newOrch(t, paired{t, s}, agent.Config{Memory: mem, Tools: []tool.Tool{weatherTool()},
		Observer: agent.ObserverFunc(func(_ context.Context, st agent.Step) {
			if st.Kind == agent.StepDoomLoop {
				steps = append(steps, st)
			}
		})})
	res, err := o.HandleMessage(ctx, msg("Weather in Paris?"))
	if err != nil || res.Response != "Sunny in Paris." {
		t.Fatalf("res = %+v, err = %v", res, err)
	}
	reqs := s.Requests()
	for i := range 3 {
		if n := notesWith(reqs[i].Messages, "same arguments"); n != 0 {
			t.Fatalf("request %d has a note already", i)
		}
	}
	if n := notesWith(reqs[3].Messages, `called "get_weather" with the same arguments 3 times`); n != 1 {
		t.Fatalf("request 4 has %d notes: %+v", n, reqs[3].Messages)
	}
	if len(steps) != 1 || steps[0].Count != 1 || !strings.Contains(steps[0].Text, "reconsider") {
		t.Fatalf("StepDoomLoop steps = %+v", steps)
	}
	h, err := mem.History(ctx, "u1", "c1", 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range h {
		if m.Role == llm.RoleSystem {
			t.Fatalf("a note was saved: %+v", m)
		}
	}

	// Different arguments are different calls.
	type listIn struct {
		Cities []string `json:"cities"`
	}
	list := tool.New("list_weather", "Weather of cities", func(_ context.Context, in listIn) (string, error) { return "ok", nil })
	s = llmtest.NewStrictScript(t,
		llmtest.Calls(llmtest.Call("list_weather", `{"cities":["Paris","Oslo"]}`)),
		llmtest.Calls(llmtest.Call("list_weather", `{"cities":["Oslo","Paris"]}`)),
		llmtest.Calls(llmtest.Call("list_weather", `{"cities":["Paris","Oslo"]}`)),
		llmtest.Calls(llmtest.Call("list_weather", `{"cities":["Paris","Rome"]}`)),
		llmtest.Text("Done."),
	)
	o = newOrch(t, s, agent.Config{Tools: []tool.Tool{list}})
	if _, err := o.HandleMessage(ctx, msg("Weather?")); err != nil {
		t.Fatal(err)
	}
	for i, r := range s.Requests() {
		if n := notesWith(r.Messages, "same arguments"); n != 0 {
			t.Fatalf("request %d has a note for calls that differ", i)
		}
	}
}

// A model that keeps repeating itself gets a note, then a stronger one,
// then the run stops with ErrDoomLoop: one last call without tools gives
// the partial answer, which is Result.Response and is saved; the notes
// are not.
func TestDoomLoopStopsWithPartialAnswer(t *testing.T) {
	ctx := context.Background()
	mem := newMem(t, memory.Config{})
	var runs atomic.Int32
	replies := make([]llmtest.Reply, 0, 10)
	for range 9 {
		replies = append(replies, llmtest.Calls(llmtest.Call("get_weather", `{"city":"Atlantis"}`)))
	}
	replies = append(replies, llmtest.Text("I could not find Atlantis's weather: the service keeps answering the same."))
	s := llmtest.NewStrictScript(t, replies...)
	o := newOrch(t, paired{t, s}, agent.Config{Memory: mem, Tools: []tool.Tool{countedWeather(&runs)}})
	res, err := o.HandleMessage(ctx, msg("Weather in Atlantis?"))
	if !errors.Is(err, agent.ErrDoomLoop) {
		t.Fatalf("err = %v, want ErrDoomLoop", err)
	}
	if res.Status != agent.StatusError || !strings.HasPrefix(res.Response, "I could not find Atlantis") || runs.Load() != 9 {
		t.Fatalf("res = %+v (tools ran %d times)", res, runs.Load())
	}
	reqs := s.Requests()
	if len(reqs) != 10 {
		t.Fatalf("%d model calls, want 10", len(reqs))
	}
	if notesWith(reqs[3].Messages, "Note: ") != 1 || notesWith(reqs[3].Messages, "Warning: ") != 0 {
		t.Fatalf("request 4: want the first note only")
	}
	if notesWith(reqs[6].Messages, "Warning: ") != 1 {
		t.Fatalf("request 7: want the stronger note")
	}
	last := reqs[9]
	if last.Purpose != llm.PurposeFinal || len(last.Tools) != 0 || notesWith(last.Messages, "being stopped") != 1 {
		t.Fatalf("last request: purpose %s, %d tools, messages %+v", last.Purpose, len(last.Tools), last.Messages[len(last.Messages)-1])
	}
	h, err := mem.History(ctx, "u1", "c1", 100)
	if err != nil {
		t.Fatal(err)
	}
	if err := llm.CheckPairing(h); err != nil {
		t.Fatal(err)
	}
	if h[len(h)-1].Content != res.Response {
		t.Fatalf("the partial answer was not saved last: %+v", h[len(h)-1])
	}
	for _, m := range h {
		if m.Role == llm.RoleSystem {
			t.Fatalf("a note was saved: %+v", m)
		}
	}
}

type flakyIn struct {
	N  int  `json:"n"`
	OK bool `json:"ok,omitempty"`
}

func flakyTool() tool.Tool {
	return tool.New("flaky", "Sometimes works", func(_ context.Context, in flakyIn) (string, error) {
		if !in.OK {
			return "", fmt.Errorf("attempt %d failed", in.N)
		}
		return "worked", nil
	})
}

// Five failing calls in a row get a note; a call that succeeds starts the
// count again.
func TestDoomLoopConsecutiveFailuresNoted(t *testing.T) {
	var replies []llmtest.Reply
	call := func(n int, ok bool) {
		replies = append(replies, llmtest.Calls(llmtest.Call("flaky", fmt.Sprintf(`{"n":%d,"ok":%v}`, n, ok))))
	}
	for n := 1; n <= 4; n++ {
		call(n, false)
	}
	call(5, true)
	for n := 6; n <= 10; n++ {
		call(n, false)
	}
	replies = append(replies, llmtest.Text("It keeps failing."))
	s := llmtest.NewStrictScript(t, replies...)
	o := newOrch(t, paired{t, s}, agent.Config{Tools: []tool.Tool{flakyTool()}, Loop: agent.LoopConfig{MaxTurns: 20}})
	res, err := o.HandleMessage(context.Background(), msg("Try it"))
	if err != nil || res.Response != "It keeps failing." {
		t.Fatalf("res = %+v, err = %v", res, err)
	}
	reqs := s.Requests()
	for i := range 10 {
		if n := notesWith(reqs[i].Messages, "tool calls failed"); n != 0 {
			t.Fatalf("request %d has a failure note (%d calls made)", i, i)
		}
	}
	if notesWith(reqs[10].Messages, "your last 5 tool calls failed") != 1 {
		t.Fatalf("request 11 has no failure note: %+v", reqs[10].Messages[len(reqs[10].Messages)-1])
	}
}

// The thresholds are configurable: zero takes the defaults, negative ones
// and DoomRepeats below 2 or above DoomWindow are refused, and NoDoomLoop
// turns the detector off.
func TestDoomLoopConfig(t *testing.T) {
	for _, lc := range []agent.LoopConfig{
		{DoomWindow: -1}, {DoomRepeats: -1}, {DoomFailures: -1}, {DoomMaxInterventions: -1},
		{DoomRepeats: 1}, {DoomWindow: 4, DoomRepeats: 5},
	} {
		if _, err := agent.NewOrchestrator(agent.Config{LLM: llmtest.NewScript(), Loop: lc}); !errors.Is(err, agent.ErrInvalidConfig) {
			t.Errorf("%+v: err = %v, want ErrInvalidConfig", lc, err)
		}
	}

	// Off: ten identical calls are just calls.
	replies := make([]llmtest.Reply, 0, 11)
	for range 10 {
		replies = append(replies, llmtest.Calls(llmtest.Call("get_weather", `{"city":"Oslo"}`)))
	}
	replies = append(replies, llmtest.Text("Rainy."))
	s := llmtest.NewStrictScript(t, replies...)
	o := newOrch(t, s, agent.Config{Tools: []tool.Tool{weatherTool()}, Loop: agent.LoopConfig{MaxTurns: 20, NoDoomLoop: true}})
	if res, err := o.HandleMessage(context.Background(), msg("Oslo?")); err != nil || res.Response != "Rainy." {
		t.Fatalf("res = %+v, err = %v", res, err)
	}

	// DoomMaxInterventions 1 and DoomRepeats 2: the second identical call
	// stops the run.
	s = llmtest.NewStrictScript(t,
		llmtest.Calls(llmtest.Call("get_weather", `{"city":"Oslo"}`)),
		llmtest.Calls(llmtest.Call("get_weather", `{"city":"Oslo"}`)),
		llmtest.Text("Rainy, I think."),
	)
	o = newOrch(t, s, agent.Config{Tools: []tool.Tool{weatherTool()}, Loop: agent.LoopConfig{DoomRepeats: 2, DoomMaxInterventions: 1}})
	res, err := o.HandleMessage(context.Background(), msg("Oslo?"))
	if !errors.Is(err, agent.ErrDoomLoop) || res.Response != "Rainy, I think." {
		t.Fatalf("res = %+v, err = %v", res, err)
	}
}

// Streamed, a stopped run shows its partial answer as its last message,
// then ends with ErrDoomLoop.
func TestDoomLoopStreamed(t *testing.T) {
	s := llmtest.NewStrictScript(t,
		llmtest.Calls(llmtest.Call("get_weather", `{"city":"Oslo"}`)),
		llmtest.Calls(llmtest.Call("get_weather", `{"city":"Oslo"}`)),
		llmtest.Text("Rainy, as far as I can tell."),
	)
	o := newOrch(t, s, agent.Config{Tools: []tool.Tool{weatherTool()}, Loop: agent.LoopConfig{DoomRepeats: 2, DoomMaxInterventions: 1}})
	var lastEnd string
	var res *agent.Result
	var streamErr error
	for ev, err := range o.Stream(context.Background(), msg("Oslo?")) {
		if err != nil {
			streamErr = err
		}
		switch ev.Type {
		case agent.EventMessageEnd:
			lastEnd = ev.Text
		case agent.EventExecutionEnd:
			res = ev.Result
		}
	}
	if !errors.Is(streamErr, agent.ErrDoomLoop) || res == nil || res.Response != lastEnd || lastEnd != "Rainy, as far as I can tell." {
		t.Fatalf("err %v, result %+v, last message %q", streamErr, res, lastEnd)
	}
}

// The detector allocates nothing in a run it does not intervene in: the
// benchmark workload (5 turns × 3 calls) costs as many allocations with it
// as without.
func TestDoomLoopDetectorAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts under the race detector are its own")
	}
	allocs := func(off bool) float64 {
		model := newBenchModel(benchTurns, benchCalls, "get_weather", "web_search", "calculator")
		o, err := agent.NewOrchestrator(agent.Config{Logger: benchLog, LLM: model, Tools: benchTools(), Loop: agent.LoopConfig{NoDoomLoop: off}})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		m := agent.Message{TenantID: "bench", ConversationID: "c", Text: benchText}
		return testing.AllocsPerRun(50, func() {
			res, err := o.HandleMessage(ctx, m)
			if err != nil || res.Turns != benchTurns+1 {
				t.Fatalf("res = %+v, err = %v", res, err)
			}
			_ = o.Forget(ctx, m.TenantID, m.ConversationID)
		})
	}
	off, on := allocs(true), allocs(false)
	if on > off {
		t.Fatalf("%v allocations per message with the detector, %v without", on, off)
	}
}

// Each intervention is an event on the run's span, saying whether it
// stopped the run.
func TestDoomLoopSpanEvents(t *testing.T) {
	tp, rec := recorder(t)
	s := llmtest.NewStrictScript(t,
		llmtest.Calls(llmtest.Call("get_weather", `{"city":"Oslo"}`)),
		llmtest.Calls(llmtest.Call("get_weather", `{"city":"Oslo"}`)), // intervention 1; the detector starts afresh
		llmtest.Calls(llmtest.Call("get_weather", `{"city":"Oslo"}`)),
		llmtest.Calls(llmtest.Call("get_weather", `{"city":"Oslo"}`)), // intervention 2: stopped
		llmtest.Text("Rainy."),
	)
	o := newOrch(t, s, agent.Config{Tools: []tool.Tool{weatherTool()}, TracerProvider: tp,
		Loop: agent.LoopConfig{DoomRepeats: 2, DoomMaxInterventions: 2, DoomWindow: 2}})
	if _, err := o.HandleMessage(context.Background(), msg("Oslo?")); !errors.Is(err, agent.ErrDoomLoop) {
		t.Fatalf("err = %v", err)
	}
	var stopped []bool
	for _, sp := range rec.Ended() {
		for _, ev := range sp.Events() {
			if ev.Name != "valet.doom_loop" {
				continue
			}
			for _, kv := range ev.Attributes {
				if kv.Key == "valet.doom_loop.stopped" {
					stopped = append(stopped, kv.Value.AsBool())
				}
			}
		}
	}
	if len(stopped) != 2 || stopped[0] || !stopped[1] {
		t.Fatalf("doom-loop span events (stopped): %v", stopped)
	}
}
