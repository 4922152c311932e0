package agent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/tool"
)

// Agent is a stateful agent exposed to the model as a tool (an Agent-Tool).
// In is its input struct: its json and jsonschema tags make the tool's
// schema, exactly as for tool.New. Run is called once every required field
// is collected, valid, and — when the agent asks for it — approved.
//
// An agent may also implement, for the same In:
//
//	Approval(in In) *approval.Request // non-nil: the user confirms before Run
//	Validate(in In) error             // field-level checks beyond the schema
//
// Validate's error may carry field errors made with [InvalidField] (joined
// with errors.Join for several); those fields are asked for again.
type Agent[In any] interface {
	Run(ctx context.Context, in In) (Reply, error)
}

// Reply is what a completed Agent-Tool returns. Text is what the model
// reads; Data, when non-nil, is JSON-encoded after it.
type Reply struct {
	Text string
	Data any
}

// InvalidField reports that an agent's field holds a value Validate
// rejects; the user is asked for it again with problem as the reason.
func InvalidField(field, problem string) error {
	return &tool.ArgumentError{Problems: []tool.FieldError{{Field: field, Rule: "validate", Message: problem}}}
}

// AgentOption configures one registered Agent-Tool.
type AgentOption func(*agentOptions)

type agentOptions struct {
	hidden  bool
	timeout time.Duration
}

// ExposeAsTool(false) keeps an agent out of the tools the model sees; it
// can still be resumed from the pool (by triggers, say).
func ExposeAsTool(expose bool) AgentOption { return func(o *agentOptions) { o.hidden = !expose } }

// AgentTimeout overrides LoopConfig.AgentToolTimeout for one agent's Run.
func AgentTimeout(d time.Duration) AgentOption { return func(o *agentOptions) { o.timeout = d } }

// Registry holds the Agent-Tools of an orchestrator. Register agents
// before passing it to NewOrchestrator; it is safe for concurrent use.
type Registry struct {
	mu     sync.RWMutex
	agents []*agentTool
	byName map[string]*agentTool
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{byName: map[string]*agentTool{}} }

// Errors of Agent-Tools; check them with errors.Is.
var (
	// ErrInvalidAgent wraps definition errors from Register.
	ErrInvalidAgent = errors.New("agent: invalid Agent-Tool")
	// ErrStaleAgent: a pooled agent was made from an older schema (or its
	// agent is no longer registered); it was removed and did not run.
	ErrStaleAgent = errors.New("agent: pooled agent no longer matches its schema")
	// ErrPaused: the pooled agent is paused; resume it first.
	ErrPaused = errors.New("agent: pooled agent is paused")
)

// taskInstruction is the extra property every Agent-Tool takes.
const taskInstruction = "task_instruction"

const confirmationMark = "[Requires user confirmation before execution]"

// Register adds impl under name to reg. The name follows the rules of tool
// names and must not be taken; In must be a struct whose schema tool.New
// could build, without a field named task_instruction.
func Register[In any](reg *Registry, name, description string, impl Agent[In], opts ...AgentOption) error {
	if reg == nil {
		return fmt.Errorf("%w: nil Registry", ErrInvalidAgent)
	}
	if impl == nil {
		return fmt.Errorf("%w: %q has a nil implementation", ErrInvalidAgent, name)
	}
	// tool.New checks the name and builds the schema; its function is
	// never called.
	probe := tool.New(name, description, func(context.Context, In) (string, error) { return "", nil })
	if err := tool.Err(probe); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidAgent, err)
	}
	a := &agentTool{name: name, description: strings.TrimSpace(description), schema: tool.SchemaOf(probe)}
	for _, o := range opts {
		if o != nil {
			o(&a.opts)
		}
	}
	if a.opts.timeout < 0 {
		return fmt.Errorf("%w: %q has a negative timeout", ErrInvalidAgent, name)
	}
	a.run = func(ctx context.Context, fields json.RawMessage) (Reply, error) {
		var in In
		if err := a.decode(fields, &in); err != nil {
			return Reply{}, err
		}
		return impl.Run(ctx, in)
	}
	if v, ok := impl.(interface{ Validate(In) error }); ok {
		a.validate = func(fields json.RawMessage) (err error) {
			defer recoverInto(&err, name)
			var in In
			if err := a.decode(fields, &in); err != nil {
				return err
			}
			return v.Validate(in)
		}
	}
	if ap, ok := impl.(interface{ Approval(In) *approval.Request }); ok {
		a.approval = func(fields json.RawMessage) (_ *approval.Request, err error) {
			defer recoverInto(&err, name)
			var in In
			if err := a.decode(fields, &in); err != nil {
				return nil, err
			}
			return ap.Approval(in), nil
		}
	}
	if err := a.build(reflect.TypeFor[In]()); err != nil {
		return fmt.Errorf("%w: %q: %w", ErrInvalidAgent, name, err)
	}
	reg.mu.Lock()
	defer reg.mu.Unlock()
	if reg.byName == nil {
		reg.byName = map[string]*agentTool{}
	}
	if _, dup := reg.byName[name]; dup {
		return fmt.Errorf("%w: %q is registered twice", ErrInvalidAgent, name)
	}
	reg.byName[name] = a
	reg.agents = append(reg.agents, a)
	return nil
}

