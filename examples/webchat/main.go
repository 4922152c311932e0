package main

import (
	"bufio"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/agenthttp"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/openai"
	"github.com/valetkit/valet/tool"
	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/agentexec"
)

//go:embed static
var staticFiles embed.FS

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "address to serve the chat on")
	smoke := flag.Bool("smoke", false, "serve on a free port, run one scripted round trip over HTTP, and exit")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var err error
	if *smoke {
		err = runSmoke(ctx, os.Stdout)
	} else {
		err = serve(ctx, *addr)
	}
	if err != nil {
		log.Fatal(err)
	}
}

// chooseModel is a real model with OPENAI_API_KEY, else the scripted one.
func chooseModel() (llm.Client, string, error) {
	if os.Getenv("OPENAI_API_KEY") == "" {
		return scripted(), "the offline scripted model", nil
	}
	c, err := openai.FromEnv()
	if err != nil {
		return nil, "", err
	}
	return c, "OpenAI (" + c.Model() + ")", nil
}

// serve runs the chat until ctx ends.
func serve(ctx context.Context, addr string) error {
	model, name, err := chooseModel()
	if err != nil {
		return err
	}
	a, err := newApp(model, 700*time.Millisecond, slog.Default())
	if err != nil {
		return err
	}
	defer a.Close()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	fmt.Printf("webchat on %s: open http://%s/?user=ann (and ?user=bob: another tenant)\n", name, ln.Addr())
	srv := &http.Server{Handler: a, ReadHeaderTimeout: 10 * time.Second}
	go func() { <-ctx.Done(); _ = srv.Shutdown(context.Background()) }()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// app is the chat's server: the page and, under /api, the agenthttp
// handler over an orchestrator and a trigger engine.
type app struct {
	http.Handler
	Outbox *Outbox
	o      *agent.Orchestrator
	stop   context.CancelFunc
	wg     sync.WaitGroup
}

// userName is the demo's stand-in for authentication: the page's ?user=.
var userName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)

func newApp(model llm.Client, latency time.Duration, logger *slog.Logger) (*app, error) {
	a := &app{Outbox: &Outbox{}}
	reg := agent.NewRegistry()
	if err := agent.Register(reg, "send_email", "Send an email for the user", SendEmail{Outbox: a.Outbox}); err != nil {
		return nil, err
	}
	o, err := agent.NewOrchestrator(agent.Config{
		LLM:          model,
		SystemPrompt: systemPrompt,
		Tools:        []tool.Tool{weatherTool(latency)},
		Agents:       reg,
		Loop:         agent.LoopConfig{RouteWhileRunning: true},
		Logger:       logger,
	})
	if err != nil {
		return nil, err
	}
	a.o = o
	exec, err := agentexec.New(o, agentexec.Config{})
	if err != nil {
		return nil, err
	}
	engine, err := trigger.New(trigger.Config{Executors: map[string]trigger.Executor{trigger.DefaultExecutor: exec}, Logger: logger})
	if err != nil {
		return nil, err
	}
	api, err := agenthttp.New(o, agenthttp.Config{
		Prefix: "/api",
		Tasks:  engine,
		Logger: logger,
		// A real host reads its session or a verified token here.
		Tenant: func(r *http.Request) (string, error) {
			u := r.Header.Get("X-User")
			if !userName.MatchString(u) {
				return "", errors.New("no user")
			}
			return u, nil
		},
	})
	if err != nil {
		return nil, err
	}
	page, err := fs.Sub(staticFiles, "static")
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/api/", api)
	mux.Handle("/", pageHeaders(http.FileServerFS(page)))
	a.Handler = mux

	ctx, stop := context.WithCancel(context.Background())
	a.stop = stop
	a.wg.Add(1)
	go func() { defer a.wg.Done(); _ = engine.Run(ctx) }()
	return a, nil
}

// Close stops the engine and the orchestrator's background work.
func (a *app) Close() {
	a.stop()
	a.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = a.o.Close(ctx)
}

// pageHeaders serves the page with a policy that lets it run only its own
// script: nothing a model writes can run even if it reached the DOM.
func pageHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		next.ServeHTTP(w, r)
	})
}

// runSmoke serves the chat on a free port with the scripted model and
// drives one round trip over HTTP as the page does: a message streamed,
// the drafted email approved by its fingerprint.
func runSmoke(ctx context.Context, out io.Writer) error {
	a, err := newApp(scripted(), 50*time.Millisecond, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	defer a.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: a, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	return smoke(ctx, "http://"+ln.Addr().String(), a.Outbox, out)
}

func smoke(ctx context.Context, base string, box *Outbox, out io.Writer) error {
	call := func(method, path, body string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("X-User", "smoke")
		if method != http.MethodGet {
			req.Header.Set("Content-Type", "application/json")
		}
		return http.DefaultClient.Do(req)
	}
	resp, err := call(http.MethodGet, "/", "")
	if err != nil {
		return err
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), "app.js") {
		return fmt.Errorf("the page: %d", resp.StatusCode)
	}
	fmt.Fprintln(out, "page served")

	resp, err = call(http.MethodPost, "/api/conversations/main/messages", `{"text":"What's the weather in Paris and Lyon? Email it to the team."}`)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var end agenthttp.Event
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev agenthttp.Event
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			return err
		}
		switch ev.Type {
		case "tool_result":
			fmt.Fprintf(out, "tool %s: %s\n", ev.ToolCall.Name, ev.ToolCall.Status)
		case "message_end":
			fmt.Fprintf(out, "assistant: %s\n", ev.Text)
		case "execution_end":
			end = ev
		}
	}
	if end.Result == nil || len(end.Result.PendingApprovals) != 1 {
		return fmt.Errorf("the run did not end waiting for one approval: %+v", end)
	}
	p := end.Result.PendingApprovals[0]
	fmt.Fprintf(out, "approval: %s\n", p.ActionSummary)
	resp, err = call(http.MethodPost, "/api/approvals/"+p.ID, fmt.Sprintf(`{"action":"approve","fingerprint":%q}`, p.Fingerprint))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var decided struct{ Result agenthttp.Result }
	if err := json.NewDecoder(resp.Body).Decode(&decided); err != nil || resp.StatusCode != http.StatusOK {
		return fmt.Errorf("approve: %d %v", resp.StatusCode, err)
	}
	fmt.Fprintf(out, "assistant: %s\n", decided.Result.Response)
	if sent := box.Sent(); len(sent) != 1 {
		return fmt.Errorf("%d emails sent, want 1", len(sent))
	}
	fmt.Fprintln(out, "emails sent: 1")
	return nil
}
