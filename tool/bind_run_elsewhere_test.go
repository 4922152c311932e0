package tool

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valetkit/valet/llm"
)

// countedTool is a Tool not made by New that counts its calls: its Call decodes for itself.
type countedTool struct{ calls atomic.Int32 }

func (p *countedTool) Spec() llm.ToolSpec {
	return llm.ToolSpec{Name: "counted", Parameters: json.RawMessage(`{"type":"object"}`)}
}

func (p *countedTool) Call(_ context.Context, args json.RawMessage) (string, error) {
	p.calls.Add(1)
	return "counted got " + string(args), nil
}

// Bind validates and decodes; Run, on another goroutine, calls the
// function with what Bind decoded and never touches the arguments again.
func TestBindDecodesOnceRunsOnAnotherGoroutine(t *testing.T) {
	var calls atomic.Int32
	r := mustRegistry(t, weatherTool(&calls))
	args := []byte(`{"city":"Oslo","days":3}`)
	b := r.Bind(llm.ToolCall{ID: "c1", Name: "get_weather", Arguments: args})
	if !b.Decoded() {
		t.Fatal("a valid call of a tool made by New is not Decoded")
	}
	copy(args, `{"city":"Rome","days":9}`) // Run must not read the arguments again
	done := make(chan Result)
	go func() { done <- b.Run(context.Background(), time.Minute) }()
	res := <-done
	if res.IsError || res.Content != "Oslo: sunny for 3 days" || res.Attempts != 1 || calls.Load() != 1 {
		t.Fatalf("Run = %+v after %d calls", res, calls.Load())
	}
	if again := b.Run(context.Background(), 0); again.Content != res.Content || calls.Load() != 2 {
		t.Fatalf("second Run = %+v after %d calls", again, calls.Load())
	}
}

// A call that cannot run binds to the Result Execute gives it, and Run
// returns that without running anything.
func TestBindFailuresAreExecuteResults(t *testing.T) {
	var calls atomic.Int32
	p := &countedTool{}
	r := mustRegistry(t, weatherTool(&calls), p)
	for _, c := range []llm.ToolCall{
		{Name: "get_weather", Arguments: json.RawMessage(`{"city":"Oslo","days":99}`)},
		{Name: "get_weather", Arguments: json.RawMessage(`{"city":"Oslo","city":"Rome"}`)},
		{Name: "get_weather", Arguments: json.RawMessage(`[1,2]`)},
		{Name: "get_weather", Arguments: json.RawMessage("{\"city\":\"\x00\xff\"")},
		{Name: "get_wether", Arguments: json.RawMessage(`{}`)},
	} {
		b := r.Bind(c)
		if b.Decoded() {
			t.Errorf("%s %s: Decoded", c.Name, c.Arguments)
		}
		got, want := b.Run(context.Background(), 0), r.Execute(context.Background(), c, 0)
		if !got.IsError || got.Content != want.Content || got.Attempts != 0 || errors.Is(got.Err, ErrUnknownTool) != errors.Is(want.Err, ErrUnknownTool) {
			t.Errorf("%s %s: Run = %+v, Execute = %+v", c.Name, c.Arguments, got, want)
		}
	}
	if calls.Load() != 0 {
		t.Fatalf("the function ran %d times for calls that cannot run", calls.Load())
	}
	var ae *ArgumentError
	if res := r.Bind(llm.ToolCall{Name: "get_weather", Arguments: json.RawMessage(`{"days":2}`)}).Run(context.Background(), 0); !errors.As(res.Err, &ae) || !strings.HasSuffix(res.Content, fixArgumentsHint) {
		t.Fatalf("missing city: %+v", res)
	}
	if res := (Bound{}).Run(context.Background(), 0); !res.IsError || !errors.Is(res.Err, ErrUnknownTool) {
		t.Fatalf("zero Bound: %+v", res)
	}

	b := r.Bind(llm.ToolCall{Name: "counted", Arguments: json.RawMessage(`{"x":1}`)})
	if b.Decoded() {
		t.Fatal("a tool not made by New is Decoded")
	}
	if res := b.Run(context.Background(), 0); res.IsError || res.Content != `counted got {"x":1}` || p.calls.Load() != 1 {
		t.Fatalf("counted: %+v", res)
	}
}

// Run applies the tool's timeout and recovers a panic, as Execute does.
func TestBoundRunTimeoutAndPanic(t *testing.T) {
	type in struct {
		Mode string `json:"mode"`
	}
	slow := New("slow", "waits", func(ctx context.Context, v in) (string, error) {
		if v.Mode == "panic" {
			panic("boom")
		}
		<-ctx.Done()
		return "", ctx.Err()
	}, WithTimeout(20*time.Millisecond))
	r := mustRegistry(t, slow)
	res := r.Bind(llm.ToolCall{Name: "slow", Arguments: json.RawMessage(`{"mode":"wait"}`)}).Run(context.Background(), time.Hour)
	if !res.IsError || !errors.Is(res.Err, context.DeadlineExceeded) || res.Content != `tool "slow" timed out after 20ms` {
		t.Fatalf("timeout: %+v", res)
	}
	res = r.Bind(llm.ToolCall{Name: "slow", Arguments: json.RawMessage(`{"mode":"panic"}`)}).Run(context.Background(), 0)
	var pe *PanicError
	if !res.IsError || !errors.As(res.Err, &pe) || pe.Value != "boom" || res.Content != `tool "slow" failed: internal error` || res.Attempts != 1 {
		t.Fatalf("panic: %+v", res)
	}
}
