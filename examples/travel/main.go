package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"time"
	_ "time/tzdata" // the demo's time zones load on any machine

	"github.com/redis/go-redis/v9"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/clock"
	"github.com/valetkit/valet/clock/clocktest"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/openai"
	"github.com/valetkit/valet/pool"
	"github.com/valetkit/valet/pool/redispool"
	"github.com/valetkit/valet/tool"
)

// ---------------------------------------------------------------- the user

// The demo's user. "Send it to me" means userEmail: the assistant knows it
// from the persona, and send_email shows it as the sender in its approval.
const (
	userName      = "Alex Kim"
	userFirstName = "Alex"
	userEmail     = "me@example.com"
	userTimeZone  = "America/Los_Angeles"
	tenantID      = "alex"        // whose pool entries these are
	conversation  = "trip-to-nyc" // the chat the approval belongs to
)

const systemPrompt = `You are Valet, the travel assistant of ` + userName + ` <` + userEmail + `>, who lives in San Francisco.
Use the tools for flights, weather and email: never invent a flight, a price or a forecast.
Call tools that do not depend on each other together, in one turn.
Resolve relative dates such as "next Friday" from the current time below, and pass dates as YYYY-MM-DD.
Emails go out from ` + userName + `'s mailbox through send_email, in plain text, signed "` + userFirstName + `".`

// The demo conversation.
const (
	askMessage  = "find me a flight SFO→NYC next Friday, check the weather there and email the plan to team@example.com"
	answerReply = "yes, but send it to me instead"
	redisPrefix = "valet:travel-demo:" // every Redis key of the demo starts with it
)

// demoNow is the pinned clock of the in-memory demo: a Sunday, so "next
// Friday" is Friday 12 June 2026, every time the demo runs.
var demoNow = time.Date(2026, time.June, 7, 10, 0, 0, 0, mustLoad(userTimeZone))

// ---------------------------------------------------------------- a plain tool: the weather

// WeatherIn is what the model sends to get_weather.
type WeatherIn struct {
	City string `json:"city" jsonschema:"description=City name, e.g. New York"`
	Date string `json:"date" jsonschema:"description=Day of the forecast as YYYY-MM-DD,format=date"`
}

func weatherTool(w Forecaster) tool.Tool {
	return tool.New("get_weather",
		"Weather forecast for a city on one day (up to 10 days ahead): conditions, high and low in °C and °F, chance of rain.",
		func(ctx context.Context, in WeatherIn) (Forecast, error) {
			ec := tool.ExecContextFrom(ctx) // who asks, and the run's logger
			ec.Logger.DebugContext(ctx, "get_weather", "tenant", ec.TenantID, "call", ec.CallID, "city", in.City, "date", in.Date)
			day, _ := time.Parse(time.DateOnly, in.Date) // the schema checked the format
			return w.Forecast(ctx, in.City, day)
		},
		tool.WithTimeout(10*time.Second),
	)
}

// ---------------------------------------------------------------- an Agent-Tool: the flight search

// FlightSearchIn is search_flights' schema. Required fields the model
// leaves out are asked of the user: the agent waits in the pool for them.
type FlightSearchIn struct {
	From       string `json:"from" jsonschema:"description=Departure airport or city code (IATA) such as SFO,pattern=^[A-Z]{3}$"`
	To         string `json:"to" jsonschema:"description=Arrival airport or city code (IATA) such as NYC for every New York airport,pattern=^[A-Z]{3}$"`
	Date       string `json:"date" jsonschema:"description=Day of departure as YYYY-MM-DD,format=date" rule:"today or later, at most 330 days ahead"`
	Passengers int    `json:"passengers,omitempty" jsonschema:"description=Number of travellers,minimum=1,maximum=9,default=1"`
}

// SearchFlights finds one-way flights. Validate enforces the date's rule
// (the rule tag only tells the model about it).
type SearchFlights struct {
	Flights  FlightSearcher
	Now      func() time.Time
	TimeZone *time.Location // the user's: what "today" means
}

