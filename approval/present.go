package approval

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/valetkit/valet/internal/textsafe"
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
// multi-line value are indented), other values as JSON. Text in a request
// cannot start a line of its own: the summary and the keys are put on one
// line, and every line break in a value — LF, CR, CR LF, VT, FF, NEL
// (U+0085), LS (U+2028), PS (U+2029) — is written as "\n" and indented;
// other control characters show as U+FFFD and bidirectional override
// controls are dropped. The last line names
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
			// A key is one line; each line of a value is indented under
			// it, whatever break ended it (textsafe.Lines).
			key := textsafe.Line(k)
			v := detailValue(r.Details[k])
			v = strings.ReplaceAll(v, "\n", "\n"+indent+strings.Repeat(" ", utf8.RuneCountInString(key)+2))
			b.WriteString(indent + key + ": " + v + "\n")
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

// oneLine puts s on one line (textsafe.Line) and collapses white space.
func oneLine(s string) string { return strings.Join(strings.Fields(textsafe.Line(s)), " ") }

// detailValue writes one Details value: strings as they are (without
// trailing white space), times in UTC, other values as JSON. Every line
// break in it is written as "\n" (textsafe.Lines), so that Present
// indents each line: a CR, NEL or LS cannot start a line at the margin.
func detailValue(v any) string {
	var s string
	switch x := v.(type) {
	case nil:
		return "(none)"
	case string:
		s = x
	case time.Time:
		return x.UTC().Format(ExpiryLayout)
	case fmt.Stringer:
		s = x.String()
	default:
		b, err := json.Marshal(v)
		if err != nil {
			s = fmt.Sprint(v)
		} else {
			s = string(b) // NEL, C1 and bidi controls are left raw by json.Marshal
		}
	}
	return strings.TrimRight(textsafe.Lines(s), " \t\n")
}
