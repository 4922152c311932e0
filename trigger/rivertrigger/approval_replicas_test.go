package rivertrigger_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/rivertrigger"
)

// replicas are engines on one schema, each on a Store of its own, as
// processes behind a load balancer are; their channel's notifications
// are gathered in one place.
type replicas struct {
	pool    *pgxpool.Pool
	expires time.Duration // how long after its run an approval expires

	mu    sync.Mutex
	notes []trigger.Notification
}

func newReplicas(t *testing.T, expires time.Duration) *replicas {
	t.Helper()
	return &replicas{pool: poolIn(t, newSchema(t)), expires: expires}
}

// start runs a new replica until the returned stop is called or the test
// ends. Its executor drafts an email waiting for the user's approval.
func (rs *replicas) start(t *testing.T) (*trigger.Engine, func()) {
	t.Helper()
	s, err := rivertrigger.New(rs.pool, rivertrigger.Config{FetchPollInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	e, err := trigger.New(trigger.Config{
		Store: s, MaxConcurrent: 8, RunTimeout: 10 * time.Second,
		Executors: map[string]trigger.Executor{trigger.DefaultExecutor: trigger.ExecutorFunc(
			func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
				return trigger.ExecResult{
					Result: "I drafted the email; shall I send it?",
					Approvals: []trigger.Approval{{ID: "ap-" + run.Task.ID, Summary: "Send the email",
						ExpiresAt: time.Now().Add(rs.expires)}},
				}, nil
			})},
		Notifiers: map[string]trigger.Notifier{"chat": trigger.NotifierFunc(func(ctx context.Context, n trigger.Notification) error {
			rs.mu.Lock()
			rs.notes = append(rs.notes, n)
			rs.mu.Unlock()
			return nil
		})},
	})
	if err != nil {
		t.Fatal(err)
	}
	return engineRun(t, e)
}

// count returns how many notifications of kind task's channel got.
func (rs *replicas) count(task string, kind trigger.NotificationKind) int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	n := 0
	for _, x := range rs.notes {
		if x.TaskID == task && x.Kind == kind {
			n++
		}
	}
	return n
}

func mailTask(id string, at time.Time) *trigger.Task {
	task := oneTime("acme", id, at)
	task.Output = trigger.Output{Channel: "chat"}
	return task
}

