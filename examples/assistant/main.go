package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/transcript"
	"github.com/valetkit/valet/credentials"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/anthropic"
	"github.com/valetkit/valet/llm/openai"
)

const systemPrompt = `You are Valet, a concise travel and errands assistant.
Use the tools for facts and numbers: never guess the weather, a price, a meeting or a search result, and use the calculator for arithmetic.
When a tool says an account is not connected, tell the user how to connect it, as the tool says; never ask them to send you a password or token.
When a tool fails, read the error, fix what it names and try again, or tell the user what went wrong.`

// defaultTimeZone is the demo user's time zone.
const defaultTimeZone = "Europe/Paris"

// options are the command-line settings of run.
type options struct {
	Interactive bool      // -i: chat on stdin instead of playing the demo
	Offline     bool      // -offline: use the scripted model even if OPENAI_API_KEY or ANTHROPIC_API_KEY is set
	TimeZone    string    // -tz: the user's IANA time zone; "" is defaultTimeZone
	Verbose     bool      // -v: debug logs (tool calls, retries) on Logs
	Postgres    string    // -postgres: keep credentials, history and memory on PostgreSQL at this URL
	DB          string    // -db: keep them in this SQLite file; main makes it defaultDBFile() for -i without -postgres; "" with Postgres "" keeps them in memory
	MCP         string    // -mcp: the command line of an MCP server whose tools the bot may use; "" none
	Transcript  string    // -transcript: write a redacted JSONL transcript per conversation under this directory; "" writes none
	In          io.Reader // the user's messages in interactive mode
	EchoInput   bool      // print what is read from In (it is not a terminal, so nothing echoed it)
	Logs        io.Writer // where logs go; nil discards them
	Model       llm.Client
	Calendar    calendarAPI // the calendar service of calendar_today; nil is fakeCalendar
}

func main() {
	opts := options{In: os.Stdin, Logs: os.Stderr, EchoInput: !isTerminal(os.Stdin)}
	flag.BoolVar(&opts.Interactive, "i", false, "chat interactively: read messages from stdin")
	flag.BoolVar(&opts.Offline, "offline", false, "use the offline scripted model even when OPENAI_API_KEY or ANTHROPIC_API_KEY is set")
	flag.StringVar(&opts.TimeZone, "tz", defaultTimeZone, "the user's time zone (IANA name)")
	flag.BoolVar(&opts.Verbose, "v", false, "log debug traces to stderr")
	flag.StringVar(&opts.Postgres, "postgres", "", "keep credentials (encrypted with the key in "+EnvCredentialsKey+"), conversation history and learned facts on PostgreSQL at this `URL`")
	flag.StringVar(&opts.DB, "db", "", "keep credentials (encrypted), conversation history and learned facts in this SQLite `file` (with -i the default is "+defaultDBFile()+"; the scripted demo keeps them in memory; "+memoryDB+" keeps them in memory)")
	flag.StringVar(&opts.MCP, "mcp", "", "also offer the tools of the MCP server this `command` starts (stdio), e.g. 'npx -y @modelcontextprotocol/server-everything'")
	flag.StringVar(&opts.Transcript, "transcript", "", "write a redacted JSONL transcript of every run under this `DIR` (one file per conversation; read it with go run ./examples/transcript FILE)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: go run ./examples/assistant [-i] [-offline] [-tz zone] [-v] [-db FILE | -postgres URL] [-mcp command] [-transcript DIR]\n\n"+
			"Without OPENAI_API_KEY the model is a local script; with it, OPENAI_BASE_URL and OPENAI_MODEL are optional.\n"+
			"With ANTHROPIC_API_KEY instead, the model is Claude; ANTHROPIC_BASE_URL and ANTHROPIC_MODEL are optional.\n"+
			"In -i mode, /connect google TOKEN saves a credential for the calendar_today tool; /disconnect google deletes it.\n"+
			"The bot remembers facts you tell it about yourself and recalls them when relevant.\n"+
			"With -i, credentials, history and facts are kept in an SQLite file (its path is printed; -db FILE\n"+
			"chooses another), so a restarted bot still has them; -postgres URL keeps them on PostgreSQL instead.\n"+
			"The scripted demo (without -i) keeps them in memory unless -db or -postgres is given.\n"+
			"%[1]s holds the key that encrypts credentials: 32 random bytes in base64, from\n"+
			"`openssl rand -base64 32`. -postgres needs it; for the SQLite file, when it is unset, the key is\n"+
			"kept in FILE.key beside the database (mode 0600, created on first run), never in the database.\n\n", EnvCredentialsKey)
		flag.PrintDefaults()
	}
	flag.Parse()
	if opts.Interactive && opts.DB == "" && opts.Postgres == "" {
		opts.DB = defaultDBFile() // -i remembers by default
	}

	// Ctrl-C cancels ctx: the running message stops, its tools see it, and
	// the program exits.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Stdout, opts)
	stop()
	switch {
	case errors.Is(err, context.Canceled):
		fmt.Fprintln(os.Stderr, "\nassistant: interrupted")
		os.Exit(130)
	case err != nil:
		fmt.Fprintln(os.Stderr, "assistant:", err)
		os.Exit(1)
	}
}

