// Package tool turns Go functions into tools a model can call, validates the
// model's arguments before anything runs, and executes calls so that every
// outcome — success, bad arguments, unknown tool, timeout, panic, error —
// becomes a result the model can read and act on.
//
// # Defining a tool
//
// A tool is a function from an input struct to an output:
//
//	type WeatherIn struct {
//		City string `json:"city" jsonschema:"description=City name"`
//		Days int    `json:"days,omitempty" jsonschema:"minimum=1,maximum=7"`
//	}
//
//	weather := tool.New("get_weather", "Current weather for a city",
//		func(ctx context.Context, in WeatherIn) (string, error) { ... })
//
// New generates the JSON Schema the model sees from the struct once, with
// github.com/invopop/jsonschema, and compiles it once, with
// github.com/santhosh-tekuri/jsonschema/v5. The rules:
//
//   - Property names come from the json tag; json:"-" hides a field.
//   - A field without omitempty (or omitzero) is required. Mark optional
//     fields omitempty.
//   - The jsonschema tag adds keywords, comma-separated:
//     description=..., minimum=1, maximum=7, exclusiveMinimum=0,
//     minLength=2, maxLength=64, pattern=^[a-z]+$, enum=a,enum=b,
//     format=email (also date-time, uri, uuid, ipv4, ...), minItems=1, ...
//     A comma inside a value is written \, — or put the description in
//     its own tag, which takes commas as they are:
//     jsonschema_description:"City, region or airport code".
//   - Objects reject unknown fields (additionalProperties false).
//   - Nested structs, slices and maps are inlined: the schema has no $ref,
//     $defs, $schema or $id. Recursive types are rejected.
//   - time.Time is a string with format date-time.
//
// A string Out is returned to the model as is; any other Out is encoded as
// JSON (no HTML escaping; a nil slice as [] and a nil map as {}).
//
// New never panics. A bad definition (a name not matching
// ^[a-zA-Z0-9_-]{1,64}$, an input that is not a struct, a nil function) is
// reported by Err, by NewRegistry and Registry.Add, and by every Call; all
// wrap ErrInvalidTool.
//
// Options adjust a tool: WithTimeout overrides the caller's timeout,
// WithRisk declares the tool's Risk (RiskLow by default; RiskMedium,
// RiskHigh, RiskCritical), which the orchestrator acts on before each call
// (see agent's "Risk"), and WithRetries retries transient failures.
// SettingsOf reads them back for any Tool.
//
// # Validation
//
// Call validates the arguments against the schema before the function runs
// and reports every violation at once in an *ArgumentError
// (errors.Is(err, ErrInvalidArguments)). Each FieldError names the field
// (a path such as "items/0/name") and the rule that failed ("required",
// "type", "enum", "minimum", "format", "additionalProperties", or "json"
// for malformed JSON), so the model can correct itself:
//
//	invalid arguments for get_weather: city: missing required field (required); days: must be <= 7, got 10 (maximum)
//
// Empty arguments count as {}; null, arrays and other non-objects are
// rejected. Validation is cheap on the success path: a small allocation-free
// check covers the keywords above and the full validator runs only when that
// check is not certain, so a call costs about as many allocations as
// json.Unmarshal into the input struct.
//
// Schema and SchemaFor expose the generated schema and its validator on
// their own, for code (such as Agent-Tools) that needs them without a tool.
//
// # Errors and retries
//
// Return Transient(err) for an infrastructure failure worth retrying (a
// dropped connection, an upstream 503). A tool built WithRetries(n, delay)
// retries such errors, and net.Error timeouts, up to n times, waiting delay,
// then twice that, and so on, and gives up early when ctx ends. Any other
// error is returned at once. A panic is recovered and becomes a
// *PanicError.
//
// # Running calls
//
// A Registry holds tools by name in registration order. Specs gives the
// specs for the model request (computed once, free to call every turn), and
// Execute runs one llm.ToolCall under a timeout and returns a Result that
// never needs special handling: Content is what the model should read
// next, IsError says whether the call failed, and Err keeps the Go error for
// logs and metrics. An unknown tool name is answered with the list of tools
// that exist, closest name first. Execute is Bind and Run in one: Bind
// looks the tool up and validates and decodes the arguments, Run runs the
// call, on any goroutine (the orchestrator binds on its loop's goroutine
// and runs each parallel call on a goroutine of its own, which then holds
// only the tool's frames and a few of Run's while the tool waits).
//
// # Context
//
// The orchestrator stores an ExecContext in the ctx of each call (tenant,
// conversation, call id, credentials store, logger); a tool reads it with
// ExecContextFrom, whose Logger is never nil (slog.Default() when none was
// set).
package tool
