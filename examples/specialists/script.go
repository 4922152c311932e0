package main

// The offline model: an llmtest.Script answering each request by a
// function of it. It tells the coordinator from the specialists by the
// system prompt (a specialist's holds "Instructions of skill <name>:"),
// and writes its answers from what it was sent: the research from the
// search results, the note from the research framed in the writer's
// context, the coordinator's reaction from the delivery message.

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
)

// script is the demo's model and what it saw.
type script struct {
	*llmtest.Script
	mu     sync.Mutex
	writer string   // the writer specialist's message: its task and context
	spawn  string   // the coordinator's spawn_agent result
	notes  []string // the doom-loop notes the coordinator was sent
	// injected is the user message the correction became in the
	// coordinator's next request.
	injected string
}

func (s *script) injectedMessage() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.injected
}

func newScript() *script {
	s := &script{}
	s.Script = llmtest.NewScriptFunc(s.reply)
	return s
}

func (s *script) writerContext() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writer
}

func (s *script) spawnResult() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.spawn
}

// graphID is the id of the graph the coordinator started, read from its
// spawn_agent result ("Started in the background as graph ID: …").
func (s *script) graphID() string {
	_, rest, ok := strings.Cut(s.spawnResult(), "as graph ")
	if !ok {
		return ""
	}
	id, _, _ := strings.Cut(rest, ":")
	return id
}

// doomNotes are the notes the coordinator was sent going round in circles.
func (s *script) doomNotes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.notes...)
}

func (s *script) reply(req llm.Request) llmtest.Reply {
	if req.Purpose == llm.PurposeRoute {
		// A message sent while the loop runs: what is it?
		return llmtest.Text("correction")
	}
	if len(req.Messages) == 0 || req.Purpose != llm.PurposeLoop && req.Purpose != llm.PurposeFinal && req.Purpose != "" {
		return llmtest.Reply{Text: "OK."}
	}
	sys := req.Messages[0].Content
	last := req.Messages[len(req.Messages)-1]
	switch {
	case strings.Contains(sys, "Instructions of skill research:"):
		return s.research(last)
	case strings.Contains(sys, "Instructions of skill writer:"):
		return s.write(req)
	}
	if r, ok := s.trip(req, last); ok {
		return r
	}
	return s.coordinate(req.Messages, last)
}

// research searches once, then compares what it found.
func (s *script) research(last llm.Message) llmtest.Reply {
	if last.Role != llm.RoleTool {
		return llmtest.Calls(llm.ToolCall{ID: "search", Name: "web_search", Arguments: []byte(`{"query":"quiet hotels Lisbon"}`)})
	}
	var quiet []string
	for _, line := range strings.Split(last.Content, "\n") {
		if strings.Contains(line, "quiet") {
			quiet = append(quiet, "- "+line)
		}
	}
	return llmtest.Text("Quiet hotels in Lisbon:\n" + strings.Join(quiet, "\n") + "\nPick: Hotel Jardim, the quietest street and the lower price.")
}

// write drafts the note from the research framed in its context.
func (s *script) write(req llm.Request) llmtest.Reply {
	var user string
	for _, m := range req.Messages {
		if m.Role == llm.RoleUser {
			user = m.Content
			break
		}
	}
	if strings.Contains(user, "Send the note") {
		return s.sendNote(req, user)
	}
	s.mu.Lock()
	s.writer = user
	s.mu.Unlock()
	research := framed(user, "research")
	_, pick, _ := strings.Cut(research, "Pick: ")
	pick, _, _ = strings.Cut(pick, ",")
	detail := pick
	for _, line := range strings.Split(research, "\n") {
		if pick != "" && strings.HasPrefix(line, "- "+pick) {
			detail = strings.TrimPrefix(line, "- ")
		}
	}
	return llmtest.Text("Subject: Lisbon next week\n\nHi Ana,\n\nI found us a quiet place for next week: " + detail +
		". Shall I book it?\n\nAlex")
}

