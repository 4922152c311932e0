package mcptool

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	sjson "github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/tool"
)

// remoteTool is one tool of the server as a tool.Tool. It is immutable: a
// changed tool on the server is a new remoteTool.
type remoteTool struct {
	set    *Set
	remote string // the tool's name on the server
	spec   llm.ToolSpec
	schema *sjson.Schema
	risk   tool.Risk
	fp     string // fingerprint of description, schema and risk
}

func (t *remoteTool) Spec() llm.ToolSpec { return t.spec }

// Settings gives the tool's risk, from the server's annotations.
func (t *remoteTool) Settings() tool.Settings { return tool.Settings{Risk: t.risk} }

// Call validates args against the server's input schema, then calls the
// tool on the server.
func (t *remoteTool) Call(ctx context.Context, args json.RawMessage) (string, error) {
	args = normalizeArgs(args)
	if ae := validate(t.schema, args); ae != nil {
		ae.Tool = t.spec.Name
		return "", ae
	}
	return t.set.call(ctx, t, args)
}

// newRemoteTool checks one listed tool and compiles its input schema
// (or takes it from the cache, or from fresh: this listing's), and cuts
// its description to Config.MaxDescriptionBytes.
func (s *Set) newRemoteTool(name string, mt *mcp.Tool, fresh map[[32]byte]compiled) (*remoteTool, error) {
	refuse := func(err error) (*remoteTool, error) {
		return nil, fmt.Errorf("%w: %q: %v", ErrRefused, mt.Name, err)
	}
	if mt.InputSchema == nil {
		return refuse(errors.New("no input schema"))
	}
	in, err := json.Marshal(mt.InputSchema)
	if err != nil {
		return refuse(fmt.Errorf("input schema: %v", err))
	}
	if len(in) > s.cfg.MaxSchemaBytes {
		return refuse(fmt.Errorf("the input schema is %d bytes, more than the %d of Config.MaxSchemaBytes", len(in), s.cfg.MaxSchemaBytes))
	}
	key := sha256.Sum256(in)
	c, ok := fresh[key]
	if !ok {
		if c, ok = s.schemas[key]; !ok {
			c.raw, c.schema, c.err = compileSchema(in, s.cfg.MaxSchemaDepth)
		}
		fresh[key] = c
	}
	if c.err != nil {
		return refuse(c.err)
	}
	desc := cutDescription(mt.Description, s.cfg.MaxDescriptionBytes)
	risk := riskOf(mt.Annotations)
	h := sha256.New()
	fmt.Fprintf(h, "%d\x00%s\x00", risk, desc)
	h.Write(c.raw)
	return &remoteTool{
		set:    s,
		remote: mt.Name,
		spec:   llm.ToolSpec{Name: name, Description: desc, Parameters: c.raw},
		schema: c.schema,
		risk:   risk,
		fp:     hex.EncodeToString(h.Sum(nil)),
	}, nil
}

// compiled is the outcome of compiling one input schema: the schema as
// sent to the model and its compiled form, or why it is refused.
type compiled struct {
	raw    json.RawMessage
	schema *sjson.Schema
	err    error
}

// cutDescription shortens a description to limit bytes, at a character
// boundary, ending with a note saying so (within the limit).
func cutDescription(d string, limit int) string {
	if len(d) <= limit {
		return d
	}
	note := func(n int) string {
		return fmt.Sprintf("\n[description cut: the first %d of %d bytes are shown]", n, len(d))
	}
	n := max(limit-len(note(limit)), 0)
	for n > 0 && !utf8.RuneStart(d[n]) {
		n--
	}
	return d[:n] + note(n)
}

