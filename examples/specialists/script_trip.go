package main

// The coordinator's part in the later scenes: a booking kept in a plan
// (update_plan), a correction the user sends while reserve_room waits, a
// deposit that needs approval, a payment the risk policy refuses, and a
// model going round in circles on a hotel that never answers.

import (
	"encoding/json"
	"strings"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
)

// The user's messages of the later scenes.
const (
	bookMessage    = "Book Hotel Jardim for Ana and me, 5 nights from Monday, and pay the deposit."
	correctMessage = "Actually make it 4 nights, we leave on Friday."
	groupMessage   = "Also pay the whole stay for our group of 12 now: 5400 EUR to Hotel Jardim."
	backupMessage  = "Is Casa do Rio free that week too, as a backup?"
)

// The deposit the coordinator pays: above freePaymentEUR, so it waits.
const depositEUR = 250

// planArgs is an update_plan call's arguments: statuses of the steps
// reserve, deposit and tell.
func planArgs(focus string, reserve, deposit, tell agent.PlanStatus) []byte {
	b, _ := json.Marshal(agent.Plan{
		Approach: "Reserve the room, pay the deposit once Alex approves it, then tell Ana.",
		Focus:    focus,
		Steps: []agent.PlanStep{
			{ID: "reserve", Description: "Reserve Hotel Jardim from Monday", Status: reserve},
			{ID: "deposit", Description: "Pay the deposit", Status: deposit},
			{ID: "tell", Description: "Tell Ana the dates", Status: tell},
		},
	})
	return b
}

func call(id, name string, args any) llmtest.Reply {
	b, _ := json.Marshal(args)
	return llmtest.Calls(llm.ToolCall{ID: id, Name: name, Arguments: b})
}

// trip answers the coordinator in the later scenes; ok is false when the
// request is not theirs.
func (s *script) trip(req llm.Request, last llm.Message) (llmtest.Reply, bool) {
	msgs := req.Messages
	if len(req.Tools) == 0 { // the doom-loop detector's last call: answer with what was found
		if strings.Contains(last.Content, "This request is being stopped") {
			s.mu.Lock()
			for _, m := range msgs {
				if strings.HasPrefix(m.Content, "Note: ") || strings.HasPrefix(m.Content, "Warning: ") {
					s.notes = append(s.notes, m.Content)
				}
			}
			s.mu.Unlock()
			return llmtest.Text("I could not reach Casa do Rio: its booking line stayed busy each time I called. " +
				"Your room at Hotel Jardim is booked, so there is no rush; I can try them again tomorrow."), true
		}
		return llmtest.Reply{}, false
	}
	const (
		pending    = agent.PlanStatus("pending")
		inProgress = agent.PlanStatus("in_progress")
		done       = agent.PlanStatus("done")
	)
	switch {
	case last.Role == llm.RoleUser && last.Content == bookMessage:
		return llmtest.Calls(llm.ToolCall{ID: "plan1", Name: agent.UpdatePlanTool, Arguments: planArgs("reserve", inProgress, pending, pending)}), true
	case last.Role == llm.RoleTool && last.ToolCallID == "plan1":
		return call("reserve5", "reserve_room", ReserveIn{Hotel: "Hotel Jardim", Nights: 5}), true
	case last.Role == llm.RoleUser && strings.Contains(last.Content, correctMessage):
		// The correction came in while reserve_room waited: redo it.
		s.mu.Lock()
		s.injected = last.Content
		s.mu.Unlock()
		return call("reserve4", "reserve_room", ReserveIn{Hotel: "Hotel Jardim", Nights: 4}), true
	case last.Role == llm.RoleTool && last.ToolCallID == "reserve5":
		return llmtest.Text("Reserved, 5 nights."), true // no correction reached the loop
	case last.Role == llm.RoleTool && last.ToolCallID == "reserve4":
		return llmtest.Calls(llm.ToolCall{ID: "plan2", Name: agent.UpdatePlanTool, Arguments: planArgs("deposit", done, inProgress, pending)}), true
	case last.Role == llm.RoleTool && last.ToolCallID == "plan2":
		return call("deposit", "pay_deposit", PayIn{To: "Hotel Jardim", AmountEUR: depositEUR, Booking: "JAR-4N"}), true
	case last.Role == llm.RoleTool && strings.HasPrefix(last.Content, "Paid "):
		return llmtest.Calls(llm.ToolCall{ID: "plan3", Name: agent.UpdatePlanTool, Arguments: planArgs("tell", done, done, pending)}), true
	case last.Role == llm.RoleTool && last.ToolCallID == "plan3":
		return llmtest.Text("Booked: Hotel Jardim, 4 nights from Monday (JAR-4N); the 250 EUR deposit is paid. Next: telling Ana the dates."), true
	case last.Role == llm.RoleUser && last.Content == groupMessage:
		return call("group", "pay_deposit", PayIn{To: "Hotel Jardim", AmountEUR: 5400, Booking: "JAR-4N"}), true
	case last.Role == llm.RoleTool && last.ToolCallID == "group":
		if !strings.Contains(last.Content, "denied by the risk policy") {
			return llmtest.Text("The payment did not go through: " + last.Content), true
		}
		return llmtest.Text("I did not pay it: payments above 1000 EUR are refused from here. You can pay the hotel for the group on arrival."), true
	case last.Role == llm.RoleUser && last.Content == backupMessage,
		lastCalled(msgs) == "check_availability":
		// Round in circles: ask again whatever it answered, whatever the notes say.
		return call("", "check_availability", AvailabilityIn{Hotel: "Casa do Rio"}), true
	}
	return llmtest.Reply{}, false
}

// lastCalled is the name of the last tool the model called in the run
// (after the user's last own message), or "".
func lastCalled(msgs []llm.Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i]
		if m.Role == llm.RoleUser && m.Content == backupMessage {
			return "" // the run's start, reached before any call
		}
		if m.Role == llm.RoleAssistant && len(m.ToolCalls) > 0 {
			return m.ToolCalls[len(m.ToolCalls)-1].Name
		}
	}
	return ""
}
