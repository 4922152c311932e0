package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/credentials"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

// TestMain runs the tests, checking that no goroutine outlives them, or,
// in the child process of TestFileRemembers, the program itself.
func TestMain(m *testing.M) {
	if os.Getenv(envRunMain) == "1" {
		main()
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

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
	reg, err := tool.NewRegistry(tools(nil)...)
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
	reg, err := tool.NewRegistry(tools(nil)...)
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
		// the calendar before and after the host connects Google
		"you> What's on my calendar today?\n  → calendar_today {}\n  ✓ calendar_today {}",
		"bot> I can't see your calendar yet: you haven't connected a Google account. To connect it, type /connect google <token>",
		"you> /connect google ********\nconnected google\n",
		"bot> 3 meetings today:\n     - 10:00–10:30 Team stand-up",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Contains(got, demoToken) {
		t.Error("the demo printed the token")
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
	// The fact extractions run in the background, after each answer, so
	// their calls interleave with the loop's: set them apart.
	var reqs, extractions []llm.Request
	for _, r := range model.Requests() {
		if r.ToolChoice == agent.RememberToolName {
			extractions = append(extractions, r)
		} else {
			reqs = append(reqs, r)
		}
	}
	if len(reqs) != 10 { // 2 + 3 + 1 + 2 + 2 model calls
		t.Fatalf("%d model calls, want 10", len(reqs))
	}
	// run waited for them: one per answered message, shown the user's
	// message and the answer, never a tool result or the token.
	if len(extractions) != 5 {
		t.Errorf("%d fact extractions, want 5", len(extractions))
	}
	for i, r := range extractions {
		for _, m := range r.Messages {
			if m.Role == llm.RoleTool || len(m.ToolCalls) > 0 || strings.Contains(m.Content, demoToken) {
				t.Errorf("extraction %d was sent %+v", i, m)
			}
		}
	}
	for i, r := range reqs {
		if err := llm.CheckPairing(r.Messages); err != nil {
			t.Errorf("request %d: %v", i, err)
		}
		if len(r.Tools) != 4 {
			t.Errorf("request %d offers %d tools", i, len(r.Tools))
		}
		for _, m := range r.Messages {
			if strings.Contains(m.Content, demoToken) {
				t.Errorf("request %d shows the model the token: %q", i, m.Content)
			}
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
	// The model read "not connected" as an answer, not a failure.
	_, results = currentTurn(reqs[7].Messages)
	if c, failed := lastResult(results, "calendar_today"); c == nil || failed || !strings.Contains(c.Content, notConnected) {
		t.Errorf("calendar_today before /connect: %+v", results)
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

// TestRealModeAnthropic runs the demo the way it runs with
// ANTHROPIC_API_KEY set: the Anthropic client, over HTTP, against valet's
// fake Messages API playing the demo script, with prompt caching.
func TestRealModeAnthropic(t *testing.T) {
	srv := llmtest.NewAnthropicServer(demoModel(), llmtest.WithAPIKey("sk-ant-test-secret"))
	defer srv.Close()
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-test-secret")
	t.Setenv("ANTHROPIC_BASE_URL", srv.URL)
	t.Setenv("ANTHROPIC_MODEL", "claude-test")

	var out bytes.Buffer
	if err := run(context.Background(), &out, options{}); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	got := out.String()
	for _, want := range []string{
		"model: claude-test at " + srv.URL + " (ANTHROPIC_API_KEY is set)",
		`✗ calculator {"expr":"(3 * 120 + 45) / 2"} failed`,
		"bot> Each of you pays €202.50",
		"tomorrow is best for a walk in Rome",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q\n%s", want, got)
		}
	}
	if strings.Contains(got, "sk-ant-test-secret") {
		t.Error("the API key was printed")
	}
	if u := srv.Usage(); u.CacheReadTokens == 0 {
		t.Errorf("the demo's later calls read nothing from the prompt cache: %+v", u)
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

// calendarSpy is a calendar service that records the tokens it was called
// with.
type calendarSpy struct{ tokens []string }

func (c *calendarSpy) api(ctx context.Context, token string) ([]Meeting, error) {
	c.tokens = append(c.tokens, token) // the tool runs one call at a time here
	return fakeCalendar(ctx, token)
}

// callCalendar runs calendar_today for tenant with store as the
// orchestrator would.
func callCalendar(t *testing.T, store credentials.Store, tenant string, cal calendarAPI) tool.Result {
	t.Helper()
	reg, err := tool.NewRegistry(tools(cal)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx := tool.WithExecContext(context.Background(), tool.ExecContext{TenantID: tenant, Credentials: credentials.ForTenant(store, tenant)})
	return reg.Execute(ctx, llm.ToolCall{ID: "call_1", Name: "calendar_today", Arguments: json.RawMessage(`{}`)}, 5*time.Second)
}

func TestCalendarTool(t *testing.T) {
	ctx := context.Background()
	store := credentials.NewMemory()
	spy := &calendarSpy{}

	// Not connected: an answer for the model, not a failure.
	res := callCalendar(t, store, "alice", spy.api)
	if res.IsError || res.Content != `{"connected":false,"note":"`+notConnected+`"}` {
		t.Errorf("not connected: %+v", res)
	}
	if len(spy.tokens) != 0 {
		t.Errorf("the calendar was called without a credential: %d calls", len(spy.tokens))
	}

	// Another tenant's credential is not alice's.
	if err := store.Save(ctx, "bob", "google", "", map[string]string{"access_token": "bob-token"}); err != nil {
		t.Fatal(err)
	}
	if res := callCalendar(t, store, "alice", spy.api); res.IsError || !strings.Contains(res.Content, `"connected":false`) {
		t.Errorf("alice sees bob's calendar: %+v", res)
	}

	// Connected: the calendar gets the token; the result does not hold it.
	if err := store.Save(ctx, "alice", "google", "", map[string]string{"access_token": "alice-token"}); err != nil {
		t.Fatal(err)
	}
	res = callCalendar(t, store, "alice", spy.api)
	var day CalendarDay
	if res.IsError || json.Unmarshal([]byte(res.Content), &day) != nil || !day.Connected || len(day.Meetings) != 3 {
		t.Fatalf("connected: %+v", res)
	}
	if len(spy.tokens) != 1 || spy.tokens[0] != "alice-token" {
		t.Errorf("the calendar got %d tokens, want alice's", len(spy.tokens))
	}
	if strings.Contains(res.Content, "alice-token") {
		t.Error("the tool result holds the token")
	}

	// A credential without an access token, and no store at all, fail.
	if err := store.Save(ctx, "carol", "google", "", map[string]string{"refresh_token": "x"}); err != nil {
		t.Fatal(err)
	}
	if res := callCalendar(t, store, "carol", spy.api); !res.IsError || !strings.Contains(res.Content, "no access token") {
		t.Errorf("no access token: %+v", res)
	}
	if res := execute(t, "calendar_today", `{}`); !res.IsError || !strings.Contains(res.Content, "no credential store") {
		t.Errorf("no store: %+v", res)
	}
}

// TestInteractiveConnect: the host, not the model, saves the token; the
// tool then reads it; nothing prints it.
func TestInteractiveConnect(t *testing.T) {
	const token = "tok-interactive-7c1f"
	in := strings.NewReader("what's on my calendar today\n" +
		"/connect google " + token + "\n" +
		"any meetings today?\n" +
		"/disconnect google\n" +
		"what's my schedule\n" +
		"/connect google\n" +
		"exit\n")
	spy := &calendarSpy{}
	var out, logs bytes.Buffer
	err := run(context.Background(), &out, options{Interactive: true, Offline: true, In: in, EchoInput: true, Calendar: spy.api, Logs: &logs, Verbose: true})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	got := out.String()
	wants := []string{
		"you> what's on my calendar today\n  → calendar_today {}",
		"bot> I can't see your calendar yet: you haven't connected a Google account. To connect it, type /connect google <token>",
		"you> /connect google ********\nconnected google\n",
		"bot> 3 meetings today:\n     - 10:00–10:30 Team stand-up with Ana, Tom (video call)",
		"you> /disconnect google\ndisconnected google\n",
		"you> /connect google\ncommands: /connect SERVICE TOKEN",
	}
	last := 0
	for _, want := range wants {
		i := strings.Index(got[last:], want)
		if i < 0 {
			t.Errorf("output lacks %q after byte %d", want, last)
			continue
		}
		last += i + len(want)
	}
	if n := strings.Count(got, "haven't connected a Google account"); n != 2 {
		t.Errorf("%d \"not connected\" answers, want 2 (before /connect and after /disconnect)", n)
	}
	if len(spy.tokens) != 1 || spy.tokens[0] != token {
		t.Errorf("the calendar was called %d times, want once with the token", len(spy.tokens))
	}
	if strings.Contains(got, token) || strings.Contains(logs.String(), token) {
		t.Error("the token was printed or logged")
	}
	if !strings.Contains(logs.String(), "calendar_today") {
		t.Errorf("no debug logs:\n%s", logs.String())
	}
	if t.Failed() {
		t.Log(got)
	}
}

func TestRedactCommand(t *testing.T) {
	for in, want := range map[string]string{
		"/connect google secret":     "/connect google ********",
		"/connect  google  a b":      "/connect google ********",
		"/connect google":            "/connect google",
		"/disconnect google":         "/disconnect google",
		"what's on my calendar":      "what's on my calendar",
		"connect google to calendar": "connect google to calendar",
	} {
		if got := redactCommand(in); got != want {
			t.Errorf("redactCommand(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestPostgresNeedsKey: -postgres without a usable VALET_CREDENTIALS_KEY
// stops before connecting, says how to make a key, and never prints one.
func TestPostgresNeedsKey(t *testing.T) {
	short := base64.StdEncoding.EncodeToString([]byte("sixteen byte key"))
	for _, tt := range []struct{ name, key, want string }{
		{"unset", "", "needs a key in VALET_CREDENTIALS_KEY"},
		{"not base64", "not*base64!", "VALET_CREDENTIALS_KEY is not valid base64"},
		{"16 bytes", short, "VALET_CREDENTIALS_KEY decodes to 16 bytes, want 32"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(EnvCredentialsKey, tt.key)
			var out bytes.Buffer
			// Port 1: nothing listens, and nothing should try.
			err := run(context.Background(), &out, options{Offline: true, Postgres: "postgres://postgres@127.0.0.1:1/none?connect_timeout=1"})
			if err == nil {
				t.Fatalf("run succeeded:\n%s", out.String())
			}
			for _, want := range []string{tt.want, "openssl rand -base64 32"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
			if strings.Contains(err.Error(), "127.0.0.1") || strings.Contains(out.String(), "tools:") {
				t.Errorf("went on without a key: %v\n%s", err, out.String())
			}
			if tt.key != "" && (strings.Contains(err.Error(), tt.key) || strings.Contains(out.String(), tt.key)) {
				t.Error("the key was printed")
			}
		})
	}
}

// TestPostgresRestart: a credential saved with /connect by one run is read
// by the next run, with a fresh orchestrator and pool, as after a restart.
// It needs VALET_TEST_POSTGRES and works in a schema of its own.
func TestPostgresRestart(t *testing.T) {
	pgURL := os.Getenv("VALET_TEST_POSTGRES")
	if pgURL == "" {
		t.Skip("VALET_TEST_POSTGRES not set; set it to a PostgreSQL URL such as postgres://postgres@127.0.0.1:5432/test?sslmode=disable to run this test")
	}
	ctx := context.Background()
	db, err := pgxpool.New(ctx, pgURL)
	if err != nil {
		t.Fatalf("VALET_TEST_POSTGRES: %v", err)
	}
	t.Cleanup(db.Close)
	schema := "valet_assistant_" + strings.ToLower(rand.Text()[:10])
	if _, err := db.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatalf("creating schema: %v", err)
	}
	t.Cleanup(func() {
		if _, err := db.Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("dropping schema %s: %v", schema, err)
		}
	})
	// The runs see only the test's schema: -postgres takes any libpq URL.
	u, err := url.Parse(pgURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()

	key := make([]byte, credentials.KeySize)
	rand.Read(key)
	t.Setenv(EnvCredentialsKey, base64.StdEncoding.EncodeToString(key))
	const token = "tok-postgres-5be2"

	chatRun := func(input string, spy *calendarSpy) string {
		t.Helper()
		var out bytes.Buffer
		opts := options{Interactive: true, Offline: true, In: strings.NewReader(input), EchoInput: true, Postgres: u.String()}
		if spy != nil {
			opts.Calendar = spy.api
		}
		if err := run(ctx, &out, opts); err != nil {
			t.Fatalf("run: %v\n%s", err, out.String())
		}
		if strings.Contains(out.String(), token) || strings.Contains(out.String(), os.Getenv(EnvCredentialsKey)) {
			t.Errorf("a run printed the token or the key:\n%s", out.String())
		}
		return out.String()
	}

	// First run: not connected, then /connect.
	got := chatRun("what's on my calendar today\n/connect google "+token+"\n", nil)
	for _, want := range []string{"credentials: PostgreSQL", "haven't connected a Google account", "connected google\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("first run lacks %q:\n%s", want, got)
		}
	}

	// At rest the token is encrypted.
	var ciphertext []byte
	if err := db.QueryRow(ctx, "SELECT ciphertext FROM "+pgx.Identifier{schema, "credentials"}.Sanitize()+
		" WHERE tenant_id = 'demo-user' AND service = 'google'").Scan(&ciphertext); err != nil {
		t.Fatalf("reading the row: %v", err)
	}
	if bytes.Contains(ciphertext, []byte(token)) {
		t.Error("the token is stored in plaintext")
	}

	// Second run, as after a restart: the tool reads the saved token.
	spy := &calendarSpy{}
	got = chatRun("what's on my calendar today\n", spy)
	if !strings.Contains(got, "bot> 3 meetings today:") || len(spy.tokens) != 1 || spy.tokens[0] != token {
		t.Errorf("after the restart the calendar got %d tokens (want the saved one):\n%s", len(spy.tokens), got)
	}

	// A run with another key cannot read it, says which key, and
	// overwrites nothing.
	other := make([]byte, credentials.KeySize)
	rand.Read(other)
	t.Setenv(EnvCredentialsKey, base64.StdEncoding.EncodeToString(other))
	got = chatRun("/connect google tok-other\nwhat's on my calendar today\n", nil)
	if !strings.Contains(got, "error:") || !strings.Contains(got, `"k1"`) || !strings.Contains(got, "The calendar_today tool failed") {
		t.Errorf("with the wrong key:\n%s", got)
	}
	t.Setenv(EnvCredentialsKey, base64.StdEncoding.EncodeToString(key))
	spy = &calendarSpy{}
	chatRun("any meetings today?\n/disconnect google\n", spy)
	if len(spy.tokens) != 1 || spy.tokens[0] != token {
		t.Errorf("the wrong key overwrote the credential: the calendar got %d tokens", len(spy.tokens))
	}
	var n int
	if err := db.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{schema, "credentials"}.Sanitize()).Scan(&n); err != nil || n != 0 {
		t.Errorf("after /disconnect: %d rows, %v", n, err)
	}
}
