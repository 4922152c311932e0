package agenthttp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/valetkit/valet/agent"
)

// postMessageBody is the body of POST …/conversations/{id}/messages.
type postMessageBody struct {
	Text string `json:"text"`
}

// streamItem is one event of the run on its way to the client.
type streamItem struct {
	ev  agent.Event
	err error
}

// postMessage runs the message through Orchestrator.Stream and answers
// with one Server-Sent Event per agent.Event. Bad input is answered with a
// JSON error before the stream starts and runs nothing. Once streaming,
// the run goes on a goroutine of its own that hands events to this one
// through a buffer of Config.EventBuffer; when it is full the run waits,
// so a slow client costs no memory. A client that does not take an event
// within Config.WriteTimeout, or disconnects, cancels the run; the handler
// returns only once the run has ended (its turns saved, every tool call
// paired with its result).
func (h *Handler) postMessage(w http.ResponseWriter, r *http.Request) {
	conv, ok := h.pathID(w, r, "conversation ID")
	if !ok {
		return
	}
	var body postMessageBody
	if err := h.decode(w, r, &body, false); err != nil {
		h.fail(w, r, err)
		return
	}
	if strings.TrimSpace(body.Text) == "" {
		h.fail(w, r, &Error{Status: http.StatusBadRequest, Code: CodeInvalidRequest, Message: `"text" is required`})
		return
	}
	msg := agent.Message{TenantID: tenantOf(r), ConversationID: conv, Text: body.Text, Source: agent.SourceUser}

	rc := http.NewResponseController(w)
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream; charset=utf-8")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	hd.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	s := &sseWriter{w: w, rc: rc, timeout: h.cfg.WriteTimeout}
	if err := s.flush(); err != nil {
		h.cfg.Logger.WarnContext(r.Context(), "agenthttp: the stream cannot be flushed", "err", err)
		return
	}

	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	events := make(chan streamItem, h.cfg.EventBuffer)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(events)
		for ev, err := range h.o.Stream(ctx, msg) {
			select {
			case events <- streamItem{ev, err}:
			case <-ctx.Done():
				return // stopping the range cancels the run; Stream returns once it ended
			}
		}
	}()
	defer func() { cancel(); <-done }()

	keepAlive := time.NewTicker(h.cfg.KeepAlive)
	defer keepAlive.Stop()
	for {
		select {
		case it, ok := <-events:
			if !ok {
				return
			}
			if err := s.event(string(it.ev.Type), mustJSON(eventOf(it.ev, it.err))); err != nil {
				h.dropped(r, conv, err)
				return
			}
			if it.err != nil && errorFor(it.err).Status == http.StatusInternalServerError {
				h.cfg.Logger.ErrorContext(r.Context(), "agenthttp: run failed", "conversation", conv, "err", agent.RedactText(it.err.Error()))
			}
			keepAlive.Reset(h.cfg.KeepAlive)
		case <-keepAlive.C:
			if err := s.comment("keep-alive"); err != nil {
				h.dropped(r, conv, err)
				return
			}
		case <-ctx.Done():
			return
		}
	}
}

// dropped logs a client that stopped reading; its run is cancelled.
func (h *Handler) dropped(r *http.Request, conv string, err error) {
	h.cfg.Logger.InfoContext(r.Context(), "agenthttp: client dropped mid-stream; run cancelled", "conversation", conv, "err", err)
}

// sseWriter writes Server-Sent Events, each flushed under a write
// deadline.
type sseWriter struct {
	w          http.ResponseWriter
	rc         *http.ResponseController
	timeout    time.Duration
	noDeadline bool
}

func (s *sseWriter) event(name string, data []byte) error {
	return s.write(fmt.Sprintf("event: %s\ndata: %s\n\n", name, data))
}

func (s *sseWriter) comment(text string) error {
	return s.write(": " + text + "\n\n")
}

func (s *sseWriter) write(frame string) error {
	if !s.noDeadline {
		if err := s.rc.SetWriteDeadline(time.Now().Add(s.timeout)); errors.Is(err, http.ErrNotSupported) {
			s.noDeadline = true // a writer without deadlines: the request's context still ends the stream
		}
	}
	if _, err := s.w.Write([]byte(frame)); err != nil {
		return err
	}
	return s.flush()
}

func (s *sseWriter) flush() error {
	if err := s.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}