func (a SearchFlights) Validate(in FlightSearchIn) error {
	var errs []error
	today := a.Now().In(a.TimeZone).Format(time.DateOnly)
	last := a.Now().In(a.TimeZone).AddDate(0, 0, 330).Format(time.DateOnly)
	switch {
	case in.Date < today: // YYYY-MM-DD strings compare like dates
		errs = append(errs, agent.InvalidField("date", "is in the past: today is "+today))
	case in.Date > last:
		errs = append(errs, agent.InvalidField("date", "is too far ahead: flights are sold until "+last))
	}
	if in.From == in.To {
		errs = append(errs, agent.InvalidField("to", "must differ from the departure "+in.From))
	}
	return errors.Join(errs...)
}

func (a SearchFlights) Run(ctx context.Context, in FlightSearchIn) (agent.Reply, error) {
	ec := tool.ExecContextFrom(ctx) // Agent-Tools get one too
	ec.Logger.DebugContext(ctx, "search_flights", "tenant", ec.TenantID, "call", ec.CallID, "from", in.From, "to", in.To, "date", in.Date)
	day, _ := time.Parse(time.DateOnly, in.Date)
	flights, err := a.Flights.Search(ctx, FlightQuery{From: in.From, To: in.To, Date: day, Passengers: max(in.Passengers, 1)})
	if err != nil {
		return agent.Reply{}, err
	}
	return agent.Reply{
		Text: fmt.Sprintf("%d flights %s→%s on %s, cheapest first.", len(flights), in.From, in.To, day.Format("Monday 2 January 2006")),
		Data: flights,
	}, nil
}

// ---------------------------------------------------------------- an Agent-Tool that needs approval: email

// SendEmailIn is send_email's schema.
type SendEmailIn struct {
	To      string `json:"to" jsonschema:"description=Recipient email address,format=email"`
	Subject string `json:"subject" jsonschema:"description=Subject line,minLength=1,maxLength=120"`
	Body    string `json:"body" jsonschema:"description=Plain-text body,minLength=1,maxLength=5000"`
}

// SendEmail sends from the user's mailbox, once the user approves.
type SendEmail struct {
	From   string // "Alex Kim <me@example.com>"
	Outbox Mailer
}

// Approval makes every email wait for the user's yes. AllowModification
// lets the user change it while approving: "yes, but send it to me
// instead" edits the recipient, and the edited email is what runs.
func (a SendEmail) Approval(in SendEmailIn) *approval.Request {
	return &approval.Request{
		ActionSummary:     fmt.Sprintf("Send the email %q to %s", in.Subject, in.To),
		Details:           map[string]any{"from": a.From, "to": in.To, "subject": in.Subject, "body": in.Body},
		AllowModification: true,
	}
}

func (a SendEmail) Run(ctx context.Context, in SendEmailIn) (agent.Reply, error) {
	ec := tool.ExecContextFrom(ctx)
	ec.Logger.DebugContext(ctx, "send_email", "tenant", ec.TenantID, "conversation", ec.ConversationID, "call", ec.CallID, "to", in.To)
	id, err := a.Outbox.Send(ctx, Email{From: a.From, To: in.To, Subject: in.Subject, Body: in.Body})
	if err != nil {
		return agent.Reply{}, err
	}
	return agent.Reply{
		Text: "Email sent to " + in.To + ".",
		Data: map[string]string{"message_id": id, "to": in.To, "subject": in.Subject},
	}, nil
}

// ---------------------------------------------------------------- wiring

// newOrchestrator wires the model, the tools, the agents and the pool.
func newOrchestrator(model llm.Client, b *backends, store pool.Store, locker pool.Locker, clk clock.Clock, log *slog.Logger) (*agent.Orchestrator, error) {
	home := mustLoad(userTimeZone)
	reg := agent.NewRegistry()
	if err := agent.Register(reg, "search_flights", "Search one-way flights for a day, cheapest first.",
		SearchFlights{Flights: b.Flights, Now: clk.Now, TimeZone: home}); err != nil {
		return nil, err
	}
	if err := agent.Register(reg, "send_email", "Send an email from the user's mailbox.",
		SendEmail{From: userName + " <" + userEmail + ">", Outbox: b.Outbox}); err != nil {
		return nil, err
	}
	return agent.NewOrchestrator(agent.Config{
		LLM:          model,
		SystemPrompt: systemPrompt,
		Tools:        []tool.Tool{weatherTool(b.Weather)},
		Agents:       reg,
		Pool:         store,  // where agents wait; it must expire entries on the clock of Clock
		Locker:       locker, // serialises a conversation across processes; nil: this process only
		Location:     home,
		Clock:        clk,
		Logger:       log,
	})
}

