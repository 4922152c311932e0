package main

import (
	"context"
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
	systemPrompt = `You are Valet, the assistant of Alex Kim <me@example.com>.
Delegate research and writing to your specialists; run longer jobs in the background and tell the user when they are done.`
	askMessage = "Find me a quiet hotel in Lisbon for next week and draft a note to Ana about it."
)

// deliveryWait bounds the wait for the background work.
const deliveryWait = time.Minute

// options are the command's flags.
type options struct {
	verbose bool
}

func main() {
	var opt options
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
	skills, err := skill.Load(skillFiles)
	if err != nil {
		return err
	}
	level := slog.LevelWarn
	if opt.verbose {
		level = slog.LevelDebug
	}
	model := newScript()
	delivered := make(chan *agent.Result, 1)
	o, err := agent.NewOrchestrator(agent.Config{
		LLM:          model,
		SystemPrompt: systemPrompt,
		Tools:        []tool.Tool{searchTool()},
		Skills:       skills,
		Logger:       slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})),
		SubAgents: agent.SubAgentOptions{
			Enabled: true,
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

	// 1. The user asks; the coordinator starts a two-task graph in the
	// background (research → write) and answers at once.
	if _, err := send(ctx, w, o, askMessage); err != nil {
		return err
	}
	fmt.Fprintf(w, "  (spawn_agent answered: %s)\n", model.spawnResult())

	// 2. The graph runs: the researcher searches, the writer is given the
	// research as a resolved [agent_result:research]. Its end arrives in
	// the conversation as a new message, and the coordinator reacts.
	fmt.Fprintln(w, "\n… the specialists work in the background …")
	var res *agent.Result
	select {
	case res = <-delivered:
	case <-time.After(deliveryWait):
		return errors.New("the background work did not end in time")
	case <-ctx.Done():
		return ctx.Err()
	}
	fmt.Fprintf(w, "\nthe writer specialist was given:\n%s\n", indent(model.writerContext()))
	h, err := o.History(ctx, tenantID, conversation)
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
	return nil
}

// send handles one user message, printing it, the tool calls and the
// answer.
func send(ctx context.Context, w io.Writer, o *agent.Orchestrator, text string) (*agent.Result, error) {
	fmt.Fprintf(w, "\nyou> %s\n", text)
	res, err := o.HandleMessage(ctx, agent.Message{TenantID: tenantID, ConversationID: conversation, Text: text})
	if err != nil {
		return res, err
	}
	for _, c := range res.ToolCalls {
		fmt.Fprintf(w, "  → %s: %s\n", c.Name, c.ResultStatus)
	}
	fmt.Fprintf(w, "bot> %s\n", strings.ReplaceAll(res.Response, "\n", "\n     "))
	return res, nil
}

// indent indents every line of s.
func indent(s string) string { return "  | " + strings.ReplaceAll(s, "\n", "\n  | ") }

// firstLine is s's first line.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

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
