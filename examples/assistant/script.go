package main

// The offline model: llmtest.Script, valet's mock llm.Client, driven by a
// function of each request. It plays its part honestly: it decides what to
// do from what the request holds (the user's message, the tool results
// that came back, the history, the facts recalled into the system prompt),
// and its answers quote what it was sent, so the demo shows what the tools
// really returned and what the bot really remembered.
//
// The same technique tests a bot: script the model, run the real
// orchestrator and tools, assert on the output and on Script.Requests().

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
)

// demoMessages is the demo conversation: what the user says, in order.
var demoMessages = []string{
	"What's the weather in Paris and Rome for the next 3 days?",
	"We're two, sharing a room in Rome: 3 nights at €120 a night plus €45 for the taxi from the airport. " +
		"How much does each of us pay? And find us a trattoria near the Pantheon for dinner.",
	"Thanks! Which of the next 3 days is best for a walk in Rome?",
	"What's on my calendar today?",
	// Not a message: the host saves the token, the model never sees it
	// (hostCommand). In a real app this is the end of an OAuth flow.
	"/connect google " + demoToken,
	"Done. What's on my calendar today?",
}

// demoToken is the fake Google access token the demo connects. It is never
// printed: not by the host, the tool, the logs or the model.
const demoToken = "ya29.demo-not-a-real-token"

// budgetExpr is the sum the model works out from the second message.
const budgetExpr = "(3 * 120 + 45) / 2"

// demoModel plays the model for demoMessages.
func demoModel() *llmtest.Script {
	return llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		if req.ToolChoice == agent.RememberToolName {
			return rememberStep(req)
		}
		user, results := currentTurn(req.Messages)
		switch {
		case strings.Contains(user, "weather"):
			return weatherStep(user, results)
		case strings.Contains(user, "each of us pay"):
			return budgetStep(results)
		case strings.Contains(user, "walk"):
			return walkStep(req.Messages)
		case strings.Contains(user, "calendar"):
			return calendarStep(results)
		}
		return llmtest.Text("I am the offline demo model and only know the demo conversation. " +
			"Run with -i to chat with the offline keyword model, or set OPENAI_API_KEY.")
	})
}

// weatherStep: first ask for the weather of every city named, all at once
// (the orchestrator runs the calls in parallel), then summarise what came
// back.
func weatherStep(user string, results []llm.Message) llmtest.Reply {
	if len(results) == 0 {
		days := 1
		if m := daysRe.FindStringSubmatch(user); m != nil {
			days, _ = strconv.Atoi(m[1])
		}
		var calls []llm.ToolCall
		for _, city := range citiesIn(user) {
			calls = append(calls, llmtest.Call("get_weather", WeatherIn{City: city, Days: days}))
		}
		if len(calls) == 0 {
			return llmtest.Text("Which city? I have weather for " + strings.Join(cityNames(), ", ") + ".")
		}
		return llmtest.Calls(calls...)
	}
	var b strings.Builder
	b.WriteString("Here's the outlook:")
	wettest := DayForecast{}
	wettestCity := ""
	for _, r := range results {
		var f Forecast
		if r.IsError || json.Unmarshal([]byte(r.Content), &f) != nil {
			fmt.Fprintf(&b, "\n- I couldn't get this forecast: %s", firstLine(r.Content))
			continue
		}
		fmt.Fprintf(&b, "\n- %s: %s.", f.City, describeDays(f.Days))
		for _, d := range f.Days {
			if d.RainChance > wettest.RainChance {
				wettest, wettestCity = d, f.City
			}
		}
	}
	if wettest.RainChance >= 50 {
		fmt.Fprintf(&b, "\nTake an umbrella in %s %s: %d%% chance of %s.", wettestCity, onDay(wettest.Day), wettest.RainChance, wettest.Conditions)
	}
	return llmtest.Text(b.String())
}

