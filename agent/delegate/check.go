package delegate

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/valetkit/valet/budget"
	"github.com/valetkit/valet/internal/ids"
)

// Bounds of what a graph and a result may hold.
const (
	// MaxTasks is the most tasks a graph may have.
	MaxTasks = 10000
	// MaxIDLen is the longest id of a task, a graph or a result's half
	// (see Result.ID), and of a skill or model name, in bytes.
	MaxIDLen = 64
	// MaxOwnerIDLen is the longest tenant or conversation id, in bytes:
	// the one limit of every valet package (agent.MaxIDLen,
	// memory.MaxIDLen…), so every conversation the orchestrator takes can
	// delegate.
	MaxOwnerIDLen = ids.MaxLen
	// MaxTaskBytes is the longest Task and the longest Context of a
	// task, each, in bytes.
	MaxTaskBytes = 256 << 10
	// MaxGraphBytes is the most text (Task and Context) all the tasks of
	// a graph may hold together, in bytes.
	MaxGraphBytes = 4 << 20
	// MaxResultBytes is the longest Text of a result, in bytes. An engine
	// cuts a longer output of a task there and marks its result partial.
	MaxResultBytes = 1 << 20
	// refPrefix opens a reference to a result.
	refPrefix = "[agent_result:"
)

// NewID returns a new random id for a graph or a result: 32 hex digits.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read does not fail
	return hex.EncodeToString(b[:])
}

// ResultID is the id of the result of task taskID of graph graphID: the
// graph's id, a dot, the task's id. Within the graph, [agent_result:taskID]
// in a task's Context names the same result.
func ResultID(graphID, taskID string) string { return graphID + "." + taskID }

// NewGraph returns a graph of a new id (NewID) for the tenant's
// conversation, its tasks those of specs, pending; or the error of
// Graph.Check.
func NewGraph(tenantID, conversationID string, specs []TaskSpec) (Graph, error) {
	g := Graph{ID: NewID(), TenantID: tenantID, ConversationID: conversationID, Status: GraphRunning}
	g.Tasks = make([]Task, len(specs))
	for i, s := range specs {
		s.DependsOn = append([]string(nil), s.DependsOn...)
		g.Tasks[i] = Task{TaskSpec: s, Status: TaskPending}
	}
	return g, g.Check()
}

// Refs returns the ids named by [agent_result:ID] references in text, in
// order of appearance, each once. An ID is 1 to MaxIDLen characters of
// [A-Za-z0-9._-]; anything else between the brackets is no reference.
func Refs(text string) []string {
	var ids []string
	for {
		i := strings.Index(text, refPrefix)
		if i < 0 {
			return ids
		}
		text = text[i+len(refPrefix):]
		end := strings.IndexByte(text, ']')
		if end < 0 {
			return ids
		}
		id := text[:end]
		if validResultID(id) && !contains(ids, id) {
			ids = append(ids, id)
		}
	}
}

