// Package agenthttp serves an agent.Orchestrator (and optionally a
// trigger.Engine) over plain net/http: the glue every host of valet
// writes, to put a chat in a browser or a phone. Mount it behind the host's
// own authentication; it finds the tenant of each request through
// Config.Tenant, which the host writes from what it trusts (a header its
// proxy sets, a verified JWT claim, a session):
//
//	h, err := agenthttp.New(orchestrator, agenthttp.Config{
//		Tenant: func(r *http.Request) (string, error) { return session.UserID(r) },
//		Tasks:  engine, // optional: the /tasks endpoints
//		Prefix: "/api",
//	})
//	mux.Handle("/api/", requireLogin(h))
//
// # Endpoints
//
// Below the Prefix (or behind http.StripPrefix):
//
//	POST   /conversations/{id}/messages  {"text"}  → text/event-stream, one event per agent.Event
//	GET    /conversations/{id}/messages            → {"messages": [Message…]}: the history
//	POST   /conversations/{id}/cancel              → 202 {"signal": "cancel"} (409 not_running)
//	POST   /conversations/{id}/pause               → 202 {"signal": "pause"}
//	GET    /approvals[?conversation=]              → {"approvals": [approval.Request…]}
//	POST   /approvals/{id}  Decision               → {"result": Result}
//	GET    /tasks[?status=ACTIVE,PAUSED]           → {"tasks": [trigger.Task…]}
//	POST   /tasks  trigger.Task                    → 201 {"task": trigger.Task}
//	GET    /tasks/{id}                             → {"task": …}
//	DELETE /tasks/{id}                             → 204
//	POST   /tasks/{id}/pause | resume | retry      → {"task": …}
//	GET    /tasks/{id}/runs[?limit=]               → {"runs": [trigger.Run…]}
//
// # Streaming a message
//
// POST …/conversations/{id}/messages answers with Server-Sent Events:
//
//	event: message_chunk
//	data: {"type":"message_chunk","text":"Looking "}
//
// one per agent.Event, its data an Event as JSON (see Event for the fields
// of each type), the last always execution_end with the Result (and an
// Error when the run failed). A message_retract event means the text since
// message_start is to be erased: the model call broke off and is retried.
// Text is the model's or a tool's, JSON-encoded: a page shows it with
// textContent, never as HTML. A comment (": keep-alive") is written after
// Config.KeepAlive without an event, so proxies keep the stream open; set
// the host's http.Server.WriteTimeout as for any request: each write of the
// stream sets its own deadline, Config.WriteTimeout.
//
// A client that disconnects cancels the run: its completed turns are saved
// with every tool call paired with its result. A client too slow to take
// an event within WriteTimeout is dropped the same way; meanwhile at most
// Config.EventBuffer events wait for it and then the run itself waits, so
// a slow client costs bounded memory. There is no Last-Event-ID: a client
// that reconnects reads the history from GET …/conversations/{id}/messages
// and the open approvals from GET …/approvals.
//
// A message posted while the conversation's run is going waits its turn,
// or, with agent.LoopConfig.RouteWhileRunning, is routed to the running
// loop: its stream is then a single execution_end whose Result has status
// "injected" and "steered" saying what it did ("inject", "cancel" or
// "pause").
//
// # Approvals
//
// GET …/approvals lists the tenant's open requests, each with its
// fingerprint. POST …/approvals/{id} decides one:
//
//	{"action": "approve" | "edit" | "cancel", "fields": {…for edit}, "reason": "…", "fingerprint": "<as listed>"}
//
// through Orchestrator.ResolveApproval: the approved action runs once and
// the loop reports it, the Result returned as JSON. The fingerprint is
// required: a request whose draft changed since it was listed answers 409
// stale and nothing runs. An ID of another tenant's request is 404, like
// one that never existed, and nothing runs.
//
// # Safety
//
// Every request goes through Config.Tenant first: an error or an empty
// tenant answers 401 and nothing runs, whatever the route. Every call to
// the orchestrator and the engine takes that tenant, so one tenant never
// sees or decides another's conversations, approvals or tasks. A POST or
// DELETE must declare Content-Type: application/json (415 otherwise), which
// a form another site posts cannot, so cookie-authenticated hosts get no
// cross-site requests through. Bodies are limited to Config.MaxBodyBytes
// (413), must be one JSON value with no unknown field (400 naming the
// problem), and errors are always
//
//	{"error": {"code": "not_found", "message": "…"}}
//
// with the status the code's constant documents; an internal failure is a
// 500 "internal" whose cause is logged, never shown. Every handler honours
// the request's context.
package agenthttp
