package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/tool"
)

type WeatherIn struct {
	City string `json:"city" jsonschema:"description=City name"`
	Days int    `json:"days,omitempty" jsonschema:"minimum=1,maximum=7"`
}

func weather() tool.Tool {
	return tool.New("get_weather", "Current weather for a city",
		func(ctx context.Context, in WeatherIn) (string, error) {
			days := max(in.Days, 1)
			return fmt.Sprintf("%s: sunny, 21°C, for the next %d day(s)", in.City, days), nil
		},
		tool.WithTimeout(10*time.Second))
}

func ExampleNew() {
	reg, err := tool.NewRegistry(weather())
	if err != nil {
		panic(err)
	}
	// The spec goes into every model request.
	spec := reg.Specs()[0]
	fmt.Println(spec.Name, string(spec.Parameters))

	// The model answers with a tool call; Execute runs it.
	call := llm.ToolCall{ID: "call_1", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Lisbon","days":2}`)}
	res := reg.Execute(context.Background(), call, 30*time.Second)
	fmt.Println(res.IsError, res.Content)
	// Output:
	// get_weather {"properties":{"city":{"type":"string","description":"City name"},"days":{"type":"integer","maximum":7,"minimum":1}},"additionalProperties":false,"type":"object","required":["city"]}
	// false Lisbon: sunny, 21°C, for the next 2 day(s)
}

func ExampleRegistry_Execute_invalidArguments() {
	reg, _ := tool.NewRegistry(weather())
	call := llm.ToolCall{ID: "call_1", Name: "get_weather", Arguments: json.RawMessage(`{"days":10,"country":"PT"}`)}
	res := reg.Execute(context.Background(), call, 30*time.Second)
	fmt.Println(res.IsError)
	fmt.Println(res.Content)
	// Output:
	// true
	// invalid arguments for get_weather: city: missing required field (required); country: unknown field; allowed fields are city, days (additionalProperties); days: must be <= 7, got 10 (maximum)
	// Fix the arguments to match the tool's schema and call the tool again.
}

func ExampleRegistry_Execute_unknownTool() {
	type none struct{}
	noop := func(context.Context, none) (string, error) { return "", nil }
	reg, _ := tool.NewRegistry(
		tool.New("web_search", "Search the web", noop),
		tool.New("calculator", "Evaluate arithmetic", noop),
		weather(),
	)
	res := reg.Execute(context.Background(), llm.ToolCall{Name: "get_wether", Arguments: json.RawMessage(`{}`)}, 0)
	fmt.Println(res.Content)
	// Output:
	// unknown tool "get_wether". Available tools: get_weather, web_search, calculator
}

func ExampleSchema_Validate() {
	s, err := tool.SchemaFor[WeatherIn]()
	if err != nil {
		panic(err)
	}
	err = s.Validate(json.RawMessage(`{"city":7}`))
	var ae *tool.ArgumentError
	if errors.As(err, &ae) {
		for _, p := range ae.Problems {
			fmt.Printf("%s %s: %s\n", p.Field, p.Rule, p.Message)
		}
	}
	// Output:
	// city type: must be a string, got integer
}

func ExampleTransient() {
	type none struct{}
	attempts := 0
	flaky := tool.New("fetch_rates", "Exchange rates",
		func(ctx context.Context, _ none) (string, error) {
			attempts++
			if attempts < 3 {
				return "", tool.Transient(fmt.Errorf("upstream: 503 Service Unavailable"))
			}
			return "EUR/USD 1.08", nil
		},
		tool.WithRetries(3, time.Millisecond))
	out, err := flaky.Call(context.Background(), nil)
	fmt.Println(out, err, attempts)
	// Output:
	// EUR/USD 1.08 <nil> 3
}

func ExampleExecContextFrom() {
	type none struct{}
	whoami := tool.New("whoami", "The current user", func(ctx context.Context, _ none) (string, error) {
		ec := tool.ExecContextFrom(ctx)
		ec.Logger.Info("whoami called") // never nil
		return ec.TenantID, nil
	})
	ctx := tool.WithExecContext(context.Background(), tool.ExecContext{TenantID: "u1", ConversationID: "c1", CallID: "call_1"})
	out, _ := whoami.Call(ctx, json.RawMessage(`{}`))
	fmt.Println(out)
	// Output:
	// u1
}
