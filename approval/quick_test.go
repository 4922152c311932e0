package approval_test

import (
	"testing"

	"github.com/valetkit/valet/approval"
)

func TestQuickYes(t *testing.T) {
	for _, reply := range []string{
		"yes", "Yes", "YES", "  yes  ", "yes!", "Yes.", "yes!!!", "yes...", "yes !",
		"y", "Y", "yep", "yup", "yeah", "Yeah!",
		"ok", "OK", "Ok.", "okay", "Okay!",
		"sure", "Sure!", "approve", "Approved", "approved.", "I approve", "confirm", "Confirmed",
		"go ahead", "Go ahead!", "go  ahead", "go\tahead", "go for it",
		"do it", "Do it!", "send it", "Send it.", "please do", "Please do.",
		"yes please", "Yes, please", "yes, please!", "yes do it", "Yes, go ahead.",
		"👍", " 👍 ", "👍🏽", "👍🏻!", "✅", "✔️",
		"\nyes\n",
	} {
		a, ok := approval.Quick(reply)
		if !ok || a != approval.Approve {
			t.Errorf("Quick(%q) = %q, %v; want approve, true", reply, a, ok)
		}
	}
}

func TestQuickNo(t *testing.T) {
	for _, reply := range []string{
		"no", "No", "NO", " no ", "no!", "No.", "no!!",
		"n", "N", "nope", "Nope.", "nah",
		"cancel", "Cancel!", "cancel it",
		"don't", "Don't!", "don’t", "dont", "do not", "Do not.", "don't do it",
		"stop", "STOP!", "abort", "reject", "denied", "decline",
		"no thanks", "No, thanks.", "no thank you", "never mind", "nevermind",
		"👎", "👎🏿", "❌",
	} {
		a, ok := approval.Quick(reply)
		if !ok || a != approval.Cancel {
			t.Errorf("Quick(%q) = %q, %v; want cancel, true", reply, a, ok)
		}
	}
}

func TestQuickGoesToTheModel(t *testing.T) {
	for _, reply := range []string{
		"", "   ", ".", "!", ",",
		// extra content
		"yes, but send it to me instead",
		"yes and no",
		"yes no",
		"not sure",
		"ok but change the date",
		"no wait, yes",
		"no, wait",
		"yes yes",
		"yes 👍",
		"yes, send it to bob@example.com",
		"approve the email",
		"approve the first one",
		"cancel the flight",
		"don't send it",
		"no problem",
		"sure thing",
		"not now",
		"ok, and also book a taxi",
		"go ahead with the second one",
		"yes\nbut change the subject",
		// questions and hedges
		"yes?", "ok?", "sure?", "no?", "yes!?", "maybe", "perhaps", "I guess", "hmm", "idk",
		"what?", "who is it to?",
		// look-alikes
		"yesterday", "nop", "okey dokey", "noo", "yess", "now", "on", "ko", "stopwatch",
		"👍👎", "👌", "🤔",
		// other languages are not guessed at
		"oui", "ja", "sí", "нет",
		// negation of a yes
		"not ok", "don't approve", "do not confirm", "no go ahead",
	} {
		if a, ok := approval.Quick(reply); ok {
			t.Errorf("Quick(%q) = %q, true; want false (the model decides)", reply, a)
		}
	}
}
