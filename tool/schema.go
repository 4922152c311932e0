package tool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/invopop/jsonschema"
	sjson "github.com/santhosh-tekuri/jsonschema/v5"
)

// schemaURL names the in-memory resource the compiler reads; nothing is ever
// fetched from it.
const schemaURL = "mem://valet/tool/arguments.json"

// Schema is the JSON Schema of a tool's input struct, generated from the
// struct's tags and compiled for validation. It is immutable and safe for
// concurrent use.
type Schema struct {
	raw      json.RawMessage // what the model sees
	tree     any             // raw decoded (numbers as json.Number), for error messages
	compiled *sjson.Schema   // the validator
	typ      reflect.Type    // the Go type the schema was made from
	fast     *fastNode       // allocation-free validator for the common keywords; nil if unsupported
}

// SchemaFor generates and compiles the schema of T, which must be a struct or
// a pointer to a struct. See the package documentation for the tags it reads.
func SchemaFor[T any]() (*Schema, error) {
	return SchemaForType(reflect.TypeFor[T]())
}

// SchemaForType is SchemaFor for a reflect.Type.
func SchemaForType(t reflect.Type) (s *Schema, err error) {
	if t == nil {
		return nil, fmt.Errorf("%w: nil input type", ErrInvalidTool)
	}
	st := t
	if st.Kind() == reflect.Pointer {
		st = st.Elem()
	}
	if st.Kind() != reflect.Struct {
		return nil, fmt.Errorf("%w: input type %s is not a struct", ErrInvalidTool, t)
	}
	if cyc := findCycle(st, nil); cyc != nil {
		return nil, fmt.Errorf("%w: input type %s is recursive (through %s); recursive schemas are not supported", ErrInvalidTool, t, cyc)
	}
	if name, where := findCollision(st, nil); name != "" {
		return nil, fmt.Errorf("%w: input type %s: the JSON field %q is declared more than once (%s); encoding/json and the schema would disagree about which field the model fills, so rename or tag one of them", ErrInvalidTool, t, name, where)
	}
	defer func() {
		// invopop panics on some malformed tags; New must never panic.
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("%w: generating the schema of %s: %v", ErrInvalidTool, t, r)
		}
	}()
	r := &jsonschema.Reflector{
		DoNotReference: true, // inline everything: no $ref / $defs for the model
		ExpandedStruct: true,
		Anonymous:      true, // no $id
	}
	js := r.ReflectFromType(st)
	js.Version = "" // no $schema
	js.ID = ""
	js.Definitions = nil
	raw, err := json.Marshal(js)
	if err != nil {
		return nil, fmt.Errorf("%w: encoding the schema of %s: %v", ErrInvalidTool, t, err)
	}
	var tree map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&tree); err != nil {
		return nil, fmt.Errorf("%w: decoding the schema of %s: %v", ErrInvalidTool, t, err)
	}
	if _, ok := tree["properties"]; !ok {
		// OpenAI rejects an object schema without properties.
		tree["properties"] = map[string]any{}
		if raw, err = json.Marshal(tree); err != nil {
			return nil, fmt.Errorf("%w: encoding the schema of %s: %v", ErrInvalidTool, t, err)
		}
	}
	if strings.Contains(string(raw), `"$ref"`) {
		return nil, fmt.Errorf("%w: the schema of %s contains a $ref", ErrInvalidTool, t)
	}
	c := sjson.NewCompiler()
	c.Draft = sjson.Draft2020
	c.AssertFormat = true // "format=email" is a rule, not a hint
	c.LoadURL = func(u string) (io.ReadCloser, error) {
		return nil, fmt.Errorf("loading %s: remote schemas are not allowed", u)
	}
	if err := c.AddResource(schemaURL, bytes.NewReader(raw)); err != nil {
		return nil, fmt.Errorf("%w: compiling the schema of %s: %v", ErrInvalidTool, t, err)
	}
	compiled, err := c.Compile(schemaURL)
	if err != nil {
		return nil, fmt.Errorf("%w: compiling the schema of %s: %v", ErrInvalidTool, t, err)
	}
	return &Schema{raw: raw, tree: tree, compiled: compiled, typ: t, fast: buildFast(tree)}, nil
}