// sendNote sends the note framed in its context with send_email, then
// reports the email's result.
func (s *script) sendNote(req llm.Request, user string) llmtest.Reply {
	if last := req.Messages[len(req.Messages)-1]; last.Role == llm.RoleTool {
		return llmtest.Text("Sent: " + last.Content)
	}
	note := framedSuffix(user, ".write")
	subject, body, _ := strings.Cut(note, "\n\n")
	args, _ := json.Marshal(map[string]string{"to": "ana@example.com", "subject": strings.TrimPrefix(subject, "Subject: "), "body": body})
	return llmtest.Calls(llm.ToolCall{ID: "mail", Name: "send_email", Arguments: args})
}

// coordinate is the coordinator: it starts the graph on the user's
// message, says it is under way, reacts to the delivery, and has the
// writer send the note when the user asks.
func (s *script) coordinate(msgs []llm.Message, last llm.Message) llmtest.Reply {
	switch {
	case last.Role == llm.RoleTool && strings.HasPrefix(last.ToolCallID, "resume_"): // the specialist's answer after the approval
		line, _, _ := strings.Cut(last.Content, "\n")
		return llmtest.Text("Done. " + line)
	case last.Role == llm.RoleTool && last.ToolCallID == "send":
		return llmtest.Text("The writer is sending it; please confirm the email.")
	case last.Role == llm.RoleUser && strings.HasPrefix(last.Content, "Looks good, send it"):
		ref := ""
		for _, m := range msgs {
			if id := refEnding(m.Content, ".write"); id != "" {
				ref = id
			}
		}
		args, _ := json.Marshal(map[string]any{"skill": "writer", "task": "Send the note to Ana (ana@example.com) with send_email.",
			"context": "The note: [agent_result:" + ref + "]"})
		return llmtest.Calls(llm.ToolCall{ID: "send", Name: agent.SpawnAgentTool, Arguments: args})
	case last.Role == llm.RoleTool:
		s.mu.Lock()
		s.spawn = last.Content
		s.mu.Unlock()
		return llmtest.Text("I've put a researcher and a writer on it; I'll tell you when the note is ready.")
	case last.Role == llm.RoleUser && strings.HasPrefix(last.Content, "[Background Tasks]"):
		note := framedSuffix(last.Content, ".write")
		return llmtest.Text("Your note to Ana is ready:\n\n" + note + "\n\nShall I send it?")
	}
	args, _ := json.Marshal(map[string]any{"tasks": []map[string]any{
		{"id": "research", "skill": "research", "task": "Find two quiet hotels in Lisbon for next week and pick one."},
		{"id": "write", "skill": "writer", "task": "Draft a short note to Ana proposing the hotel.",
			"context": "The research: [agent_result:research]", "depends_on": []string{"research"}},
	}})
	return llmtest.Calls(llm.ToolCall{ID: "plan", Name: agent.SpawnAgentTool, Arguments: args})
}

// framed is the text of the agent_result block of that id in s.
func framed(s, id string) string {
	open := fmt.Sprintf(`<agent_result id=%q`, id)
	return block(s, strings.Index(s, open))
}

// framedSuffix is the text of the first agent_result block whose id ends
// with suffix.
func framedSuffix(s, suffix string) string {
	at := strings.Index(s, suffix+`" status=`)
	if at < 0 {
		return ""
	}
	return block(s, strings.LastIndex(s[:at], "<agent_result"))
}

// block is the text of the agent_result block opening at i.
func block(s string, i int) string {
	if i < 0 {
		return ""
	}
	s = s[i:]
	_, body, ok := strings.Cut(s, ">\n")
	if !ok {
		return ""
	}
	body, _, _ = strings.Cut(body, "\n</agent_result>")
	return body
}

// refEnding is the id of the first [agent_result:ID] reference in s whose
// id ends with suffix, or "".
func refEnding(s, suffix string) string {
	for {
		_, rest, ok := strings.Cut(s, "[agent_result:")
		if !ok {
			return ""
		}
		id, _, _ := strings.Cut(rest, "]")
		if strings.HasSuffix(id, suffix) {
			return id
		}
		s = rest
	}
}
