package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valetkit/valet/credentials"
	"github.com/valetkit/valet/llm"
)

type WeatherIn struct {
	City  string `json:"city" jsonschema:"description=City name"`
	Days  int    `json:"days,omitempty" jsonschema:"minimum=1,maximum=7"`
	Units string `json:"units,omitempty" jsonschema:"enum=metric,enum=imperial"`
	Email string `json:"email,omitempty" jsonschema:"format=email"`
}

func weatherTool(calls *atomic.Int32) Tool {
	return New("get_weather", "Current weather for a city",
		func(ctx context.Context, in WeatherIn) (string, error) {
			if calls != nil {
				calls.Add(1)
			}
			return fmt.Sprintf("%s: sunny for %d days", in.City, max(in.Days, 1)), nil
		})
}

func mustRegistry(t *testing.T, tools ...Tool) *Registry {
	t.Helper()
	r, err := NewRegistry(tools...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestSchemaJSON(t *testing.T) {
	s, err := SchemaFor[WeatherIn]()
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(s.JSON(), &m); err != nil {
		t.Fatal(err)
	}
	if m["type"] != "object" || m["additionalProperties"] != false {
		t.Errorf("schema = %s", s.JSON())
	}
	for _, k := range []string{"$schema", "$id", "$defs", "$ref"} {
		if strings.Contains(string(s.JSON()), `"`+k+`"`) {
			t.Errorf("schema contains %s: %s", k, s.JSON())
		}
	}
	req, _ := m["required"].([]any)
	if len(req) != 1 || req[0] != "city" {
		t.Errorf("required = %v, want [city] (fields without omitempty are required)", req)
	}
	props := m["properties"].(map[string]any)
	days := props["days"].(map[string]any)
	if days["type"] != "integer" || days["minimum"] != 1.0 || days["maximum"] != 7.0 {
		t.Errorf("days = %v", days)
	}
	if city := props["city"].(map[string]any); city["description"] != "City name" {
		t.Errorf("city = %v", city)
	}
}

type nested struct {
	Items []struct {
		Name string `json:"name"`
		Qty  int    `json:"qty,omitempty" jsonschema:"minimum=1"`
	} `json:"items"`
	Address *struct {
		Street string `json:"street"`
	} `json:"address,omitempty"`
}

func TestSchemaInlinesNestedTypes(t *testing.T) {
	s, err := SchemaFor[*nested]()
	if err != nil {
		t.Fatal(err)
	}
	raw := string(s.JSON())
	if strings.Contains(raw, "$ref") || strings.Contains(raw, "$defs") {
		t.Fatalf("not inlined: %s", raw)
	}
	err = s.Validate(json.RawMessage(`{"items":[{"name":"a"},{"qty":0}],"address":{}}`))
	ae := asArgumentError(t, err)
	want := map[string]string{"items/1/name": "required", "items/1/qty": "minimum", "address/street": "required"}
	got := map[string]string{}
	for _, p := range ae.Problems {
		got[p.Field] = p.Rule
	}
	for f, r := range want {
		if got[f] != r {
			t.Errorf("problem for %s = %q, want %q (all: %v)", f, got[f], r, ae.Problems)
		}
	}
}

type Node struct {
	Name     string  `json:"name"`
	Children []*Node `json:"children,omitempty"`
}

func TestSchemaForRejects(t *testing.T) {
	if _, err := SchemaFor[int](); !errors.Is(err, ErrInvalidTool) {
		t.Errorf("int: err = %v", err)
	}
	if _, err := SchemaFor[Node](); !errors.Is(err, ErrInvalidTool) {
		t.Errorf("recursive: err = %v", err)
	}
	if _, err := SchemaFor[struct{}](); err != nil {
		t.Errorf("empty struct: %v", err)
	}
	s, _ := SchemaFor[struct{}]()
	if !strings.Contains(string(s.JSON()), `"properties":{}`) {
		t.Errorf("empty struct schema has no properties: %s", s.JSON())
	}
}

func asArgumentError(t *testing.T, err error) *ArgumentError {
	t.Helper()
	var ae *ArgumentError
	if !errors.As(err, &ae) {
		t.Fatalf("err = %v (%T), want *ArgumentError", err, err)
	}
	if !errors.Is(err, ErrInvalidArguments) {
		t.Fatalf("errors.Is(err, ErrInvalidArguments) = false")
	}
	return ae
}

func TestValidation(t *testing.T) {
	var calls atomic.Int32
	tl := weatherTool(&calls)
	cases := []struct {
		name, args  string
		field, rule string
	}{
		{"malformed", `{"city":`, "", "json"},
		{"trailing", `{"city":"x"} {}`, "", "json"},
		{"null", `null`, "", "type"},
		{"array", `[{"city":"x"}]`, "", "type"},
		{"string", `"Paris"`, "", "type"},
		{"missing required", `{"days":2}`, "city", "required"},
		{"empty object", `{}`, "city", "required"},
		{"empty args", ``, "city", "required"},
		{"wrong type", `{"city":42}`, "city", "type"},
		{"float for int", `{"city":"x","days":2.5}`, "days", "type"},
		{"string for int", `{"city":"x","days":"2"}`, "days", "type"},
		{"below minimum", `{"city":"x","days":0}`, "days", "minimum"},
		{"above maximum", `{"city":"x","days":8}`, "days", "maximum"},
		{"enum", `{"city":"x","units":"kelvin"}`, "units", "enum"},
		{"escaped enum", `{"city":"x","units":"k\u0065lvin"}`, "units", "enum"},
		{"format", `{"city":"x","email":"not-an-email"}`, "email", "format"},
		{"unknown field", `{"city":"x","country":"PT"}`, "country", "additionalProperties"},
		{"case-folded field", `{"City":"x"}`, "City", "additionalProperties"},
		// JSON Schema calls 3.0 an integer; encoding/json cannot put it in an int.
		{"integer spelt as float", `{"city":"x","days":3.0}`, "days", "type"},
		{"huge int", `{"city":"x","days":100000000000000000000000}`, "days", "maximum"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := tl.Call(context.Background(), json.RawMessage(tc.args))
			if out != "" {
				t.Errorf("out = %q", out)
			}
			ae := asArgumentError(t, err)
			if ae.Tool != "get_weather" {
				t.Errorf("Tool = %q", ae.Tool)
			}
			found := false
			for _, p := range ae.Problems {
				if p.Field == tc.field && p.Rule == tc.rule {
					found = true
				}
			}
			if !found {
				t.Errorf("problems = %+v, want field %q rule %q", ae.Problems, tc.field, tc.rule)
			}
			msg := ae.Error()
			if !strings.HasPrefix(msg, "invalid arguments for get_weather: ") || !strings.Contains(msg, "("+tc.rule+")") {
				t.Errorf("Error() = %q", msg)
			}
			if tc.field != "" && !strings.Contains(msg, tc.field+": ") {
				t.Errorf("Error() = %q does not name %q", msg, tc.field)
			}
			// The schema alone agrees.
			s := SchemaOf(tl)
			if err := s.Validate(json.RawMessage(tc.args)); err == nil && tc.name != "integer spelt as float" {
				t.Errorf("Schema.Validate accepted %s", tc.args)
			}
		})
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("function ran %d times on invalid arguments", n)
	}
}

func TestValidationListsEveryProblem(t *testing.T) {
	err := SchemaOf(weatherTool(nil)).Validate(json.RawMessage(`{"days":9,"units":"x","extra":true}`))
	ae := asArgumentError(t, err)
	rules := map[string]string{}
	for _, p := range ae.Problems {
		rules[p.Field] = p.Rule
	}
	want := map[string]string{"city": "required", "days": "maximum", "units": "enum", "extra": "additionalProperties"}
	for f, r := range want {
		if rules[f] != r {
			t.Errorf("%s: rule %q, want %q; all %+v", f, rules[f], r, ae.Problems)
		}
	}
	const wantMsg = `invalid arguments: city: missing required field (required); days: must be <= 7, got 9 (maximum)`
	if !strings.HasPrefix(ae.Error(), wantMsg) {
		t.Errorf("Error() = %q, want prefix %q", ae.Error(), wantMsg)
	}
}

func TestValidArguments(t *testing.T) {
	tl := weatherTool(nil)
	for _, args := range []string{
		`{"city":"Lisbon"}`,
		` {"city":"Lisbon","days":7,"units":"imperial"} `,
		`{"city":"Lisbon","days":1}`, // on the minimum: decided by the full validator
		`{"city":"Li\"sbon","units":"metric"}`,
		`{"city":"Lisbon","email":"a@example.com"}`,
	} {
		if _, err := tl.Call(context.Background(), json.RawMessage(args)); err != nil {
			t.Errorf("%s: %v", args, err)
		}
	}
	out, err := tl.Call(context.Background(), json.RawMessage(`{"city":"Lisbon","days":3}`))
	if err != nil || out != "Lisbon: sunny for 3 days" {
		t.Errorf("Call = %q, %v", out, err)
	}
}

func TestNewDefinitionErrors(t *testing.T) {
	fn := func(ctx context.Context, in WeatherIn) (string, error) { return "", nil }
	cases := map[string]Tool{
		"bad name":   New("get weather", "", fn),
		"empty":      New("", "", fn),
		"too long":   New(strings.Repeat("a", 65), "", fn),
		"nil fn":     New[WeatherIn, string]("ok", "", nil),
		"not struct": New("ok", "", func(ctx context.Context, in string) (string, error) { return in, nil }),
		"recursive":  New("ok", "", func(ctx context.Context, in Node) (string, error) { return "", nil }),
	}
	for name, tl := range cases {
		t.Run(name, func(t *testing.T) {
			if err := Err(tl); !errors.Is(err, ErrInvalidTool) {
				t.Fatalf("Err = %v", err)
			}
			if _, err := tl.Call(context.Background(), json.RawMessage(`{}`)); !errors.Is(err, ErrInvalidTool) {
				t.Errorf("Call err = %v", err)
			}
			if _, err := NewRegistry(tl); !errors.Is(err, ErrInvalidTool) {
				t.Errorf("NewRegistry err = %v", err)
			}
			var r Registry
			if err := r.Add(tl); !errors.Is(err, ErrInvalidTool) || r.Len() != 0 {
				t.Errorf("Add err = %v, Len = %d", err, r.Len())
			}
		})
	}
	if err := Err(New("a-b_C9", "", fn)); err != nil {
		t.Errorf("valid name rejected: %v", err)
	}
	if err := Err(New("p", "", func(ctx context.Context, in *WeatherIn) (string, error) { return in.City, nil })); err != nil {
		t.Errorf("pointer input rejected: %v", err)
	}
}

func TestPointerInput(t *testing.T) {
	tl := New("p", "", func(ctx context.Context, in *WeatherIn) (string, error) { return in.City, nil })
	out, err := tl.Call(context.Background(), json.RawMessage(`{"city":"Porto"}`))
	if err != nil || out != "Porto" {
		t.Fatalf("Call = %q, %v", out, err)
	}
}

type point struct {
	X int `json:"x"`
	Y int `json:"y"`
}

func TestOutputEncoding(t *testing.T) {
	ctx := context.Background()
	call := func(tl Tool) string {
		t.Helper()
		out, err := tl.Call(ctx, json.RawMessage(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	type none struct{}
	cases := []struct {
		tl   Tool
		want string
	}{
		{New("s", "", func(context.Context, none) (string, error) { return "<b>plain</b>\n", nil }), "<b>plain</b>\n"},
		{New("st", "", func(context.Context, none) (point, error) { return point{1, 2}, nil }), `{"x":1,"y":2}`},
		{New("html", "", func(context.Context, none) (map[string]string, error) { return map[string]string{"a": "<&>"}, nil }), `{"a":"<&>"}`},
		{New("nilslice", "", func(context.Context, none) ([]point, error) { return nil, nil }), `[]`},
		{New("nilmap", "", func(context.Context, none) (map[string]int, error) { return nil, nil }), `{}`},
		{New("nilptr", "", func(context.Context, none) (*point, error) { return nil, nil }), `null`},
		{New("int", "", func(context.Context, none) (int, error) { return 42, nil }), `42`},
		{New("raw", "", func(context.Context, none) (json.RawMessage, error) { return json.RawMessage(`{"a": 1}`), nil }), `{"a":1}`},
	}
	for _, tc := range cases {
		if got := call(tc.tl); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.tl.Spec().Name, got, tc.want)
		}
	}
	bad := New("bad", "", func(context.Context, none) (func(), error) { return func() {}, nil })
	if _, err := bad.Call(ctx, nil); err == nil {
		t.Error("unencodable result: no error")
	}
}

func TestSpecAndSettings(t *testing.T) {
	tl := New("get_weather", "Weather", func(ctx context.Context, in WeatherIn) (string, error) { return "", nil },
		WithTimeout(5*time.Second), WithRisk(RiskHigh), WithRetries(2, 0))
	spec := tl.Spec()
	if spec.Name != "get_weather" || spec.Description != "Weather" || !json.Valid(spec.Parameters) {
		t.Errorf("spec = %+v", spec)
	}
	want := Settings{Timeout: 5 * time.Second, Risk: RiskHigh, Retries: 2, RetryDelay: DefaultRetryDelay}
	if got := SettingsOf(tl); got != want {
		t.Errorf("settings = %+v, want %+v", got, want)
	}
	if got := SettingsOf(plainTool{}); got != (Settings{}) {
		t.Errorf("plain tool settings = %+v", got)
	}
	for r, s := range map[Risk]string{RiskLow: "low", RiskMedium: "medium", RiskHigh: "high", RiskCritical: "critical", Risk(9): "Risk(9)"} {
		if r.String() != s {
			t.Errorf("%d.String() = %q", int(r), r.String())
		}
	}
}

type plainTool struct {
	name string
	call func(ctx context.Context, args json.RawMessage) (string, error)
}

func (p plainTool) Spec() llm.ToolSpec { return llm.ToolSpec{Name: p.name} }
func (p plainTool) Call(ctx context.Context, args json.RawMessage) (string, error) {
	return p.call(ctx, args)
}

type netTimeout struct{}

func (netTimeout) Error() string   { return "i/o timeout" }
func (netTimeout) Timeout() bool   { return true }
func (netTimeout) Temporary() bool { return true }

var _ net.Error = netTimeout{}

func TestRetries(t *testing.T) {
	type none struct{}
	cases := []struct {
		name  string
		err   error
		tries int32
	}{
		{"plain error once", errors.New("bad input"), 1},
		{"transient n+1", Transient(errors.New("503")), 4},
		{"wrapped transient", fmt.Errorf("fetch: %w", Transient(errors.New("reset"))), 4},
		{"net timeout", fmt.Errorf("dial: %w", netTimeout{}), 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Int32
			tl := New("flaky", "", func(context.Context, none) (string, error) {
				n.Add(1)
				return "", tc.err
			}, WithRetries(3, time.Microsecond))
			_, err := tl.Call(context.Background(), nil)
			if !errors.Is(err, tc.err) && err.Error() != tc.err.Error() {
				t.Errorf("err = %v", err)
			}
			if got := n.Load(); got != tc.tries {
				t.Errorf("tried %d times, want %d", got, tc.tries)
			}
		})
	}
	t.Run("succeeds after transient", func(t *testing.T) {
		var n atomic.Int32
		tl := New("flaky", "", func(context.Context, none) (string, error) {
			if n.Add(1) < 3 {
				return "", Transient(errors.New("503"))
			}
			return "ok", nil
		}, WithRetries(5, time.Microsecond))
		out, err := tl.Call(context.Background(), nil)
		if out != "ok" || err != nil || n.Load() != 3 {
			t.Errorf("out %q err %v tries %d", out, err, n.Load())
		}
	})
	t.Run("wait honours ctx", func(t *testing.T) {
		var n atomic.Int32
		ctx, cancel := context.WithCancel(context.Background())
		tl := New("flaky", "", func(context.Context, none) (string, error) {
			n.Add(1)
			cancel()
			return "", Transient(errors.New("503"))
		}, WithRetries(5, time.Hour))
		done := make(chan struct{})
		go func() {
			defer close(done)
			if _, err := tl.Call(ctx, nil); err == nil {
				t.Error("no error")
			}
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("retry wait ignored ctx")
		}
		if n.Load() != 1 {
			t.Errorf("tries = %d", n.Load())
		}
	})
}

func TestTransient(t *testing.T) {
	if Transient(nil) != nil {
		t.Error("Transient(nil) != nil")
	}
	base := errors.New("x")
	err := Transient(base)
	if !IsTransient(err) || !errors.Is(err, base) || err.Error() != "x" {
		t.Errorf("Transient: %v", err)
	}
	if IsTransient(base) || IsTransient(nil) || IsTransient(context.DeadlineExceeded) {
		t.Error("plain errors reported transient")
	}
}

func TestExecContext(t *testing.T) {
	ec := ExecContextFrom(context.Background())
	if ec.Logger == nil || ec.TenantID != "" {
		t.Fatalf("zero ExecContext = %+v", ec)
	}
	ec.Logger.Info("discarded") // must not panic
	store := fakeStore{}
	logger := slog.New(slog.DiscardHandler)
	ctx := WithExecContext(context.Background(), ExecContext{TenantID: "u1", ConversationID: "c1", CallID: "call_1", Credentials: store, Logger: logger})
	type none struct{}
	tl := New("who", "", func(ctx context.Context, _ none) (string, error) {
		ec := ExecContextFrom(ctx)
		if ec.Credentials == nil || ec.Logger != logger {
			return "", errors.New("missing credentials or logger")
		}
		return ec.TenantID + "/" + ec.ConversationID + "/" + ec.CallID, nil
	})
	res := mustRegistry(t, tl).Execute(ctx, llm.ToolCall{ID: "call_1", Name: "who", Arguments: json.RawMessage(`{}`)}, time.Second)
	if res.IsError || res.Content != "u1/c1/call_1" {
		t.Errorf("res = %+v", res)
	}
}

type fakeStore struct{ credentials.Store }
