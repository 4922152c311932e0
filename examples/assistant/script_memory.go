package main

import (
	"regexp"
	"slices"
	"strings"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
)

// rememberStep answers the fact-extraction call the orchestrator makes after
// each answered message (agent.MemoryOptions.Extract). The call forces
// remember_facts; its user message holds the turn ("The user wrote: ...",
// then "The assistant answered: ...") and its system prompt the facts
// already known, one "- [id] text" line each. This model keeps what the
// user states about themselves: each sentence of the user's part that
// starts with "My" or "I" and is neither a question nor a request,
// rewritten in the third person ("My dentist is Dr. Kim." → "The user's
// dentist is Dr. Kim."). A fact already known is left out; one about the
// same thing as a known fact ("The user's dentist is ...") supersedes it.
// Anything else gives an empty list: the assistant's answer is never read.
func rememberStep(req llm.Request) llmtest.Reply {
	facts := []rememberedFact{} // "facts": [] when there is none
	user, _ := currentTurn(req.Messages)
	if said, ok := strings.CutPrefix(user, "The user wrote:\n"); ok {
		said, _, _ = strings.Cut(said, "\n\nThe assistant answered:")
		known := knownFacts(req.Messages)
	next:
		for _, s := range statements(said) {
			f := thirdPerson(s)
			for _, k := range known {
				switch {
				case strings.EqualFold(k.text, f.Text):
					continue next // known already
				case f.subject != "" && f.Supersedes == "" && hasPrefixFold(k.text, f.subject):
					f.Supersedes = k.id // the same thing, changed
				}
			}
			facts = append(facts, f)
		}
	}
	return llmtest.Calls(llmtest.Call(agent.RememberToolName, map[string]any{"facts": facts}))
}

// rememberedFact is one fact of a remember_facts call.
type rememberedFact struct {
	Text       string `json:"text"`
	Kind       string `json:"kind"`
	Supersedes string `json:"supersedes,omitempty"`
	subject    string // "The user's dentist is ": what the fact is about, for superseding
}

type knownFact struct{ id, text string }

var knownFactRe = regexp.MustCompile(`(?m)^- \[([^\]\n]+)\] (.+)$`)

// knownFacts reads the "- [id] text" lines of the system prompt of an
// extraction call.
func knownFacts(msgs []llm.Message) []knownFact {
	var known []knownFact
	for _, m := range msgs {
		if m.Role != llm.RoleSystem {
			continue
		}
		for _, k := range knownFactRe.FindAllStringSubmatch(m.Content, -1) {
			known = append(known, knownFact{id: k[1], text: strings.TrimSpace(k[2])})
		}
	}
	return known
}

// fromMemory answers the user's message, when no tool applies, from what
// the request holds about the user: it acknowledges statements ("My dentist
// is Dr. Kim." → "Noted: your dentist is Dr. Kim."), answers "what did I
// say first?" from the history, and "who is my dentist?" from the facts
// recalled into the system prompt or, failing that, from what the user
// said earlier in the conversation. "" means it has nothing to say.
func fromMemory(msgs []llm.Message, user string) string {
	if said := statements(user); len(said) > 0 {
		for i, s := range said {
			said[i] = secondPerson(s)
		}
		return "Noted: " + strings.Join(said, "; ") + "."
	}
	lower := strings.ToLower(strings.ReplaceAll(user, "’", "'"))
	if containsAny(lower, "what did i say", "what did i tell you", "what have i said", "what have i told you") {
		return earlierMessage(msgs, strings.Contains(lower, "first"))
	}
	if m := myThingRe.FindStringSubmatch(lower); m != nil {
		return aboutMy(msgs, strings.Fields(m[1]))
	}
	return ""
}

var myThingRe = regexp.MustCompile(`\bmy ([a-z][a-z' -]*)`)

// earlierMessage quotes the user's first message in the request's history,
// or the one just before the current one.
func earlierMessage(msgs []llm.Message, first bool) string {
	said := userMessages(msgs)
	if len(said) > 0 {
		said = said[:len(said)-1] // the last is the question itself
	}
	switch {
	case len(said) == 0:
		return "I have no earlier message of yours in this conversation."
	case first:
		return "The first message of yours I have in this conversation is: “" + said[0] + "”"
	}
	return "Just before this you said: “" + said[len(said)-1] + "”"
}

