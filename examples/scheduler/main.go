package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"time"
	_ "time/tzdata" // Europe/Paris loads on any machine

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/clock"
	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/agentexec"
)

// The demo's user, and the conversation the tasks were set up in.
const (
	tenantID     = "alex"
	conversation = "chat"
	userZone     = "Europe/Paris"
	chatChannel  = "chat" // the notifier the results go to
)

// The tasks' ids.
const (
	taskDigest   = "morning-digest"
	taskAmazon   = "amazon-mail"
	taskFlight   = "flight-price"
	taskReminder = "dentist-reminder"
)

// conditionFlight is the name of the price check the flight task polls.
const conditionFlight = "flight_price_below_300"

// config holds the settings of run.
type config struct {
	Postgres string        // -postgres: tasks on PostgreSQL through River; "" keeps them in memory on a fake clock
	Redis    string        // -redis: events on a Redis stream; required with -postgres
	Publish  bool          // -publish: this process publishes the demo's emails (live mode)
	Name     string        // -name: this process's label in live mode; "" is "pid N"
	Duration time.Duration // -duration: how long the live demo runs; 0 is the timeline's
	Verbose  bool          // -v: the engine's logs on Logs
	Logs     io.Writer     // nil discards logs

	// Set by tests.
	Queue    string                       // River queue; "" is liveQueue
	Stream   string                       // Redis stream; "" is the one named from the store's namespace (redisbus.StreamFor)
	timeline *timeline                    // nil: the default of the mode
	notified func(n trigger.Notification) // hears every notification this process delivers
}

