package llmtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/valetkit/valet/llm"
)

// The tools the orchestrator forces in its side calls. They are spelled out
// rather than imported because the approval and agent packages test with
// llmtest; a test checks they still match approval.ResolveToolName and
// agent.ProvideFieldsToolName.
const (
	resolveToolName       = "resolve_approvals"
	provideFieldsToolName = "provide_fields"
)

// Decision answers one pending approval in [Decide]. Make it with
// [Approve], [Edit] or [Cancel], which take the approval's position.
//
// Positions count from 0 in the order the orchestrator's approval call
// lists the pending approvals (the numbers the model is shown), which is
// the order of Result.PendingApprovals and of
// Orchestrator.ListPendingApprovals: oldest first, and those raised in one
// turn in the order the model called them.
type Decision struct {
	pos    int
	action string
	fields any
	reason string
}

// Approve approves the pending approval at position pos (from 0).
func Approve(pos int) Decision { return Decision{pos: pos, action: "approve"} }

// Cancel cancels the pending approval at position pos (from 0).
func Cancel(pos int) Decision { return Decision{pos: pos, action: "cancel"} }

// Edit approves the pending approval at position pos (from 0) with changed
// fields: a non-empty JSON object, given as JSON text (a string or []byte)
// or as a value to encode, e.g. `{"to":"me@example.com"}`.
func Edit(pos int, fields any) Decision { return Decision{pos: pos, action: "edit", fields: fields} }

// Because returns d with the user's reason, e.g.
// llmtest.Cancel(1).Because("too expensive").
func (d Decision) Because(reason string) Decision {
	d.reason = reason
	return d
}

// String returns d as it is written, e.g. "Cancel(1)".
func (d Decision) String() string {
	name := "Decision"
	if d.action != "" {
		name = strings.ToUpper(d.action[:1]) + d.action[1:]
	}
	return name + "(" + strconv.Itoa(d.pos) + ")"
}

// decisionArgs is one entry of the resolve_approvals arguments.
type decisionArgs struct {
	ID     string          `json:"id"`
	Action string          `json:"action"`
	Fields json.RawMessage `json:"fields,omitempty"`
	Reason string          `json:"reason,omitempty"`
}

// Decide returns a reply to the orchestrator's approval call: a call of its
// forced resolve_approvals tool that makes decisions, in order (the order
// in which approved actions run). It reads the pending approvals' ids from
// the request, so a test answers by position (see [Decision]):
//
//	llmtest.Decide(llmtest.Approve(0), llmtest.Cancel(1), llmtest.Edit(2, `{"to":"me@example.com"}`))
//
// Approvals it does not name stay pending; Decide() with no decisions says
// the user's message decided none. The call fails with [ErrReplyMismatch]
// (and the failure is recorded for [Script.Err] and [Script.Strict]) when
// the request has no resolve_approvals tool (no approval is pending, or
// the script is out of step with the bot), when a position has no pending
// approval, when two decisions name the same one, or when an Edit's fields
// are not a non-empty JSON object.
//
// A single pending approval answered with a plain "yes" or "no" is decided
// without a model call, so such a message needs no reply in the script.
func Decide(decisions ...Decision) Reply {
	ds := slices.Clone(decisions)
	return Reply{build: func(req llm.Request) (Reply, error) {
		ids, err := PendingApprovalIDs(req)
		if err != nil {
			return Reply{}, fmt.Errorf("%s: %w", decideString(ds), err)
		}
		out := make([]decisionArgs, 0, len(ds))
		by := make(map[int]Decision, len(ds))
		for _, d := range ds {
			switch {
			case d.action == "":
				return Reply{}, fmt.Errorf("%v: not made with Approve, Edit or Cancel", d)
			case d.pos < 0 || d.pos >= len(ids):
				return Reply{}, fmt.Errorf("%v: no approval at position %d; %s", d, d.pos, pendingString(ids))
			}
			if prev, dup := by[d.pos]; dup {
				return Reply{}, fmt.Errorf("%v and %v decide the same approval", prev, d)
			}
			by[d.pos] = d
			a := decisionArgs{ID: ids[d.pos], Action: d.action, Reason: d.reason}
			if d.action == "edit" {
				if a.Fields, err = object(d.fields); err != nil || bytes.Equal(a.Fields, []byte("{}")) {
					if err == nil {
						err = errors.New("no field changed")
					}
					return Reply{}, fmt.Errorf("%v: fields must be a non-empty JSON object: %w", d, err)
				}
			}
			out = append(out, a)
		}
		return resolveCall(out), nil
	}}
}

// ApproveAll returns a reply to the orchestrator's approval call that
// approves every pending approval, in the order they are listed. It fails
// like [Decide] when no approval is pending.
func ApproveAll() Reply { return all("approve", "ApproveAll()") }

// CancelAll returns a reply to the orchestrator's approval call that
// cancels every pending approval. It fails like [Decide] when no approval
// is pending.
func CancelAll() Reply { return all("cancel", "CancelAll()") }

func all(action, name string) Reply {
	return Reply{build: func(req llm.Request) (Reply, error) {
		ids, err := PendingApprovalIDs(req)
		if err != nil {
			return Reply{}, fmt.Errorf("%s: %w", name, err)
		}
		out := make([]decisionArgs, len(ids))
		for i, id := range ids {
			out[i] = decisionArgs{ID: id, Action: action}
		}
		return resolveCall(out), nil
	}}
}

func resolveCall(ds []decisionArgs) Reply {
	return Calls(Call(resolveToolName, struct {
		Decisions []decisionArgs `json:"decisions"`
	}{ds}))
}