// jsonDepth returns how deep objects and arrays nest in the JSON text b.
func jsonDepth(b []byte) int {
	depth, deepest := 0, 0
	inString, escaped := false, false
	for _, c := range b {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
			deepest = max(deepest, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	return deepest
}

// riskOf maps a tool's annotations to a risk, with the defaults MCP
// gives missing hints (not read-only, destructive): read-only is low, a
// tool that says it is not destructive medium, any other high.
func riskOf(a *mcp.ToolAnnotations) tool.Risk {
	switch {
	case a == nil:
		return tool.RiskHigh
	case a.ReadOnlyHint:
		return tool.RiskLow
	case a.DestructiveHint != nil && !*a.DestructiveHint:
		return tool.RiskMedium
	}
	return tool.RiskHigh
}

// schemaURL names the in-memory resource the compiler reads.
const schemaURL = "mem://valet/mcptool/input.json"

// compileSchema checks a server's input schema (a JSON object with
// "type": "object", nested at most maxDepth deep), compiles it, and
// returns it as sent to the model: keys in a stable order, and
// "properties": {} added when missing (some model APIs reject an object
// schema without it). Remote references are refused; nothing is fetched.
func compileSchema(raw []byte, maxDepth int) (json.RawMessage, *sjson.Schema, error) {
	if d := jsonDepth(raw); d > maxDepth {
		return nil, nil, fmt.Errorf("the input schema nests %d deep, more than the %d of Config.MaxSchemaDepth", d, maxDepth)
	}
	var tree map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&tree); err != nil || tree == nil {
		return nil, nil, errors.New("the input schema is not a JSON object")
	}
	if tree["type"] != "object" {
		return nil, nil, fmt.Errorf(`the input schema's type is %s, want "object"`, compact(tree["type"]))
	}
	if _, ok := tree["properties"]; !ok {
		tree["properties"] = map[string]any{}
	}
	raw, err := json.Marshal(tree) // maps marshal in key order
	if err != nil {
		return nil, nil, fmt.Errorf("input schema: %v", err)
	}
	c := sjson.NewCompiler()
	c.Draft = sjson.Draft2020
	c.LoadURL = func(u string) (io.ReadCloser, error) {
		return nil, fmt.Errorf("loading %s: remote schemas are not allowed", u)
	}
	if err := c.AddResource(schemaURL, bytes.NewReader(raw)); err != nil {
		return nil, nil, fmt.Errorf("input schema: %v", err)
	}
	sch, err := c.Compile(schemaURL)
	if err != nil {
		return nil, nil, fmt.Errorf("compiling the input schema: %v", err)
	}
	return raw, sch, nil
}

func compact(v any) string {
	if v == nil {
		return "missing"
	}
	b, _ := json.Marshal(v)
	return string(b)
}

var emptyObject = json.RawMessage("{}")

// normalizeArgs makes empty arguments {}, as package tool does.
func normalizeArgs(args json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(args)) == 0 {
		return emptyObject
	}
	return args
}

// validate checks args against schema and lists every problem in a
// *tool.ArgumentError, as package tool does for its own tools.
func validate(schema *sjson.Schema, args []byte) *tool.ArgumentError {
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			err = errors.New("unexpected data after the JSON value")
		}
	}
	if err != nil {
		return &tool.ArgumentError{Problems: []tool.FieldError{{Rule: "json", Message: "the arguments are not valid JSON: " + strings.TrimPrefix(err.Error(), "json: ")}}}
	}
	if _, ok := v.(map[string]any); !ok {
		return &tool.ArgumentError{Problems: []tool.FieldError{{Rule: "type", Message: "the arguments must be a JSON object, got " + compact(v)}}}
	}
	err = schema.Validate(v)
	if err == nil {
		return nil
	}
	var ve *sjson.ValidationError
	if !errors.As(err, &ve) {
		return &tool.ArgumentError{Problems: []tool.FieldError{{Rule: "schema", Message: err.Error()}}}
	}
	var out []tool.FieldError
	var walk func(e *sjson.ValidationError)
	walk = func(e *sjson.ValidationError) {
		if len(e.Causes) == 0 {
			kw := e.KeywordLocation
			out = append(out, tool.FieldError{
				Field:   strings.TrimPrefix(e.InstanceLocation, "/"),
				Rule:    kw[strings.LastIndexByte(kw, '/')+1:],
				Message: e.Message,
			})
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	slices.SortStableFunc(out, func(a, b tool.FieldError) int {
		if c := strings.Compare(a.Field, b.Field); c != 0 {
			return c
		}
		return strings.Compare(a.Rule, b.Rule)
	})
	return &tool.ArgumentError{Problems: slices.Compact(out)}
}