func main() {
	var cfg config
	flag.StringVar(&cfg.Postgres, "postgres", "", "keep the tasks on PostgreSQL at this `URL` and run them through River, on the real clock (needs -redis)")
	flag.StringVar(&cfg.Redis, "redis", "", "carry the events on a Redis stream at this `URL` (with -postgres)")
	flag.BoolVar(&cfg.Publish, "publish", false, "with -postgres: this process publishes the demo's emails (give it to one process only)")
	flag.StringVar(&cfg.Name, "name", "", "with -postgres: this process's label on its output (default \"pid N\")")
	flag.DurationVar(&cfg.Duration, "duration", 0, "with -postgres: how long the demo runs (default 1m10s)")
	flag.BoolVar(&cfg.Verbose, "v", false, "log the engine's debug traces to stderr")
	flag.Usage = func() {
		fmt.Fprint(flag.CommandLine.Output(), "usage: go run ./examples/scheduler [-v]\n"+
			"       go run ./examples/scheduler -postgres URL -redis URL [-publish] [-name label] [-duration d] [-v]\n\n"+
			"Without flags, two days of a bot's tasks run on a fake clock in a few seconds.\n"+
			"With -postgres and -redis, they run on the real clock, shared by every process started the same way:\n"+
			"start two at once, one with -publish, and each run fires once.\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	cfg.Logs = os.Stderr

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Stdout, cfg)
	stop()
	switch {
	case errors.Is(err, context.Canceled):
		fmt.Fprintln(os.Stderr, "\nscheduler: interrupted")
		os.Exit(130)
	case err != nil:
		fmt.Fprintln(os.Stderr, "scheduler:", err)
		os.Exit(1)
	}
}

// run plays the demo: offline on a fake clock, or live on PostgreSQL and
// Redis when cfg names them.
func run(ctx context.Context, w io.Writer, cfg config) error {
	switch {
	case cfg.Postgres == "" && cfg.Redis == "":
		return runOffline(ctx, w, cfg)
	case cfg.Postgres == "" || cfg.Redis == "":
		return errors.New("-postgres and -redis go together: tasks on PostgreSQL, events on Redis")
	}
	return runLive(ctx, w, cfg)
}

// ---------------------------------------------------------------- the timeline

// timeline is what happens in a demo, from its start (the tasks'
// creation): when the digest runs, when the emails arrive, when the fare
// drops, when the reminder is due.
type timeline struct {
	loc       *time.Location
	digest    trigger.Schedule // the digest's schedule
	reminder  time.Duration    // the reminder's time, from the start
	pollEvery time.Duration    // how often the fare is checked
	priceDrop time.Duration    // when the fare goes under 300 €, from the start
	mails     []mail
	length    time.Duration // how long the demo runs
	stamp     string        // the time layout of the chat lines
}

// offlineStart is when the offline demo begins: Monday 2 March 2026, 07:00
// in Paris.
var offlineStart = time.Date(2026, time.March, 2, 7, 0, 0, 0, mustLoad(userZone))

// offlineTimeline is two days on the fake clock: the digest at 08:00 each
// morning, the reminder at 15:00 on Monday, the fare under 300 € from
// Tuesday 14:00, and four emails — one from Amazon, delivered twice.
func offlineTimeline() *timeline {
	return &timeline{
		loc:       mustLoad(userZone),
		digest:    trigger.Schedule{Cron: "0 8 * * *", Zone: userZone},
		reminder:  8 * time.Hour, // Monday 15:00: "remind me at 3 pm"
		pollEvery: 15 * time.Minute,
		priceDrop: 31 * time.Hour, // Tuesday 14:00
		mails: []mail{
			{ID: "1000", FromName: "Mum", From: "mum@example.net", Subject: "Photos from Sunday lunch", At: -(8*time.Hour + 50*time.Minute)},
			{ID: "1001", FromName: "GitHub", From: "notifications@github.com", Subject: "Review requested on valetkit/valet#42", At: -20 * time.Minute},
			{ID: "1002", FromName: "Amazon", From: "shipping@amazon.com", Subject: "Your order has shipped",
				Snippet: "Kindle Paperwhite, arriving Wednesday 4 March", At: 3*time.Hour + 30*time.Minute, Again: 6 * time.Hour},
			{ID: "1003", FromName: "Medium", From: "noreply@medium.com", Subject: "Daily Digest: 5 stories for you", At: 4*time.Hour + 45*time.Minute},
			{ID: "1004", FromName: "Alice", From: "alice@example.org", Subject: "Standup moved to 10:00", At: 24*time.Hour + 30*time.Minute},
		},
		length: 48 * time.Hour,
		stamp:  "Mon 15:04",
	}
}

// liveTimeline is about a minute on the real clock: the digest every 15
// seconds, the same emails a few seconds apart, the reminder after 20
// seconds, the fare checked every 4 seconds and under 300 € after 35.
func liveTimeline() *timeline {
	tl := offlineTimeline()
	tl.digest = trigger.Schedule{Every: 15 * time.Second}
	tl.reminder = 20 * time.Second
	tl.pollEvery = 4 * time.Second
	tl.priceDrop = 35 * time.Second
	secs := []time.Duration{-9 * time.Hour, -30 * time.Minute, 8 * time.Second, 14 * time.Second, 30 * time.Second}
	for i := range tl.mails {
		tl.mails[i].At = secs[i]
	}
	tl.mails[2].Again = 26 * time.Second
	tl.length = 70 * time.Second
	tl.stamp = "15:04:05"
	return tl
}

// tasks are what Alex set up, from start on.
func (tl *timeline) tasks(start time.Time) []*trigger.Task {
	tasks := []*trigger.Task{
		{
			ID: taskDigest, Name: "Morning digest",
			Trigger: trigger.Trigger{Kind: trigger.KindSchedule, Schedule: tl.digest},
			Action:  trigger.Action{Instruction: "Write my morning digest: the date, then my emails of the last 24 hours, one line each."},
		},
		{
			ID: taskAmazon, Name: "Amazon mail",
			Trigger: trigger.Trigger{Kind: trigger.KindEvent, Source: "gmail", Type: "message.received",
				Filter: map[string]string{"from.domain": "amazon.com"}},
			Action: trigger.Action{Instruction: "An email from Amazon arrived: tell me in one line what it is about."},
		},
		{
			ID: taskFlight, Name: "Flight price watch",
			Trigger: trigger.Trigger{Kind: trigger.KindCondition, Condition: conditionFlight, Every: tl.pollEvery},
			Action:  trigger.Action{Instruction: "The Paris → New York fare for 14 April went under 300 €: check it and tell me."},
		},
		{
			ID: taskReminder, Name: "Dentist reminder",
			Trigger: trigger.Trigger{Kind: trigger.KindSchedule, Schedule: trigger.Schedule{At: start.Add(tl.reminder)}},
			Action:  trigger.Action{Instruction: "Remind me to call the dentist back about Thursday's appointment."},
		},
	}
	for _, t := range tasks {
		t.TenantID, t.ConversationID = tenantID, conversation
		t.Output = trigger.Output{Channel: chatChannel} // RouteNotify: the result goes to the chat
	}
	return tasks
}

// ---------------------------------------------------------------- the wiring

// demo is the bot of either mode: an orchestrator on the offline model,
// the engine that runs its tasks, the chat the results go to.
type demo struct {
	tl     *timeline
	world  *world
	orch   *agent.Orchestrator
	engine *trigger.Engine
	chat   *chat
	out    *printer
}

// newDemo wires the bot. store and bus are the engine's (nil: in memory);
// clk is the one clock of the orchestrator, the engine and the tools (nil:
// the real clock).
func newDemo(tl *timeline, out *printer, store trigger.Store, bus trigger.EventBus, clk clock.Clock, c *chat, log *slog.Logger) (*demo, error) {
	clk = clock.Or(clk)
	w := &world{now: clk.Now, tl: tl}
	o, err := agent.NewOrchestrator(agent.Config{
		LLM:          offlineModel(),
		SystemPrompt: systemPrompt,
		Tools:        tools(w),
		Location:     tl.loc,
		Clock:        clk,
		Logger:       log,
	})
	if err != nil {
		return nil, err
	}
	exec, err := agentexec.New(o, agentexec.Config{})
	if err != nil {
		return nil, err
	}
	e, err := trigger.New(trigger.Config{
		Store: store,
		Bus:   bus,
		Clock: clk,
		// Every task runs through the assistant: agentexec turns a run
		// into a message tagged [Scheduled Task], [Event Trigger] or
		// [Condition Trigger].
		Executors: map[string]trigger.Executor{trigger.DefaultExecutor: exec},
		Conditions: map[string]trigger.Condition{
			conditionFlight: func(ctx context.Context, t *trigger.Task) (bool, error) {
				return w.checkPrice(ctx, t.CreatedAt), nil
			},
		},
		Notifiers: map[string]trigger.Notifier{chatChannel: c},
		Logger:    log,
	})
	if err != nil {
		return nil, err
	}
	return &demo{tl: tl, world: w, orch: o, engine: e, chat: c, out: out}, nil
}

// createTasks creates the tasks, starting at start. A task that exists
// already (ErrConflict) is kept: another process created it.
func (d *demo) createTasks(ctx context.Context, start time.Time) error {
	for _, t := range d.tl.tasks(start) {
		if err := d.engine.CreateTask(ctx, t); err != nil && !errors.Is(err, trigger.ErrConflict) {
			return fmt.Errorf("creating task %s: %w", t.ID, err)
		}
	}
	return nil
}

// taskOrder is the order the tasks are shown in.
var taskOrder = []string{taskDigest, taskAmazon, taskFlight, taskReminder}

// demoTasks returns the demo's tasks, in taskOrder.
func (d *demo) demoTasks(ctx context.Context) ([]*trigger.Task, error) {
	tasks, err := d.engine.List(ctx, tenantID)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(tasks, func(a, b *trigger.Task) int {
		return cmp.Compare(slices.Index(taskOrder, a.ID), slices.Index(taskOrder, b.ID))
	})
	return tasks, nil
}

// listTasks prints the tenant's tasks.
func (d *demo) listTasks(ctx context.Context) error {
	tasks, err := d.demoTasks(ctx)
	if err != nil {
		return err
	}
	for _, t := range tasks {
		d.out.printf("  %-19s %s\n", t.Name, d.describe(t))
	}
	return nil
}

// describe says what fires t.
func (d *demo) describe(t *trigger.Task) string {
	g := t.Trigger
	switch {
	case g.Kind == trigger.KindEvent:
		var where []string
		for _, k := range slices.Sorted(maps.Keys(g.Filter)) {
			where = append(where, k+" = "+g.Filter[k])
		}
		return fmt.Sprintf("event %s %s where %s", g.Source, g.Type, strings.Join(where, ", "))
	case g.Kind == trigger.KindCondition:
		return fmt.Sprintf("condition %s, checked every %s", g.Condition, g.Every)
	case !g.Schedule.At.IsZero():
		return "once, at " + d.stamp(g.Schedule.At)
	case g.Schedule.Cron != "":
		return fmt.Sprintf("cron %q in %s", g.Schedule.Cron, g.Schedule.Zone)
	}
	return "every " + g.Schedule.Every.String()
}

func (d *demo) stamp(t time.Time) string { return t.In(d.tl.loc).Format(d.tl.stamp) }

// summary prints each task's runs, from its history in the store.
func (d *demo) summary(ctx context.Context) error {
	tasks, err := d.demoTasks(ctx)
	if err != nil {
		return err
	}
	d.out.printf("\nruns per task, from the history in the store:\n")
	for _, t := range tasks {
		runs, err := d.engine.Runs(ctx, tenantID, t.ID, 0)
		if err != nil {
			return err
		}
		slices.Reverse(runs) // oldest first
		var when []string
		for _, r := range runs {
			s := d.stamp(r.StartedAt)
			if r.Status != trigger.RunSucceeded {
				s += " (" + string(r.Status) + ")"
			}
			when = append(when, s)
		}
		var notes []string
		if d.chat.label != "" {
			notes = append(notes, fmt.Sprintf("%d delivered by this process", d.chat.notifications(t.ID)))
		}
		switch t.ID {
		case taskFlight:
			polls, low := d.world.pollStats()
			note := fmt.Sprintf("fare checked %d times", polls)
			if d.chat.label != "" {
				note = fmt.Sprintf("fare checked %d times here", polls)
			}
			if !low.IsZero() {
				note += ", under 300 € from " + d.stamp(low)
			}
			notes = append(notes, note)
		case taskReminder:
			notes = append(notes, "task "+string(t.Status))
		}
		line := fmt.Sprintf("  %-19s %d %-4s %s", t.Name, len(runs), plural(len(runs), "run"), strings.Join(when, ", "))
		if len(notes) > 0 {
			line += "  (" + strings.Join(notes, "; ") + ")"
		}
		d.out.printf("%s\n", line)
	}
	return nil
}

// close waits for the orchestrator's background work.
func (d *demo) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = d.orch.Close(ctx)
}

