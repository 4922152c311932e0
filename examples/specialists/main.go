package main

import (
	"context"
	"crypto/rand"
	"embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/skill"
	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/tool"
)

// skillFiles holds the specialists: skills/research/SKILL.md and
// skills/writer/SKILL.md (skill.Load searches skills/ in it).
//
//go:embed skills
var skillFiles embed.FS

// The demo's user and conversation.
const (
	tenantID     = "alex"
	conversation = "lisbon-trip"
	userEmail    = "Alex Kim <me@example.com>"
	systemPrompt = `You are Valet, the assistant of Alex Kim <me@example.com>.
Delegate research and writing to your specialists; run longer jobs in the background and tell the user when they are done.`
	askMessage  = "Find me a quiet hotel in Lisbon for next week and draft a note to Ana about it."
	sendMessage = "Looks good, send it to Ana (ana@example.com)."
	approveWith = "yes"
)

// deliveryWait bounds the wait for the background work.
const deliveryWait = 2 * time.Minute

// options are the command's flags.
type options struct {
	postgres, schema   string // -postgres, -schema: pgdelegate
	redis, redisPrefix string // -redis: redispool ("" prefix: redisPrefix)
	verbose            bool
}

func main() {
	var opt options
	flag.StringVar(&opt.postgres, "postgres", "", "keep results and task graphs in PostgreSQL at this URL (pgdelegate), so background work survives a restart")
	flag.StringVar(&opt.schema, "schema", "", "with -postgres: the schema of pgdelegate's and River's tables (it must exist); default the search_path")
	flag.StringVar(&opt.redis, "redis", "", "keep the pool of waiting agents in Redis at this URL (redispool), so the approval survives a restart")
	flag.BoolVar(&opt.verbose, "v", false, "log debug traces to stderr")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, opt); err != nil {
		fmt.Fprintln(os.Stderr, "specialists:", err)
		os.Exit(1)
	}
}

// run plays the demo, printing it to w.
func run(ctx context.Context, w io.Writer, opt options) error {
	level := slog.LevelError // the warnings of the later scenes are shown as scenes
	if opt.verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	skills, err := skill.Load(skillFiles)
	if err != nil {
		return err
	}
	st, err := openStorage(ctx, w, opt, log)
	if err != nil {
		return err
	}
	defer st.close()
	conv := conversation
	if st.engine != nil || st.pool != nil {
		// Durable storage may hold an earlier run's work: this run's
		// conversation is its own.
		conv += "-" + rand.Text()[:8]
	}
	agents := agent.NewRegistry()
	outbox := &Outbox{}
	if err := agent.Register(agents, "send_email", "Send an email from the user's mailbox.", SendEmail{From: userEmail, Outbox: outbox}); err != nil {
		return err
	}
	model := newScript()
	desk, payments := newDesk(), &Payments{}
	delivered := make(chan *agent.Result, 8)
	o, err := agent.NewOrchestrator(agent.Config{
		LLM:          model,
		SystemPrompt: systemPrompt,
		Tools:        []tool.Tool{searchTool(), desk.reserveTool(), payments.payTool(), availabilityTool()},
		Agents:       agents,
		Skills:       skills,
		Pool:         st.pool,
		Locker:       st.locker,
		Control:      st.control,
		Plan:         agent.PlanOptions{Enabled: true},
		Logger:       log,
		Loop: agent.LoopConfig{
			DirectAgentPrompts: true,
			// pay_deposit: up to 100 EUR runs, up to 1000 waits for the
			// user, above is refused.
			RiskPolicy: riskPolicy,
			// A message that arrives while the loop runs is routed to it.
			RouteWhileRunning: true,
		},
		SubAgents: agent.SubAgentOptions{
			Enabled: true,
			Engine:  st.engine,
			// The coordinator's reaction to background work that ended:
			// a real host pushes it to the user's chat.
			OnBackground: func(_ context.Context, res *agent.Result) {
				select {
				case delivered <- res:
				default:
				}
			},
		},
	})
	if err != nil {
		return err
	}
	defer o.Close(context.WithoutCancel(ctx))
	if st.engine != nil { // a host's engine is the host's to run
		ectx, stopEngine := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := st.engine.Run(ectx, o.TaskExecutor()); err != nil {
				log.Error("the delegation engine stopped", "err", err)
			}
		}()
		defer func() { stopEngine(); <-done }()
	}

	// 1. The user asks; the coordinator starts a two-task graph in the
	// background (research → write) and answers at once.
	if _, err := send(ctx, w, o, conv, askMessage); err != nil {
		return err
	}
	graph := model.graphID()
	fmt.Fprintf(w, "  (spawn_agent answered: %s)\n", model.spawnResult())
	if graph == "" {
		return errors.New("the coordinator started no background work")
	}

	// 2. The graph runs: the researcher searches, the writer is given the
	// research as a resolved [agent_result:research]. Its end arrives in
	// the conversation as a new message, and the coordinator reacts.
	fmt.Fprintln(w, "\n… the specialists work in the background …")
	res, err := awaitDelivery(ctx, delivered, graph)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\nthe writer specialist was given:\n%s\n", indent(model.writerContext()))
	h, err := o.History(ctx, tenantID, conv)
	if err != nil {
		return err
	}
	for i := len(h) - 1; i >= 0; i-- {
		if m := h[i]; m.Role == llm.RoleUser && m.Name == agent.TriggerMessageName {
			fmt.Fprintf(w, "\nnew message in the conversation (%s, not the user's words):\n%s\n", res.TaskID, indent(m.Content))
			break
		}
	}
	fmt.Fprintf(w, "\nbot> %s\n", strings.ReplaceAll(res.Response, "\n", "\n     "))

	// 3. The user wants it sent: the writer specialist calls send_email,
	// which needs approval. The specialist is parked with its loop state in
	// the pool and the coordinator's run waits for the user.
	res, err = send(ctx, w, o, conv, sendMessage)
	if err != nil {
		return err
	}
	if res.Status != agent.StatusWaitingForApproval || len(res.PendingApprovals) != 1 {
		return fmt.Errorf("the email did not wait for approval: %s", res.Status)
	}
	printApproval(w, res.PendingApprovals[0], res.Waiting)
	if n := len(outbox.Sent()); n != 0 {
		return fmt.Errorf("%d emails went out before the user approved", n)
	}

	// 4. The user approves: the email goes out once, the specialist goes
	// on where it stopped, and its answer reaches the coordinator.
	if _, err := send(ctx, w, o, conv, approveWith); err != nil {
		return err
	}
	fmt.Fprintln(w, "\noutbox (what was really sent):")
	for _, m := range outbox.Sent() {
		fmt.Fprintf(w, "  to %s: %q\n%s\n", m.To, m.Subject, indent(m.Body))
	}
	return trip(ctx, w, o, st.control, conv, model, desk, payments)
}

