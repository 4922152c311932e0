package rivertrigger_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/rivertrigger"
)

// diesAfterRecord is a Store whose process dies the moment a run's end is
// recorded (Finish committed): die stops the engine, and nothing the
// engine does after the record reaches the user.
type diesAfterRecord struct {
	*rivertrigger.Store
	die func()
}

func (d diesAfterRecord) Finish(ctx context.Context, r trigger.Run, t *trigger.Task) error {
	err := d.Store.Finish(ctx, r, t)
	if err == nil && r.Status == trigger.RunSucceeded {
		d.die()
	}
	return err
}

// notes keeps the notices a Notifier was handed.
type notes struct {
	mu   sync.Mutex
	seen []trigger.Notification
}

func (n *notes) add(x trigger.Notification) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.seen = append(n.seen, x)
}

func (n *notes) of(taskID string) []trigger.Notification {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []trigger.Notification
	for _, x := range n.seen {
		if x.TaskID == taskID {
			out = append(out, x)
		}
	}
	return out
}

// noticeEngine returns an engine on a new Store in pool's schema, the
// store wrapped by wrap, whose "chat" channel is chat.
func noticeEngine(t *testing.T, pool *pgxpool.Pool, cfg rivertrigger.Config, chat trigger.Notifier,
	wrap func(*rivertrigger.Store) trigger.Store) *trigger.Engine {
	t.Helper()
	cfg.FetchPollInterval = 100 * time.Millisecond
	s, err := rivertrigger.New(pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	exec := trigger.ExecutorFunc(func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		return trigger.ExecResult{Result: "report of " + run.Task.ID}, nil
	})
	e, err := trigger.New(trigger.Config{Store: wrap(s), RunTimeout: 10 * time.Second,
		Executors: map[string]trigger.Executor{trigger.DefaultExecutor: exec},
		Notifiers: map[string]trigger.Notifier{"chat": chat}})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// A run's notice, on a replica that dies right after the run's record
// (before its delivery), is not lost: it was queued in the transaction
// that recorded the run, and another replica delivers it, with the
// idempotency key every attempt at it carries.
func TestRunNoticeSurvivesDeathAfterTheRecord(t *testing.T) {
	pool := poolIn(t, newSchema(t))
	ctx := context.Background()
	var onA, onB notes
	// A's channel never answers before A dies.
	chatA := trigger.NotifierFunc(func(ctx context.Context, n trigger.Notification) error {
		onA.add(n)
		<-ctx.Done()
		return ctx.Err()
	})
	chatB := trigger.NotifierFunc(func(ctx context.Context, n trigger.Notification) error {
		onB.add(n)
		return nil
	})
	runCtx, die := context.WithCancel(ctx)
	a := noticeEngine(t, pool, rivertrigger.Config{}, chatA,
		func(s *rivertrigger.Store) trigger.Store { return diesAfterRecord{s, die} })
	done := make(chan error, 1)
	go func() { done <- a.Run(runCtx) }()
	defer func() { die(); <-done }()

	task := oneTime("acme", "report", time.Now().Add(time.Second))
	task.Output = trigger.Output{Channel: "chat", Target: "user-1"}
	if err := a.CreateTask(ctx, task); err != nil {
		t.Fatal(err)
	}
	<-runCtx.Done() // A recorded the run and died
	<-done
	done <- nil
	runs, err := a.Runs(ctx, "acme", "report", 0)
	if err != nil || len(runs) != 1 || runs[0].Status != trigger.RunSucceeded {
		t.Fatalf("runs after A died: %+v, %v; want one succeeded (recorded)", runs, err)
	}
	run := runs[0]

	b := noticeEngine(t, pool, rivertrigger.Config{}, chatB, func(s *rivertrigger.Store) trigger.Store { return s })
	engineRun(t, b)
	waitFor(t, 20*time.Second, "the notice on B", func() (bool, error) { return len(onB.of("report")) > 0, nil })
	want := trigger.NotificationKey(run.ID, trigger.NotifyResult)
	for _, n := range append(onA.of("report"), onB.of("report")...) {
		if n.IdempotencyKey != want || n.Kind != trigger.NotifyResult || n.RunID != run.ID ||
			n.Text != "report of report" || n.Target != "user-1" {
			t.Fatalf("a delivery: %+v; want the result of run %q with key %q", n, run.ID, want)
		}
	}
	time.Sleep(500 * time.Millisecond) // a repeat on B would show by now
	if got := onB.of("report"); len(got) != 1 {
		t.Fatalf("B delivered %d notices, want 1: %+v", len(got), got)
	}
}

// A Notifier that keeps failing on one task's notice is tried with
// backoff, NotifyAttempts times with one key, then its failure is kept on
// the run, whose result stands; another run's notice goes out meanwhile.
func TestFailingNotifierRetriedThenRecordedWhileOthersGoOut(t *testing.T) {
	pool := poolIn(t, newSchema(t))
	ctx := context.Background()
	var seen notes
	good := make(chan struct{})
	var goodOnce sync.Once
	chat := trigger.NotifierFunc(func(ctx context.Context, n trigger.Notification) error {
		seen.add(n)
		if n.TaskID == "good" {
			goodOnce.Do(func() { close(good) })
			return nil
		}
		select { // the failing delivery holds until the other goes out
		case <-good:
		case <-ctx.Done():
		}
		return errors.New("chat is down")
	})
	e := noticeEngine(t, pool, rivertrigger.Config{NotifyAttempts: 3, NotifyBackoff: 10 * time.Millisecond}, chat,
		func(s *rivertrigger.Store) trigger.Store { return s })
	engineRun(t, e)
	at := time.Now().Add(time.Second)
	for _, id := range []string{"bad", "good"} {
		task := oneTime("acme", id, at)
		task.Output = trigger.Output{Channel: "chat", Target: "user-1"}
		if err := e.CreateTask(ctx, task); err != nil {
			t.Fatal(err)
		}
	}
	var bad trigger.Run
	waitFor(t, 60*time.Second, "the failure kept on the bad run", func() (bool, error) {
		runs, err := e.Runs(ctx, "acme", "bad", 0)
		if err != nil || len(runs) != 1 {
			return false, err
		}
		bad = runs[0]
		return bad.RouteError != "", nil
	})
	if bad.Status != trigger.RunSucceeded || bad.Result != "report of bad" ||
		!strings.Contains(bad.RouteError, "chat is down") || !strings.Contains(bad.RouteError, "last attempt") {
		t.Fatalf("bad run: %+v; want succeeded, its result kept, the notifier's failure recorded", bad)
	}
	tries := seen.of("bad")
	if len(tries) != 3 {
		t.Fatalf("the failing notice was tried %d times, want 3 (NotifyAttempts)", len(tries))
	}
	for _, n := range tries {
		if n.IdempotencyKey != trigger.NotificationKey(bad.ID, trigger.NotifyResult) {
			t.Fatalf("a try's key %q; want the run's %q", n.IdempotencyKey, trigger.NotificationKey(bad.ID, trigger.NotifyResult))
		}
	}
	if got := seen.of("good"); len(got) != 1 {
		t.Fatalf("the good run's notice went out %d times, want 1", len(got))
	}
}

// New refuses notice settings it cannot work with: a negative one, and a
// NotifyQueue that is the runs' Queue (a failing Notifier would hold a
// run's worker).
func TestNoticeSettingsRejected(t *testing.T) {
	db, err := pgxpool.New(context.Background(), "postgres://u@127.0.0.1:1/prod") // never connects
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, cfg := range []rivertrigger.Config{
		{NotifyAttempts: -1}, {NotifyBackoff: -time.Second}, {NotifyWorkers: -1},
		{Queue: "jobs", NotifyQueue: "jobs"}, {NotifyQueue: "valet_trigger"},
	} {
		if _, err := rivertrigger.New(db, cfg); !errors.Is(err, trigger.ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", cfg, err)
		}
	}
	if _, err := rivertrigger.New(db, rivertrigger.Config{NotifyAttempts: 3, NotifyQueue: "notices"}); err != nil {
		t.Fatal(err)
	}
}