// ---------------------------------------------------------------- the chat

// printer writes lines from any goroutine.
type printer struct {
	mu sync.Mutex
	w  io.Writer
}

func (p *printer) printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, format, args...)
}

// chat is the Notifier of the "chat" channel: it shows each result as a
// chat line, "[time] task name: text". Offline it holds the lines until
// the driver flushes them, in order of time then task, so that runs due
// at the same time print the same way every time.
type chat struct {
	out      *printer
	now      func() time.Time
	loc      *time.Location
	layout   string
	label    string // live: this process's name, before each line
	hold     bool
	notified func(trigger.Notification)

	mu    sync.Mutex
	held  []chatLine
	count map[string]int // notifications per task id
}

type chatLine struct {
	at   time.Time
	task string
	text string
}

func newChat(out *printer, now func() time.Time, tl *timeline) *chat {
	return &chat{out: out, now: now, loc: tl.loc, layout: tl.stamp, count: map[string]int{}}
}

// Notify implements trigger.Notifier.
func (c *chat) Notify(ctx context.Context, n trigger.Notification) error {
	at := c.now()
	head := "[" + at.In(c.loc).Format(c.layout) + "] "
	if c.label != "" {
		head = c.label + " | " + head
	}
	text := n.Text
	if n.Kind == trigger.NotifyFailure {
		text = "⚠ " + text
	}
	line := head + n.TaskName + ": " + strings.ReplaceAll(text, "\n", "\n"+strings.Repeat(" ", len([]rune(head))+2)) + "\n"
	c.mu.Lock()
	defer c.mu.Unlock()
	c.count[n.TaskID]++
	if c.notified != nil {
		c.notified(n)
	}
	if c.hold {
		c.held = append(c.held, chatLine{at: at, task: n.TaskName, text: line})
		return nil
	}
	c.out.printf("%s", line)
	return nil
}

