package sqlitetrigger_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/sqlitetrigger"
)

// notes records the notices an engine delivers.
type notes struct {
	mu  sync.Mutex
	got []trigger.Notification
}

func (n *notes) notifier() trigger.Notifier {
	return trigger.NotifierFunc(func(_ context.Context, x trigger.Notification) error {
		n.mu.Lock()
		n.got = append(n.got, x)
		n.mu.Unlock()
		return nil
	})
}

func (n *notes) count(task string, kind trigger.NotificationKind) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := 0
	for _, x := range n.got {
		if x.TaskID == task && x.Kind == kind {
			c++
		}
	}
	return c
}

// drafting is an engine on s whose executor ends each run waiting for
// the approval of an email, expiring after expires.
func drafting(t *testing.T, s trigger.Store, expires time.Duration, n *notes) *trigger.Engine {
	t.Helper()
	e, err := trigger.New(trigger.Config{
		Store: s, MaxConcurrent: 4, RunTimeout: 10 * time.Second,
		Executors: map[string]trigger.Executor{trigger.DefaultExecutor: trigger.ExecutorFunc(
			func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
				return trigger.ExecResult{
					Result: "I drafted the email; shall I send it?",
					Approvals: []trigger.Approval{{ID: "ap-" + run.Task.ID, Summary: "Send the email",
						ExpiresAt: time.Now().Add(expires)}},
				}, nil
			})},
		Notifiers: map[string]trigger.Notifier{"chat": n.notifier()},
	})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func mailTask(id string, at time.Time) *trigger.Task {
	task := oneTime("acme", id, at)
	task.Output = trigger.Output{Channel: "chat"}
	return task
}

// An approval nobody answers expires through the River job queued with
// the waiting run's record: the run EXPIRED, the user told once.
func TestApprovalExpiresThroughRiver(t *testing.T) {
	s, db := newStore(t, fast())
	var n notes
	e := drafting(t, s, 1500*time.Millisecond, &n)
	runEngine(t, e)
	ctx := context.Background()
	if err := e.CreateTask(ctx, mailTask("mail", time.Now().Add(200*time.Millisecond))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the approval asked", func() (bool, error) {
		return n.count("mail", trigger.NotifyApproval) == 1, nil
	})
	waitFor(t, 20*time.Second, "the expiry told", func() (bool, error) {
		return n.count("mail", trigger.NotifyExpired) == 1, nil
	})
	runs, err := e.Runs(ctx, "acme", "mail", 0)
	if err != nil || len(runs) != 1 || runs[0].Status != trigger.RunExpired || runs[0].Approvals[0].Outcome != trigger.OutcomeExpired {
		t.Fatalf("runs = %+v, %v", runs, err)
	}
	task, err := e.Get(ctx, "acme", "mail")
	if err != nil || task.Status == trigger.StatusPendingApproval {
		t.Fatalf("task after the expiry: %+v, %v", task, err)
	}
	// River completes the expiry's job after its worker returned.
	waitFor(t, 10*time.Second, "the one expiry job completed", func() (bool, error) {
		var all, completed int
		err := db.QueryRow(`SELECT count(*), count(*) FILTER (WHERE state = 'completed') FROM river_job WHERE kind = ?`,
			sqlitetrigger.ExpiryJobKind).Scan(&all, &completed)
		if all != 1 {
			return false, errors.New("not one expiry job")
		}
		return completed == 1, err
	})
}

// A run waiting for approval survives a restart: the file is closed and
// opened again, and the approval given after it settles the run, its
// task COMPLETED, the result told once through River.
func TestApprovalAcrossARestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "valet.db")
	ctx := context.Background()
	var n notes
	{
		s, db := newStoreAt(t, path)
		e := drafting(t, s, time.Hour, &n)
		stop := runEngine(t, e)
		if err := e.CreateTask(ctx, mailTask("mail", time.Now().Add(200*time.Millisecond))); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 20*time.Second, "the run waiting", statusIs(e, "acme", "mail", trigger.StatusPendingApproval))
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	s, _ := newStoreAt(t, path)
	e := drafting(t, s, time.Hour, &n)
	runEngine(t, e)
	waiting, err := e.Runs(ctx, "acme", "mail", 0)
	if err != nil || len(waiting) != 1 || waiting[0].Status != trigger.RunWaiting {
		t.Fatalf("the run after the restart: %+v, %v", waiting, err)
	}
	if err := e.ApprovalSettled(ctx, trigger.Settled{TenantID: "acme", TaskID: "mail", ApprovalID: "ap-mail",
		Outcome: trigger.OutcomeApproved, Result: "Sent to team@example.com."}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the result told", func() (bool, error) {
		return n.count("mail", trigger.NotifyResult) == 1, nil
	})
	runs, err := e.Runs(ctx, "acme", "mail", 0)
	if err != nil || len(runs) != 1 || runs[0].Status != trigger.RunSucceeded || runs[0].Result != "Sent to team@example.com." {
		t.Fatalf("runs = %+v, %v", runs, err)
	}
	if task, err := e.Get(ctx, "acme", "mail"); err != nil || task.Status != trigger.StatusCompleted {
		t.Fatalf("task = %+v, %v", task, err)
	}
	time.Sleep(500 * time.Millisecond) // a second notice would be delivered by now
	if c := n.count("mail", trigger.NotifyResult); c != 1 {
		t.Errorf("result told %d times", c)
	}
}

// diesAfterRunStore is a Store whose process dies right after the run's
// record: every Update fails once down is set.
type diesAfterRunStore struct {
	*sqlitetrigger.Store
	down atomic.Bool
}

func (d *diesAfterRunStore) Update(ctx context.Context, t *trigger.Task) error {
	if d.down.Load() {
		return errors.New("the process died")
	}
	return d.Store.Update(ctx, t)
}

// The settled run and its task's move are one transaction (SettleRun):
// an engine whose every later Update fails still leaves the task
// COMPLETED with its run.
func TestSettlementAndTheTaskMoveAreOneStep(t *testing.T) {
	s, db := newStore(t, fast())
	var n notes
	a := drafting(t, s, time.Hour, &n)
	runEngine(t, a)
	ctx := context.Background()
	if err := a.CreateTask(ctx, mailTask("mail", time.Now().Add(200*time.Millisecond))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the run waiting", statusIs(a, "acme", "mail", trigger.StatusPendingApproval))
	s2, err := sqlitetrigger.New(db, sqlitetrigger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	dying := &diesAfterRunStore{Store: s2}
	dying.down.Store(true)
	b, err := trigger.New(trigger.Config{Store: dying})
	if err != nil {
		t.Fatal(err)
	}
	_ = b.ApprovalSettled(ctx, trigger.Settled{TenantID: "acme", TaskID: "mail", ApprovalID: "ap-mail",
		Outcome: trigger.OutcomeApproved, Result: "Sent."})
	task, err := a.Get(ctx, "acme", "mail")
	if err != nil {
		t.Fatal(err)
	}
	runs, err := a.Runs(ctx, "acme", "mail", 0)
	if err != nil {
		t.Fatal(err)
	}
	if runs[0].Status != trigger.RunSucceeded || task.Status != trigger.StatusCompleted {
		t.Fatalf("run %s, task %s; want SUCCEEDED and COMPLETED", runs[0].Status, task.Status)
	}
	waitFor(t, 20*time.Second, "the answer told through the running engine", func() (bool, error) {
		return n.count("mail", trigger.NotifyResult) == 1, nil
	})
}
