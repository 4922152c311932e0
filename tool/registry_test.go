package tool

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valetkit/valet/llm"
)

func namedTool(name string) Tool {
	type none struct{}
	return New(name, "the "+name+" tool", func(context.Context, none) (string, error) { return name, nil })
}

func TestRegistryOrderAndLookup(t *testing.T) {
	r := mustRegistry(t, namedTool("web_search"), namedTool("calculator"))
	if err := r.Add(weatherTool(nil)); err != nil {
		t.Fatal(err)
	}
	want := []string{"web_search", "calculator", "get_weather"}
	if got := r.Names(); !slices.Equal(got, want) || r.Len() != 3 {
		t.Fatalf("Names = %v, Len = %d", got, r.Len())
	}
	specs := r.Specs()
	for i, s := range specs {
		if s.Name != want[i] {
			t.Errorf("Specs[%d] = %s", i, s.Name)
		}
	}
	if tl, ok := r.Get("calculator"); !ok || tl.Spec().Name != "calculator" {
		t.Error("Get(calculator)")
	}
	if _, ok := r.Get("nope"); ok {
		t.Error("Get(nope) found something")
	}
	// Specs handed out earlier do not change when tools are added.
	if err := r.Add(namedTool("later")); err != nil {
		t.Fatal(err)
	}
	if len(specs) != 3 || len(r.Specs()) != 4 {
		t.Errorf("old specs %d, new %d", len(specs), len(r.Specs()))
	}
	names := r.Names()
	names[0] = "changed"
	if r.Names()[0] != "web_search" {
		t.Error("Names shares its slice")
	}
}

func TestRegistrySpecsDoNotAllocate(t *testing.T) {
	r := mustRegistry(t, namedTool("a"), namedTool("b"))
	if n := testing.AllocsPerRun(100, func() { _ = r.Specs() }); n != 0 {
		t.Errorf("Specs allocates %v times", n)
	}
}

func TestRegistryRejects(t *testing.T) {
	if _, err := NewRegistry(namedTool("a"), namedTool("a")); !errors.Is(err, ErrDuplicateTool) {
		t.Errorf("duplicate: %v", err)
	}
	if _, err := NewRegistry(nil); !errors.Is(err, ErrInvalidTool) {
		t.Errorf("nil: %v", err)
	}
	if _, err := NewRegistry(plainTool{name: "bad name"}); !errors.Is(err, ErrInvalidTool) {
		t.Errorf("bad spec name: %v", err)
	}
	r := mustRegistry(t, namedTool("a"))
	if err := r.Add(namedTool("a")); !errors.Is(err, ErrDuplicateTool) || r.Len() != 1 {
		t.Errorf("Add duplicate: %v, Len %d", err, r.Len())
	}
}

