package tool

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valetkit/valet/llm"
)

// Registry is a set of tools by name, kept in registration order. It is
// safe for concurrent use. The zero value is an empty registry ready to use.
//
// Lookups read an immutable snapshot through an atomic pointer, so the
// tool calls of a turn never contend on a lock; Add copies and replaces it.
type Registry struct {
	mu   sync.Mutex // serialises Add
	snap atomic.Pointer[snapshot]
}

// snapshot is one immutable state of a Registry.
type snapshot struct {
	byName map[string]Tool
	names  []string
	specs  []llm.ToolSpec
}

func (r *Registry) load() *snapshot {
	if s := r.snap.Load(); s != nil {
		return s
	}
	return &snapshot{}
}

// NewRegistry returns a registry holding tools, in order. It rejects a nil
// tool, a tool with a definition error (ErrInvalidTool) and a second tool
// of the same name (ErrDuplicateTool).
func NewRegistry(tools ...Tool) (*Registry, error) {
	r := &Registry{}
	for _, t := range tools {
		if err := r.Add(t); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Add registers t after the tools already there.
func (r *Registry) Add(t Tool) error {
	if t == nil {
		return fmt.Errorf("%w: nil tool", ErrInvalidTool)
	}
	if err := Err(t); err != nil {
		return err
	}
	spec := t.Spec()
	if !validName(spec.Name) {
		return fmt.Errorf("%w: name %q must match ^[a-zA-Z0-9_-]{1,64}$", ErrInvalidTool, spec.Name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.load()
	if _, dup := old.byName[spec.Name]; dup {
		return fmt.Errorf("%w: %q", ErrDuplicateTool, spec.Name)
	}
	next := &snapshot{byName: make(map[string]Tool, len(old.byName)+1)}
	for k, v := range old.byName {
		next.byName[k] = v
	}
	next.byName[spec.Name] = t
	// Full slice expressions force a copy, so slices handed out earlier
	// never change.
	next.names = append(old.names[:len(old.names):len(old.names)], spec.Name)
	next.specs = append(old.specs[:len(old.specs):len(old.specs)], spec)
	r.snap.Store(next)
	return nil
}

// Get returns the tool registered under name.
func (r *Registry) Get(name string) (Tool, bool) {
	t, ok := r.load().byName[name]
	return t, ok
}

// Len returns the number of tools.
func (r *Registry) Len() int { return len(r.load().names) }

// Names returns the tools' names in registration order, in a new slice.
func (r *Registry) Names() []string { return slices.Clone(r.load().names) }

// Specs returns the tools' specs in registration order. The slice is built
// when tools are added and shared by every caller, so Specs does not
// allocate; do not modify it (appending to it is safe).
func (r *Registry) Specs() []llm.ToolSpec { return r.load().specs }

// Result is the outcome of one tool call as the model will see it.
type Result struct {
	// Content is the tool's output, or a description of the failure that
	// tells the model what to do next.
	Content string
	// IsError is true when the call failed.
	IsError bool
	// Err is the failure for the program: wraps ErrUnknownTool, is an
	// *ArgumentError, wraps context.DeadlineExceeded for a timeout, is a
	// *PanicError, or is the tool's own error. Nil on success.
	Err error
	// Attempts is how many times the tool ran: 1 normally, more when a
	// transient error was retried (WithRetries), 0 when it never ran (an
	// unknown tool, or arguments rejected before the call).
	Attempts int
}

// fixArgumentsHint follows an argument error so the model knows what to do.
const fixArgumentsHint = "\nFix the arguments to match the tool's schema and call the tool again."

// Execute runs one tool call and turns every outcome into a Result: it never
// panics and has no error return. The timeout is the tool's
// Settings.Timeout when set, else defaultTimeout (0 means none). The call
// runs on the calling goroutine; tools are expected to honour ctx.
//
//   - unknown tool: the Result lists the available tools, closest name first
//   - invalid arguments: the ArgumentError text plus an instruction to fix
//     them and call again
//   - timeout: `tool "x" timed out after 30s`
//   - panic: `tool "x" failed: internal error` (details only in Err)
//   - other error: `tool "x" failed: <error text>`
func (r *Registry) Execute(ctx context.Context, call llm.ToolCall, defaultTimeout time.Duration) Result {
	b := r.Bind(call)
	return b.Run(ctx, defaultTimeout)
}

// timeoutError wraps context.DeadlineExceeded and the tool's own error.
type timeoutError struct {
	msg   string
	cause error
}

func (e *timeoutError) Error() string   { return e.msg + ": " + e.cause.Error() }
func (e *timeoutError) Unwrap() []error { return []error{context.DeadlineExceeded, e.cause} }

func (r *Registry) unknown(name string) Result {
	names := r.Names()
	var b strings.Builder
	fmt.Fprintf(&b, "unknown tool %q. ", name)
	if len(names) == 0 {
		b.WriteString("No tools are available.")
	} else {
		dist := make(map[string]int, len(names))
		for _, n := range names {
			dist[n] = editDistance(strings.ToLower(name), strings.ToLower(n))
		}
		slices.SortStableFunc(names, func(a, b string) int { return dist[a] - dist[b] })
		b.WriteString("Available tools: ")
		b.WriteString(strings.Join(names, ", "))
	}
	return Result{Content: b.String(), IsError: true, Err: fmt.Errorf("%w: %q", ErrUnknownTool, name)}
}

// editDistance is the Levenshtein distance between a and b, in runes.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
