package tool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/tool"
)

type ConvertIn struct {
	Amount float64 `json:"amount" jsonschema:"description=Amount to convert,exclusiveMinimum=0"`
	To     string  `json:"to" jsonschema:"description=Target currency,enum=USD,enum=GBP"`
}

// The first thing a bot's tool is: tool.New from a typed function, its
// name and description for the model, and options after them, each
// overriding a documented default. The orchestrator takes it in
// agent.Config.Tools; a Registry is what runs the model's calls, checking
// their arguments against the schema before the function runs.
func Example() {
	convert := tool.New("convert_eur", "Convert euros into another currency",
		func(ctx context.Context, in ConvertIn) (string, error) {
			return fmt.Sprintf("%.2f EUR = %.2f %s", in.Amount, in.Amount*1.08, in.To), nil
		},
		tool.WithTimeout(5*time.Second))
	reg, err := tool.NewRegistry(convert)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	for _, args := range []string{`{"amount":10,"to":"USD"}`, `{"amount":10,"to":"JPY"}`} {
		res := reg.Execute(ctx, llm.ToolCall{ID: "call_1", Name: "convert_eur", Arguments: json.RawMessage(args)}, 0)
		fmt.Println(res.IsError, res.Content)
	}
	// Output:
	// false 10.00 EUR = 10.80 USD
	// true invalid arguments for convert_eur: to: must be one of "USD", "GBP"; got "JPY" (enum)
	// Fix the arguments to match the tool's schema and call the tool again.
}