// flush prints the lines held, by time then task name.
func (c *chat) flush() {
	c.mu.Lock()
	held := c.held
	c.held = nil
	c.mu.Unlock()
	slices.SortStableFunc(held, func(a, b chatLine) int {
		return cmp.Or(a.at.Compare(b.at), strings.Compare(a.task, b.task))
	})
	for _, l := range held {
		c.out.printf("%s", l.text)
	}
}

// notifications returns how many results went to the chat for the task.
func (c *chat) notifications(taskID string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.count[taskID]
}

// ---------------------------------------------------------------- helpers

// pollStats returns how many times the fare was checked, and when it was
// first seen under the threshold.
func (w *world) pollStats() (int, time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.polls, w.firstLow
}

func logger(cfg config) *slog.Logger {
	if cfg.Logs == nil {
		return slog.New(slog.DiscardHandler)
	}
	level := slog.LevelWarn
	if cfg.Verbose {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(cfg.Logs, &slog.HandlerOptions{Level: level}))
}

func plural(n int, noun string) string {
	if n == 1 {
		return noun
	}
	return noun + "s"
}

func mustLoad(name string) *time.Location {
	loc, err := time.LoadLocation(name)
	if err != nil {
		panic(err) // time/tzdata is linked in: cannot happen
	}
	return loc
}
