package approval

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Choices returns the actions the user may take on r, in the order they are
// offered:
//
//   - with no Options: Approve, Edit (only when AllowModification), Cancel;
//   - with Options: the valid actions among them, in their order, without
//     duplicates, Edit only when AllowModification; Cancel is always
//     appended when missing, because a user can always refuse.
//
// [Present] shows these choices, and [ParseDecisions] and [Resolve] accept
// only these actions for r.
func (r *Request) Choices() []Action {
	if len(r.Options) == 0 {
		if r.AllowModification {
			return []Action{Approve, Edit, Cancel}
		}
		return []Action{Approve, Cancel}
	}
	out := make([]Action, 0, 3)
	for _, o := range r.Options {
		a := Action(strings.ToLower(strings.TrimSpace(o)))
		if !a.Valid() || slices.Contains(out, a) || (a == Edit && !r.AllowModification) {
			continue
		}
		out = append(out, a)
	}
	if !slices.Contains(out, Cancel) {
		out = append(out, Cancel)
	}
	return out
}

// Allows reports whether a is one of r's [Request.Choices].
func (r *Request) Allows(a Action) bool { return slices.Contains(r.Choices(), a) }

// ExpiryLayout is how [Present] writes a request's expiry time: RFC 3339 in
// UTC to the second ("2025-06-01T15:04:05Z"), which carries the date and
// reads the same for a user and a model in any time zone.
const ExpiryLayout = time.RFC3339

// Present returns a compact plain-text listing of pending requests, meant
// both for a model's prompt and as the text shown to a user. The output
// depends only on pending, so the same requests always read the same. One
// request reads
//
//	| 1. Send an email to team@example.com
//	|    subject: Weekly report
//	|    to: team@example.com
//	|    Reply: approve, edit or cancel (expires 2025-06-01T15:04:05Z)
//
// Requests are numbered in the order given. Details follow, one per line,
// sorted by key; strings are written as they are (continuation lines of a
// multi-line value are indented), other values as JSON. The last line names
// the [Request.Choices] and, when ExpiresAt is set, the expiry time in UTC
// (see [ExpiryLayout]). Request IDs are not shown; [Resolve] gives them to
// the model separately. Present returns "" for no requests.
func Present(pending []Request) string {
	var b strings.Builder
	for i := range pending {
		r := &pending[i]
		if i > 0 {
			b.WriteByte('\n')
		}
		num := strconv.Itoa(i+1) + ". "
		indent := strings.Repeat(" ", len(num))
		summary := oneLine(r.ActionSummary)
		if summary == "" {
			summary = "Run " + r.AgentName
		}
		b.WriteString(num + summary + "\n")

		keys := make([]string, 0, len(r.Details))
		for k := range r.Details {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			v := detailValue(r.Details[k])
			v = strings.ReplaceAll(v, "\n", "\n"+indent+strings.Repeat(" ", len(k)+2))
			b.WriteString(indent + k + ": " + v + "\n")
		}

		b.WriteString(indent + "Reply: " + joinChoices(r.Choices()))
		if !r.ExpiresAt.IsZero() {
			b.WriteString(" (expires " + r.ExpiresAt.UTC().Format(ExpiryLayout) + ")")
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// joinChoices writes actions as "approve, edit or cancel".
func joinChoices(as []Action) string {
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = string(a)
	}
	if len(s) <= 1 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// oneLine collapses white space, new lines included.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// detailValue writes one Details value: strings as they are (without
// trailing white space), times in UTC, other values as JSON.
func detailValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "(none)"
	case string:
		return strings.TrimRight(strings.ReplaceAll(x, "\r\n", "\n"), " \t\n")
	case time.Time:
		return x.UTC().Format(ExpiryLayout)
	case fmt.Stringer:
		return x.String()
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