// budgetStep works out the shared cost and looks for a restaurant, in
// parallel. Its first calculator call uses a wrong argument name, a slip
// real models make; valet validates the arguments against the tool's
// schema, answers with an error tool result naming the field, and the model
// calls again correctly.
func budgetStep(results []llm.Message) llmtest.Reply {
	calc, calcFailed := lastResult(results, "calculator")
	search, _ := lastResult(results, "web_search")
	switch {
	case calc == nil:
		return llmtest.Calls(
			llmtest.Call("calculator", map[string]string{"expr": budgetExpr}), // wrong name: the field is "expression"
			llmtest.Call("web_search", SearchIn{Query: "trattoria near the Pantheon Rome", Limit: 2}),
		)
	case calcFailed && strings.Contains(calc.Content, "expression"):
		// The error says which field was missing: call again with it.
		return llmtest.Calls(llmtest.Call("calculator", CalcIn{Expression: budgetExpr}))
	case calcFailed:
		return llmtest.Text("Sorry, the calculator failed: " + firstLine(calc.Content))
	}
	var b strings.Builder
	var res CalcResult
	if err := json.Unmarshal([]byte(calc.Content), &res); err != nil {
		return llmtest.Text("The calculator answered something I can't read: " + calc.Content)
	}
	fmt.Fprintf(&b, "Each of you pays €%s: %s = %s.", money(res.Result), res.Expression, strconv.FormatFloat(res.Result, 'f', -1, 64))
	if search != nil {
		b.WriteString("\n" + describeSearch(search))
	}
	return llmtest.Text(b.String())
}

// walkStep answers from the conversation's history: the Rome forecast
// fetched for the first message is still in the request, so no tool is
// needed. Without it, the model would fetch the forecast.
func walkStep(msgs []llm.Message) llmtest.Reply {
	var rome *Forecast
	for _, m := range toolResults(msgs) {
		var f Forecast
		if m.Role == llm.RoleTool && m.Name == "get_weather" && !m.IsError &&
			json.Unmarshal([]byte(m.Content), &f) == nil && f.City == "Rome" {
			rome = &f
		}
	}
	if rome == nil || len(rome.Days) == 0 {
		if _, results := currentTurn(msgs); len(results) == 0 {
			return llmtest.Calls(llmtest.Call("get_weather", WeatherIn{City: "Rome", Days: 3}))
		}
		return llmtest.Text("Sorry, I couldn't get the forecast for Rome.")
	}
	best := slices.MinFunc(rome.Days, func(a, b DayForecast) int {
		if a.RainChance != b.RainChance {
			return a.RainChance - b.RainChance
		}
		return b.HighC - a.HighC
	})
	return llmtest.Text(fmt.Sprintf("Going by the forecast I fetched earlier, %s is best for a walk in Rome: %s, up to %d°C, %d%% chance of rain.",
		best.Day, best.Conditions, best.HighC, best.RainChance))
}

// calendarStep asks calendar_today, then relays what it answered: the
// meetings, or that the Google account is not connected yet.
func calendarStep(results []llm.Message) llmtest.Reply {
	if len(results) == 0 {
		return llmtest.Calls(llmtest.Call("calendar_today", CalendarIn{}))
	}
	return llmtest.Text(summarise(results))
}