// aboutMy answers a question about "my <thing>": from the facts recalled
// into the system prompt's <background> block ("The user's dentist is Dr.
// Kim." → "Your dentist is Dr. Kim."), else from the user's earlier
// statements in the history. The longest part of the phrase that a fact is
// about wins: "sister's birthday", then "sister".
func aboutMy(msgs []llm.Message, thing []string) string {
	facts := backgroundFacts(msgs)
	var said []string
	if u := userMessages(msgs); len(u) > 0 {
		for _, m := range u[:len(u)-1] {
			said = append(said, statements(m)...)
		}
	}
	for n := len(thing); n > 0; n-- {
		phrase := strings.Join(thing[:n], " ")
		for _, p := range []string{phrase, strings.TrimSuffix(phrase, "'s")} {
			var answer []string
			for _, f := range facts {
				if hasPhraseFold(f, "the user's "+p) {
					if rest, ok := strings.CutPrefix(f, "The user's "); ok {
						answer = append(answer, "Your "+rest)
					} else {
						answer = append(answer, "I remember this: "+f)
					}
				}
			}
			if len(answer) > 0 {
				return strings.Join(answer, " ")
			}
			for _, s := range slices.Backward(said) {
				if hasPhraseFold(s, "my "+p) {
					return "You told me earlier in this conversation: “" + s + "”"
				}
			}
		}
	}
	return "I don't remember anything about your " + strings.Join(thing, " ") + "."
}

// backgroundFacts returns the facts of the <background> block the
// orchestrator appends to the system prompt: the long-term items recalled
// for this message.
func backgroundFacts(msgs []llm.Message) []string {
	var facts []string
	for _, m := range msgs {
		if m.Role != llm.RoleSystem {
			continue
		}
		_, block, ok := strings.Cut(m.Content, "<background>")
		if !ok {
			continue
		}
		block, _, _ = strings.Cut(block, "</background>")
		for line := range strings.Lines(block) {
			if f, ok := strings.CutPrefix(strings.TrimSpace(line), "- "); ok {
				facts = append(facts, f)
			}
		}
	}
	return facts
}

// userMessages returns what the user wrote, in the order of the request:
// the history's messages, then the current one.
func userMessages(msgs []llm.Message) []string {
	var said []string
	for _, m := range msgs {
		if m.Role == llm.RoleUser {
			said = append(said, m.Content)
		}
	}
	return said
}

// statements returns the sentences of text in which the user states
// something about themselves: those starting with "My" or "I" (I'm, I've),
// leaving out questions and requests ("I want...", "I need...").
func statements(text string) []string {
	var out []string
	for _, s := range sentences(text) {
		words := strings.Fields(strings.ToLower(s))
		if strings.HasSuffix(s, "?") || len(words) < 2 {
			continue
		}
		switch words[0] {
		case "my", "i'm", "i've":
		case "i":
			if slices.Contains([]string{"want", "need", "would", "wonder", "think", "guess", "hope"}, words[1]) {
				continue
			}
		default:
			continue
		}
		out = append(out, s)
	}
	return out
}