// recoverInto turns a panic in an agent's method into an error, so a
// faulty agent never takes the process down.
func recoverInto(err *error, name string) {
	if v := recover(); v != nil {
		*err = &tool.PanicError{Tool: name, Value: v, Stack: debug.Stack()}
	}
}

// Names returns the registered agents' names in registration order.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, len(r.agents))
	for i, a := range r.agents {
		out[i] = a.name
	}
	return out
}

// Spec returns the tool spec the model sees for the named agent: the
// enhanced schema, with task_instruction and the confirmation mark.
func (r *Registry) Spec(name string) (llm.ToolSpec, bool) {
	a := r.get(name)
	if a == nil {
		return llm.ToolSpec{}, false
	}
	return a.spec, true
}

// SchemaVersion returns the fingerprint of the named agent's schema, the
// version stamped on its pool entries.
func (r *Registry) SchemaVersion(name string) (string, bool) {
	a := r.get(name)
	if a == nil {
		return "", false
	}
	return a.version, true
}

func (r *Registry) get(name string) *agentTool {
	if r == nil {
		return nil
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.byName[name]
}

func (r *Registry) list() []*agentTool {
	if r == nil {
		return nil
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Clone(r.agents)
}

// agentTool is one registered agent with its type erased.
type agentTool struct {
	name, description string
	opts              agentOptions
	schema            *tool.Schema    // of In: validation
	spec              llm.ToolSpec    // what the model sees
	editSchema        json.RawMessage // the fields, none required: for edits
	extractSpec       llm.ToolSpec    // forced tool reading fields from a reply
	version           string
	required          map[string]bool
	defaults          map[string]json.RawMessage
	run               func(ctx context.Context, fields json.RawMessage) (Reply, error)
	validate          func(fields json.RawMessage) error                      // nil: no Validate method
	approval          func(fields json.RawMessage) (*approval.Request, error) // nil: never needs approval
	// plain: a plain tool's high-risk call waiting for approval, run
	// through this registry (risk.go); nil for an Agent-Tool.
	plain *tool.Registry
}

// build derives the model's schema, the version and the field facts from
// the validation schema.
func (a *agentTool) build(t reflect.Type) error {
	raw := a.schema.JSON()
	sum := sha256.Sum256(raw)
	a.version = hex.EncodeToString(sum[:8])

	var root map[string]any
	if err := json.Unmarshal(raw, &root); err != nil {
		return err
	}
	props, _ := root["properties"].(map[string]any)
	if _, clash := props[taskInstruction]; clash {
		return fmt.Errorf("the input struct must not have a %q field: every Agent-Tool gets one", taskInstruction)
	}
	a.required = map[string]bool{}
	if req, ok := root["required"].([]any); ok {
		for _, r := range req {
			if s, ok := r.(string); ok {
				a.required[s] = true
			}
		}
	}
	a.defaults = map[string]json.RawMessage{}
	rules := ruleTags(t)
	for name, p := range props {
		pm, ok := p.(map[string]any)
		if !ok {
			continue
		}
		if d, ok := pm["default"]; ok {
			if b, err := json.Marshal(d); err == nil {
				a.defaults[name] = b
			}
		}
		if d := describe(pm, rules[name], a.required[name]); d != "" {
			pm["description"] = d
		} else {
			delete(pm, "description") // never an empty description
		}
	}
	// The model may leave out what it does not know: the user is asked for
	// missing required fields instead of the model guessing them.
	delete(root, "required")
	edit, err := json.Marshal(root)
	if err != nil {
		return err
	}
	a.editSchema = edit
	props["unrelated"] = map[string]any{
		"type":        "boolean",
		"description": "True when the user's reply does not answer this request but is about something else.",
	}
	ext, err := json.Marshal(root)
	if err != nil {
		return err
	}
	delete(props, "unrelated")
	a.extractSpec = llm.ToolSpec{Name: ProvideFieldsToolName, Description: "Give the values the user's reply supplies for " + a.name + ".", Parameters: ext}
	props[taskInstruction] = map[string]any{
		"type": "string",
		"description": "Optional. Context for the task that fits no other field: the user's wording, preferences, constraints. " +
			"Leave out fields you do not know rather than guessing; the user will be asked for them.",
	}
	params, err := json.Marshal(root)
	if err != nil {
		return err
	}
	desc := a.description
	if a.approval != nil {
		desc = strings.TrimSpace(desc + "\n" + confirmationMark)
	}
	a.spec = llm.ToolSpec{Name: a.name, Description: desc, Parameters: params}
	return nil
}

// ruleTags reads the `rule:"..."` tags of t's fields: custom validation
// rules in words, shown to the model next to the field.
func ruleTags(t reflect.Type) map[string]string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	out := map[string]string{}
	for f := range t.Fields() {
		r := f.Tag.Get("rule")
		if r == "" || !f.IsExported() {
			continue
		}
		name := f.Name
		if j := f.Tag.Get("json"); j != "" {
			if n, _, _ := strings.Cut(j, ","); n != "" && n != "-" {
				name = n
			}
		}
		out[name] = r
	}
	return out
}

// describe appends the property's constraints to its description, so a
// model that ignores schema keywords still reads them.
func describe(p map[string]any, rule string, required bool) string {
	var parts []string
	if d, _ := p["description"].(string); strings.TrimSpace(d) != "" {
		parts = append(parts, strings.TrimRight(strings.TrimSpace(d), "."))
	}
	if required {
		parts = append(parts, "Required")
	}
	if f, ok := p["format"].(string); ok {
		parts = append(parts, "Format: "+f)
	}
	if pat, ok := p["pattern"].(string); ok {
		parts = append(parts, "Must match the pattern "+pat)
	}
	if e, ok := p["enum"].([]any); ok {
		vals := make([]string, len(e))
		for i, v := range e {
			b, _ := json.Marshal(v)
			vals[i] = string(b)
		}
		parts = append(parts, "One of "+strings.Join(vals, ", "))
	}
	for _, k := range [...]struct{ key, text string }{
		{"minimum", "Minimum %v"}, {"maximum", "Maximum %v"},
		{"exclusiveMinimum", "Greater than %v"}, {"exclusiveMaximum", "Less than %v"},
		{"minLength", "At least %v characters"}, {"maxLength", "At most %v characters"},
		{"minItems", "At least %v items"}, {"maxItems", "At most %v items"},
	} {
		if v, ok := p[k.key]; ok {
			parts = append(parts, fmt.Sprintf(k.text, v))
		}
	}
	if d, ok := p["default"]; ok {
		b, _ := json.Marshal(d)
		parts = append(parts, "Default "+string(b))
	}
	if rule = strings.TrimSpace(rule); rule != "" {
		parts = append(parts, "Rule: "+strings.TrimRight(rule, "."))
	}
	if len(parts) == 0 {
		return ""
	}
	return strings.Join(parts, ". ") + "."
}

// decode fills defaults for absent optional fields and decodes fields into
// v, validating them against the schema.
func (a *agentTool) decode(fields json.RawMessage, v any) error {
	if len(a.defaults) > 0 {
		m := map[string]json.RawMessage{}
		if len(bytes.TrimSpace(fields)) > 0 {
			if err := json.Unmarshal(fields, &m); err != nil {
				return err
			}
		}
		changed := false
		for k, d := range a.defaults {
			if _, ok := m[k]; !ok {
				m[k] = d
				changed = true
			}
		}
		if changed {
			b, err := json.Marshal(m)
			if err != nil {
				return err
			}
			fields = b
		}
	}
	return a.schema.Decode(fields, v)
}

// collected is the outcome of merging new arguments into an agent's fields.
type collected struct {
	fields   json.RawMessage // the valid fields, a JSON object
	task     string          // task_instruction, if given
	missing  []string        // required fields still absent
	problems []string        // why given values were rejected
	err      error           // Validate failed (panicked): the agent cannot go on
}

func (c *collected) complete() bool { return len(c.missing) == 0 && len(c.problems) == 0 }

// collect merges args (the model's arguments, or fields extracted from the
// user's reply) into prev: valid values are adopted, invalid ones dropped
// and reported, and what is still required is listed. When everything is
// there it runs the agent's Validate.
func (a *agentTool) collect(prev, args json.RawMessage) collected {
	var c collected
	fields := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(prev)) > 0 {
		_ = json.Unmarshal(prev, &fields) // prev was produced here: an object
	}
	if len(bytes.TrimSpace(args)) > 0 {
		var in map[string]json.RawMessage
		if err := json.Unmarshal(args, &in); err != nil || in == nil {
			c.problems = append(c.problems, "the arguments must be a JSON object")
		}
		for k, v := range in {
			if k == taskInstruction {
				_ = json.Unmarshal(v, &c.task)
				continue
			}
			if string(bytes.TrimSpace(v)) == "null" {
				continue // "not known": same as leaving it out
			}
			fields[k] = v
		}
	}
	bad := map[string]bool{}
	for range len(fields) + 1 {
		b, _ := json.Marshal(fields)
		err := a.schema.Validate(b)
		var ae *tool.ArgumentError
		if !errors.As(err, &ae) {
			break
		}
		dropped := false
		for _, p := range ae.Problems {
			top, _, _ := strings.Cut(p.Field, "/")
			if p.Rule == "required" && !strings.Contains(p.Field, "/") {
				continue // listed below
			}
			if top == "" {
				continue
			}
			if _, ok := fields[top]; ok {
				delete(fields, top)
				dropped = true
			}
			if !bad[p.String()] {
				bad[p.String()] = true
				c.problems = append(c.problems, p.String())
			}
		}
		if !dropped {
			break
		}
	}
	for name := range a.required {
		if _, ok := fields[name]; !ok {
			c.missing = append(c.missing, name)
		}
	}
	slices.Sort(c.missing)
	c.fields, _ = json.Marshal(fields)
	if c.complete() && a.validate != nil {
		if err := a.validate(c.fields); err != nil {
			if pe := (*tool.PanicError)(nil); errors.As(err, &pe) {
				c.err = err
				return c
			}
			c.problems = append(c.problems, validationProblems(err, fields)...)
			c.fields, _ = json.Marshal(fields)
		}
	}
	return c
}