// replModel is the offline model of the interactive mode (-i). It picks a
// tool by keywords, then summarises what the tool returned. Without a tool
// to call it answers from memory: it acknowledges what the user says about
// themselves, answers "who is my dentist?" from the facts recalled into the
// system prompt, and "what did I say first?" from the conversation's
// history. Simple, but it never makes anything up.
func replModel() *llmtest.Script {
	return llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		if req.ToolChoice == agent.RememberToolName {
			return rememberStep(req)
		}
		user, results := currentTurn(req.Messages)
		if len(results) > 0 {
			return llmtest.Text(summarise(results))
		}
		lower := strings.ToLower(user)
		switch {
		case containsAny(lower, "calendar", "meeting", "agenda", "schedule", "appointment"):
			return llmtest.Calls(llmtest.Call("calendar_today", CalendarIn{}))
		case containsAny(lower, "weather", "forecast", "rain", "temperature", "sunny"):
			return weatherStep(user, nil)
		case containsAny(lower, "search", "find", "look up", "google"):
			q := strings.TrimSpace(searchVerbRe.ReplaceAllString(user, ""))
			return llmtest.Calls(llmtest.Call("web_search", SearchIn{Query: q}))
		case containsAny(lower, "calc", "compute", "how much is", "what is", "what's") || exprRe.MatchString(user):
			if e := longestExpr(user); e != "" {
				return llmtest.Calls(llmtest.Call("calculator", CalcIn{Expression: e}))
			}
		}
		if answer := fromMemory(req.Messages, user); answer != "" {
			return llmtest.Text(answer)
		}
		return llmtest.Text("I'm the offline demo model: I pick a tool by keyword. Try \"weather in Rome for 3 days\", " +
			"\"calculate (3 * 120 + 45) / 2\", \"search trattoria near the Pantheon\", \"what's on my calendar today\", " +
			"\"my dentist is Dr. Kim\" then \"who is my dentist?\", or \"what did I say first?\". " +
			"Set OPENAI_API_KEY to talk to a real model.")
	})
}

// summarise turns the tool results of a turn into an answer.
func summarise(results []llm.Message) string {
	var parts []string
	for _, r := range results {
		if r.IsError {
			why := strings.TrimPrefix(firstLine(r.Content), fmt.Sprintf("tool %q failed: ", r.Name))
			parts = append(parts, fmt.Sprintf("The %s tool failed: %s", r.Name, why))
			continue
		}
		switch r.Name {
		case "get_weather":
			var f Forecast
			if json.Unmarshal([]byte(r.Content), &f) == nil {
				parts = append(parts, fmt.Sprintf("%s: %s.", f.City, describeDays(f.Days)))
				continue
			}
		case "calculator":
			var c CalcResult
			if json.Unmarshal([]byte(r.Content), &c) == nil {
				parts = append(parts, fmt.Sprintf("%s = %s", c.Expression, strconv.FormatFloat(c.Result, 'f', -1, 64)))
				continue
			}
		case "web_search":
			parts = append(parts, describeSearch(&r))
			continue
		case "calendar_today":
			var d CalendarDay
			if json.Unmarshal([]byte(r.Content), &d) == nil {
				parts = append(parts, describeCalendar(d))
				continue
			}
		}
		parts = append(parts, fmt.Sprintf("%s returned: %s", r.Name, r.Content))
	}
	return strings.Join(parts, "\n")
}

// ---------------------------------------------------------------- memory

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

// ---------------------------------------------------------------- reading the request

// currentTurn returns the last user message and the tool results that
// followed it (the results of the calls made for this message so far).
func currentTurn(msgs []llm.Message) (user string, results []llm.Message) {
	msgs = toolResults(msgs)
	for i := len(msgs) - 1; i >= 0; i-- {
		switch msgs[i].Role {
		case llm.RoleTool:
			results = append(results, msgs[i])
		case llm.RoleUser:
			slices.Reverse(results)
			return msgs[i].Content, results
		}
	}
	slices.Reverse(results)
	return "", results
}

// toolResults reads the tool messages the way a model does. Over the
// OpenAI wire a tool message carries only its content and the id of the
// call it answers: the tool's name comes from that call, and a failure is
// recognised by its text (these tools answer JSON objects when they
// succeed). It returns a copy of msgs with Name and IsError filled in.
func toolResults(msgs []llm.Message) []llm.Message {
	msgs = slices.Clone(msgs)
	names := map[string]string{}
	for i, m := range msgs {
		for _, c := range m.ToolCalls {
			names[c.ID] = c.Name
		}
		if m.Role == llm.RoleTool {
			if m.Name == "" {
				msgs[i].Name = names[m.ToolCallID]
			}
			msgs[i].IsError = m.IsError || !strings.HasPrefix(m.Content, "{") || !json.Valid([]byte(m.Content))
		}
	}
	return msgs
}