func decideString(ds []Decision) string {
	s := make([]string, len(ds))
	for i, d := range ds {
		s[i] = d.String()
	}
	return "Decide(" + strings.Join(s, ", ") + ")"
}

func pendingString(ids []string) string {
	if len(ids) == 1 {
		return "1 approval is pending, at position 0"
	}
	return fmt.Sprintf("%d approvals are pending, at positions 0 to %d", len(ids), len(ids)-1)
}

// PendingApprovalIDs returns the ids of the approvals the request's
// resolve_approvals tool lists, in order (the order of
// Result.PendingApprovals): from the enum of decisions[].id in its
// parameters, or else from its description's `- id "…"` lines. It fails
// when the request has no such tool or it lists none. Decide and the other
// helpers use it; a scripted model that answers by its own rules may too.
func PendingApprovalIDs(req llm.Request) ([]string, error) {
	spec, ok := findTool(req, resolveToolName)
	if !ok {
		// The likeliest cause: a plain yes or no to the only pending
		// approval is decided without a model call (approval.Quick), so a
		// Decide scripted for it meets the next call instead.
		return nil, fmt.Errorf("the request has no %s tool, so no approval is pending (%s); "+
			"a plain yes or no reply to a single pending approval is decided without a model call, "+
			"so the script should have no Decide or ApproveAll reply for it", resolveToolName, describeTools(req))
	}
	var p struct {
		Properties struct {
			Decisions struct {
				Items struct {
					Properties struct {
						ID struct {
							Enum []string `json:"enum"`
						} `json:"id"`
					} `json:"properties"`
				} `json:"items"`
			} `json:"decisions"`
		} `json:"properties"`
	}
	_ = json.Unmarshal(spec.Parameters, &p)
	ids := p.Properties.Decisions.Items.Properties.ID.Enum
	if len(ids) == 0 {
		for line := range strings.Lines(spec.Description) {
			rest, ok := strings.CutPrefix(line, "- id ")
			if !ok {
				continue
			}
			if q, err := strconv.QuotedPrefix(rest); err == nil {
				if id, err := strconv.Unquote(q); err == nil {
					ids = append(ids, id)
				}
			}
		}
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("the %s tool lists no pending approval", resolveToolName)
	}
	return ids, nil
}

// ProvideFields returns a reply to the orchestrator's input-extraction call
// (made when an Agent-Tool waits for fields and the user answers): a call
// of its forced provide_fields tool with the fields the user's message
// gives, as JSON text or a value to encode:
//
//	llmtest.ProvideFields(`{"city":"Paris"}`)
//
// The call fails with [ErrReplyMismatch] (recorded for [Script.Err] and
// [Script.Strict]) when the request has no provide_fields tool (no agent
// waits for input), when fields is not a JSON object, or when it names a
// field the waiting agent does not have.
func ProvideFields(fields any) Reply { return provide(fields, "ProvideFields") }

// Unrelated returns a reply to the orchestrator's input-extraction call
// that says the user's message does not answer the waiting agent but is
// about something else ({"unrelated": true}); the agent keeps waiting and
// the message goes to the loop. It fails like [ProvideFields].
func Unrelated() Reply { return provide(map[string]bool{"unrelated": true}, "Unrelated") }

func provide(fields any, name string) Reply {
	return Reply{build: func(req llm.Request) (Reply, error) {
		spec, ok := findTool(req, provideFieldsToolName)
		if !ok {
			return Reply{}, fmt.Errorf("%s: the request has no %s tool, so no agent waits for input (%s)", name, provideFieldsToolName, describeTools(req))
		}
		raw, err := object(fields)
		if err != nil {
			return Reply{}, fmt.Errorf("%s: fields must be a JSON object: %w", name, err)
		}
		var p struct {
			Properties map[string]json.RawMessage `json:"properties"`
		}
		if json.Unmarshal(spec.Parameters, &p) == nil && len(p.Properties) > 0 {
			var got map[string]json.RawMessage
			_ = json.Unmarshal(raw, &got)
			for k := range got {
				if _, ok := p.Properties[k]; !ok {
					names := make([]string, 0, len(p.Properties))
					for n := range p.Properties {
						names = append(names, n)
					}
					slices.Sort(names)
					return Reply{}, fmt.Errorf("%s: the waiting agent has no field %q (its fields: %s)", name, k, strings.Join(names, ", "))
				}
			}
		}
		return Calls(Call(provideFieldsToolName, raw)), nil
	}}
}

// object encodes v like Call's args and checks that it is a JSON object;
// it returns it compacted.
func object(v any) (json.RawMessage, error) {
	raw, err := rawJSON(v)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, fmt.Errorf("got %s", bytes.TrimSpace(raw))
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func findTool(req llm.Request, name string) (llm.ToolSpec, bool) {
	for _, t := range req.Tools {
		if t.Name == name {
			return t, true
		}
	}
	return llm.ToolSpec{}, false
}

// describeTools names the request's tools and tool choice, for errors.
func describeTools(req llm.Request) string {
	var b strings.Builder
	if len(req.Tools) == 0 {
		b.WriteString("it has no tools")
	} else {
		names := make([]string, len(req.Tools))
		for i, t := range req.Tools {
			names[i] = t.Name
		}
		b.WriteString("its tools: " + strings.Join(names, ", "))
	}
	if req.ToolChoice != "" {
		fmt.Fprintf(&b, "; tool choice %q", string(req.ToolChoice))
	}
	return b.String()
}