// Runs waiting for approval on replica A are approved after A is gone,
// each through two replicas at once (the user's click reaching both, a
// retry): every run is settled once — succeeded with the answer, its
// task COMPLETED, the result told once — not written and delivered by
// both.
func TestApprovalSettledOnceAcrossReplicas(t *testing.T) {
	const n = 12
	rs := newReplicas(t, time.Hour)
	a, stopA := rs.start(t)
	ctx := context.Background()
	due := time.Now().Add(time.Second)
	for i := range n {
		if err := a.CreateTask(ctx, mailTask(fmt.Sprintf("mail%02d", i), due)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 30*time.Second, "every run waiting on A", func() (bool, error) {
		list, err := a.List(ctx, "acme", trigger.StatusPendingApproval)
		return len(list) == n, err
	})
	stopA() // A is gone, with whatever it kept in memory
	b, _ := rs.start(t)
	c, _ := rs.start(t)
	// Another tenant settling acme's approval, even through a task of its
	// own of the same id, settles nothing of acme's.
	if err := b.CreateTask(ctx, &trigger.Task{ID: "mail00", TenantID: "evil", Name: "x",
		Trigger: trigger.Trigger{Kind: trigger.KindEvent, Source: "x"}, Action: trigger.Action{Instruction: "x"}}); err != nil {
		t.Fatal(err)
	}
	for _, tenant := range []string{"evil", "nobody"} {
		if err := c.ApprovalSettled(ctx, trigger.Settled{TenantID: tenant, TaskID: "mail00", ApprovalID: "ap-mail00",
			Outcome: trigger.OutcomeCancelled, Result: "Cancelled."}); err != nil {
			t.Fatalf("a settlement as tenant %s: %v", tenant, err)
		}
	}
	if task, err := b.Get(ctx, "acme", "mail00"); err != nil || task.Status != trigger.StatusPendingApproval {
		t.Fatalf("acme's task after another tenant's settlement: %+v, %v", task, err)
	}
	var wg sync.WaitGroup
	for i := range n {
		id := fmt.Sprintf("mail%02d", i)
		for _, e := range []*trigger.Engine{b, c} {
			wg.Go(func() {
				if err := e.ApprovalSettled(ctx, trigger.Settled{TenantID: "acme", TaskID: id, ApprovalID: "ap-" + id,
					Outcome: trigger.OutcomeApproved, Result: "Sent to team@example.com."}); err != nil {
					t.Errorf("settling %s: %v", id, err)
				}
			})
		}
	}
	wg.Wait()
	for i := range n {
		id := fmt.Sprintf("mail%02d", i)
		task, err := b.Get(ctx, "acme", id)
		if err != nil {
			t.Fatal(err)
		}
		runs, err := b.Runs(ctx, "acme", id, 0)
		if err != nil {
			t.Fatal(err)
		}
		if task.Status != trigger.StatusCompleted || len(runs) != 1 || runs[0].Status != trigger.RunSucceeded ||
			runs[0].Result != "Sent to team@example.com." || runs[0].Approvals[0].Outcome != trigger.OutcomeApproved {
			t.Errorf("%s: task %s, runs %+v", id, task.Status, runs)
		}
	}
	// The result's notice is queued with the settlement's record and
	// delivered by River, on whichever replica: once.
	waitFor(t, 20*time.Second, "every result told", func() (bool, error) {
		for i := range n {
			if rs.count(fmt.Sprintf("mail%02d", i), trigger.NotifyResult) == 0 {
				return false, nil
			}
		}
		return true, nil
	})
	time.Sleep(500 * time.Millisecond) // a repeat would show by now
	for i := range n {
		id := fmt.Sprintf("mail%02d", i)
		if got := rs.count(id, trigger.NotifyResult); got != 1 {
			t.Errorf("%s: the result was told %d times, want once", id, got)
		}
	}
}

// A run waiting for an approval nobody answers expires at the approval's
// time although both replicas were restarted meanwhile (no process that
// saw it go waiting is left): the run is expired, nothing ran, the
// channel is told once, and the one-time task is ACTIVE again.
func TestApprovalExpiresWithBothReplicasRestarted(t *testing.T) {
	rs := newReplicas(t, 3*time.Second)
	a, stopA := rs.start(t)
	_, stopB := rs.start(t)
	ctx := context.Background()
	if err := a.CreateTask(ctx, mailTask("mail", time.Now().Add(time.Second))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the run waiting", statusIs(a, "acme", "mail", trigger.StatusPendingApproval))
	stopA()
	stopB()
	a2, _ := rs.start(t)
	rs.start(t)
	waitFor(t, 30*time.Second, "the run expired", func() (bool, error) {
		runs, err := a2.Runs(ctx, "acme", "mail", 0)
		return err == nil && len(runs) == 1 && runs[0].Status == trigger.RunExpired, err
	})
	// The run's record, then its task: the task follows at once.
	waitFor(t, 5*time.Second, "the task ACTIVE again", statusIs(a2, "acme", "mail", trigger.StatusActive))
	runs, err := a2.Runs(ctx, "acme", "mail", 0)
	if err != nil {
		t.Fatal(err)
	}
	r := runs[0]
	if r.FinishedAt.Before(r.Approvals[0].ExpiresAt) || r.Approvals[0].Outcome != trigger.OutcomeExpired {
		t.Fatalf("run %+v: expired before its approval's time, or not as expired", r)
	}
	time.Sleep(500 * time.Millisecond) // a second expiry would be told by now
	if got := rs.count("mail", trigger.NotifyExpired); got != 1 {
		t.Fatalf("the expiry was told %d times, want once", got)
	}
}

// The user approves through replica B while replica A is still finishing
// the run (the approval was listed as soon as the assistant parked it):
// A records the run waiting after B heard the decision, and applies it —
// the run succeeds with B's answer, the task is COMPLETED, and nothing
// expires later.
func TestApprovalSettledOnAnotherReplicaBeforeTheRunIsRecorded(t *testing.T) {
	pool := poolIn(t, newSchema(t))
	ctx := context.Background()
	var mu sync.Mutex
	var b *trigger.Engine
	replica := func(exec trigger.ExecutorFunc) *trigger.Engine {
		s, err := rivertrigger.New(pool, rivertrigger.Config{FetchPollInterval: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		e, err := trigger.New(trigger.Config{Store: s, RunTimeout: 10 * time.Second,
			Executors: map[string]trigger.Executor{trigger.DefaultExecutor: exec}})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	a := replica(func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		mu.Lock()
		other := b
		mu.Unlock()
		if err := other.ApprovalSettled(ctx, trigger.Settled{TenantID: "acme", TaskID: run.Task.ID, ApprovalID: "ap-1",
			Outcome: trigger.OutcomeApproved, Result: "Sent to team@example.com."}); err != nil {
			return trigger.ExecResult{}, err
		}
		return trigger.ExecResult{Result: "I drafted the email; shall I send it?",
			Approvals: []trigger.Approval{{ID: "ap-1", Summary: "Send the email", ExpiresAt: time.Now().Add(time.Hour)}}}, nil
	})
	mu.Lock()
	b = replica(func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		return trigger.ExecResult{}, fmt.Errorf("replica B runs nothing in this test")
	})
	mu.Unlock()
	engineRun(t, a) // B only hears the decision: it is not dispatching
	if err := a.CreateTask(ctx, oneTime("acme", "mail", time.Now().Add(time.Second))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the task COMPLETED", statusIs(a, "acme", "mail", trigger.StatusCompleted))
	runs, err := a.Runs(ctx, "acme", "mail", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].Status != trigger.RunSucceeded || runs[0].Result != "Sent to team@example.com." {
		t.Fatalf("runs = %+v", runs)
	}
}