// run builds the assistant and plays the demo conversation, or chats on
// opts.In with -i.
func run(ctx context.Context, w io.Writer, opts options) error {
	model, err := chooseModel(w, opts)
	if err != nil {
		return err
	}
	loc := userLocation(w, opts.TimeZone)
	st, err := openStorage(ctx, w, opts)
	if err != nil {
		return err
	}
	defer st.Close()
	store := st.Credentials
	log := logger(opts)
	var sources []agent.ToolSource
	if opts.MCP != "" {
		set, err := connectMCP(ctx, w, opts.MCP, log)
		if err != nil {
			return err
		}
		defer set.Close() // stops the server
		sources = append(sources, set)
	}
	conv := agent.Message{TenantID: "demo-user", ConversationID: "demo"}
	// With -transcript, every step of every run goes to a file of the
	// conversation, secrets redacted; closed after the last run (defers
	// run last first).
	var observer agent.Observer
	if opts.Transcript != "" {
		tx, err := transcript.New(transcript.Config{Dir: opts.Transcript, Logger: log})
		if err != nil {
			return err
		}
		defer tx.Close()
		observer = tx
		fmt.Fprintf(w, "transcript: %s\n", filepath.Join(opts.Transcript, transcript.FileName(conv.TenantID, conv.ConversationID)))
	}

	// The whole wiring: a model, a persona, tools, a time zone, where the
	// tenants' credentials are, and where history and facts are kept.
	o, err := agent.NewOrchestrator(agent.Config{
		LLM:          model,
		SystemPrompt: systemPrompt,
		Tools:        tools(opts.Calendar),
		ToolSources:  sources, // -mcp: the server's tools, read at each message
		Location:     loc,     // shown to the model with the current time
		Credentials:  store,   // tools get it bound to the message's tenant
		Memory:       st.Memory,
		Pool:         st.Pool, // nil: in memory
		// Learn from each answered message: after the reply, in the
		// background, one model call picks out durable facts about the
		// user; later messages recall the relevant ones.
		MemoryOptions: agent.MemoryOptions{Extract: true},
		Logger:        log,
		Observer:      observer, // nil without -transcript
	})
	if err != nil {
		return err
	}
	// Before the storage closes (defers run last first): let the facts of
	// the last messages be extracted and saved.
	defer finish(ctx, o, log)

	fmt.Fprintf(w, "tools: %s\n", toolNames(o))

	if opts.Interactive {
		return chat(ctx, w, o, store, conv, opts)
	}
	for _, text := range demoMessages {
		fmt.Fprintf(w, "\nyou> %s\n", redactCommand(text))
		if ok, err := hostCommand(ctx, w, store, conv.TenantID, text); ok {
			if err != nil {
				return err
			}
			continue
		}
		conv.Text = text
		if err := send(ctx, w, o, conv); err != nil {
			return err
		}
	}
	return nil
}

// closeTimeout bounds how long the program waits at exit for the
// extraction of facts still under way.
const closeTimeout = 10 * time.Second

