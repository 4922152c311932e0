package agenthttp

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"github.com/valetkit/valet/trigger"
)

// tasks wraps a /tasks endpoint: 404 not_configured without Config.Tasks.
func (h *Handler) tasks(fn func(w http.ResponseWriter, r *http.Request, e *trigger.Engine)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if h.cfg.Tasks == nil {
			h.fail(w, r, &Error{Status: http.StatusNotFound, Code: CodeNotConfigured, Message: "this server manages no scheduled tasks"})
			return
		}
		fn(w, r, h.cfg.Tasks)
	}
}

type taskBody struct {
	Task *trigger.Task `json:"task"`
}

type tasksBody struct {
	Tasks []*trigger.Task `json:"tasks"`
}

// listTasks answers GET …/tasks (?status=ACTIVE,PAUSED keeps those):
// {"tasks": [trigger.Task…]}.
func (h *Handler) listTasks(w http.ResponseWriter, r *http.Request, e *trigger.Engine) {
	var statuses []trigger.Status
	if q := r.URL.Query().Get("status"); q != "" {
		for _, s := range strings.Split(q, ",") {
			st := trigger.Status(strings.TrimSpace(s))
			if err := st.Check(); err != nil {
				h.fail(w, r, err)
				return
			}
			statuses = append(statuses, st)
		}
	}
	list, err := e.List(r.Context(), tenantOf(r), statuses...)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if list == nil {
		list = []*trigger.Task{}
	}
	writeJSON(w, http.StatusOK, tasksBody{list})
}

// createTask answers POST …/tasks: the body is a trigger.Task as JSON;
// its tenant is the request's (a tenant_id in the body must be it), and
// the engine checks the rest (400 invalid_request saying what is wrong;
// 409 conflict for an ID the tenant has). 201 {"task": trigger.Task}.
func (h *Handler) createTask(w http.ResponseWriter, r *http.Request, e *trigger.Engine) {
	var t trigger.Task
	if err := h.decode(w, r, &t, false); err != nil {
		h.fail(w, r, err)
		return
	}
	tenant := tenantOf(r)
	if t.TenantID != "" && t.TenantID != tenant {
		h.fail(w, r, &Error{Status: http.StatusBadRequest, Code: CodeInvalidRequest, Message: `"tenant_id" is the caller's own; leave it out`})
		return
	}
	t.TenantID = tenant
	if err := e.CreateTask(r.Context(), &t); err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, taskBody{&t})
}

// getTask answers GET …/tasks/{id}: {"task": trigger.Task}, 404 for a task
// the tenant does not have.
func (h *Handler) getTask(w http.ResponseWriter, r *http.Request, e *trigger.Engine) {
	h.onTask(w, r, e.Get)
}

// pauseTask, resumeTask and retryTask answer POST …/tasks/{id}/pause,
// /resume and /retry: {"task": trigger.Task} as it is now; 400 for a task
// whose status does not allow it.
func (h *Handler) pauseTask(w http.ResponseWriter, r *http.Request, e *trigger.Engine) {
	h.onTask(w, r, e.Pause)
}

func (h *Handler) resumeTask(w http.ResponseWriter, r *http.Request, e *trigger.Engine) {
	h.onTask(w, r, e.Resume)
}

func (h *Handler) retryTask(w http.ResponseWriter, r *http.Request, e *trigger.Engine) {
	h.onTask(w, r, e.Retry)
}

// onTask calls fn on the tenant's task {id} and answers the task.
func (h *Handler) onTask(w http.ResponseWriter, r *http.Request, fn func(context.Context, string, string) (*trigger.Task, error)) {
	id, ok := h.pathID(w, r, "task ID")
	if !ok {
		return
	}
	if r.Method == http.MethodPost {
		if err := h.decode(w, r, &steerBody{}, true); err != nil {
			h.fail(w, r, err)
			return
		}
	}
	t, err := fn(r.Context(), tenantOf(r), id)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, taskBody{t})
}

// deleteTask answers DELETE …/tasks/{id}: 204, or 404 for a task the
// tenant does not have.
func (h *Handler) deleteTask(w http.ResponseWriter, r *http.Request, e *trigger.Engine) {
	id, ok := h.pathID(w, r, "task ID")
	if !ok {
		return
	}
	if err := h.decode(w, r, &steerBody{}, true); err != nil {
		h.fail(w, r, err)
		return
	}
	if _, err := e.Get(r.Context(), tenantOf(r), id); err != nil {
		h.fail(w, r, err) // Delete of a missing task may succeed quietly; the client is told 404
		return
	}
	if err := e.Delete(r.Context(), tenantOf(r), id); err != nil {
		h.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// taskRuns answers GET …/tasks/{id}/runs (?limit=, default
// DefaultRunsLimit, at most MaxRunsLimit): the task's newest runs, newest
// first, {"runs": [trigger.Run…]}.
func (h *Handler) taskRuns(w http.ResponseWriter, r *http.Request, e *trigger.Engine) {
	id, ok := h.pathID(w, r, "task ID")
	if !ok {
		return
	}
	limit := DefaultRunsLimit
	if q := r.URL.Query().Get("limit"); q != "" {
		n, err := strconv.Atoi(q)
		if err != nil || n < 1 || n > MaxRunsLimit {
			h.fail(w, r, &Error{Status: http.StatusBadRequest, Code: CodeInvalidRequest, Message: "limit must be a number from 1 to " + strconv.Itoa(MaxRunsLimit)})
			return
		}
		limit = n
	}
	if _, err := e.Get(r.Context(), tenantOf(r), id); err != nil {
		h.fail(w, r, err)
		return
	}
	runs, err := e.Runs(r.Context(), tenantOf(r), id, limit)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if runs == nil {
		runs = []trigger.Run{}
	}
	writeJSON(w, http.StatusOK, struct {
		Runs []trigger.Run `json:"runs"`
	}{runs})
}
