package approval

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/valetkit/valet/llm"
)

// ResolveToolName is the name of the tool [Resolve] forces the model to call.
const ResolveToolName = "resolve_approvals"

// Decided is the decision the user made about one pending request.
type Decided struct {
	ID       string // the Request's ID
	Decision Decision
}

// Resolution is what a user's reply decided about the pending requests.
type Resolution struct {
	// Decided holds one entry per request the reply decided, in the order
	// the model listed them: the confirmation order in which approved
	// actions run. Empty when the reply decided nothing (it was about
	// something else).
	Decided []Decided
	// Ignored lists what the model answered but was not applied, one
	// "<id>: <reason>" per entry, e.g. "r2: edit is not allowed for this
	// request" ("(no id)" or "(entry 3)" stand in for a missing id). A
	// caller may tell the user about them; nothing in Ignored runs or is
	// cancelled, and those requests stay pending.
	Ignored []string
	// Quick is true when the reply was decided by [Quick], without a model
	// call.
	Quick bool
	// Usage is the tokens of the model call, zero when there was none.
	Usage llm.Usage
}

// ResolveOptions tunes [Resolve]. The zero value is ready to use.
type ResolveOptions struct {
	// Editable holds, keyed by request ID, the JSON Schema of the fields
	// the user may change on a request that allows modification. It is
	// shown to the model so that edits name real fields. Default: none.
	Editable map[string]json.RawMessage
	// History is recent conversation, oldest first, so that the model can
	// read "yes, the second one" in context. Only the text of user and
	// assistant messages is sent; system and tool messages and tool calls
	// are left out. Default: none.
	History []llm.Message
	// Model overrides the client's model when non-empty. Default: the
	// client's.
	Model string
}

// ResolveTool returns the tool the model calls to record what the user's
// reply decided about pending. editable is as in [ResolveOptions.Editable]
// and may be nil.
//
// Its parameters are
//
//	{"decisions": [{"id": "...", "action": "approve|edit|cancel", "fields": {...}, "reason": "..."}]}
//
// with "id" limited to the pending IDs. The description teaches the model
// to list only the requests the reply decides, to send an empty list when
// the reply is about something else, and to use "edit" only with the
// changed values; it lists every request with its choices and, for those
// that allow modification, the schema of its editable fields.
func ResolveTool(pending []Request, editable map[string]json.RawMessage) llm.ToolSpec {
	ids := make([]string, 0, len(pending))
	seen := make(map[string]bool, len(pending))
	var list strings.Builder
	for i := range pending {
		r := &pending[i]
		if seen[r.ID] {
			continue
		}
		seen[r.ID] = true
		ids = append(ids, r.ID)
		fmt.Fprintf(&list, "- id %s: %s", strconv.Quote(r.ID), oneLine(r.ActionSummary))
		if r.AgentName != "" {
			fmt.Fprintf(&list, " (%s)", r.AgentName)
		}
		fmt.Fprintf(&list, "; actions: %s", joinChoices(r.Choices()))
		if r.Allows(Edit) {
			if s := compactJSON(editable[r.ID]); s != "" {
				fmt.Fprintf(&list, "; editable fields (JSON Schema): %s", s)
			} else {
				list.WriteString("; editable fields: those shown in its details")
			}
		} else {
			list.WriteString("; cannot be edited")
		}
		list.WriteByte('\n')
	}

	desc := "Record what the user's latest reply decides about the pending actions that await their confirmation.\n" +
		"Add one entry to decisions for each pending action the reply decides, in the order the user mentions them. " +
		"Leave out every action the reply does not clearly decide. " +
		"If the reply is about something else, asks a question, or is unclear, send an empty decisions list. " +
		"A reply like \"yes\" or \"no\" without naming an action decides all pending actions only when that is clearly what the user means.\n" +
		"Actions: \"approve\" runs the action exactly as presented. " +
		"\"edit\" runs it with changes: use it only when the user agrees to the action with changes and gives the new values, " +
		"and put only the changed fields, with their new values, in \"fields\". " +
		"If the user wants a change but does not say the new value, or the action cannot be edited, leave the action out. " +
		"\"cancel\" means the action must not run. " +
		"Put the user's reason, if they gave one, in \"reason\".\n" +
		"Pending actions:\n" + list.String()

	idSchema := map[string]any{"type": "string", "description": "The id of the pending action."}
	if len(ids) > 0 {
		idSchema["enum"] = ids
	}
	params := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"decisions": map[string]any{
				"type":        "array",
				"description": "One entry per pending action the reply decides; empty when it decides none.",
				"items": map[string]any{
					"type": "object",
					"properties": map[string]any{
						"id": idSchema,
						"action": map[string]any{
							"type":        "string",
							"enum":        []string{string(Approve), string(Edit), string(Cancel)},
							"description": "approve: run as presented; edit: run with the changed fields; cancel: do not run.",
						},
						"fields": map[string]any{
							"type":        "object",
							"description": "For edit only: the changed fields and their new values, following the action's editable fields schema.",
						},
						"reason": map[string]any{
							"type":        "string",
							"description": "The user's reason, if given.",
						},
					},
					"required": []string{"id", "action"},
				},
			},
		},
		"required":             []string{"decisions"},
		"additionalProperties": false,
	}
	raw, err := json.Marshal(params)
	if err != nil { // maps of strings and slices of strings always encode
		raw = json.RawMessage(`{"type":"object"}`)
	}
	return llm.ToolSpec{Name: ResolveToolName, Description: desc, Parameters: raw}
}

