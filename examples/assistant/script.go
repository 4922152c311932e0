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
