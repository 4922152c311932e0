package main

// The offline model: llmtest.Script, valet's mock llm.Client, answering by
// a function of each request. It decides from what the request holds — the
// kind of call (a loop turn, the forced resolve_approvals call, the
// phrasing of a question without tools), the user's words, the current
// time in the system prompt, the tool results — and quotes the tool
// results it was sent, so the demo shows what the tools really returned.

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
)

// demoModel plays the model of the demo conversation.
func demoModel() *llmtest.Script {
	return llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		switch {
		case req.ToolChoice == approval.ResolveToolName:
			// The user replied to pending approvals with more than a bare
			// yes or no: say what the reply decides.
			return resolveStep(req)
		case req.ToolChoice == "provide_fields":
			// A waiting agent asks which fields the reply gives. The demo
			// always gives every field, so this is a reply about something else.
			return llmtest.Calls(llmtest.Call("provide_fields", `{"unrelated":true}`))
		case len(req.Tools) == 0:
			// Agents wait for the user: phrase the question, no tools.
			return llmtest.Text(waitingReply(req.Messages))
		}
		return tripStep(req.Messages)
	})
}

// trip is what the demo request asks for.
type trip struct {
	from, to string // IATA codes
	city     string // where the weather is wanted
	date     time.Time
	emailTo  string
}

// tripStep is one turn of the loop: search flights and weather at once,
// then draft the email from their results; or, after the user's
// decision, report what happened to the email.
func tripStep(msgs []llm.Message) llmtest.Reply {
	user, results := currentTurn(msgs)
	if sent := lastResult(results, "send_email"); sent != nil {
		return llmtest.Text(emailOutcome(sent, msgs))
	}
	t, ok := parseTrip(user, currentDate(msgs))
	if !ok {
		return llmtest.Text("I'm the offline demo model and only know the demo request: " +
			"a flight SFO→NYC next Friday, the weather there, and the plan by email. Set OPENAI_API_KEY to talk to a real model.")
	}
	flights, weather := lastResult(results, "search_flights"), lastResult(results, "get_weather")
	if flights == nil && weather == nil {
		// Independent: both in one turn, and the orchestrator runs them at once.
		return llmtest.Calls(
			llmtest.Call("search_flights", FlightSearchIn{From: t.from, To: t.to, Date: t.date.Format(time.DateOnly)}),
			llmtest.Call("get_weather", WeatherIn{City: t.city, Date: t.date.Format(time.DateOnly)}),
		)
	}
	plan := planText(flights, weather)
	if t.emailTo == "" {
		return llmtest.Text(plan)
	}
	return llmtest.Calls(llmtest.Call("send_email", SendEmailIn{
		To:      t.emailTo,
		Subject: fmt.Sprintf("Trip plan: %s → %s, %s", t.from, t.to, t.date.Format("Monday 2 January")),
		Body:    "Hi,\n\nHere is the plan for " + t.date.Format("Monday 2 January") + ":\n\n" + plan + "\n\n" + signature(msgs),
	}))
}

// waitingReply phrases the question of a run that ends with agents
// waiting: what was found, and the draft to approve.
func waitingReply(msgs []llm.Message) string {
	var b strings.Builder
	var flights, weather *llm.Message
	for _, m := range toolMessages(msgs) {
		switch m.Name {
		case "search_flights":
			flights = &m
		case "get_weather":
			weather = &m
		}
	}
	if flights != nil || weather != nil {
		b.WriteString(planText(flights, weather) + "\n\n")
	}
	var draft SendEmailIn
	if c := lastCall(msgs, "send_email"); c != nil && json.Unmarshal(c.Arguments, &draft) == nil {
		fmt.Fprintf(&b, "I've drafted the email %q to %s. Shall I send it? You can approve it, change it (the recipient, say) or cancel it.", draft.Subject, draft.To)
		return b.String()
	}
	// Something else waits: repeat the orchestrator's note.
	if note := msgs[len(msgs)-1].Content; strings.HasPrefix(note, "These actions wait for the user:") {
		note = strings.TrimPrefix(note, "These actions wait for the user:")
		note, _, _ = strings.Cut(note, "\n\nWrite your reply")
		b.WriteString(strings.TrimSpace(note))
	}
	return b.String()
}