// compactJSON returns raw without insignificant white space, raw as it is
// when it is not valid JSON, and "" when it is empty or null.
func compactJSON(raw json.RawMessage) string {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" {
		return ""
	}
	var b bytes.Buffer
	if err := json.Compact(&b, t); err != nil {
		return oneLine(string(t))
	}
	return b.String()
}

// decisionArgs is the wire form of one entry of the resolve tool.
type decisionArgs struct {
	ID     string          `json:"id"`
	Action Action          `json:"action"`
	Fields json.RawMessage `json:"fields"`
	Reason string          `json:"reason"`
}

// ParseDecisions reads the arguments of a [ResolveToolName] call and returns
// the decisions it makes about pending, in the order the model listed them,
// and the entries it did not apply as "<id>: <reason>" (see
// [Resolution.Ignored]).
//
// An entry is not applied when its id is not one of pending, when its id
// was already decided by an earlier entry (the first one wins), when its
// action is not one of the request's [Request.Choices] (an edit of a request
// that does not allow modification, say), or when it is an edit without a
// non-empty "fields" object. Fields are dropped from approve and cancel, and
// kept compacted (no insignificant white space) for edit.
// Arguments that are not a JSON object with a "decisions" array (missing or
// null counts as empty) are an error wrapping [ErrInvalidDecision].
func ParseDecisions(args json.RawMessage, pending []Request) (decided []Decided, ignored []string, err error) {
	var top struct {
		Decisions []json.RawMessage `json:"decisions"`
	}
	if err := json.Unmarshal(args, &top); err != nil {
		return nil, nil, fmt.Errorf("%w: %s arguments: %v", ErrInvalidDecision, ResolveToolName, err)
	}
	byID := make(map[string]*Request, len(pending))
	for i := range pending {
		if _, dup := byID[pending[i].ID]; !dup {
			byID[pending[i].ID] = &pending[i]
		}
	}
	done := make(map[string]bool, len(top.Decisions))
	for n, entry := range top.Decisions {
		var d decisionArgs
		if err := json.Unmarshal(entry, &d); err != nil {
			ignored = append(ignored, fmt.Sprintf("(entry %d): malformed: %v", n+1, err))
			continue
		}
		r, ok := byID[d.ID]
		switch {
		case !ok:
			ignored = append(ignored, ignoredID(d.ID)+": not a pending request")
			continue
		case done[d.ID]:
			ignored = append(ignored, d.ID+": decided twice, the first decision was kept")
			continue
		case !d.Action.Valid():
			ignored = append(ignored, fmt.Sprintf("%s: unknown action %q", d.ID, d.Action))
			continue
		case !r.Allows(d.Action):
			ignored = append(ignored, fmt.Sprintf("%s: %s is not allowed for this request", d.ID, d.Action))
			continue
		}
		dec := Decision{Action: d.Action, Reason: strings.TrimSpace(d.Reason)}
		if d.Action == Edit {
			var fields map[string]json.RawMessage
			if json.Unmarshal(d.Fields, &fields) != nil || len(fields) == 0 {
				ignored = append(ignored, d.ID+": edit without changed fields")
				continue
			}
			dec.Fields = json.RawMessage(compactJSON(d.Fields))
		}
		if err := dec.Check(); err != nil {
			ignored = append(ignored, d.ID+": "+err.Error())
			continue
		}
		done[d.ID] = true
		decided = append(decided, Decided{ID: d.ID, Decision: dec})
	}
	return decided, ignored, nil
}

