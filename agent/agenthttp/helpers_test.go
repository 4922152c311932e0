package agenthttp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/agenthttp"
	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/tool"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// headerTenant is the test hosts' authentication: the X-Tenant header.
func headerTenant(r *http.Request) (string, error) {
	t := r.Header.Get("X-Tenant")
	if t == "" {
		return "", errors.New("no X-Tenant header")
	}
	return t, nil
}

// env is one host: an orchestrator behind the handler on a real server.
type env struct {
	t       *testing.T
	o       *agent.Orchestrator
	srv     *httptest.Server
	h       *agenthttp.Handler
	ended   chan *agent.Result // every top run's Result, from the Observer
	outbox  *outbox
	weather atomic.Int32
}

// newEnv serves model with send_email (an Agent-Tool needing approval)
// and get_weather, plus cfg's tools; hcfg.Tenant defaults to the header.
func newEnv(t *testing.T, model llm.Client, cfg agent.Config, hcfg agenthttp.Config) *env {
	t.Helper()
	e := &env{t: t, ended: make(chan *agent.Result, 16), outbox: &outbox{}}
	reg := agent.NewRegistry()
	if err := agent.Register(reg, "send_email", "Send an email", sendEmail{e.outbox}); err != nil {
		t.Fatal(err)
	}
	cfg.LLM = model
	cfg.Agents = reg
	cfg.Tools = append(cfg.Tools, tool.New("get_weather", "Weather in a city",
		func(ctx context.Context, in struct {
			City string `json:"city"`
			Key  string `json:"key,omitempty"`
		}) (string, error) {
			e.weather.Add(1)
			return "sunny in " + in.City, nil
		}))
	cfg.Loop.DirectAgentPrompts = true
	cfg.Observer = agent.ObserverFunc(func(ctx context.Context, s agent.Step) {
		if s.Kind == agent.StepRunEnd && s.Path == nil {
			select {
			case e.ended <- s.Result:
			default:
			}
		}
	})
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	o, err := agent.NewOrchestrator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if hcfg.Logger == nil {
		hcfg.Logger = slog.New(slog.DiscardHandler)
	}
	if hcfg.Tenant == nil {
		hcfg.Tenant = headerTenant
	}
	e.o = o
	e.h, err = agenthttp.New(o, hcfg)
	if err != nil {
		t.Fatal(err)
	}
	e.srv = httptest.NewServer(e.h)
	t.Cleanup(func() {
		e.srv.Close()
		_ = o.Close(context.Background())
	})
	return e
}

// reply is an answer read whole.
type reply struct {
	status int
	header http.Header
	body   string
}

// errorOf decodes the uniform error body.
func (r reply) errorOf(t *testing.T) (code, message string) {
	t.Helper()
	var b struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal([]byte(r.body), &b); err != nil || b.Error.Code == "" {
		t.Fatalf("status %d, body %q: not the uniform error shape (%v)", r.status, r.body, err)
	}
	return b.Error.Code, b.Error.Message
}

// do sends a request as tenant ("" sends none) with a JSON body (when
// body is not "" and the method is not GET) and reads the answer whole.
func (e *env) do(method, path, tenant, body string) reply {
	e.t.Helper()
	ct := ""
	if method != http.MethodGet {
		ct = "application/json"
	}
	return e.doCT(method, path, tenant, ct, body)
}

func (e *env) doCT(method, path, tenant, contentType, body string) reply {
	e.t.Helper()
	resp := e.send(context.Background(), method, path, tenant, contentType, body)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return reply{resp.StatusCode, resp.Header, string(b)}
}

func (e *env) send(ctx context.Context, method, path, tenant, contentType, body string) *http.Response {
	e.t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, e.srv.URL+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if tenant != "" {
		req.Header.Set("X-Tenant", tenant)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp
}

// stream is an SSE answer read event by event.
type stream struct {
	t      *testing.T
	resp   *http.Response
	sc     *bufio.Scanner
	cancel context.CancelFunc
	raw    []string // every line read, comments included
}

// post sends a message and returns its stream, checked to be one.
func (e *env) post(tenant, conv, text string) *stream {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	body, _ := json.Marshal(map[string]string{"text": text})
	resp := e.send(ctx, http.MethodPost, "/conversations/"+conv+"/messages", tenant, "application/json", string(body))
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		e.t.Fatalf("POST message: %d %s %q", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	s := &stream{t: e.t, resp: resp, sc: bufio.NewScanner(resp.Body), cancel: cancel}
	s.sc.Buffer(make([]byte, 64<<10), 4<<20)
	e.t.Cleanup(s.close)
	return s
}

func (s *stream) close() { s.cancel(); s.resp.Body.Close() }

// next returns the next event (false at the end of the stream), checking
// that its SSE name is its data's type.
func (s *stream) next() (agenthttp.Event, bool) {
	s.t.Helper()
	var name string
	for s.sc.Scan() {
		line := s.sc.Text()
		s.raw = append(s.raw, line)
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var ev agenthttp.Event
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev); err != nil {
				s.t.Fatalf("data line %q: %v", line, err)
			}
			if ev.Type != name {
				s.t.Fatalf("event %q carries data of type %q", name, ev.Type)
			}
			return ev, true
		}
	}
	return agenthttp.Event{}, false
}

