package mcptool

import (
	"context"
	"errors"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/tool"
)

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

func connect(t *testing.T, srv Server, cfg Config) *Set {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quiet()
	}
	s, err := Connect(context.Background(), srv, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func registry(t *testing.T, s *Set) *tool.Registry {
	t.Helper()
	ts, err := s.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	reg, err := tool.NewRegistry(ts...)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

func run(reg *tool.Registry, name, args string) tool.Result {
	return reg.Execute(context.Background(), llm.ToolCall{ID: "c1", Name: name, Arguments: []byte(args)}, 0)
}

// The server's tools are offered under sanitised, prefixed names, with
// the server's schemas, and calls reach the server.
func TestConnectOffersServerTools(t *testing.T) {
	s := connect(t, helperServer("t"), Config{})
	reg := registry(t, s)
	names := reg.Names()
	long := names[slices.IndexFunc(names, func(n string) bool { return strings.HasPrefix(n, "t_very_long") })]
	want := []string{"t_echo", "t_add", "t_delete_all", "t_sleep", "t_flood", "t_picture", "t_read_file", long, "t_rugpull"}
	slices.Sort(want)
	slices.Sort(names)
	if !slices.Equal(names, want) {
		t.Fatalf("offered %v, want %v", names, want)
	}
	valid := regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	for _, n := range names {
		if !valid.MatchString(n) {
			t.Errorf("name %q does not match %s", n, valid)
		}
	}
	if res := run(reg, "t_echo", `{"text":"hi"}`); res.IsError || res.Content != "echo: hi" {
		t.Fatalf("echo: %+v", res)
	}
	if res := run(reg, "t_read_file", `{}`); res.Content != "dotted" {
		t.Fatalf("t_read_file ran %q; want the first of the two tools it could name (read.file)", res.Content)
	}
	if res := run(reg, long, `{}`); res.Content != "long" {
		t.Fatalf("%s: %+v", long, res)
	}
	echo, _ := reg.Get("t_echo")
	if got := string(echo.Spec().Parameters); !strings.Contains(got, `"minLength":1`) || echo.Spec().Description != "Echoes text" {
		t.Fatalf("echo spec %+v: want the server's description and schema", echo.Spec())
	}
	noArgs, _ := reg.Get("t_sleep")
	if got := string(noArgs.Spec().Parameters); got != `{"properties":{},"type":"object"}` {
		t.Fatalf("a schema without properties is sent as %s; want properties added", got)
	}
}

// Annotations give the risk: read-only low, not destructive medium,
// destructive or unannotated high.
func TestAnnotationsMapToRisk(t *testing.T) {
	reg := registry(t, connect(t, helperServer("t"), Config{}))
	for name, want := range map[string]tool.Risk{"t_echo": tool.RiskLow, "t_add": tool.RiskMedium, "t_delete_all": tool.RiskHigh, "t_sleep": tool.RiskHigh} {
		tl, _ := reg.Get(name)
		if got := tool.SettingsOf(tl).Risk; got != want {
			t.Errorf("%s: risk %s, want %s", name, got, want)
		}
	}
}

// A tool with a malformed schema, or one that would fetch a remote
// schema, is refused with a clear reason; so is the second of two tools
// whose names sanitise alike. The others work.
func TestMalformedSchemaRefusedOthersUsable(t *testing.T) {
	var logs strings.Builder
	s := connect(t, helperServer("t"), Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	refused := map[string]string{}
	for _, r := range s.Refused() {
		if !errors.Is(r.Err, ErrRefused) {
			t.Errorf("refusal of %q: %v does not wrap ErrRefused", r.Tool, r.Err)
		}
		refused[r.Tool] = r.Err.Error()
	}
	if len(refused) != 3 {
		t.Fatalf("refused %v; want broken, remote_ref and read_file", refused)
	}
	for tool, want := range map[string]string{"broken": "/properties/x/type' does not validate", "remote_ref": "remote schemas are not allowed", "read_file": `"read.file" and "read_file" would both be named "t_read_file"`} {
		if !strings.Contains(refused[tool], want) {
			t.Errorf("refusal of %s: %q does not say %q", tool, refused[tool], want)
		}
	}
	if n := strings.Count(logs.String(), "a tool of the server is refused"); n != 3 {
		t.Errorf("%d WARN lines for refused tools, want 3:\n%s", n, logs.String())
	}
	// Listing again does not warn again.
	s.dirty.Store(true)
	registry(t, s)
	if n := strings.Count(logs.String(), "a tool of the server is refused"); n != 3 {
		t.Errorf("%d WARN lines after a second listing, want still 3", n)
	}
	if res := run(registry(t, s), "t_echo", `{"text":"still here"}`); res.Content != "echo: still here" {
		t.Fatalf("echo after refusals: %+v", res)
	}
}

// Arguments are validated against the server's schema before the call:
// bad ones come back as an argument error naming each problem.
func TestArgumentsValidatedBeforeCall(t *testing.T) {
	reg := registry(t, connect(t, helperServer("t"), Config{}))
	res := run(reg, "t_echo", `{"text":"","extra":1}`)
	var ae *tool.ArgumentError
	if !res.IsError || !errors.As(res.Err, &ae) || res.Attempts != 0 {
		t.Fatalf("bad arguments: %+v; want an ArgumentError and no attempt", res)
	}
	rules := map[string]string{}
	for _, p := range ae.Problems {
		rules[p.Field] = p.Rule
	}
	if rules["text"] != "minLength" || rules[""] != "additionalProperties" {
		t.Fatalf("problems %+v: want text minLength and additionalProperties", ae.Problems)
	}
	if !strings.Contains(res.Content, "invalid arguments for t_echo") || !strings.Contains(res.Content, "Fix the arguments") {
		t.Fatalf("content %q", res.Content)
	}
	if res := run(reg, "t_add", `[1,2]`); !errors.As(res.Err, &ae) {
		t.Fatalf("array arguments: %+v", res)
	}
	if res := run(reg, "t_add", `{"a":1,`); !errors.As(res.Err, &ae) || ae.Problems[0].Rule != "json" {
		t.Fatalf("malformed JSON: %+v", res)
	}
}

// Results: structured content as JSON, isError as a tool failure whose
// text the model reads, images described, floods cut.
func TestResultsBecomeToolResults(t *testing.T) {
	reg := registry(t, connect(t, helperServer("t"), Config{MaxResultBytes: 1000}))
	if res := run(reg, "t_add", `{"a":1,"b":2}`); res.IsError || res.Content != `{"sum":3}` {
		t.Fatalf("structured: %+v", res)
	}
	res := run(reg, "t_delete_all", `{}`)
	if !res.IsError || !errors.Is(res.Err, ErrToolFailed) || res.Content != `tool "t_delete_all" failed: permission denied: nothing was deleted` {
		t.Fatalf("isError: %+v", res)
	}
	res = run(reg, "t_picture", `{}`)
	want := "here it is\n[image: image/png, 4096 bytes, not shown]\n[resource link: notes file:///notes.txt]\n[resource: file:///a.txt]\ninline text"
	if res.IsError || res.Content != want {
		t.Fatalf("mixed content:\n%s\nwant:\n%s", res.Content, want)
	}
	res = run(reg, "t_flood", `{}`)
	if res.IsError || !strings.HasSuffix(res.Content, "[result cut: the first 1000 of 2097152 bytes are shown]") || len(res.Content) > 1100 {
		t.Fatalf("flood: %d bytes, ends %q", len(res.Content), res.Content[max(0, len(res.Content)-80):])
	}
}

// A bad Server is refused before anything starts.
func TestServerSpecChecked(t *testing.T) {
	for _, srv := range []Server{
		{Command: "x"},
		{Name: "has space", Command: "x"},
		{Name: strings.Repeat("a", 33), Command: "x"},
		{Name: "a"},
		{Name: "a", Command: "x", URL: "http://x"},
		{Name: "a", URL: "http://x", Args: []string{"y"}},
		{Name: "a", Command: "x", Header: map[string][]string{"A": {"b"}}},
	} {
		if _, err := Connect(context.Background(), srv, Config{}); !errors.Is(err, ErrInvalidServer) {
			t.Errorf("%+v: %v, want ErrInvalidServer", srv, err)
		}
	}
	if _, err := Connect(context.Background(), helperServer("t"), Config{CallTimeout: -1}); err == nil {
		t.Error("a negative CallTimeout is accepted")
	}
}

// Names are the server's name, '_' and the tool's, sanitised and kept
// within 64 characters; long names stay distinct.
func TestToolNames(t *testing.T) {
	for remote, want := range map[string]string{
		"read_file": "fs_read_file",
		"read.file": "fs_read_file",
		"a b/c:d":   "fs_a_b_c_d",
		"héllo":     "fs_h_llo",
		"x-y_Z9":    "fs_x-y_Z9",
	} {
		if got, err := toolName("fs", remote); err != nil || got != want {
			t.Errorf("toolName(fs, %q) = %q, %v; want %q", remote, got, err, want)
		}
	}
	a, _ := toolName("fs", strings.Repeat("x", 100)+"a")
	b, _ := toolName("fs", strings.Repeat("x", 100)+"b")
	if len(a) != 64 || len(b) != 64 || a == b {
		t.Errorf("long names %q and %q: want two different names of 64 characters", a, b)
	}
	if _, err := toolName("fs", ""); !errors.Is(err, ErrRefused) {
		t.Errorf("an empty name: %v", err)
	}
}

// After Close, the Set and its tools fail with ErrClosed, and the
// server's process has exited.
func TestCloseStopsServer(t *testing.T) {
	s, err := Connect(context.Background(), helperServer("t"), Config{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	reg := registry(t, s)
	p := s.sess.proc
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
	default:
		t.Fatal("the server process is still running after Close")
	}
	if _, err := s.Tools(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Tools after Close: %v", err)
	}
	if res := run(reg, "t_echo", `{"text":"x"}`); !errors.Is(res.Err, ErrClosed) {
		t.Fatalf("a call after Close: %+v", res)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}