// ignoredID names an entry's id in Resolution.Ignored; an empty id reads
// as (no id).
func ignoredID(id string) string {
	if id == "" {
		return "(no id)"
	}
	return id
}

// errNoClient is returned by Resolve when the reply needs a model and there
// is none.
var errNoClient = errors.New("approval: resolve: no llm.Client to read the reply with")

// Resolve works out what the user's reply decides about the pending
// requests.
//
//   - No pending requests, or a blank reply: an empty Resolution, no model
//     call.
//   - Exactly one pending request and [Quick] recognises the reply: that
//     decision, Quick set, no model call (c may then be nil).
//   - Otherwise one call to c: a system message explaining the task and
//     listing the requests ([Present], with their IDs), the text of
//     opts.History, and the reply as a user message, with [ResolveTool]
//     forced through ToolChoice and Purpose set to
//     [llm.PurposeResolveApprovals]. Its first resolve_approvals call is
//     read with [ParseDecisions]. A model that answers without that call
//     decided nothing: an empty Resolution, not an error.
//
// Model errors are returned wrapped as "approval: resolve: ...", so
// [llm.KindOf] still classifies them; malformed tool arguments wrap
// [ErrInvalidDecision]. Resolve does not check expiry: the caller drops or
// rejects expired requests (see [Request.Expired]).
func Resolve(ctx context.Context, c llm.Client, reply string, pending []Request, opts ResolveOptions) (*Resolution, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("approval: resolve: %w", err)
	}
	res := &Resolution{}
	if len(pending) == 0 || strings.TrimSpace(reply) == "" {
		return res, nil
	}
	if len(pending) == 1 {
		if a, ok := Quick(reply); ok {
			res.Quick = true
			r := &pending[0]
			if r.Allows(a) {
				res.Decided = []Decided{{ID: r.ID, Decision: Decision{Action: a}}}
			} else {
				res.Ignored = []string{fmt.Sprintf("%s: %s is not allowed for this request", r.ID, a)}
			}
			return res, nil
		}
	}
	if c == nil {
		return nil, errNoClient
	}

	resp, err := c.Complete(ctx, resolveRequest(reply, pending, opts))
	if err != nil {
		return nil, fmt.Errorf("approval: resolve: %w", err)
	}
	res.Usage = resp.Usage
	for _, call := range resp.Message.ToolCalls {
		if call.Name != ResolveToolName {
			continue
		}
		res.Decided, res.Ignored, err = ParseDecisions(call.Arguments, pending)
		if err != nil {
			return nil, err // already "approval: invalid decision: ..."
		}
		break
	}
	return res, nil
}

// resolveSystemPrompt opens the system message of a Resolve call.
const resolveSystemPrompt = "You read a user's reply to a request for confirmation. " +
	"The assistant asked the user to approve, edit or cancel the pending actions below before they run. " +
	"Call " + ResolveToolName + " with what the user's latest message decides about each of them. " +
	"Decide only what the user actually said: leave out any action the message does not clearly decide, " +
	"and send an empty list when the message is about something else. " +
	"Running an action the user did not approve can cost them money, so when in doubt leave it out."

// resolveRequest builds the one model call of Resolve.
func resolveRequest(reply string, pending []Request, opts ResolveOptions) llm.Request {
	var sys strings.Builder
	sys.WriteString(resolveSystemPrompt)
	sys.WriteString("\n\nPending actions:\n")
	sys.WriteString(Present(pending))
	sys.WriteString("\nTheir ids, by number:")
	for i := range pending {
		fmt.Fprintf(&sys, " %d = %s", i+1, strconv.Quote(pending[i].ID))
		if i < len(pending)-1 {
			sys.WriteByte(';')
		}
	}

	msgs := make([]llm.Message, 0, len(opts.History)+2)
	msgs = append(msgs, llm.SystemMessage(sys.String()))
	for _, m := range opts.History {
		if strings.TrimSpace(m.Content) == "" {
			continue
		}
		switch m.Role {
		case llm.RoleUser:
			msgs = append(msgs, llm.UserMessage(m.Content))
		case llm.RoleAssistant:
			msgs = append(msgs, llm.AssistantMessage(m.Content))
		}
	}
	msgs = append(msgs, llm.UserMessage(reply))
	return llm.Request{
		Messages:   msgs,
		Tools:      []llm.ToolSpec{ResolveTool(pending, opts.Editable)},
		ToolChoice: llm.ToolChoice(ResolveToolName),
		Purpose:    llm.PurposeResolveApprovals,
		Model:      opts.Model,
	}
}
