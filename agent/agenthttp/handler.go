package agenthttp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path"
	"strings"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/internal/ids"
)

// Handler is the http.Handler New returns. It is safe for concurrent use.
type Handler struct {
	o   *agent.Orchestrator
	cfg Config
	mux *http.ServeMux
}

// routes registers every endpoint under cfg.Prefix.
func (h *Handler) routes() {
	p := h.cfg.Prefix
	h.mux.HandleFunc("POST "+p+"/conversations/{id}/messages", h.postMessage)
	h.mux.HandleFunc("GET "+p+"/conversations/{id}/messages", h.getMessages)
	h.mux.HandleFunc("POST "+p+"/conversations/{id}/cancel", h.steer(agent.SignalCancel))
	h.mux.HandleFunc("POST "+p+"/conversations/{id}/pause", h.steer(agent.SignalPause))
	h.mux.HandleFunc("GET "+p+"/approvals", h.listApprovals)
	h.mux.HandleFunc("POST "+p+"/approvals/{id}", h.decideApproval)
	h.mux.HandleFunc("GET "+p+"/tasks", h.tasks(h.listTasks))
	h.mux.HandleFunc("POST "+p+"/tasks", h.tasks(h.createTask))
	h.mux.HandleFunc("GET "+p+"/tasks/{id}", h.tasks(h.getTask))
	h.mux.HandleFunc("DELETE "+p+"/tasks/{id}", h.tasks(h.deleteTask))
	h.mux.HandleFunc("POST "+p+"/tasks/{id}/pause", h.tasks(h.pauseTask))
	h.mux.HandleFunc("POST "+p+"/tasks/{id}/resume", h.tasks(h.resumeTask))
	h.mux.HandleFunc("POST "+p+"/tasks/{id}/retry", h.tasks(h.retryTask))
	h.mux.HandleFunc("GET "+p+"/tasks/{id}/runs", h.tasks(h.taskRuns))
}

type tenantKey struct{}

// tenantOf returns the tenant ServeHTTP established for r.
func tenantOf(r *http.Request) string {
	t, _ := r.Context().Value(tenantKey{}).(string)
	return t
}

// ServeHTTP authenticates the request through Config.Tenant before
// anything else (401 without a tenant: no route is revealed), answers an
// unknown route or method with a JSON 404 or 405, requires a POST or
// DELETE to declare Content-Type application/json (415 otherwise: a form
// another site posts cannot reach a cookie-authenticated host), and then
// serves the endpoint.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tenant, err := h.tenant(r)
	if err != nil || !ids.Valid(tenant) {
		var e *Error
		if !errors.As(err, &e) || e == nil {
			e = &Error{Status: http.StatusUnauthorized, Code: CodeUnauthenticated, Message: "authentication required"}
		}
		if e.Status < 400 || e.Status > 599 {
			e = &Error{Status: http.StatusUnauthorized, Code: e.Code, Message: e.Message}
			if e.Code == "" {
				e.Code = CodeUnauthenticated
			}
		}
		writeJSON(w, e.Status, errorBody{e})
		return
	}
	if !cleanPath(r.URL.Path) {
		// The mux would redirect to the cleaned path (with an HTML body);
		// an API answers what it was asked for.
		writeJSON(w, http.StatusNotFound, errorBody{&Error{Status: http.StatusNotFound, Code: CodeNotFound, Message: "no such endpoint"}})
		return
	}
	if _, pattern := h.mux.Handler(r); pattern == "" {
		h.unrouted(w, r)
		return
	}
	if (r.Method == http.MethodPost || r.Method == http.MethodDelete) && !isJSON(r) {
		writeJSON(w, http.StatusUnsupportedMediaType, errorBody{&Error{Status: http.StatusUnsupportedMediaType,
			Code: CodeUnsupportedMediaType, Message: r.Method + " requires Content-Type: application/json"}})
		return
	}
	h.mux.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tenantKey{}, tenant)))
}

// errTenantPanicked answers a request whose Config.Tenant panicked.
var errTenantPanicked = &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: "internal error"}

// tenant calls Config.Tenant, containing a panic of the host's function:
// the request is answered 500 and the panic logged without its value
// (which may hold the credentials the function was reading).
func (h *Handler) tenant(r *http.Request) (tenant string, err error) {
	defer func() {
		if p := recover(); p != nil {
			h.cfg.Logger.ErrorContext(r.Context(), "agenthttp: Config.Tenant panicked", "method", r.Method, "path", r.URL.Path, "panic_type", fmt.Sprintf("%T", p))
			tenant, err = "", errTenantPanicked
		}
	}()
	return h.cfg.Tenant(r)
}

// cleanPath reports whether p is already in the form path.Clean gives
// (a trailing slash aside), as the mux wants it to route without a
// redirect.
func cleanPath(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	c := path.Clean(p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return c == p
}

// unrouted answers a request no pattern takes as the mux would (404, or
// 405 with its Allow header) but in the handler's JSON shape.
func (h *Handler) unrouted(w http.ResponseWriter, r *http.Request) {
	fallback, _ := h.mux.Handler(r)
	rec := &statusRecorder{header: http.Header{}}
	fallback.ServeHTTP(rec, r)
	if rec.status == http.StatusMethodNotAllowed {
		w.Header().Set("Allow", rec.header.Get("Allow"))
		writeJSON(w, http.StatusMethodNotAllowed, errorBody{&Error{Status: http.StatusMethodNotAllowed,
			Code: CodeMethodNotAllowed, Message: r.Method + " is not allowed here"}})
		return
	}
	writeJSON(w, http.StatusNotFound, errorBody{&Error{Status: http.StatusNotFound, Code: CodeNotFound, Message: "no such endpoint"}})
}

// statusRecorder keeps the status and headers the mux's fallback sets.
type statusRecorder struct {
	header http.Header
	status int
}

func (s *statusRecorder) Header() http.Header         { return s.header }
func (s *statusRecorder) Write(b []byte) (int, error) { return len(b), nil }
func (s *statusRecorder) WriteHeader(code int)        { s.status = code }

// pathID returns the {id} of r, or answers 400 and returns false when it
// is not a valid ID.
func (h *Handler) pathID(w http.ResponseWriter, r *http.Request, what string) (string, bool) {
	id := r.PathValue("id")
	if err := ids.Check(what, id); err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody{&Error{Status: http.StatusBadRequest, Code: CodeInvalidRequest, Message: err.Error()}})
		return "", false
	}
	return id, true
}