// awaitDelivery waits for the coordinator's reaction to graph's end (an
// engine on durable storage may first deliver an earlier run's graphs).
func awaitDelivery(ctx context.Context, delivered <-chan *agent.Result, graph string) (*agent.Result, error) {
	timeout := time.After(deliveryWait)
	for {
		select {
		case res := <-delivered:
			if res.TaskID == "graph:"+graph {
				return res, nil
			}
		case <-timeout:
			return nil, errors.New("the background work did not end in time")
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// send handles one user message, printing it, the tool calls and the
// answer.
func send(ctx context.Context, w io.Writer, o *agent.Orchestrator, conv, text string) (*agent.Result, error) {
	fmt.Fprintf(w, "\nyou> %s\n", text)
	res, err := o.HandleMessage(ctx, agent.Message{TenantID: tenantID, ConversationID: conv, Text: text})
	if err != nil {
		return res, err
	}
	printRun(w, res)
	return res, nil
}

// printApproval shows the request the user decides on, and who asked.
func printApproval(w io.Writer, req approval.Request, waiting []agent.Waiting) {
	fmt.Fprintf(w, "  ⏸ approval %s: %s\n", req.AgentName, req.ActionSummary)
	for _, wt := range waiting {
		if len(wt.Path) > 0 {
			fmt.Fprintf(w, "    asked by the specialist at %s\n", strings.Join(wt.Path, " › "))
		}
	}
}

// indent indents every line of s.
func indent(s string) string { return "  | " + strings.ReplaceAll(s, "\n", "\n  | ") }

// ---------------------------------------------------------------- the research tool

// SearchIn is web_search's input.
type SearchIn struct {
	Query string `json:"query" jsonschema:"description=What to search the web for"`
}

// searchTool is a fake web search answering from canned results: only the
// research specialist has it (its SKILL.md lists it).
func searchTool() tool.Tool {
	return tool.New("web_search", "Search the web; returns the top results, one per line.",
		func(ctx context.Context, in SearchIn) (string, error) {
			return "Casa do Rio — quiet riverside guesthouse in Alfama, 140 EUR a night\n" +
				"Hotel Jardim — garden rooms in Estrela, very quiet street, 125 EUR a night\n" +
				"Baixa Central — lively square, 110 EUR a night, noisy at night", nil
		})
}