// finish waits, up to closeTimeout, for the background fact extraction of
// the messages answered so far. When ctx is cancelled (Ctrl-C) it cancels
// them instead of waiting.
func finish(ctx context.Context, o *agent.Orchestrator, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, closeTimeout)
	defer cancel()
	if err := o.Close(ctx); errors.Is(err, context.DeadlineExceeded) {
		log.Warn("assistant: gave up waiting for fact extraction; the facts of the last messages may not be remembered", "waited", closeTimeout)
	}
}

// send streams the handling of one message to w: the model's text as it is
// written, each tool call as it starts and ends, then the run's telemetry.
func send(ctx context.Context, w io.Writer, o *agent.Orchestrator, msg agent.Message) error {
	for ev, err := range o.Stream(ctx, msg) {
		switch ev.Type {
		case agent.EventMessageStart:
			fmt.Fprint(w, "bot> ")
		case agent.EventMessageChunk:
			fmt.Fprint(w, strings.ReplaceAll(ev.Text, "\n", "\n     "))
		case agent.EventMessageRetract:
			// The model call broke off part way and is retried (or the run
			// fails): what was printed since EventMessageStart is void. A
			// terminal cannot take it back, so say so; a UI would erase it.
			fmt.Fprintln(w, " [cut off; discarded]")
		case agent.EventMessageEnd:
			fmt.Fprintln(w)
		case agent.EventToolCallStart:
			fmt.Fprintf(w, "  → %s %s\n", ev.ToolCall.Name, ev.ToolCall.ArgsSummary)
		case agent.EventToolResult:
			printToolResult(w, ev.ToolCall)
		case agent.EventStateChange:
			fmt.Fprintf(w, "  … %s\n", ev.State)
		case agent.EventExecutionEnd:
			printResult(w, ev.Result)
			if err != nil {
				return describeError(err)
			}
		}
	}
	return nil
}

func printToolResult(w io.Writer, c *agent.ToolCallRecord) {
	if c.Success {
		fmt.Fprintf(w, "  ✓ %s %s: %d chars in %s\n", c.Name, c.ArgsSummary, c.ResultChars, round(c.Duration))
		return
	}
	// The model reads the same error text and can correct itself.
	fmt.Fprintf(w, "  ✗ %s %s failed in %s: %s\n", c.Name, c.ArgsSummary, round(c.Duration),
		strings.ReplaceAll(c.Error, "\n", "\n      "))
}

func printResult(w io.Writer, r *agent.Result) {
	failed, n := "", 0
	for _, c := range r.ToolCalls {
		if !c.Success {
			n++
		}
	}
	if n > 0 {
		failed = fmt.Sprintf(" (%d failed)", n)
	}
	fmt.Fprintf(w, "  [%s · %s · %s · %d tokens in, %d out · %s]\n",
		r.Status, plural(r.Turns, "turn"), plural(len(r.ToolCalls), "tool call")+failed, r.Usage.InputTokens, r.Usage.OutputTokens, round(r.Duration))
}

// chat is the interactive mode: one conversation, a message per line,
// until EOF or "exit". Lines starting with "/" are the host's commands
// (hostCommand) and never reach the model.
func chat(ctx context.Context, w io.Writer, o *agent.Orchestrator, store credentials.Store, conv agent.Message, opts options) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	fmt.Fprintln(w, `Type a message; "/connect google <token>" connects a Google account; "exit" or Ctrl-D quits.`)
	lines := readLines(ctx, opts.In)
	for {
		fmt.Fprint(w, "\nyou> ")
		var text string
		select {
		case <-ctx.Done():
			return ctx.Err()
		case line, ok := <-lines:
			if !ok {
				fmt.Fprintln(w)
				return nil
			}
			text = strings.TrimSpace(line)
		}
		if opts.EchoInput {
			fmt.Fprintln(w, redactCommand(text)) // never a token
		}
		switch text {
		case "":
			continue
		case "exit", "quit":
			return nil
		}
		if ok, err := hostCommand(ctx, w, store, conv.TenantID, text); ok {
			if err != nil {
				if ctx.Err() != nil {
					return err
				}
				fmt.Fprintln(w, "error:", err)
			}
			continue
		}
		conv.Text = text
		err := send(ctx, w, o, conv)
		switch {
		case err == nil:
		case ctx.Err() != nil, llm.KindOf(err) == llm.KindAuth:
			return err // nothing more will work
		default:
			fmt.Fprintln(w, "error:", err) // this message failed; the next may not
		}
	}
}