// ---------------------------------------------------------------- the program

// options are the command-line settings of run.
type options struct {
	Step        string // "all" (default), "ask" or "answer"
	Reply       string // the user's answer to the approval; "" is answerReply
	RedisURL    string // -redis: keep the pool in Redis
	RedisPrefix string // "" is redisPrefix
	Offline     bool   // -offline: the scripted model even if OPENAI_API_KEY is set
	Verbose     bool   // -v: debug logs on Logs
	Logs        io.Writer
	Model       llm.Client  // set by tests; nil chooses by OPENAI_API_KEY
	Clock       clock.Clock // set by tests; nil: demoNow, or the real clock with Redis
	Backends    *backends   // set by tests; nil: the canned fakes
}

func main() {
	opts := options{Logs: os.Stderr}
	flag.StringVar(&opts.Step, "step", "all", `"all": both messages; with -redis, "ask" sends the request and leaves the approval pending, "answer" answers it from a fresh process`)
	flag.StringVar(&opts.Reply, "reply", answerReply, "the user's answer to the approval (try \"yes\" or \"no\")")
	flag.StringVar(&opts.RedisURL, "redis", "", "keep the pool in Redis at this URL (redis://host:6379/0) so approvals survive a restart")
	flag.BoolVar(&opts.Offline, "offline", false, "use the offline scripted model even when OPENAI_API_KEY is set")
	flag.BoolVar(&opts.Verbose, "v", false, "log debug traces to stderr")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: go run ./examples/travel [-redis URL [-step all|ask|answer]] [-reply text] [-offline] [-v]\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Stdout, opts)
	stop()
	switch {
	case errors.Is(err, context.Canceled):
		fmt.Fprintln(os.Stderr, "\ntravel: interrupted")
		os.Exit(130)
	case err != nil:
		fmt.Fprintln(os.Stderr, "travel:", err)
		os.Exit(1)
	}
}

// errNothingPending: -step=answer found no approval to answer.
var errNothingPending = errors.New("no pending approval in the pool: run -step=ask first (approvals expire after 30 minutes)")

// run plays the demo: the request, then the answer to its approval.
func run(ctx context.Context, w io.Writer, opts options) error {
	step := cmp.Or(opts.Step, "all")
	if step != "all" && step != "ask" && step != "answer" {
		return fmt.Errorf("-step must be all, ask or answer, not %q", step)
	}
	if step != "all" && opts.RedisURL == "" {
		return fmt.Errorf("-step=%s needs -redis: without it the pending approval lives in this process only", step)
	}
	model, err := chooseModel(w, opts)
	if err != nil {
		return err
	}
	log := logger(opts)
	clk := chooseClock(w, opts)
	store, locker, closePool, err := choosePool(ctx, w, opts, clk, log)
	if err != nil {
		return err
	}
	defer closePool()
	b := opts.Backends
	if b == nil {
		b = fakeBackends(clk.Now)
	}
	o, err := newOrchestrator(model, b, store, locker, clk, log)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "tools: %s\n", toolNames(o))

	if step == "all" || step == "ask" {
		if err := ask(ctx, w, o, b.Outbox); err != nil {
			return err
		}
		if step == "ask" {
			fmt.Fprintf(w, "\nThe approval waits in Redis. Answer it from a fresh process within 30 minutes:\n"+
				"  go run ./examples/travel -redis %s -step=answer\n", opts.RedisURL)
			return nil
		}
	}
	if err := answer(ctx, w, o, b.Outbox, cmp.Or(opts.Reply, answerReply)); err != nil {
		return err
	}
	printOutbox(w, b.Outbox)
	return nil
}

// ask sends the request: flights and weather run at once, then the email
// is drafted and waits for approval.
func ask(ctx context.Context, w io.Writer, o *agent.Orchestrator, outbox *Outbox) error {
	pending, err := o.ListPendingApprovals(ctx, tenantID)
	if err != nil {
		return err
	}
	if len(pending) > 0 {
		return fmt.Errorf("approval %s from an earlier run is still pending: answer it with -step=answer first", pending[0].ID)
	}
	res, err := send(ctx, w, o, agent.Message{TenantID: tenantID, ConversationID: conversation, Text: askMessage})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "  outbox: %d sent (nothing goes out before the approval)\n", len(outbox.Sent()))
	if res.Status != agent.StatusWaitingForApproval {
		return fmt.Errorf("the request ended %s, not waiting for approval", res.Status)
	}
	return nil
}

