package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestEvaluate(t *testing.T) {
	tests := []struct {
		expr string
		want float64
	}{
		{"42", 42},
		{"1.5", 1.5},
		{".5 + 1", 1.5},
		{"1 + 2 * 3", 7},
		{"(1 + 2) * 3", 9},
		{"10 - 4 - 3", 3}, // left-associative
		{"100 / 10 / 5", 2},
		{"2 * 3 + 4 * 5", 26},
		{"(3 * 120 + 45) / 2", 202.5},
		{"-3 + 5", 2},
		{"-(2 + 3) * 2", -10},
		{"2 * -3", -6},
		{"--4", 4},
		{"((((7))))", 7},
		{"  8\t/ 4 ", 2},
		{"1 / 4", 0.25},
	}
	for _, tt := range tests {
		got, err := evaluate(tt.expr)
		if err != nil || got != tt.want {
			t.Errorf("evaluate(%q) = %v, %v; want %v", tt.expr, got, err, tt.want)
		}
	}
}

func TestEvaluateErrors(t *testing.T) {
	tests := []struct{ expr, want string }{
		{"1 / 0", "division by zero"},
		{"5 / (2 - 2)", "division by zero"},
		{"", "expression ends too early at position 1"},
		{"1 +", "expression ends too early"},
		{"(1 + 2", "missing )"},
		{"1 + 2)", `unexpected ")" at position 6`},
		{"2 ^ 3", `unexpected "^"`},
		{"3 × 4", `unexpected "×" at position 3`},
		{"1.2.3", `bad number "1.2.3"`},
		{"abc", `unexpected "a" at position 1`},
		{strings.Repeat("(", 200) + "1" + strings.Repeat(")", 200), "nested too deeply"},
		{"1" + strings.Repeat("0", 400) + " * 10", "a number is too large"},
		{"1" + strings.Repeat("0", 300) + " * 1" + strings.Repeat("0", 300), "the result is too large"},
	}
	for _, tt := range tests {
		_, err := evaluate(tt.expr)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("evaluate(%q) error = %v; want it to contain %q", tt.expr, err, tt.want)
		}
	}
	if _, err := evaluate("7 / 0"); !errors.Is(err, errDivisionByZero) {
		t.Errorf("7 / 0: %v is not errDivisionByZero", err)
	}
}

// execute runs one call through a registry, as the orchestrator does.
func execute(t *testing.T, name, args string) tool.Result {
	t.Helper()
	reg, err := tool.NewRegistry(tools()...)
	if err != nil {
		t.Fatal(err)
	}
	return reg.Execute(context.Background(), llm.ToolCall{ID: "call_1", Name: name, Arguments: json.RawMessage(args)}, 5*time.Second)
}

func TestToolValidation(t *testing.T) {
	tests := []struct {
		name, tool, args string
		want             []string // in the error the model reads
	}{
		{"days above 7", "get_weather", `{"city":"Rome","days":9}`, []string{"days: must be <= 7, got 9 (maximum)"}},
		{"days below 1", "get_weather", `{"city":"Rome","days":0}`, []string{"days", "minimum"}},
		{"city missing", "get_weather", `{"days":2}`, []string{"city: missing required field"}},
		{"city wrong type", "get_weather", `{"city":7}`, []string{"city", "type"}},
		{"query too short", "web_search", `{"query":"a"}`, []string{"query", "minLength"}},
		{"limit above 10", "web_search", `{"query":"rome","limit":50}`, []string{"limit", "maximum"}},
		{"unknown field", "calculator", `{"expr":"1+1"}`, []string{"expr: unknown field", "expression: missing required field"}},
		{"empty expression", "calculator", `{"expression":""}`, []string{"expression", "minLength"}},
		{"division by zero", "calculator", `{"expression":"1/0"}`, []string{`tool "calculator" failed: division by zero`}},
		{"unknown city", "get_weather", `{"city":"Atlantis"}`, []string{`no weather data for "Atlantis"`, "Paris"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := execute(t, tt.tool, tt.args)
			if !res.IsError {
				t.Fatalf("%s %s succeeded: %s", tt.tool, tt.args, res.Content)
			}
			for _, w := range tt.want {
				if !strings.Contains(res.Content, w) {
					t.Errorf("error %q does not contain %q", res.Content, w)
				}
			}
		})
	}
}

