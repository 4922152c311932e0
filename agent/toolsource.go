package agent

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"

	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/tool"
)

// ToolSource supplies tools whose list may change while the orchestrator
// runs: the tools of an MCP server (tool/mcptool's Set is one), a plugin
// directory, a feature flag. The orchestrator reads every source of
// Config.ToolSources once at the start of each run, so a changed list
// reaches the model from the next run on, never in the middle of one.
//
// Tools must be safe for concurrent use and should answer quickly (the
// run waits for it); returning the same slice while nothing changed lets
// the orchestrator reuse what it built from it. A source that returns an
// error, panics, or offers a tool whose name another tool of the run
// already has does not stop the run: those tools are left out of that
// run and a WARN line says why.
type ToolSource interface {
	Tools(ctx context.Context) ([]tool.Tool, error)
}

// runToolset is the tool set of a run with ToolSources: the orchestrator's
// own tools (Config.Tools and the Agent-Tools) followed by the sources'.
type runToolset struct {
	reg    *tool.Registry
	specs  []llm.ToolSpec
	tokens int // of specs, estimated once
	// refused are the reasons tools were left out, logged by every run
	// that uses this set.
	refused []string
}

// sourceCache keeps the last tool set built from the sources with what it
// was built from, so runs that find the same lists reuse it.
type sourceCache struct {
	mu    sync.Mutex
	lists [][]tool.Tool // per source, as returned; nil for one that failed
	set   *runToolset
}

// loadSources reads Config.ToolSources once for the run. Without sources
// it does nothing, and the run uses the orchestrator's registry.
func (r *run) loadSources() {
	o := r.o
	srcs := o.cfg.ToolSources
	if len(srcs) == 0 || r.toolset != nil {
		return
	}
	lists := make([][]tool.Tool, len(srcs))
	for i, s := range srcs {
		ts, err := readSource(r.ctx, s)
		if err != nil {
			r.log().WarnContext(r.ctx, "agent: a tool source failed; this run goes on without its tools", "source", i, "err", maskText(err.Error()))
			continue
		}
		lists[i] = ts
	}
	c := &o.srcCache
	c.mu.Lock()
	set := c.set
	if set == nil || !sameLists(c.lists, lists) {
		set = o.buildToolset(lists)
		// A copy: a source that changes its slice in place is not
		// mistaken for one that returned the same tools.
		for i := range lists {
			if lists[i] != nil {
				lists[i] = slices.Clone(lists[i])
			}
		}
		c.lists, c.set = lists, set
	}
	c.mu.Unlock()
	for _, why := range set.refused {
		r.log().WarnContext(r.ctx, "agent: a tool of a tool source was refused for this run", "reason", why)
	}
	r.toolset = set
}

// readSource calls s.Tools, turning a panic into an error.
func readSource(ctx context.Context, s ToolSource) (ts []tool.Tool, err error) {
	defer func() {
		if v := recover(); v != nil {
			ts, err = nil, fmt.Errorf("agent: tool source panicked: %v", v)
		}
	}()
	if s == nil {
		return nil, fmt.Errorf("agent: nil tool source")
	}
	return s.Tools(ctx)
}

// buildToolset merges the orchestrator's tools with the sources' lists.
// A source tool that is nil, badly defined, or named like a tool already
// in the set is refused, never shadowing the one there.
func (o *Orchestrator) buildToolset(lists [][]tool.Tool) *runToolset {
	set := &runToolset{}
	names := o.tools.Names()
	all := make([]tool.Tool, 0, len(names))
	seen := make(map[string]int, len(names))
	for _, n := range names {
		t, _ := o.tools.Get(n)
		all = append(all, t)
		seen[n] = -1
	}
	for i, ts := range lists {
		for _, t := range ts {
			if t == nil {
				set.refused = append(set.refused, fmt.Sprintf("source %d: a nil tool", i))
				continue
			}
			if err := tool.Err(t); err != nil {
				set.refused = append(set.refused, fmt.Sprintf("source %d: %v", i, err))
				continue
			}
			name := t.Spec().Name
			if prev, dup := seen[name]; dup {
				by := "a tool of Config.Tools or an Agent-Tool"
				if prev >= 0 {
					by = fmt.Sprintf("a tool of source %d", prev)
				}
				set.refused = append(set.refused, fmt.Sprintf("source %d: tool %q is already %s", i, name, by))
				continue
			}
			// Registry.Add checks the name and definition once more.
			if err := (&tool.Registry{}).Add(t); err != nil {
				set.refused = append(set.refused, fmt.Sprintf("source %d: %v", i, err))
				continue
			}
			seen[name] = i
			all = append(all, t)
		}
	}
	reg, err := tool.NewRegistry(all...)
	if err != nil { // cannot happen: every tool was checked above
		reg = o.tools
		set.refused = append(set.refused, err.Error())
	}
	set.reg, set.specs = reg, reg.Specs()
	set.tokens = toolTokens(o, set.specs)
	return set
}

// sameLists reports whether the sources returned the same tools as last
// time, in the same order.
func sameLists(a, b [][]tool.Tool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if len(a[i]) != len(b[i]) || (a[i] == nil) != (b[i] == nil) {
			return false
		}
		for j := range a[i] {
			if !sameTool(a[i][j], b[i][j]) {
				return false
			}
		}
	}
	return true
}

// sameTool reports whether a and b are the same pointer. Tools of other
// kinds never count as the same (comparing them could panic), so a set
// with such tools is rebuilt for every run.
func sameTool(a, b tool.Tool) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	ta := reflect.TypeOf(a)
	if ta != reflect.TypeOf(b) || ta.Kind() != reflect.Pointer {
		return false
	}
	return a == b
}

// tools returns the run's registry: a specialist's own, the
// orchestrator's, or with ToolSources the one built for this run.
func (r *run) tools() *tool.Registry {
	if r.sub != nil && r.sub.reg != nil {
		return r.sub.reg // a specialist's scope (spawn_skill.go)
	}
	if r.toolset != nil {
		return r.toolset.reg
	}
	return r.o.tools
}

// specs returns the specs of the run's tools.
func (r *run) specs() []llm.ToolSpec {
	if r.sub != nil {
		return r.sub.specs
	}
	if r.toolset != nil {
		return r.toolset.specs
	}
	return r.o.specs
}

// specTokens estimates the tokens of the run's tool specs.
func (r *run) specTokens() int {
	if r.sub != nil {
		return r.sub.tokens
	}
	if r.toolset != nil {
		return r.toolset.tokens
	}
	return r.o.specTokens
}