// JSON returns the schema sent to the model: an object schema with
// properties, required and additionalProperties false, every nested type
// inlined (no $schema, $id, $ref or $defs). The returned bytes are shared;
// do not modify them.
func (s *Schema) JSON() json.RawMessage { return s.raw }

// Type returns the Go type the schema was generated from.
func (s *Schema) Type() reflect.Type { return s.typ }

// Validate checks args against the schema. It returns nil or an
// *ArgumentError listing every problem. Empty args (no bytes, or only
// white space) count as {}.
func (s *Schema) Validate(args json.RawMessage) error {
	if ae := s.validate(args); ae != nil {
		return ae
	}
	return nil
}

// Decode validates args and, when they are valid, unmarshals them into v (a
// pointer). It returns nil or an *ArgumentError.
func (s *Schema) Decode(args json.RawMessage, v any) error {
	if ae := s.decode(args, v); ae != nil {
		return ae
	}
	return nil
}

var emptyObject = []byte("{}")

func normalizeArgs(args []byte) []byte {
	for _, c := range args {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return args
		}
	}
	return emptyObject
}

func (s *Schema) decode(args []byte, v any) *ArgumentError {
	args = normalizeArgs(args)
	// The fast path leaves the JSON syntax to json.Unmarshal below.
	if s.fast == nil || !s.fast.validJSON(args) {
		if ae := s.validateFull(args); ae != nil {
			return ae
		}
	}
	if err := json.Unmarshal(args, v); err != nil {
		return &ArgumentError{Problems: []FieldError{unmarshalProblem(err)}}
	}
	return nil
}

func (s *Schema) validate(args []byte) *ArgumentError {
	args = normalizeArgs(args)
	if s.fast != nil && s.fast.validJSON(args) && json.Valid(args) {
		return nil
	}
	return s.validateFull(args)
}

// validateFull decodes args into a generic value and runs the compiled
// schema on it, turning its findings into FieldErrors.
func (s *Schema) validateFull(args []byte) *ArgumentError {
	inst, err := decodeInstance(args)
	if err != nil {
		var de *duplicateKeyError
		if errors.As(err, &de) {
			return &ArgumentError{Problems: []FieldError{{Field: de.field, Rule: "json", Message: "the field appears more than once; send each field once"}}}
		}
		return &ArgumentError{Problems: []FieldError{{Rule: "json", Message: "the arguments are not valid JSON: " + strings.TrimPrefix(err.Error(), "json: ")}}}
	}
	err = s.compiled.Validate(inst)
	if err == nil {
		return nil
	}
	return &ArgumentError{Problems: s.problems(inst, err)}
}

// decodeInstance decodes one JSON value, keeping numbers as json.Number so
// large integers keep their precision, and rejects trailing data.
func decodeInstance(args []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		if err == io.EOF {
			return nil, errors.New("unexpected end of JSON input")
		}
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("unexpected data after the JSON value")
	}
	if field, dup := duplicateKey(args); dup {
		return nil, &duplicateKeyError{field: field}
	}
	return v, nil
}

// duplicateKeyError reports an object that repeats a key. Such arguments
// are rejected: the decoded value the validator checks keeps only the last
// occurrence, while encoding/json merges repeated objects into the same
// struct field, so checked and delivered values would differ.
type duplicateKeyError struct{ field string }

func (e *duplicateKeyError) Error() string { return "repeated field " + e.field }

// duplicateKey reports the path (JSON-pointer style, without the leading
// slash) of the first repeated key of an object in data, a valid JSON
// document.
func duplicateKey(data []byte) (string, bool) {
	if !bytes.Contains(data, []byte{':'}) {
		return "", false // no object member at all
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var walk func(path string) (string, bool)
	walk = func(path string) (string, bool) {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		switch tok {
		case json.Delim('{'):
			seen := make(map[string]struct{})
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return "", false
				}
				k, _ := kt.(string)
				field := joinField(path, strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1"))
				if _, dup := seen[k]; dup {
					return field, true
				}
				seen[k] = struct{}{}
				if f, dup := walk(field); dup {
					return f, true
				}
			}
			dec.Token() // '}'
		case json.Delim('['):
			for i := 0; dec.More(); i++ {
				if f, dup := walk(joinField(path, strconv.Itoa(i))); dup {
					return f, true
				}
			}
			dec.Token() // ']'
		}
		return "", false
	}
	return walk("")
}

