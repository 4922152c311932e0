package rivertrigger_test

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/rivertrigger"
)

// leaderLossBound is the documented bound (package doc, "Leader loss") on
// how late a scheduled run starts when River's leader process is killed:
// the leader's 15 s term running out, a follower's next bid (every 5–6
// s), the maintenance services' start (up to 1 s) and a fetch.
const leaderLossBound = 23*time.Second + 100*time.Millisecond // FetchPollInterval of killConfig

// leaderHandoverBound is the documented bound on how late a run starts
// when the leader resigns (a graceful stop): a bid at once, the
// maintenance services' start (up to 1 s), River's scheduler tick (5 s)
// and a fetch.
const leaderHandoverBound = 6*time.Second + 100*time.Millisecond

// When the replica that is River's leader is killed (SIGKILL: it does not
// resign), a run that falls due meanwhile does not wait for another
// replica to be elected: the surviving replica makes it available itself
// (promote.go) and runs it, within leaderLossBound of the kill at most;
// another replica is elected within the dead leader's term.
func TestLeaderKilledScheduleRunsOnAnotherReplica(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out a River leader's term, about 20 s")
	}
	schema := newSchema(t)
	pool := poolIn(t, schema)
	ctx := context.Background()
	s, err := rivertrigger.New(pool, killConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE rt_exec (run_id text NOT NULL, pid int NOT NULL,
		attempt int NOT NULL, finished bool NOT NULL DEFAULT false, at timestamptz NOT NULL DEFAULT clock_timestamp())`); err != nil {
		t.Fatal(err)
	}
	leader := func() (string, error) {
		var id string
		err := pool.QueryRow(ctx, `SELECT coalesce((SELECT leader_id FROM river_leader WHERE expires_at > now()), '')`).Scan(&id)
		return id, err
	}

	// The child replica starts alone, so it is elected.
	child := exec.Command(os.Args[0], "-test.run", "^TestKillChild$", "-test.count", "1")
	child.Env = append(os.Environ(), childSchema+"="+schema)
	child.Stdout, child.Stderr = os.Stderr, os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = child.Process.Kill()
			_ = child.Wait()
		}
	})
	var first string
	waitFor(t, 30*time.Second, "the child replica elected", func() (bool, error) {
		id, err := leader()
		first = id
		return id != "", err
	})

	e, err := trigger.New(trigger.Config{Store: s, MaxConcurrent: 4, RunTimeout: 3 * time.Second,
		Executors: map[string]trigger.Executor{trigger.DefaultExecutor: recordingExec(pool, 10*time.Millisecond)}})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- e.Run(rctx) }()
	defer func() { stop(); <-done }()

	due := time.Now().Add(2 * time.Second)
	if err := e.CreateTask(ctx, oneTime("acme", "after-kill", due)); err != nil {
		t.Fatal(err)
	}
	if id, err := leader(); err != nil || id != first {
		t.Fatalf("leader %q, %v; want the child %q still", id, err, first)
	}
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now()
	_ = child.Wait()
	killed = true

	waitFor(t, 2*leaderLossBound, "the run on the surviving replica", statusIs(e, "acme", "after-kill", trigger.StatusCompleted))
	var ranAt time.Time
	var pid int
	if err := pool.QueryRow(ctx, `SELECT at, pid FROM rt_exec ORDER BY at LIMIT 1`).Scan(&ranAt, &pid); err != nil {
		t.Fatal(err)
	}
	then, err := leader()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("leader killed %s before the due time; the run started %s after the kill (%s late); leader then %q (the killed one: %q)",
		due.Sub(killedAt).Round(time.Millisecond), ranAt.Sub(killedAt).Round(time.Millisecond),
		ranAt.Sub(due).Round(time.Millisecond), then, first)
	if pid != os.Getpid() {
		t.Fatalf("run by pid %d, want the surviving replica's %d", pid, os.Getpid())
	}
	waitFor(t, 2*leaderLossBound, "another replica elected", func() (bool, error) {
		id, err := leader()
		return id != "" && id != first, err
	})
	if ranAt.Sub(killedAt) > leaderLossBound {
		t.Fatalf("the run started %s after the leader was killed; the documented bound is %s", ranAt.Sub(killedAt), leaderLossBound)
	}
}

// A leader stopped, not killed (its engine's context cancelled, as on a
// deploy's SIGTERM), resigns: another replica is elected at once, and a
// run that falls due meanwhile starts within leaderHandoverBound (made
// available by the other replica, promote.go, else by the new leader's
// scheduler), not a leader's term.
func TestLeaderStoppedHandsOverAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two engines for several seconds")
	}
	schema := newSchema(t)
	pool := poolIn(t, schema)
	ctx := context.Background()
	newEngine := func() *trigger.Engine {
		s, err := rivertrigger.New(pool, killConfig())
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		e, err := trigger.New(trigger.Config{Store: s, MaxConcurrent: 4, RunTimeout: 3 * time.Second,
			Executors: map[string]trigger.Executor{trigger.DefaultExecutor: recordingExec(pool, 10*time.Millisecond)}})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE rt_exec (run_id text NOT NULL, pid int NOT NULL,
		attempt int NOT NULL, finished bool NOT NULL DEFAULT false, at timestamptz NOT NULL DEFAULT clock_timestamp())`); err != nil {
		t.Fatal(err)
	}
	leader := func() (string, error) {
		var id string
		err := pool.QueryRow(ctx, `SELECT coalesce((SELECT leader_id FROM river_leader WHERE expires_at > now()), '')`).Scan(&id)
		return id, err
	}
	_, stopA := engineRun(t, newEngine())
	var first string
	waitFor(t, 30*time.Second, "the first replica elected", func() (bool, error) {
		id, err := leader()
		first = id
		return id != "", err
	})
	b, _ := engineRun(t, newEngine())
	due := time.Now().Add(2 * time.Second)
	if err := b.CreateTask(ctx, oneTime("acme", "after-stop", due)); err != nil {
		t.Fatal(err)
	}
	stopA()
	stoppedAt := time.Now()
	waitFor(t, 2*leaderLossBound, "the run on the other replica", statusIs(b, "acme", "after-stop", trigger.StatusCompleted))
	var ranAt time.Time
	if err := pool.QueryRow(ctx, `SELECT at FROM rt_exec ORDER BY at LIMIT 1`).Scan(&ranAt); err != nil {
		t.Fatal(err)
	}
	now, _ := leader()
	t.Logf("leader stopped %s before the due time; the run started %s after the stop (%s late); leader %q after %q",
		due.Sub(stoppedAt).Round(time.Millisecond), ranAt.Sub(stoppedAt).Round(time.Millisecond),
		ranAt.Sub(due).Round(time.Millisecond), now, first)
	waitFor(t, leaderHandoverBound, "another replica elected", func() (bool, error) {
		id, err := leader()
		return id != "" && id != first, err
	})
	if late := ranAt.Sub(due); late > leaderHandoverBound {
		t.Fatalf("the run started %s late after the leader resigned; the documented bound is %s", late, leaderHandoverBound)
	}
}

// engineRun runs e until the returned stop is called (or the test ends).
func engineRun(t *testing.T, e *trigger.Engine) (*trigger.Engine, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	t.Cleanup(stop)
	return e, stop
}