func contains(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// validTaskID: 1..MaxIDLen of [a-z0-9_-].
func validTaskID(id string) bool {
	if id == "" || len(id) > MaxIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// validResultID: 1..2*MaxIDLen+1 of [A-Za-z0-9._-] (a graph's id, a dot,
// a task's id fits).
func validResultID(id string) bool {
	if id == "" || len(id) > 2*MaxIDLen+1 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// checkName refuses an empty (when required), overlong, not UTF-8 or
// control-holding name: names go on one line in logs and prompts.
func checkName(what, s string, required bool) error {
	switch {
	case s == "" && required:
		return fmt.Errorf("%w: %s is empty", ErrInvalid, what)
	case len(s) > MaxIDLen:
		return fmt.Errorf("%w: %s is longer than %d bytes", ErrInvalid, what, MaxIDLen)
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: %s is not UTF-8", ErrInvalid, what)
	}
	return oneLine(what, s)
}

// oneLine refuses a name holding a control character: names go on one
// line in logs and prompts.
func oneLine(what, s string) error {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == 0x2028 || r == 0x2029 {
			return fmt.Errorf("%w: %s holds a control character", ErrInvalid, what)
		}
	}
	return nil
}

// checkOwner refuses a tenant or conversation id that is empty (when
// required), over MaxOwnerIDLen bytes, not UTF-8, holding a NUL byte
// (ids.Check, as every valet package), or not one line.
func checkOwner(what, s string, required bool) error {
	if s == "" && !required {
		return nil
	}
	if err := ids.Check(what, s); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return oneLine(what, s)
}

// Check reports, wrapping ErrInvalid, what makes r unfit to store: a
// malformed ID, an empty TenantID, an unknown Status, a negative Usage, a
// Text over MaxResultBytes, not UTF-8 or holding a NUL byte.
func (r *Result) Check() error {
	if !validResultID(r.ID) {
		return fmt.Errorf("%w: result id %q is not 1 to %d characters of [A-Za-z0-9._-]", ErrInvalid, clip(r.ID), 2*MaxIDLen+1)
	}
	if err := checkOwner("tenant id", r.TenantID, true); err != nil {
		return err
	}
	if err := checkOwner("conversation id", r.ConversationID, false); err != nil {
		return err
	}
	for _, f := range [][2]string{{"graph id", r.GraphID}, {"task id", r.TaskID}, {"skill", r.Skill}} {
		if err := checkName(f[0], f[1], false); err != nil {
			return err
		}
	}
	if !r.Status.Valid() {
		return fmt.Errorf("%w: result status %q is not completed, partial or failed", ErrInvalid, clip(string(r.Status)))
	}
	if len(r.Text) > MaxResultBytes {
		return fmt.Errorf("%w: result text is longer than %d bytes", ErrInvalid, MaxResultBytes)
	}
	if !utf8.ValidString(r.Text) {
		return fmt.Errorf("%w: result text is not UTF-8", ErrInvalid)
	}
	if strings.IndexByte(r.Text, 0) >= 0 {
		return fmt.Errorf("%w: result text holds a NUL byte (Output.Clean replaces them)", ErrInvalid)
	}
	if err := r.Usage.Check(); err != nil {
		return fmt.Errorf("%w: result usage: %w", ErrInvalid, err)
	}
	return nil
}

// clip shortens s for an error message and puts it on one line.
func clip(s string) string {
	if len(s) > MaxIDLen {
		s = s[:MaxIDLen] + "…"
	}
	return strings.ToValidUTF8(s, "?")
}

// Check reports, wrapping ErrInvalid, what makes g unfit to run: an
// empty or malformed ID, TenantID or ConversationID; no task, or more
// than MaxTasks; a task id not 1 to MaxIDLen characters of [a-z0-9_-],
// or given twice; an empty Task; a Task or Context over MaxTaskBytes,
// tasks whose texts are over MaxGraphBytes in all; a Task or Context
// not UTF-8 or holding a NUL byte; a dependency on an unknown task or on itself, or given
// twice; a reference [agent_result:ID] in a task's Task or Context naming
// a task of the graph it does not depend on; an invalid Budget; and
// depends_on edges that make a cycle (ErrCycle, naming a task on it).
func (g *Graph) Check() error {
	if !validResultID(g.ID) || len(g.ID) > MaxIDLen {
		return fmt.Errorf("%w: graph id %q is not 1 to %d characters of [A-Za-z0-9._-]", ErrInvalid, clip(g.ID), MaxIDLen)
	}
	if err := checkOwner("tenant id", g.TenantID, true); err != nil {
		return err
	}
	if err := checkOwner("conversation id", g.ConversationID, false); err != nil {
		return err
	}
	if err := checkName("model", g.Model, false); err != nil {
		return err
	}
	if err := g.Budget.Check(); err != nil {
		return fmt.Errorf("%w: graph budget: %w", ErrInvalid, err)
	}
	if len(g.Tasks) == 0 {
		return fmt.Errorf("%w: graph has no task", ErrInvalid)
	}
	if len(g.Tasks) > MaxTasks {
		return fmt.Errorf("%w: graph has %d tasks, more than %d", ErrInvalid, len(g.Tasks), MaxTasks)
	}
	index := make(map[string]int, len(g.Tasks))
	total := 0
	for i := range g.Tasks {
		t := &g.Tasks[i]
		if total += len(t.Task) + len(t.Context); total > MaxGraphBytes {
			return fmt.Errorf("%w: the graph's task texts are longer than %d bytes in all", ErrInvalid, MaxGraphBytes)
		}
		if !validTaskID(t.ID) {
			return fmt.Errorf("%w: task id %q is not 1 to %d characters of [a-z0-9_-]", ErrInvalid, clip(t.ID), MaxIDLen)
		}
		if _, dup := index[t.ID]; dup {
			return fmt.Errorf("%w: task id %q is given twice", ErrInvalid, t.ID)
		}
		index[t.ID] = i
	}
	for i := range g.Tasks {
		t := &g.Tasks[i]
		if err := checkName("skill of task "+t.ID, t.Skill, false); err != nil {
			return err
		}
		if strings.TrimSpace(t.Task) == "" {
			return fmt.Errorf("%w: task %q has no task text", ErrInvalid, t.ID)
		}
		for _, f := range [][2]string{{"task", t.Task}, {"context", t.Context}} {
			if len(f[1]) > MaxTaskBytes {
				return fmt.Errorf("%w: %s text of task %q is longer than %d bytes", ErrInvalid, f[0], t.ID, MaxTaskBytes)
			}
			if !utf8.ValidString(f[1]) {
				return fmt.Errorf("%w: %s text of task %q is not UTF-8", ErrInvalid, f[0], t.ID)
			}
			if strings.IndexByte(f[1], 0) >= 0 {
				return fmt.Errorf("%w: %s text of task %q holds a NUL byte", ErrInvalid, f[0], t.ID)
			}
		}
		for j, d := range t.DependsOn {
			if d == t.ID {
				return fmt.Errorf("%w: task %q depends on itself", ErrCycle, t.ID)
			}
			if _, ok := index[d]; !ok {
				return fmt.Errorf("%w: task %q depends on %q, which is not a task of the graph", ErrInvalid, t.ID, clip(d))
			}
			if contains(t.DependsOn[:j], d) {
				return fmt.Errorf("%w: task %q depends on %q twice", ErrInvalid, t.ID, d)
			}
		}
		for _, text := range []string{t.Task, t.Context} {
			for _, ref := range Refs(text) {
				if _, ok := index[ref]; ok && !contains(t.DependsOn, ref) {
					return fmt.Errorf("%w: task %q refers to [agent_result:%s] but does not depend on task %q",
						ErrInvalid, t.ID, ref, ref)
				}
			}
		}
	}
	return checkAcyclic(g.Tasks, index)
}

// checkAcyclic refuses a cycle with ErrCycle naming a task on it: an
// iterative depth-first search, so a chain of MaxTasks does not grow the
// stack.
func checkAcyclic(tasks []Task, index map[string]int) error {
	const (
		unseen = iota
		onPath
		done
	)
	state := make([]uint8, len(tasks))
	type frame struct{ node, next int }
	var stack []frame
	for root := range tasks {
		if state[root] != unseen {
			continue
		}
		state[root] = onPath
		stack = append(stack[:0], frame{root, 0})
		for len(stack) > 0 {
			f := &stack[len(stack)-1]
			deps := tasks[f.node].DependsOn
			if f.next == len(deps) {
				state[f.node] = done
				stack = stack[:len(stack)-1]
				continue
			}
			d := index[deps[f.next]]
			f.next++
			switch state[d] {
			case onPath:
				return fmt.Errorf("%w: task %q depends on itself through %q", ErrCycle, tasks[d].ID, tasks[f.node].ID)
			case unseen:
				state[d] = onPath
				stack = append(stack, frame{d, 0})
			}
		}
	}
	return nil
}

// Spent returns what cap of l c reached, as a sentence an engine puts in
// the Error of a task it does not start, or "" while c is within l.
func Spent(l budget.Limits, c budget.Consumed) string {
	switch {
	case l.MaxTokens > 0 && c.Tokens >= l.MaxTokens:
		return fmt.Sprintf("the graph's budget of %d tokens is spent", l.MaxTokens)
	case l.MaxCostUSD > 0 && c.CostUSD >= l.MaxCostUSD:
		return fmt.Sprintf("the graph's budget of %.4f USD is spent", l.MaxCostUSD)
	case l.MaxWall > 0 && c.Wall >= l.MaxWall:
		return fmt.Sprintf("the graph's wall time of %s is spent", l.MaxWall)
	case l.MaxToolCalls > 0 && c.ToolCalls >= l.MaxToolCalls:
		return fmt.Sprintf("the graph's budget of %d tool calls is spent", l.MaxToolCalls)
	}
	return ""
}

// OneAtATime reports whether a graph with Budget l runs one task at a
// time: l caps tokens, cost or tool calls (see Graph.Budget).
func OneAtATime(l budget.Limits) bool {
	return l.MaxTokens > 0 || l.MaxCostUSD > 0 || l.MaxToolCalls > 0
}

// Clean returns o fit to store as a result: an empty Status made
// ResultCompleted, an unknown one ResultFailed; a Text over
// MaxResultBytes cut there (at a rune's start) and its Status made
// ResultPartial when it was ResultCompleted; bytes not UTF-8, and NUL
// bytes, replaced by U+FFFD;
// an invalid Usage zeroed.
func (o Output) Clean() Output {
	switch {
	case o.Status == "":
		o.Status = ResultCompleted
	case !o.Status.Valid():
		o.Status = ResultFailed
	}
	o.Text = strings.ToValidUTF8(o.Text, "\uFFFD")
	if strings.IndexByte(o.Text, 0) >= 0 { // PostgreSQL's text cannot hold it
		o.Text = strings.ReplaceAll(o.Text, "\x00", "\uFFFD")
	}
	if len(o.Text) > MaxResultBytes {
		cut := MaxResultBytes
		for cut > 0 && !utf8.RuneStart(o.Text[cut]) {
			cut--
		}
		o.Text = o.Text[:cut]
		if o.Status == ResultCompleted {
			o.Status = ResultPartial
		}
	}
	if o.Usage.Check() != nil {
		o.Usage = budget.Consumed{}
	}
	return o
}

// Add returns c plus d.
func add(c, d budget.Consumed) budget.Consumed {
	return budget.Consumed{Tokens: c.Tokens + d.Tokens, CostUSD: c.CostUSD + d.CostUSD, Wall: c.Wall + d.Wall, ToolCalls: c.ToolCalls + d.ToolCalls}
}