func unmarshalProblem(err error) FieldError {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if k := te.Type.Kind(); strings.HasPrefix(te.Value, "number") && (reflect.Int <= k && k <= reflect.Uint64) {
			return FieldError{
				Field:   strings.ReplaceAll(te.Field, ".", "/"),
				Rule:    "type",
				Message: fmt.Sprintf("must be a whole number without a decimal point or exponent that fits in a Go %s, got %s", te.Type, strings.TrimSpace(strings.TrimPrefix(te.Value, "number"))),
			}
		}
		return FieldError{
			Field:   strings.ReplaceAll(te.Field, ".", "/"),
			Rule:    "type",
			Message: fmt.Sprintf("a JSON %s cannot be stored in a Go %s", te.Value, te.Type),
		}
	}
	return FieldError{Rule: "json", Message: strings.TrimPrefix(err.Error(), "json: ")}
}

// problems turns the validator's error tree into FieldErrors, sorted by
// field then rule.
func (s *Schema) problems(inst any, err error) []FieldError {
	var ve *sjson.ValidationError
	if !errors.As(err, &ve) {
		return []FieldError{{Rule: "schema", Message: err.Error()}}
	}
	var out []FieldError
	var walk func(e *sjson.ValidationError)
	walk = func(e *sjson.ValidationError) {
		if len(e.Causes) == 0 {
			out = append(out, s.leaf(inst, e)...)
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	slices.SortStableFunc(out, func(a, b FieldError) int {
		if c := strings.Compare(a.Field, b.Field); c != 0 {
			return c
		}
		return strings.Compare(a.Rule, b.Rule)
	})
	return slices.Compact(out)
}

func (s *Schema) leaf(inst any, e *sjson.ValidationError) []FieldError {
	kw := e.KeywordLocation
	i := strings.LastIndexByte(kw, '/')
	rule := kw[i+1:]
	node, _ := lookupPointer(s.tree, kw[:max(i, 0)]).(map[string]any)
	val := lookupPointer(inst, e.InstanceLocation)
	field := strings.TrimPrefix(e.InstanceLocation, "/")
	one := func(msg string) []FieldError { return []FieldError{{Field: field, Rule: rule, Message: msg}} }
	switch rule {
	case "required":
		obj, _ := val.(map[string]any)
		req, _ := node["required"].([]any)
		var out []FieldError
		for _, r := range req {
			name, _ := r.(string)
			if _, ok := obj[name]; !ok {
				out = append(out, FieldError{Field: joinField(field, name), Rule: rule, Message: "missing required field"})
			}
		}
		if len(out) > 0 {
			return out
		}
	case "additionalProperties":
		obj, _ := val.(map[string]any)
		props, _ := node["properties"].(map[string]any)
		allowed := sortedKeys(props)
		var out []FieldError
		for _, k := range sortedKeys(obj) {
			if _, ok := props[k]; ok {
				continue
			}
			msg := "unknown field"
			if len(allowed) > 0 {
				msg += "; allowed fields are " + strings.Join(allowed, ", ")
			} else {
				msg += "; this object takes no fields"
			}
			out = append(out, FieldError{Field: joinField(field, k), Rule: rule, Message: msg})
		}
		if len(out) > 0 {
			return out
		}
	case "type":
		want := typeNames(node["type"])
		got := jsonTypeName(val)
		if field == "" {
			return one(fmt.Sprintf("the arguments must be a JSON %s, got %s", want, got))
		}
		return one(fmt.Sprintf("must be %s, got %s", withArticle(want), got))
	case "enum":
		vals, _ := node["enum"].([]any)
		parts := make([]string, len(vals))
		for i, v := range vals {
			parts[i] = compactJSON(v)
		}
		return one(fmt.Sprintf("must be one of %s; got %s", strings.Join(parts, ", "), compactJSON(val)))
	case "minimum":
		return one(fmt.Sprintf("must be >= %v, got %v", node[rule], val))
	case "maximum":
		return one(fmt.Sprintf("must be <= %v, got %v", node[rule], val))
	case "exclusiveMinimum":
		return one(fmt.Sprintf("must be > %v, got %v", node[rule], val))
	case "exclusiveMaximum":
		return one(fmt.Sprintf("must be < %v, got %v", node[rule], val))
	case "multipleOf":
		return one(fmt.Sprintf("must be a multiple of %v, got %v", node[rule], val))
	case "format":
		return one(fmt.Sprintf("must be a valid %v, got %s", node[rule], compactJSON(val)))
	case "minLength":
		return one(fmt.Sprintf("must be at least %v characters long", node[rule]))
	case "maxLength":
		return one(fmt.Sprintf("must be at most %v characters long", node[rule]))
	case "pattern":
		return one(fmt.Sprintf("must match the pattern %v, got %s", node[rule], compactJSON(val)))
	case "minItems":
		return one(fmt.Sprintf("must have at least %v items", node[rule]))
	case "maxItems":
		return one(fmt.Sprintf("must have at most %v items", node[rule]))
	case "uniqueItems":
		return one("items must be unique: " + e.Message)
	}
	return one(e.Message)
}

func joinField(base, name string) string {
	if base == "" {
		return name
	}
	return base + "/" + name
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func typeNames(t any) string {
	switch t := t.(type) {
	case string:
		return t
	case []any:
		parts := make([]string, 0, len(t))
		for _, p := range t {
			parts = append(parts, fmt.Sprint(p))
		}
		return strings.Join(parts, " or ")
	}
	return "a valid value"
}

func withArticle(s string) string {
	if s == "" {
		return s
	}
	switch s[0] {
	case 'a', 'e', 'i', 'o', 'u':
		return "an " + s
	}
	return "a " + s
}

func jsonTypeName(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number:
		if _, err := strconv.ParseInt(string(v), 10, 64); err == nil {
			return "integer"
		}
		return "number"
	case float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

func compactJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	const limit = 80
	if len(b) > limit {
		return string(b[:limit]) + "…"
	}
	return string(b)
}

// lookupPointer follows a JSON pointer ("" or "/a/0/b") through a decoded
// JSON value and returns nil when the path does not exist.
func lookupPointer(v any, ptr string) any {
	if ptr == "" || ptr == "#" {
		return v
	}
	ptr = strings.TrimPrefix(ptr, "#")
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch x := v.(type) {
		case map[string]any:
			v = x[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

// findCycle reports a struct type reachable from itself, or nil.
func findCycle(t reflect.Type, path []reflect.Type) reflect.Type {
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
		return findCycle(t.Elem(), path)
	case reflect.Struct:
		if slices.Contains(path, t) {
			return t
		}
		path = append(path, t)
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() && !f.Anonymous {
				continue
			}
			if f.Tag.Get("json") == "-" {
				continue
			}
			if c := findCycle(f.Type, path); c != nil {
				return c
			}
		}
	}
	return nil
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// findCollision reports a JSON name that two fields of a struct reachable
// from t share once embedded structs are flattened as encoding/json
// flattens them, with the Go fields declaring it; or "". encoding/json
// resolves such a collision by depth (or drops the name when ambiguous)
// while invopop/jsonschema lets the last declaration define the schema, so
// the schema could check one field while the arguments fill another.
func findCollision(t reflect.Type, seen []reflect.Type) (name, where string) {
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
		return findCollision(t.Elem(), seen)
	case reflect.Struct:
	default:
		return "", ""
	}
	if slices.Contains(seen, t) || reflect.PointerTo(t).Implements(unmarshalerType) {
		return "", ""
	}
	seen = append(seen, t)
	names := map[string][]string{}
	collectJSONNames(t, "", names, nil)
	for _, n := range sortedKeys(names) {
		if fields := names[n]; len(fields) > 1 {
			return n, t.String() + "." + strings.Join(fields, ", "+t.String()+".")
		}
	}
	for i := range t.NumField() {
		f := t.Field(i)
		if (!f.IsExported() && !f.Anonymous) || f.Tag.Get("json") == "-" {
			continue
		}
		if n, w := findCollision(f.Type, seen); n != "" {
			return n, w
		}
	}
	return "", ""
}

// collectJSONNames maps each JSON name of struct t to the Go fields that
// declare it, descending into embedded structs without a JSON name.
func collectJSONNames(t reflect.Type, prefix string, names map[string][]string, path []reflect.Type) {
	if slices.Contains(path, t) {
		return
	}
	path = append(path, t)
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			collectJSONNames(ft, prefix+f.Name+".", names, path)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		names[name] = append(names[name], prefix+f.Name)
	}
}