// sentences splits text at ".", "!", "?" followed by a space or the end,
// and at line breaks. A period after a title or an initial ("Dr. Kim",
// "J. Smith") does not end a sentence. Curly apostrophes become straight.
func sentences(text string) []string {
	text = strings.ReplaceAll(text, "’", "'")
	var out []string
	add := func(s string) {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	start := 0
	for i := 0; i < len(text); i++ {
		switch text[i] {
		case '\n':
			add(text[start:i])
			start = i + 1
		case '.', '!', '?':
			j := i
			for j+1 < len(text) && strings.IndexByte(".!?", text[j+1]) >= 0 {
				j++
			}
			if j+1 < len(text) && !strings.ContainsRune(" \t\r\n", rune(text[j+1])) {
				continue // 3.5, e.g, a URL
			}
			if text[i] == '.' && j == i && isAbbreviation(text[start:i]) {
				continue
			}
			add(text[start : j+1])
			start, i = j+1, j
		}
	}
	add(text[start:])
	return out
}

// isAbbreviation reports whether the last word of s is a title or an
// initial, which a period follows without ending the sentence.
func isAbbreviation(s string) bool {
	w := strings.ToLower(s[strings.LastIndexAny(s, " \t(")+1:])
	return len(w) == 1 || slices.Contains([]string{"dr", "mr", "mrs", "ms", "prof", "st", "jr", "sr", "mt"}, w)
}

// thirdPerson rewrites a statement of the user about themselves as a fact
// about "the user": "My dentist is Dr. Kim." → "The user's dentist is Dr.
// Kim."; "I love tea." → "The user loves tea." (a preference).
func thirdPerson(s string) rememberedFact {
	words := strings.Fields(strings.TrimRight(s, ".! "))
	f := rememberedFact{Kind: "fact"}
	var out []string
	switch strings.ToLower(words[0]) {
	case "my":
		out, words = []string{"The user's"}, words[1:]
		if len(words) > 0 && slices.Contains([]string{"birthday", "anniversary"}, strings.ToLower(words[0])) {
			f.Kind = "date"
		}
		// "My dentist is Dr. Kim.": a later "My dentist is ..." replaces it.
		for i, w := range words {
			if lw := strings.ToLower(w); lw == "is" || lw == "are" {
				f.subject = strings.Join(append(slices.Clone(out), words[:i+1]...), " ") + " "
				break
			}
		}
	case "i'm":
		out, words = []string{"The user is"}, words[1:]
	case "i've":
		out, words = []string{"The user has"}, words[1:]
	default: // "I"
		out, words = []string{"The user"}, words[1:]
		for len(words) > 1 && slices.Contains([]string{"really", "also", "always", "never", "usually", "often", "still"}, strings.ToLower(words[0])) {
			out, words = append(out, words[0]), words[1:]
		}
		verb := strings.ToLower(words[0])
		if verb == "don't" && len(words) > 1 {
			verb = strings.ToLower(words[1])
		}
		if slices.Contains([]string{"like", "love", "prefer", "hate", "enjoy", "dislike"}, verb) {
			f.Kind = "preference"
		}
		out, words = append(out, thirdPersonVerb(words[0])), words[1:]
	}
	for _, w := range words {
		out = append(out, ownWord(w, "the user's", "the user", "the user"))
	}
	f.Text = strings.Join(out, " ") + "."
	return f
}

// thirdPersonVerb conjugates the verb after "I" for "the user".
func thirdPersonVerb(v string) string {
	lv := strings.ToLower(v)
	switch lv {
	case "am":
		return "is"
	case "have":
		return "has"
	case "don't":
		return "doesn't"
	case "haven't":
		return "hasn't"
	case "was", "were", "went", "met", "got", "had", "made", "bought", "found", "left", "began", "became", "grew",
		"took", "saw", "did", "didn't", "came", "knew", "gave", "sold", "wrote", "spent", "lost", "won", "can", "can't",
		"cannot", "could", "will", "won't", "would", "should", "must", "might", "may", "used":
		return v
	}
	switch {
	case strings.HasSuffix(lv, "ed"):
		return v
	case strings.HasSuffix(lv, "s"), strings.HasSuffix(lv, "sh"), strings.HasSuffix(lv, "ch"),
		strings.HasSuffix(lv, "x"), strings.HasSuffix(lv, "z"), strings.HasSuffix(lv, "o"):
		return v + "es"
	case len(lv) > 1 && strings.HasSuffix(lv, "y") && !strings.ContainsRune("aeiou", rune(lv[len(lv)-2])):
		return v[:len(v)-1] + "ies"
	}
	return v + "s"
}

// secondPerson rewrites a statement of the user for the user's ears: "My
// dentist is Dr. Kim." → "your dentist is Dr. Kim"; "I am vegetarian" →
// "you are vegetarian".
func secondPerson(s string) string {
	words := strings.Fields(strings.TrimRight(s, ".! "))
	for i, w := range words {
		core, rest := splitWord(w)
		switch lc := strings.ToLower(core); {
		case lc == "am" && i > 0 && strings.ToLower(words[i-1]) == "you":
			core = "are"
		case lc == "was" && i > 0 && strings.ToLower(words[i-1]) == "you":
			core = "were"
		case lc == "i'm":
			core = "you're"
		case lc == "i've":
			core = "you've"
		default:
			core = ownWord(core, "your", "you", "you")
		}
		words[i] = core + rest
	}
	return strings.Join(words, " ")
}

// ownWord replaces my, me and I in w (punctuation kept) with the words
// given, and leaves other words as they are.
func ownWord(w, my, me, i string) string {
	core, rest := splitWord(w)
	switch strings.ToLower(core) {
	case "my":
		return my + rest
	case "me":
		return me + rest
	case "i":
		return i + rest
	}
	return w
}

// splitWord splits w into the word and the punctuation after it.
func splitWord(w string) (core, rest string) {
	core = strings.TrimRight(w, ".,;:!?)\"")
	return core, w[len(core):]
}

// hasPhraseFold reports whether s holds phrase, case-insensitively, as
// whole words.
func hasPhraseFold(s, phrase string) bool {
	s, phrase = strings.ToLower(s), strings.ToLower(phrase)
	for i := 0; ; {
		j := strings.Index(s[i:], phrase)
		if j < 0 {
			return false
		}
		j += i
		before, after := j == 0 || !isWordByte(s[j-1]), j+len(phrase) == len(s) || !isWordByte(s[j+len(phrase)])
		if before && after {
			return true
		}
		i = j + 1
	}
}

func isWordByte(c byte) bool {
	return c == '\'' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c >= 0x80
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}