// resolveStep answers the forced resolve_approvals call: "yes, but send it
// to me instead" edits the recipient to the sender's own address, shown in
// the approval's details ("from: Alex Kim <me@example.com>").
func resolveStep(req llm.Request) llmtest.Reply {
	ids, _ := llmtest.PendingApprovalIDs(req)
	reply := strings.ToLower(lastUser(req.Messages))
	var action approval.Action
	var fields map[string]string
	switch {
	case emailRe.MatchString(reply):
		action, fields = approval.Edit, map[string]string{"to": emailRe.FindString(reply)}
	case toMeRe.MatchString(reply):
		m := senderRe.FindStringSubmatch(req.Messages[0].Content)
		if m == nil {
			break // who is "me"? Leave it undecided.
		}
		action, fields = approval.Edit, map[string]string{"to": m[1]}
	case yesRe.MatchString(reply):
		action = approval.Approve
	case noRe.MatchString(reply):
		action = approval.Cancel
	}
	type decision struct {
		ID     string            `json:"id"`
		Action approval.Action   `json:"action"`
		Fields map[string]string `json:"fields,omitempty"`
	}
	decisions := []decision{}
	if action != "" {
		for _, id := range ids {
			decisions = append(decisions, decision{ID: id, Action: action, Fields: fields})
		}
	}
	return llmtest.Calls(llmtest.Call(approval.ResolveToolName, map[string]any{"decisions": decisions}))
}

// emailOutcome reports send_email's result after the user's decision,
// and the change the user made if the first draft is still in the history
// (it is not in a fresh process: history lives in memory).
func emailOutcome(m *llm.Message, msgs []llm.Message) string {
	if m.IsError {
		if strings.Contains(m.Content, "cancelled") {
			return "OK, I didn't send the email."
		}
		return "The email could not be sent: " + firstLine(m.Content)
	}
	var sent map[string]string
	if json.Unmarshal(jsonPart(m.Content), &sent) != nil {
		return m.Content
	}
	text := fmt.Sprintf("Done: I sent %q to %s", sent["subject"], sent["to"])
	if c := firstCall(msgs, "send_email"); c != nil {
		var draft SendEmailIn
		if json.Unmarshal(c.Arguments, &draft) == nil && draft.To != sent["to"] {
			text += " instead of " + draft.To
		}
	}
	return text + fmt.Sprintf(" (message %s).", sent["message_id"])
}

// planText describes the cheapest flight and the weather.
func planText(flights, weather *llm.Message) string {
	var lines []string
	switch {
	case flights == nil:
	case flights.IsError:
		lines = append(lines, "Flights: the search failed ("+firstLine(flights.Content)+").")
	default:
		var fs []Flight
		if json.Unmarshal(jsonPart(flights.Content), &fs) != nil || len(fs) == 0 {
			lines = append(lines, "Flights: none found.")
			break
		}
		best := fs[0] // the search sorts cheapest first
		lines = append(lines, fmt.Sprintf("Flight: %s %s, %s %s → %s %s, nonstop, %s, $%d (the cheapest of %d).",
			best.Airline, best.Flight, best.From, hhmm(best.Departs), best.To, hhmm(best.Arrives), best.Duration, best.PriceUSD, len(fs)))
		if len(fs) > 1 {
			var others []string
			for _, f := range fs[1:min(len(fs), 3)] {
				others = append(others, fmt.Sprintf("%s %s at %s ($%d)", f.Airline, f.Flight, hhmm(f.Departs), f.PriceUSD))
			}
			lines = append(lines, "Also: "+strings.Join(others, ", ")+".")
		}
	}
	switch {
	case weather == nil:
	case weather.IsError:
		lines = append(lines, "Weather: no forecast ("+firstLine(weather.Content)+").")
	default:
		var f Forecast
		if json.Unmarshal([]byte(weather.Content), &f) != nil {
			break
		}
		lines = append(lines, fmt.Sprintf("Weather in %s: %s, %d°C / %d°F (low %d°C), %d%% chance of rain.",
			f.City, f.Conditions, f.HighC, f.HighF, f.LowC, f.RainChance))
	}
	return strings.Join(lines, "\n")
}

// ---------------------------------------------------------------- reading the request

var (
	routeRe   = regexp.MustCompile(`\b([A-Z]{3})\s*(?:→|->|to)\s*([A-Z]{3})\b`)
	weekdayRe = regexp.MustCompile(`(?i)\b(next|this|on)\s+(monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b`)
	emailRe   = regexp.MustCompile(`[\w.+-]+@[\w-]+(?:\.[\w-]+)+`)
	nowRe     = regexp.MustCompile(`Current time: \w+, (\d{1,2} \w+ \d{4})`)
	senderRe  = regexp.MustCompile(`(?m)^\s*from: [^<\n]*<([^>\s]+@[^>\s]+)>`)
	toMeRe    = regexp.MustCompile(`\bto (me|myself)\b`)
	yesRe     = regexp.MustCompile(`^\s*(yes|yeah|yep|ok|okay|sure|approve|go ahead|send it)\b`)
	noRe      = regexp.MustCompile(`^\s*(no|nope|cancel|don't|do not|stop)\b`)
	signedRe  = regexp.MustCompile(`signed "([^"]+)"`)
)