// answer finds the pending approvals in the pool — this may be a fresh
// process — and replies to them in their conversation.
func answer(ctx context.Context, w io.Writer, o *agent.Orchestrator, outbox *Outbox, reply string) error {
	pending, err := o.ListPendingApprovals(ctx, tenantID)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\npending approvals of %s in the pool: %d\n", tenantID, len(pending))
	if len(pending) == 0 {
		return errNothingPending
	}
	listApprovals(w, pending)
	before := len(outbox.Sent())
	_, err = send(ctx, w, o, agent.Message{TenantID: tenantID, ConversationID: pending[0].ConversationID, Text: reply})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "  outbox: %d sent by this reply\n", len(outbox.Sent())-before)
	return nil
}

// chooseModel returns the OpenAI client when OPENAI_API_KEY is set, and the
// offline script otherwise.
func chooseModel(w io.Writer, opts options) (llm.Client, error) {
	if opts.Model != nil {
		fmt.Fprintln(w, "model: supplied by the caller")
		return opts.Model, nil
	}
	if !opts.Offline && os.Getenv(openai.EnvAPIKey) != "" {
		c, err := openai.FromEnv() // OPENAI_API_KEY, OPENAI_BASE_URL, OPENAI_MODEL
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(w, "model: %s (OPENAI_API_KEY is set)\n", c.Model())
		return c, nil
	}
	fmt.Fprintln(w, "model: offline script (set OPENAI_API_KEY to use a real model)")
	return demoModel(), nil
}

// choosePool returns the Redis pool and locker with -redis, and an
// in-memory pool without.
func choosePool(ctx context.Context, w io.Writer, opts options, clk clock.Clock, log *slog.Logger) (pool.Store, pool.Locker, func(), error) {
	if opts.RedisURL == "" {
		fmt.Fprintln(w, "pool: in memory (add -redis URL to keep approvals across restarts)")
		// The pool expires entries on its own clock: it must be the
		// orchestrator's (Config.Clock), or an approval stamped with the
		// pinned clock would count as long expired and vanish.
		store, err := pool.NewMemory(pool.MemoryConfig{Clock: clk})
		if err != nil {
			return nil, nil, nil, err
		}
		return store, nil, func() {}, nil
	}
	ro, err := redis.ParseURL(opts.RedisURL)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("-redis: %w", err)
	}
	rdb := redis.NewClient(ro)
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		return nil, nil, nil, fmt.Errorf("-redis %s: %w", ro.Addr, err)
	}
	prefix := cmp.Or(opts.RedisPrefix, redisPrefix)
	store, err := redispool.New(rdb, redispool.Config{Prefix: prefix, Logger: log})
	if err != nil {
		_ = rdb.Close()
		return nil, nil, nil, err
	}
	// The locker serialises one conversation's messages across processes.
	locker, err := redispool.NewLocker(rdb, redispool.LockerConfig{Prefix: prefix, Logger: log})
	if err != nil {
		_ = rdb.Close()
		return nil, nil, nil, err
	}
	fmt.Fprintf(w, "pool: Redis at %s, keys %q…\n", ro.Addr, prefix)
	return store, locker, func() { _ = rdb.Close() }, nil
}

// chooseClock pins the clock of the in-memory demo so "next Friday" is
// always the same day. With Redis it is the real clock: the store expires
// entries on the real clock, and would drop at once an approval whose
// expiry a pinned clock put in the past.
func chooseClock(w io.Writer, opts options) clock.Clock {
	clk := opts.Clock
	switch {
	case clk != nil:
	case opts.RedisURL == "":
		fmt.Fprintf(w, "clock: pinned to %s\n", demoNow.Format("Monday 2 January 2006 15:04 MST"))
		return clocktest.New(demoNow) // stands still: nothing advances it
	default:
		clk = clock.System{}
	}
	fmt.Fprintf(w, "clock: %s\n", clk.Now().In(mustLoad(userTimeZone)).Format("Monday 2 January 2006 15:04 MST"))
	return clk
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

func mustLoad(name string) *time.Location {
	loc, err := time.LoadLocation(name)
	if err != nil {
		panic(err) // time/tzdata is linked in: cannot happen
	}
	return loc
}