func TestTools(t *testing.T) {
	var f Forecast
	res := execute(t, "get_weather", `{"city":"  rome ","days":3}`)
	if res.IsError || json.Unmarshal([]byte(res.Content), &f) != nil {
		t.Fatalf("get_weather: %+v", res)
	}
	if f.City != "Rome" || len(f.Days) != 3 || f.Days[0].Day != "today" || f.Days[2].Day != "day 3" || f.Days[0].HighC == 0 {
		t.Errorf("forecast = %+v", f)
	}
	if again := execute(t, "get_weather", `{"city":"Rome","days":3}`); again.Content != res.Content {
		t.Errorf("the fake weather is not deterministic:\n%s\n%s", res.Content, again.Content)
	}
	if res := execute(t, "get_weather", `{"city":"Paris"}`); !strings.Contains(res.Content, `"day":"today"`) || strings.Contains(res.Content, "tomorrow") {
		t.Errorf("default days is not 1: %s", res.Content)
	}

	var s SearchResults
	res = execute(t, "web_search", `{"query":"trattoria near the Pantheon","limit":1}`)
	if res.IsError || json.Unmarshal([]byte(res.Content), &s) != nil || len(s.Results) != 1 || !strings.Contains(s.Results[0].Title, "Trattoria") {
		t.Errorf("web_search: %+v", res)
	}
	if res := execute(t, "web_search", `{"query":"quantum chromodynamics"}`); res.Content != `{"query":"quantum chromodynamics","results":[]}` {
		t.Errorf("no hits: %s", res.Content)
	}

	if res := execute(t, "calculator", `{"expression":"(3 * 120 + 45) / 2"}`); res.Content != `{"expression":"(3 * 120 + 45) / 2","result":202.5}` {
		t.Errorf("calculator: %+v", res)
	}
}

func TestToolsHonourCancellation(t *testing.T) {
	reg, err := tool.NewRegistry(tools()...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for name, args := range map[string]string{"get_weather": `{"city":"Rome"}`, "web_search": `{"query":"rome"}`} {
		res := reg.Execute(ctx, llm.ToolCall{Name: name, Arguments: json.RawMessage(args)}, 0)
		if !res.IsError || !errors.Is(res.Err, context.Canceled) {
			t.Errorf("cancelled %s: %+v", name, res)
		}
	}
}

func TestDemo(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), &out, options{Offline: true}); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	got := out.String()
	for _, want := range []string{
		"model: offline script",
		"time zone: Europe/Paris",
		"you> " + demoMessages[0],
		// two weather calls in one turn
		`→ get_weather {"city":"Paris","days":3}`,
		`→ get_weather {"city":"Rome","days":3}`,
		`✓ get_weather {"city":"Paris","days":3}`,
		`✓ get_weather {"city":"Rome","days":3}`,
		"bot> Here's the outlook:",
		"Paris: partly cloudy 19°C today, light rain 17°C tomorrow (70% rain)",
		"[completed · 2 turns · 2 tool calls ·",
		// the failed call and the recovery
		`✗ calculator {"expr":"(3 * 120 + 45) / 2"} failed`,
		"expression: missing required field",
		`✓ calculator {"expression":"(3 * 120 + 45) / 2"}`,
		"bot> Each of you pays €202.50: (3 * 120 + 45) / 2 = 202.5.",
		"Trattoria del Portico",
		"[completed · 3 turns · 3 tool calls (1 failed) ·",
		// the answer from history
		"bot> Going by the forecast I fetched earlier, tomorrow is best for a walk in Rome",
		"[completed · 1 turn · 0 tool calls ·",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Contains(got, "error") && !strings.Contains(got, "(1 failed)") {
		t.Errorf("unexpected error in output")
	}
	if t.Failed() {
		t.Log(got)
	}
}

// TestDemoRequests checks what the model was sent: the final answers are
// built from the tool results in the requests, and every request keeps
// tool calls and results paired.
func TestDemoRequests(t *testing.T) {
	model := demoModel()
	var out bytes.Buffer
	if err := run(context.Background(), &out, options{Model: model}); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	reqs := model.Requests()
	if len(reqs) != 6 { // 2 + 3 + 1 model calls
		t.Fatalf("%d model calls, want 6", len(reqs))
	}
	for i, r := range reqs {
		if err := llm.CheckPairing(r.Messages); err != nil {
			t.Errorf("request %d: %v", i, err)
		}
		if len(r.Tools) != 3 {
			t.Errorf("request %d offers %d tools", i, len(r.Tools))
		}
	}
	if sys := reqs[0].Messages[0].Content; !strings.Contains(sys, "Europe/Paris") || !strings.Contains(sys, "You are Valet") {
		t.Errorf("system prompt: %s", sys)
	}
	// The third call saw the calculator's validation error.
	_, results := currentTurn(reqs[3].Messages)
	if c, failed := lastResult(results, "calculator"); c == nil || !failed {
		t.Errorf("the model was not shown the calculator's error: %+v", results)
	}
}

