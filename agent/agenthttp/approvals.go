package agenthttp

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/approval"
)

// listApprovals answers GET …/approvals: the tenant's open approval
// requests, oldest first, of every conversation (?conversation= keeps one).
// {"approvals": [approval.Request…]}; each carries the fingerprint a
// decision sends back.
func (h *Handler) listApprovals(w http.ResponseWriter, r *http.Request) {
	pending, err := h.o.ListPendingApprovals(r.Context(), tenantOf(r))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := make([]approval.Request, 0, len(pending))
	conv := r.URL.Query().Get("conversation")
	for _, p := range pending {
		if conv == "" || p.ConversationID == conv {
			out = append(out, p)
		}
	}
	writeJSON(w, http.StatusOK, struct {
		Approvals []approval.Request `json:"approvals"`
	}{out})
}

// Decision is the body of POST …/approvals/{id}.
type Decision struct {
	// Action is "approve", "edit" or "cancel".
	Action approval.Action `json:"action"`
	// Fields are the changed fields of an edit, a JSON object.
	Fields json.RawMessage `json:"fields,omitempty"`
	// Reason is the user's, optional.
	Reason string `json:"reason,omitempty"`
	// Fingerprint is the request's, as listed: required. When the
	// action changed since (its draft was edited), the answer is 409 stale
	// and nothing runs.
	Fingerprint string `json:"fingerprint"`
}

// decideApproval answers POST …/approvals/{id}: the decision goes through
// Orchestrator.ResolveApproval, which runs the approved action once and
// lets the loop report it. 200 {"result": Result} (with "error" when the
// run that followed failed). 404 for an ID the tenant has no open request
// of (another tenant's included), 409 stale for an old fingerprint,
// 410 expired, 422 for an edit the request does not allow; nothing runs.
func (h *Handler) decideApproval(w http.ResponseWriter, r *http.Request) {
	id, ok := h.pathID(w, r, "approval ID")
	if !ok {
		return
	}
	var body Decision
	if err := h.decode(w, r, &body, false); err != nil {
		h.fail(w, r, err)
		return
	}
	if body.Fingerprint == "" {
		h.fail(w, r, &Error{Status: http.StatusBadRequest, Code: CodeInvalidRequest,
			Message: `"fingerprint" is required: send the request's fingerprint as listed, so a decision taken on a stale screen runs nothing`})
		return
	}
	d := approval.Decision{Action: body.Action, Fields: body.Fields, Reason: body.Reason, Fingerprint: body.Fingerprint}
	if err := d.Check(); err != nil {
		h.fail(w, r, err)
		return
	}
	res, err := h.o.ResolveApproval(r.Context(), tenantOf(r), id, d)
	if err != nil && (res == nil || decisionRefused(err)) {
		h.fail(w, r, err)
		return
	}
	out := struct {
		Result *Result `json:"result"`
		Error  *Error  `json:"error,omitempty"`
	}{Result: resultOf(res)}
	if err != nil {
		out.Error = errorFor(err)
		if out.Error.Status == http.StatusInternalServerError {
			h.cfg.Logger.ErrorContext(r.Context(), "agenthttp: the run after a decision failed", "approval", id, "err", agent.RedactText(err.Error()))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// decisionRefused reports whether err refused the decision itself, so
// nothing ran: it is answered with its own status, not as a run's outcome.
func decisionRefused(err error) bool {
	for _, s := range []error{approval.ErrNotFound, approval.ErrExpired, approval.ErrStale, approval.ErrInvalidDecision,
		approval.ErrNotAllowed, agent.ErrPaused, agent.ErrStaleAgent, agent.ErrInvalidID} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}