// validationProblems turns Validate's error into problem texts, dropping
// the named fields from fields so they are asked for again.
func validationProblems(err error, fields map[string]json.RawMessage) []string {
	var out []string
	var walk func(error)
	walk = func(err error) {
		if ae, ok := err.(*tool.ArgumentError); ok {
			for _, p := range ae.Problems {
				top, _, _ := strings.Cut(p.Field, "/")
				delete(fields, top)
				out = append(out, p.Field+": "+p.Message)
			}
			return
		}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		if ae := (*tool.ArgumentError)(nil); errors.As(err, &ae) {
			walk(ae)
			return
		}
		out = append(out, err.Error())
	}
	walk(err)
	return out
}

// content renders a Reply as the text of a tool result.
func (r Reply) content() string {
	if r.Data == nil {
		return r.Text
	}
	b, err := json.Marshal(r.Data)
	if err != nil {
		return r.Text
	}
	if r.Text == "" {
		return string(b)
	}
	return r.Text + "\n" + string(b)
}

// agentProxy puts an Agent-Tool into the orchestrator's tool registry, so
// its spec is listed with the tools and unknown-tool answers name it. Its
// Call is never used: the orchestrator runs agents itself.
type agentProxy struct{ a *agentTool }

func (p agentProxy) Spec() llm.ToolSpec { return p.a.spec }
func (p agentProxy) Call(context.Context, json.RawMessage) (string, error) {
	return "", fmt.Errorf("agent %q runs through the orchestrator", p.a.name)
}
