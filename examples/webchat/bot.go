package main

import (
	"context"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"
	"time"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

const systemPrompt = `You are Valet, a concise assistant in a web chat.
Use get_weather for any forecast and call it for several cities together, in one turn.
Send email only through send_email; the user approves each one.`

// ---------------------------------------------------------------- get_weather

// WeatherIn is what the model sends to get_weather.
type WeatherIn struct {
	City string `json:"city" jsonschema:"description=City name, e.g. Paris"`
}

// weatherTool answers a made-up forecast after a pretend network delay,
// long enough to see two calls run side by side.
func weatherTool(latency time.Duration) tool.Tool {
	return tool.New("get_weather", "Today's weather in a city: conditions and the high in °C.",
		func(ctx context.Context, in WeatherIn) (string, error) {
			select {
			case <-time.After(latency):
			case <-ctx.Done():
				return "", ctx.Err()
			}
			h := fnv.New32a()
			h.Write([]byte(strings.ToLower(in.City)))
			n := h.Sum32()
			sky := []string{"sunny", "cloudy", "light rain", "clear", "windy"}[n%5]
			return fmt.Sprintf("%s: %s, high %d °C", in.City, sky, 12+n%15), nil
		})
}

// ---------------------------------------------------------------- send_email

// EmailIn is send_email's schema.
type EmailIn struct {
	To      string `json:"to" jsonschema:"description=Recipient email address,format=email"`
	Subject string `json:"subject" jsonschema:"description=Subject line"`
	Body    string `json:"body" jsonschema:"description=Plain-text body"`
}

// Outbox keeps the emails the demo "sends".
type Outbox struct {
	mu   sync.Mutex
	sent []EmailIn
}

// Sent returns the emails sent so far.
func (o *Outbox) Sent() []EmailIn {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]EmailIn(nil), o.sent...)
}

// SendEmail is an Agent-Tool that asks for approval before it sends.
type SendEmail struct{ Outbox *Outbox }

// Run sends the approved email.
func (s SendEmail) Run(ctx context.Context, in EmailIn) (agent.Reply, error) {
	s.Outbox.mu.Lock()
	defer s.Outbox.mu.Unlock()
	s.Outbox.sent = append(s.Outbox.sent, in)
	return agent.Reply{Text: "Email sent to " + in.To + "."}, nil
}

// Approval shows the draft; the user may edit any field.
func (SendEmail) Approval(in EmailIn) *approval.Request {
	return &approval.Request{ActionSummary: "Send an email to " + in.To, AllowModification: true,
		Details: map[string]any{"to": in.To, "subject": in.Subject, "body": in.Body}}
}

// ---------------------------------------------------------------- the offline model

// scripted is the offline model: it answers from the conversation so far,
// so any number of users can chat with it at once.
func scripted() *llmtest.Script {
	return llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		switch req.Purpose {
		case llm.PurposePhrase:
			return llmtest.Text("I drafted the email: approve, edit or cancel it below.")
		case llm.PurposeRoute:
			return llmtest.Text("new")
		case llm.PurposeLoop, llm.PurposeFinal:
		default:
			return llmtest.Text("")
		}
		last := req.Messages[len(req.Messages)-1]
		switch {
		case last.Role == llm.RoleUser && strings.Contains(strings.ToLower(last.Content), "weather"):
			return llmtest.Reply{Text: "Let me check both cities at once.", ToolCalls: []llm.ToolCall{
				llmtest.Call("get_weather", `{"city":"Paris"}`), llmtest.Call("get_weather", `{"city":"Lyon"}`)}}
		case last.Role == llm.RoleTool && last.Name == "get_weather":
			var lines []string
			for _, m := range req.Messages {
				if m.Role == llm.RoleTool && m.Name == "get_weather" && !m.IsError {
					lines = append(lines, m.Content)
				}
			}
			body := "Hello team,\n\nToday's forecast:\n" + strings.Join(lines, "\n") + "\n\nBest"
			args := fmt.Sprintf(`{"to":"team@example.com","subject":"Today's weather","body":%q}`, body)
			return llmtest.Calls(llmtest.Call("send_email", args))
		case last.Role == llm.RoleTool && last.Name == "send_email" && last.IsError:
			return llmtest.Text("Understood, I did not send the email.")
		case last.Role == llm.RoleTool && last.Name == "send_email":
			return llmtest.Text("Done: the forecast is on its way. " + last.Content)
		}
		return llmtest.Text("I'm the offline demo: ask me for the weather in Paris and Lyon, emailed to the team.")
	})
}