func TestExecuteSuccess(t *testing.T) {
	r := mustRegistry(t, weatherTool(nil))
	res := r.Execute(context.Background(), llm.ToolCall{ID: "1", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Oslo","days":2}`)}, time.Second)
	if res.IsError || res.Err != nil || res.Content != "Oslo: sunny for 2 days" {
		t.Errorf("res = %+v", res)
	}
}

func TestExecuteUnknownTool(t *testing.T) {
	r := mustRegistry(t, namedTool("web_search"), namedTool("calculator"), weatherTool(nil))
	res := r.Execute(context.Background(), llm.ToolCall{Name: "get_wether", Arguments: json.RawMessage(`{}`)}, 0)
	const want = `unknown tool "get_wether". Available tools: get_weather, web_search, calculator`
	if !res.IsError || res.Content != want || !errors.Is(res.Err, ErrUnknownTool) {
		t.Errorf("res = %+v\nwant content %q", res, want)
	}
	var empty Registry
	res = empty.Execute(context.Background(), llm.ToolCall{Name: "x"}, 0)
	if !res.IsError || !strings.Contains(res.Content, "No tools are available") || !errors.Is(res.Err, ErrUnknownTool) {
		t.Errorf("empty registry: %+v", res)
	}
}

func TestExecuteInvalidArguments(t *testing.T) {
	var calls = 0
	r := mustRegistry(t, New("get_weather", "", func(ctx context.Context, in WeatherIn) (string, error) {
		calls++
		return "", nil
	}))
	res := r.Execute(context.Background(), llm.ToolCall{Name: "get_weather", Arguments: json.RawMessage(`{"days":10}`)}, time.Second)
	var ae *ArgumentError
	if !res.IsError || !errors.As(res.Err, &ae) || calls != 0 {
		t.Fatalf("res = %+v, calls %d", res, calls)
	}
	for _, s := range []string{"invalid arguments for get_weather", "city: missing required field (required)", "days: must be <= 7, got 10 (maximum)", "call the tool again"} {
		if !strings.Contains(res.Content, s) {
			t.Errorf("content %q lacks %q", res.Content, s)
		}
	}
}

func TestExecuteTimeout(t *testing.T) {
	type none struct{}
	slow := func(ctx context.Context, _ none) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	}
	r := mustRegistry(t,
		New("slow", "", slow),
		New("slow_own", "", slow, WithTimeout(5*time.Millisecond)),
	)
	res := r.Execute(context.Background(), llm.ToolCall{Name: "slow", Arguments: json.RawMessage(`{}`)}, 10*time.Millisecond)
	if !res.IsError || res.Content != `tool "slow" timed out after 10ms` || !errors.Is(res.Err, context.DeadlineExceeded) {
		t.Errorf("default timeout: %+v", res)
	}
	res = r.Execute(context.Background(), llm.ToolCall{Name: "slow_own", Arguments: json.RawMessage(`{}`)}, time.Hour)
	if !res.IsError || res.Content != `tool "slow_own" timed out after 5ms` || !errors.Is(res.Err, context.DeadlineExceeded) {
		t.Errorf("tool timeout: %+v", res)
	}
	// A cancelled caller is not a timeout.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res = r.Execute(ctx, llm.ToolCall{Name: "slow", Arguments: json.RawMessage(`{}`)}, time.Hour)
	if !res.IsError || strings.Contains(res.Content, "timed out") || !errors.Is(res.Err, context.Canceled) {
		t.Errorf("cancelled: %+v", res)
	}
}

func TestExecutePanic(t *testing.T) {
	type none struct{}
	r := mustRegistry(t,
		New("boom", "", func(context.Context, none) (string, error) { panic("kaboom") }),
		plainTool{name: "raw_boom", call: func(context.Context, json.RawMessage) (string, error) { panic(errors.New("raw")) }},
	)
	for _, name := range []string{"boom", "raw_boom"} {
		res := r.Execute(context.Background(), llm.ToolCall{Name: name, Arguments: json.RawMessage(`{}`)}, time.Second)
		var pe *PanicError
		if !res.IsError || res.Content != `tool "`+name+`" failed: internal error` || !errors.As(res.Err, &pe) {
			t.Fatalf("%s: %+v", name, res)
		}
		if pe.Tool != name || len(pe.Stack) == 0 || pe.Value == nil {
			t.Errorf("%s: PanicError = %+v", name, pe)
		}
	}
	// Direct calls of a New tool also recover.
	tl, _ := r.Get("boom")
	_, err := tl.Call(context.Background(), nil)
	var pe *PanicError
	if !errors.As(err, &pe) || pe.Value != "kaboom" || !strings.Contains(err.Error(), "kaboom") {
		t.Errorf("Call err = %v", err)
	}
}

func TestExecuteToolError(t *testing.T) {
	type none struct{}
	base := errors.New("upstream said no")
	r := mustRegistry(t, New("fails", "", func(context.Context, none) (string, error) { return "", base }))
	res := r.Execute(context.Background(), llm.ToolCall{Name: "fails", Arguments: json.RawMessage(`{}`)}, time.Second)
	if !res.IsError || res.Content != `tool "fails" failed: upstream said no` || !errors.Is(res.Err, base) {
		t.Errorf("res = %+v", res)
	}
}

func TestExecuteConcurrent(t *testing.T) {
	r := mustRegistry(t, weatherTool(nil))
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			if i%2 == 0 {
				_ = r.Add(namedTool("extra_" + string(rune('a'+i))))
			}
			res := r.Execute(context.Background(), llm.ToolCall{Name: "get_weather", Arguments: json.RawMessage(`{"city":"X"}`)}, time.Second)
			if res.IsError {
				t.Error(res.Content)
			}
			_ = r.Specs()
		})
	}
	wg.Wait()
	if r.Len() != 5 {
		t.Errorf("Len = %d", r.Len())
	}
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"a", "", 1}, {"kitten", "sitting", 3}, {"get_wether", "get_weather", 1}, {"héllo", "hello", 1}} {
		if got := editDistance(tc.a, tc.b); got != tc.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.d)
		}
	}
}

func TestExecuteCountsAttempts(t *testing.T) {
	type in struct {
		N int `json:"n" jsonschema:"minimum=1"`
	}
	fails := 2
	flaky := New("flaky", "", func(ctx context.Context, v in) (string, error) {
		if fails > 0 {
			fails--
			return "", Transient(errors.New("upstream 503"))
		}
		return "ok", nil
	}, WithRetries(3, time.Microsecond))
	broken := New("broken", "", func(ctx context.Context, v in) (string, error) {
		return "", Transient(errors.New("upstream 503"))
	}, WithRetries(1, time.Microsecond))
	reg, err := NewRegistry(flaky, broken)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, tool, args string
		attempts         int
		isErr            bool
	}{
		{"two transient failures then success", "flaky", `{"n":1}`, 3, false},
		{"a success at once", "flaky", `{"n":1}`, 1, false},
		{"retries exhausted", "broken", `{"n":1}`, 2, true},
		{"arguments rejected before the call", "flaky", `{"n":0}`, 0, true},
		{"unknown tool", "nope", `{}`, 0, true},
	}
	for _, tt := range tests {
		res := reg.Execute(context.Background(), llm.ToolCall{ID: "c", Name: tt.tool, Arguments: json.RawMessage(tt.args)}, 0)
		if res.Attempts != tt.attempts || res.IsError != tt.isErr {
			t.Errorf("%s: Attempts=%d IsError=%v (%s), want %d, %v", tt.name, res.Attempts, res.IsError, res.Content, tt.attempts, tt.isErr)
		}
	}
}