// until reads events up to the first of type typ and returns them all.
func (s *stream) until(typ string) []agenthttp.Event {
	s.t.Helper()
	var evs []agenthttp.Event
	for {
		ev, ok := s.next()
		if !ok {
			s.t.Fatalf("the stream ended before a %s event; got %v", typ, types(evs))
		}
		evs = append(evs, ev)
		if ev.Type == typ {
			return evs
		}
	}
}

// all reads the stream to its end, checking it ends with execution_end.
func (s *stream) all() []agenthttp.Event {
	s.t.Helper()
	evs := s.until("execution_end")
	if ev, ok := s.next(); ok {
		s.t.Fatalf("an event after execution_end: %+v", ev)
	}
	return evs
}

func types(evs []agenthttp.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.Type
	}
	return out
}

func count(evs []agenthttp.Event, typ string) int {
	n := 0
	for _, ev := range evs {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

// waitEnded returns the next run's Result (StepRunEnd).
func (e *env) waitEnded() *agent.Result {
	e.t.Helper()
	select {
	case res := <-e.ended:
		return res
	case <-time.After(10 * time.Second):
		e.t.Fatal("no run ended")
		return nil
	}
}

// ---------------------------------------------------------------- tools

type emailIn struct {
	To      string `json:"to"`
	Subject string `json:"subject"`
}

type outbox struct {
	mu   sync.Mutex
	sent []emailIn
}

func (o *outbox) list() []emailIn {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]emailIn(nil), o.sent...)
}

type sendEmail struct{ box *outbox }

func (s sendEmail) Run(ctx context.Context, in emailIn) (agent.Reply, error) {
	s.box.mu.Lock()
	defer s.box.mu.Unlock()
	s.box.sent = append(s.box.sent, in)
	return agent.Reply{Text: "sent to " + in.To}, nil
}

func (sendEmail) Approval(in emailIn) *approval.Request {
	return &approval.Request{ActionSummary: "Send an email to " + in.To, AllowModification: true,
		Details: map[string]any{"to": in.To, "subject": in.Subject}}
}

// gate is a tool that blocks until released or cancelled.
type gate struct {
	started   chan struct{}
	release   chan struct{}
	cancelled atomic.Bool
	once      sync.Once
}

func newGate() *gate { return &gate{started: make(chan struct{}), release: make(chan struct{})} }

func (g *gate) tool() tool.Tool {
	return tool.New("work", "A long piece of work", func(ctx context.Context, _ struct{}) (string, error) {
		g.once.Do(func() { close(g.started) })
		select {
		case <-g.release:
			return "done", nil
		case <-ctx.Done():
			g.cancelled.Store(true)
			return "", ctx.Err()
		}
	})
}

// pairedHistory fails unless every assistant tool call of h is answered
// by exactly one tool result after it.
func pairedHistory(t *testing.T, h []agenthttp.Message) {
	t.Helper()
	open := map[string]int{}
	for _, m := range h {
		for _, c := range m.ToolCalls {
			open[c.ID]++
		}
		if m.Role == "tool" {
			if open[m.ToolCallID] != 1 {
				t.Fatalf("tool result %q answers no open call: %+v", m.ToolCallID, h)
			}
			open[m.ToolCallID]--
		}
	}
	for id, n := range open {
		if n != 0 {
			t.Fatalf("tool call %q has no result: %+v", id, h)
		}
	}
}

// history reads a conversation's history over HTTP as tenant.
func (e *env) history(tenant, conv string) []agenthttp.Message {
	e.t.Helper()
	r := e.do(http.MethodGet, "/conversations/"+conv+"/messages", tenant, "")
	if r.status != http.StatusOK {
		e.t.Fatalf("GET history: %d %s", r.status, r.body)
	}
	var b struct{ Messages []agenthttp.Message }
	if err := json.Unmarshal([]byte(r.body), &b); err != nil {
		e.t.Fatal(err)
	}
	return b.Messages
}
