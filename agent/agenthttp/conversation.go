package agenthttp

import (
	"net/http"

	"github.com/valetkit/valet/agent"
)

// getMessages answers GET …/conversations/{id}/messages: the
// conversation's history as its next message would load it
// (Orchestrator.History), for a client that reconnects after a stream
// broke off. {"messages": [Message…]}.
func (h *Handler) getMessages(w http.ResponseWriter, r *http.Request) {
	conv, ok := h.pathID(w, r, "conversation ID")
	if !ok {
		return
	}
	hist, err := h.o.History(r.Context(), tenantOf(r), conv)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := make([]Message, 0, len(hist))
	for _, m := range hist {
		out = append(out, messageOf(m))
	}
	writeJSON(w, http.StatusOK, struct {
		Messages []Message `json:"messages"`
	}{out})
}

// steerBody is the (optional, empty) body of POST …/cancel and …/pause.
type steerBody struct{}

// steer answers POST …/conversations/{id}/cancel and …/pause: the signal
// goes to the conversation's running loop, on whichever replica runs it
// (Orchestrator.Cancel, Pause). 202 {"signal": "cancel"}; 409 not_running
// when no loop runs. The stream of the run ends with status cancelled, or
// paused at its next turn boundary.
func (h *Handler) steer(sig agent.Signal) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		conv, ok := h.pathID(w, r, "conversation ID")
		if !ok {
			return
		}
		if err := h.decode(w, r, &steerBody{}, true); err != nil {
			h.fail(w, r, err)
			return
		}
		var err error
		if sig == agent.SignalCancel {
			err = h.o.Cancel(r.Context(), tenantOf(r), conv)
		} else {
			err = h.o.Pause(r.Context(), tenantOf(r), conv)
		}
		if err != nil {
			h.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusAccepted, struct {
			Signal string `json:"signal"`
		}{string(sig)})
	}
}