func TestInteractive(t *testing.T) {
	in := strings.NewReader("what's the weather in Rome\n\ncalculate 7 / (2 - 2)\nwhat is 2 + 3 * 4\nsearch trattoria near the Pantheon\nweather in Tokyo for 9 days\nhello\nexit\nnever read\n")
	var out bytes.Buffer
	if err := run(context.Background(), &out, options{Interactive: true, Offline: true, In: in, EchoInput: true}); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	got := out.String()
	for _, want := range []string{
		"you> what's the weather in Rome\n",
		`→ get_weather {"city":"Rome","days":1}`,
		"bot> Rome: sunny 25°C today.",
		`✗ calculator {"expression":"7 / (2 - 2)"} failed`,
		"bot> The calculator tool failed: division by zero\n",
		"bot> 2 + 3 * 4 = 14",
		`→ web_search {"query":"trattoria near the Pantheon"}`,
		"Trattoria del Portico, by the Pantheon",
		"days: must be <= 7, got 9 (maximum)",
		"bot> I'm the offline demo model",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Contains(got, "never read") {
		t.Error("kept reading after exit")
	}
	if t.Failed() {
		t.Log(got)
	}
}

func TestInteractiveEOF(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), &out, options{Interactive: true, Offline: true, In: strings.NewReader("what is 1+1")})
	if err != nil || !strings.Contains(out.String(), "1+1 = 2") {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
}

func TestCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out bytes.Buffer
	err := run(ctx, &out, options{Offline: true})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("run with a cancelled ctx: %v", err)
	}
}

func TestModelFailure(t *testing.T) {
	model := llmtest.NewScript(llmtest.Fail(&llm.Error{Kind: llm.KindAuth, StatusCode: 401, Message: "invalid api key"}))
	var out bytes.Buffer
	err := run(context.Background(), &out, options{Model: model})
	if llm.KindOf(err) != llm.KindAuth || !strings.Contains(err.Error(), "check OPENAI_API_KEY") {
		t.Fatalf("err = %v", err)
	}
	if !strings.Contains(out.String(), "[error ·") {
		t.Errorf("no telemetry for the failed message:\n%s", out.String())
	}
}

// TestRealMode runs the demo the way it runs with OPENAI_API_KEY set: the
// OpenAI client, over HTTP, against valet's fake OpenAI-compatible server
// playing the demo script.
func TestRealMode(t *testing.T) {
	srv := llmtest.NewServer(demoModel(), llmtest.WithAPIKey("sk-test-secret"))
	defer srv.Close()
	t.Setenv("OPENAI_API_KEY", "sk-test-secret")
	t.Setenv("OPENAI_BASE_URL", srv.URL)
	t.Setenv("OPENAI_MODEL", "gpt-test")

	var out bytes.Buffer
	if err := run(context.Background(), &out, options{}); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	got := out.String()
	for _, want := range []string{
		"model: gpt-test at " + srv.URL,
		`✗ calculator {"expr":"(3 * 120 + 45) / 2"} failed`,
		"bot> Each of you pays €202.50",
		"tomorrow is best for a walk in Rome",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q\n%s", want, got)
		}
	}
	if strings.Contains(got, "sk-test-secret") {
		t.Error("the API key was printed")
	}

	// -offline ignores the key.
	out.Reset()
	if err := run(context.Background(), &out, options{Offline: true}); err != nil || !strings.Contains(out.String(), "model: offline script") {
		t.Errorf("-offline: %v\n%s", err, out.String())
	}
}

// TestStreamDroppedAndRetried cuts the first streamed answer after two
// chunks, as a flaky network does: the cut-off text is marked discarded,
// and the retried answer is printed whole, once.
func TestStreamDroppedAndRetried(t *testing.T) {
	answer := llmtest.Text("Rome is sunny tomorrow, good for a walk.")
	srv := llmtest.NewServer(llmtest.NewScript(answer, answer)) // the dropped call used the first
	defer srv.Close()
	srv.Inject(llmtest.DropStream(2))
	t.Setenv("OPENAI_API_KEY", "sk-test")
	t.Setenv("OPENAI_BASE_URL", srv.URL)
	model, err := chooseModel(io.Discard, options{})
	if err != nil {
		t.Fatal(err)
	}
	o, err := agent.NewOrchestrator(agent.Config{LLM: model, Loop: agent.LoopConfig{LLMRetryBaseDelay: time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := send(context.Background(), &out, o, agent.Message{TenantID: "t", Text: "walk tomorrow?"}); err != nil {
		t.Fatalf("send: %v\n%s", err, out.String())
	}
	got := out.String()
	if !strings.Contains(got, " [cut off; discarded]\n") || strings.Count(got, "Rome is sunny tomorrow, good for a walk.") != 1 {
		t.Fatalf("output:\n%s", got)
	}
}
