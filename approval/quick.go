package approval

import (
	"strings"
	"unicode"
)

// quickWords maps every reply [Quick] accepts, in normalised form, to the
// action it means. Anything not listed here goes to the model.
//
// The list is deliberately short: a reply lands here only when it says
// nothing but yes or no. "no problem", "sure thing", "not now" or "don't
// send it" are left out on purpose; they are clear to a person but carry
// more than a bare yes or no, and the model reads them in context.
var quickWords = map[string]Action{
	// yes
	"yes":          Approve,
	"y":            Approve,
	"yep":          Approve,
	"yup":          Approve,
	"yeah":         Approve,
	"yes please":   Approve,
	"ok":           Approve,
	"okay":         Approve,
	"sure":         Approve,
	"approve":      Approve,
	"approved":     Approve,
	"i approve":    Approve,
	"confirm":      Approve,
	"confirmed":    Approve,
	"i confirm":    Approve,
	"go ahead":     Approve,
	"go for it":    Approve,
	"do it":        Approve,
	"send it":      Approve,
	"please do":    Approve,
	"yes do it":    Approve,
	"yes go ahead": Approve,
	"👍":            Approve,
	"✅":            Approve,
	"✔":            Approve,

	// no
	"no":           Cancel,
	"n":            Cancel,
	"nope":         Cancel,
	"nah":          Cancel,
	"no thanks":    Cancel,
	"no thank you": Cancel,
	"cancel":       Cancel,
	"cancel it":    Cancel,
	"don't":        Cancel,
	"dont":         Cancel,
	"do not":       Cancel,
	"don't do it":  Cancel,
	"do not do it": Cancel,
	"stop":         Cancel,
	"abort":        Cancel,
	"reject":       Cancel,
	"rejected":     Cancel,
	"deny":         Cancel,
	"denied":       Cancel,
	"decline":      Cancel,
	"never mind":   Cancel,
	"nevermind":    Cancel,
	"👎":            Cancel,
	"❌":            Cancel,
}

// Quick is the fast path for a bare yes or no, decided without a model call.
//
// It returns (Approve, true) when reply is nothing but an unambiguous yes
// ("yes", "ok", "go ahead", "👍" …), (Cancel, true) when it is nothing but a
// no ("no", "cancel", "stop", "👎" …), and false for anything else. Case,
// surrounding white space, commas between the words ("yes, please"),
// curly apostrophes, emoji skin tones and a trailing run of "!" or "." are
// ignored; a trailing "?" is not ("ok?" is a question, not a yes).
//
// Quick is conservative on purpose: approved actions spend people's money
// and send their mail. A reply with any further content ("yes, but send it
// to me", "ok but change the date", "no wait, yes", "not sure") returns
// false, and should be given to the model through [Resolve]. Only English
// words are recognised.
func Quick(reply string) (Action, bool) {
	a, ok := quickWords[normaliseReply(reply)]
	return a, ok
}

// normaliseReply lowercases s, drops emoji modifiers, turns curly
// apostrophes into straight ones and commas into spaces, collapses white
// space and strips a trailing run of "!" and ".".
func normaliseReply(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range strings.ToLower(s) {
		switch {
		case r == '\uFE0F' || r == '\uFE0E' || (r >= 0x1F3FB && r <= 0x1F3FF):
			// variation selectors and skin tones: 👍🏽 is 👍
		case r == '\u2019' || r == '\u2018':
			b.WriteRune('\'')
		case r == ',':
			b.WriteRune(' ')
		default:
			b.WriteRune(r)
		}
	}
	s = strings.Join(strings.Fields(b.String()), " ")
	s = strings.TrimRightFunc(s, func(r rune) bool { return r == '!' || r == '.' || unicode.IsSpace(r) })
	return s
}