// parseTrip reads the demo request: a route of airport codes, a weekday,
// maybe an address to email the plan to.
func parseTrip(text string, today time.Time) (trip, bool) {
	m := routeRe.FindStringSubmatch(text)
	if m == nil || !strings.Contains(strings.ToLower(text), "flight") {
		return trip{}, false
	}
	t := trip{from: m[1], to: m[2], city: m[2], date: today.AddDate(0, 0, 1), emailTo: emailRe.FindString(text)}
	if p, ok := places[t.to]; ok {
		t.city = p.city
	}
	if d := weekdayRe.FindStringSubmatch(text); d != nil {
		t.date = nextWeekday(today, d[2])
	}
	return t, true
}

// nextWeekday is the first such day after today.
func nextWeekday(today time.Time, name string) time.Time {
	for i := 1; i <= 7; i++ {
		d := today.AddDate(0, 0, i)
		if strings.EqualFold(d.Weekday().String(), name) {
			return d
		}
	}
	return today
}

// currentDate reads today's date from the system prompt, as a real model
// does: "Current time: Sunday, 7 June 2026, 10:00 (PDT, UTC-07:00)".
func currentDate(msgs []llm.Message) time.Time {
	for _, m := range msgs {
		if m.Role != llm.RoleSystem {
			continue
		}
		if s := nowRe.FindStringSubmatch(m.Content); s != nil {
			if d, err := time.Parse("2 January 2006", s[1]); err == nil {
				return d
			}
		}
	}
	return time.Now().Truncate(24 * time.Hour)
}

// signature signs with the first name of the user the persona names.
func signature(msgs []llm.Message) string {
	if len(msgs) > 0 {
		if m := signedRe.FindStringSubmatch(msgs[0].Content); m != nil {
			return m[1]
		}
	}
	return "Sent by Valet"
}

// currentTurn returns the last user message and the tool results that
// followed it.
func currentTurn(msgs []llm.Message) (user string, results []llm.Message) {
	msgs = toolMessages(msgs)
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

func lastUser(msgs []llm.Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == llm.RoleUser {
			return msgs[i].Content
		}
	}
	return ""
}

// toolMessages reads tool messages the way a model does. Over the OpenAI
// wire a tool message carries only its content and the id of the call it
// answers: the name comes from that call, and a failure is recognised by
// its text. It returns a copy of msgs with Name and IsError filled in.
func toolMessages(msgs []llm.Message) []llm.Message {
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
			msgs[i].IsError = m.IsError || jsonPart(m.Content) == nil
		}
	}
	return msgs
}

// lastResult returns the newest result of the named tool.
func lastResult(results []llm.Message, name string) *llm.Message {
	for i := len(results) - 1; i >= 0; i-- {
		if results[i].Name == name {
			return &results[i]
		}
	}
	return nil
}

// lastCall returns the newest call of the named tool.
func lastCall(msgs []llm.Message, name string) *llm.ToolCall {
	for i := len(msgs) - 1; i >= 0; i-- {
		for j := range msgs[i].ToolCalls {
			if msgs[i].ToolCalls[j].Name == name {
				return &msgs[i].ToolCalls[j]
			}
		}
	}
	return nil
}

// firstCall returns the oldest call of the named tool.
func firstCall(msgs []llm.Message, name string) *llm.ToolCall {
	for i := range msgs {
		for j := range msgs[i].ToolCalls {
			if msgs[i].ToolCalls[j].Name == name {
				return &msgs[i].ToolCalls[j]
			}
		}
	}
	return nil
}

// jsonPart is the JSON of a tool result: a plain tool's whole result, or
// the data after the first line of an Agent-Tool's reply. Nil when there
// is none (an error, say).
func jsonPart(s string) []byte {
	if json.Valid([]byte(s)) {
		return []byte(s)
	}
	if _, data, ok := strings.Cut(s, "\n"); ok && json.Valid([]byte(data)) {
		return []byte(data)
	}
	return nil
}

// hhmm cuts "2026-06-12 08:15 PDT" to "08:15".
func hhmm(stamp string) string {
	if f := strings.Fields(stamp); len(f) == 3 {
		return f[1]
	}
	return stamp
}