// lastResult returns the newest result of the named tool, and whether it
// is an error.
func lastResult(results []llm.Message, name string) (*llm.Message, bool) {
	for i := len(results) - 1; i >= 0; i-- {
		if results[i].Name == name {
			return &results[i], results[i].IsError
		}
	}
	return nil, false
}

// citiesIn returns the cities of the weather table named in text, in the
// order they appear.
func citiesIn(text string) []string {
	lower := strings.ToLower(text)
	type at struct {
		name string
		i    int
	}
	var found []at
	for _, c := range weatherTable {
		if i := strings.Index(lower, strings.ToLower(c.name)); i >= 0 {
			found = append(found, at{c.name, i})
		}
	}
	slices.SortFunc(found, func(a, b at) int { return a.i - b.i })
	names := make([]string, len(found))
	for i, f := range found {
		names[i] = f.name
	}
	return names
}

var (
	daysRe       = regexp.MustCompile(`(\d+)\s*days?`)
	exprRe       = regexp.MustCompile(`\d\s*[-+*/]\s*[(\d.]`)
	exprCharsRe  = regexp.MustCompile(`[-+*/().\d\s]+`)
	searchVerbRe = regexp.MustCompile(`(?i)^\s*(please\s+)?(search( the web)?( for)?|find( me| us)?|look up|google)\s*`)
)

// longestExpr returns the longest run of arithmetic characters in text
// that holds a digit.
func longestExpr(text string) string {
	best := ""
	for _, m := range exprCharsRe.FindAllString(text, -1) {
		m = strings.TrimSpace(m)
		if len(m) > len(best) && strings.ContainsAny(m, "0123456789") {
			best = m
		}
	}
	return best
}

// ---------------------------------------------------------------- wording

func describeDays(days []DayForecast) string {
	parts := make([]string, len(days))
	for i, d := range days {
		parts[i] = fmt.Sprintf("%s %d°C %s", d.Conditions, d.HighC, onDay(d.Day))
		if d.RainChance >= 50 {
			parts[i] += fmt.Sprintf(" (%d%% rain)", d.RainChance)
		}
	}
	return strings.Join(parts, ", ")
}

func onDay(day string) string {
	if strings.HasPrefix(day, "day ") {
		return "on " + day
	}
	return day
}

func describeSearch(m *llm.Message) string {
	var s SearchResults
	if err := json.Unmarshal([]byte(m.Content), &s); err != nil {
		return "The search returned something I can't read."
	}
	if len(s.Results) == 0 {
		return fmt.Sprintf("I found nothing for %q.", s.Query)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Found for %q:", s.Query)
	for _, r := range s.Results {
		fmt.Fprintf(&b, "\n- %s: %s %s", r.Title, firstSentence(r.Snippet), r.URL)
	}
	return b.String()
}

func describeCalendar(d CalendarDay) string {
	if !d.Connected {
		// The tool's note is for the model; say it to the user.
		return "I can't see your calendar yet: you haven't connected a Google account. " +
			"To connect it, type /connect google <token> (the token goes to the app, not to me)."
	}
	if len(d.Meetings) == 0 {
		return "Your calendar is free today."
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s today:", plural(len(d.Meetings), "meeting"))
	for _, m := range d.Meetings {
		fmt.Fprintf(&b, "\n- %s–%s %s", m.Start, m.End, m.Title)
		if m.With != "" {
			fmt.Fprintf(&b, " with %s", m.With)
		}
		if m.Where != "" {
			fmt.Fprintf(&b, " (%s)", m.Where)
		}
	}
	return b.String()
}

func money(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

func firstSentence(s string) string {
	if i := strings.Index(s, ". "); i >= 0 {
		return s[:i+1]
	}
	return s
}

func containsAny(s string, words ...string) bool {
	for _, w := range words {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}
