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

// diesAfterEnd is a Store whose process dies the moment the record of a
// run that succeeded or expired commits, by whichever write: die stops
// the engine and its channel, and cancels RunNow's caller.
type diesAfterEnd struct {
	*rivertrigger.Store
	die func()
}

func (d diesAfterEnd) ended(r trigger.Run, err error) error {
	if err == nil && (r.Status == trigger.RunSucceeded || r.Status == trigger.RunExpired) {
		d.die()
	}
	return err
}

func (d diesAfterEnd) SwapRun(ctx context.Context, old, r trigger.Run) error {
	return d.ended(r, d.Store.SwapRun(ctx, old, r))
}

func (d diesAfterEnd) SettleRun(ctx context.Context, old, r trigger.Run, t *trigger.Task) error {
	return d.ended(r, d.Store.SettleRun(ctx, old, r, t))
}

func (d diesAfterEnd) Finish(ctx context.Context, r trigger.Run, t *trigger.Task) error {
	return d.ended(r, d.Store.Finish(ctx, r, t))
}

func (d diesAfterEnd) UpdateRun(ctx context.Context, r trigger.Run) error {
	return d.ended(r, d.Store.UpdateRun(ctx, r))
}

// outsideEngine is an engine on a new Store in pool's schema, wrapped by
// wrap, whose executor ends a run waiting for approval that expires the
// task's Action.Instruction (a duration) after the run's due time, or,
// when that is no duration, with a report, having moved the task's next
// time an hour on when it is "reschedule" (an operator's change while it
// runs).
func outsideEngine(t *testing.T, pool *pgxpool.Pool, chat trigger.Notifier, wrap func(*rivertrigger.Store) trigger.Store) *trigger.Engine {
	t.Helper()
	s, err := rivertrigger.New(pool, rivertrigger.Config{FetchPollInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	exec := trigger.ExecutorFunc(func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		ttl, err := time.ParseDuration(run.Task.Action.Instruction)
		if err != nil && run.Task.Action.Instruction == "reschedule" {
			task, err := s.Get(ctx, run.Task.TenantID, run.Task.ID)
			if err != nil {
				return trigger.ExecResult{}, err
			}
			task.NextRun = task.NextRun.Add(time.Hour)
			if err := s.Update(ctx, task); err != nil {
				return trigger.ExecResult{}, err
			}
		}
		if err != nil {
			return trigger.ExecResult{Result: "report of " + run.Task.ID}, nil
		}
		return trigger.ExecResult{Result: "Shall I send it?", Approvals: []trigger.Approval{
			{ID: "ap-" + run.Task.ID, Summary: "Send the email", ExpiresAt: run.DueAt.Add(ttl)}}}, nil
	})
	e, err := trigger.New(trigger.Config{Store: wrap(s), RunTimeout: 10 * time.Second,
		Executors: map[string]trigger.Executor{trigger.DefaultExecutor: exec},
		Notifiers: map[string]trigger.Notifier{"chat": chat}})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// The notice of a run whose end is recorded outside an attempt's Finish
// with its task — a waiting run the user approved, one whose approvals
// expired, a run of RunNow, a run whose task was rescheduled while it ran
// — is queued in the transaction of that record: a replica that dies
// right after it loses none, and another delivers it once, with its key.
func TestNoticeRecordedOutsideAnAttemptSurvivesDeath(t *testing.T) {
	for _, tc := range []struct {
		name, ttl string
		kind      trigger.NotificationKind
		text      string
	}{
		{"approved", "1h", trigger.NotifyResult, "Sent to the team."},
		{"expired", "2s", trigger.NotifyExpired, "not confirmed in time"},
		{"run now", "report", trigger.NotifyResult, "report of mail"},
		{"rescheduled while it ran", "reschedule", trigger.NotifyResult, "report of mail"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := poolIn(t, newSchema(t))
			ctx := context.Background()
			dead := make(chan struct{})
			runCtx, stop := context.WithCancel(ctx)
			callerCtx, hangUp := context.WithCancel(ctx)
			var once sync.Once
			die := func() { once.Do(func() { close(dead); stop(); hangUp() }) }
			chatA := trigger.NotifierFunc(func(ctx context.Context, n trigger.Notification) error {
				<-dead
				return errors.New("the process died")
			})
			a := outsideEngine(t, pool, chatA, func(s *rivertrigger.Store) trigger.Store { return diesAfterEnd{s, die} })
			done := make(chan error, 1)
			go func() { done <- a.Run(runCtx) }()
			defer func() { die(); <-done; done <- nil }()

			task := oneTime("acme", "mail", time.Now().Add(time.Second))
			if tc.name == "run now" {
				task.Trigger.Schedule.At = time.Now().Add(time.Hour)
			}
			task.Output = trigger.Output{Channel: "chat", Target: "user-1"}
			task.Action.Instruction = tc.ttl
			if err := a.CreateTask(ctx, task); err != nil {
				t.Fatal(err)
			}
			switch tc.name {
			case "run now":
				if _, err := a.RunNow(callerCtx, "acme", "mail"); err != nil {
					t.Fatal(err)
				}
			case "rescheduled while it ran":
			default:
				waitFor(t, 30*time.Second, "the run waiting", statusIs(a, "acme", "mail", trigger.StatusPendingApproval))
				if tc.name == "approved" {
					if err := a.ApprovalSettled(ctx, trigger.Settled{TenantID: "acme", TaskID: "mail", ApprovalID: "ap-mail",
						Outcome: trigger.OutcomeApproved, Result: "Sent to the team."}); err != nil {
						t.Fatal(err)
					}
				}
			}
			select {
			case <-dead:
			case <-time.After(30 * time.Second):
				t.Fatal("the run's end was not recorded")
			}
			<-done
			done <- nil
			runs, err := a.Runs(ctx, "acme", "mail", 0)
			if err != nil || len(runs) != 1 || runs[0].Status == trigger.RunWaiting || runs[0].Status == trigger.RunRunning {
				t.Fatalf("runs after A died: %+v, %v; want one ended", runs, err)
			}
			key := trigger.NotificationKey(runs[0].ID, tc.kind)

			var onB notes
			b := outsideEngine(t, pool, trigger.NotifierFunc(func(ctx context.Context, n trigger.Notification) error {
				onB.add(n)
				return nil
			}), func(s *rivertrigger.Store) trigger.Store { return s })
			engineRun(t, b)
			count := func() int {
				c := 0
				for _, n := range onB.of("mail") {
					if n.IdempotencyKey == key {
						c++
						if n.Kind != tc.kind || n.RunID != runs[0].ID || n.Target != "user-1" || !strings.Contains(n.Text, tc.text) {
							t.Errorf("the notice: %+v", n)
						}
					}
				}
				return c
			}
			waitFor(t, 20*time.Second, "the notice on B", func() (bool, error) { return count() > 0, nil })
			time.Sleep(500 * time.Millisecond) // a repeat would show by now
			if got := count(); got != 1 {
				t.Fatalf("B told %s %d times, want once", key, got)
			}
		})
	}
}