// readLines sends the lines of r on the returned channel, closed at EOF.
// Reading happens on its own goroutine so that Ctrl-C ends a waiting
// prompt at once.
func readLines(ctx context.Context, r io.Reader) <-chan string {
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
	}()
	return lines
}

// chooseModel returns the OpenAI client when OPENAI_API_KEY is set, the
// Anthropic client when ANTHROPIC_API_KEY is, both in a fallback chain
// (OpenAI first, Claude when it is down) when both are, and the offline
// script otherwise.
func chooseModel(w io.Writer, opts options) (llm.Client, error) {
	if opts.Model != nil {
		fmt.Fprintln(w, "model: supplied by the caller")
		return opts.Model, nil
	}
	var chain []llm.Client
	if !opts.Offline && os.Getenv(openai.EnvAPIKey) != "" {
		c, err := openai.FromEnv() // OPENAI_API_KEY, OPENAI_BASE_URL, OPENAI_MODEL
		if err != nil {
			return nil, err
		}
		endpoint := os.Getenv(openai.EnvBaseURL)
		if endpoint == "" {
			endpoint = openai.DefaultBaseURL
		}
		fmt.Fprintf(w, "model: %s at %s (OPENAI_API_KEY is set)\n", c.Model(), endpoint)
		chain = append(chain, c)
	}
	if !opts.Offline && os.Getenv(anthropic.EnvAPIKey) != "" {
		c, err := anthropic.FromEnv() // ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, ANTHROPIC_MODEL
		if err != nil {
			return nil, err
		}
		endpoint := os.Getenv(anthropic.EnvBaseURL)
		if endpoint == "" {
			endpoint = anthropic.DefaultBaseURL
		}
		what := "model"
		if len(chain) > 0 {
			what = "fallback model"
		}
		fmt.Fprintf(w, "%s: %s at %s (ANTHROPIC_API_KEY is set)\n", what, c.Model(), endpoint)
		chain = append(chain, c)
	}
	switch len(chain) {
	case 1:
		return chain[0], nil
	case 2:
		// Never silent: each switch is a WARN line of the orchestrator's
		// logger, and Result.Models names the model that answered.
		return llm.NewFallback(llm.FallbackConfig{Primary: chain[0], Fallbacks: chain[1:]})
	}
	fmt.Fprintln(w, "model: offline script (set OPENAI_API_KEY or ANTHROPIC_API_KEY to use a real model)")
	if opts.Interactive {
		return replModel(), nil
	}
	return demoModel(), nil
}

// userLocation loads the user's time zone, falling back to UTC when the
// system has no time zone database.
func userLocation(w io.Writer, name string) *time.Location {
	if name == "" {
		name = defaultTimeZone
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		fmt.Fprintf(w, "time zone: UTC (%s is unavailable: %v)\n", name, err)
		return time.UTC
	}
	fmt.Fprintf(w, "time zone: %s\n", loc)
	return loc
}

func logger(opts options) *slog.Logger {
	if opts.Logs == nil {
		return slog.New(slog.DiscardHandler)
	}
	level := slog.LevelWarn
	if opts.Verbose {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(opts.Logs, &slog.HandlerOptions{Level: level}))
}

// describeError adds a hint to the errors a user can fix.
func describeError(err error) error {
	switch llm.KindOf(err) {
	case llm.KindAuth:
		return fmt.Errorf("the model rejected the credentials (check OPENAI_API_KEY or ANTHROPIC_API_KEY, or unset it to run offline): %w", err)
	case llm.KindUnavailable, llm.KindTimeout:
		return fmt.Errorf("the model could not be reached (check OPENAI_BASE_URL or ANTHROPIC_BASE_URL and the network): %w", err)
	}
	return err
}

func round(d time.Duration) time.Duration {
	if d >= time.Millisecond {
		return d.Round(time.Millisecond)
	}
	return d.Round(time.Microsecond)
}

func toolNames(o *agent.Orchestrator) string {
	var names []string
	for _, t := range o.Tools() {
		names = append(names, t.Name)
	}
	return strings.Join(names, ", ")
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
