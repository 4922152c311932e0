//go:build unix

package sqlitepool_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/pool"
	"github.com/valetkit/valet/pool/sqlitepool"
)

// killChild names, in the child's environment, the file the child process
// of TestApprovalOfAKilledProcess works on.
const killChild = "VALET_SQLITEPOOL_KILL_CHILD"

// killedAfterParking is the child's pool: the process kills itself
// (SIGKILL) the moment an entry waiting for approval is in the file,
// before the orchestrator does anything that follows the Create.
type killedAfterParking struct{ *sqlitepool.Store }

func (k killedAfterParking) Create(ctx context.Context, e *pool.Entry) error {
	if err := k.Store.Create(ctx, e); err != nil || e.Status != pool.StatusWaitingForApproval {
		return err
	}
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // dies here
}

// TestApprovalKillChild is the process TestApprovalOfAKilledProcess
// starts; it does nothing otherwise.
func TestApprovalKillChild(t *testing.T) {
	path := os.Getenv(killChild)
	if path == "" {
		t.Skip("the child process of TestApprovalOfAKilledProcess")
	}
	p := start(t, path, func(s *sqlitepool.Store) pool.Store { return killedAfterParking{s} })
	res, err := p.o.HandleMessage(bg, agent.Message{TenantID: "u1", ConversationID: "mail", Text: "please mail the team"})
	t.Fatalf("the child was not killed: %+v, %v", res, err)
}

// TestApprovalOfAKilledProcess: a process parks an approval in the file
// and is killed (SIGKILL) the moment the entry is written. The next
// process on the file lists it; two of its goroutines race to approve
// it, on two connections pools as two processes would: one wins, the
// other gets approval.ErrNotFound, and the email is sent once, by the
// winner, never by the killed process.
func TestApprovalOfAKilledProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "valet.db")
	child := exec.Command(os.Args[0], "-test.run", "^TestApprovalKillChild$", "-test.count", "1")
	child.Env = append(os.Environ(), killChild+"="+path)
	child.Stdout, child.Stderr = os.Stderr, os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("the child ended with %v, not killed", err)
		}
	case <-time.After(2 * time.Minute):
		_ = child.Process.Kill()
		<-exited
		t.Fatal("the child did not park its approval")
	}

	a, b := start(t, path, nil), start(t, path, nil)
	pending, err := a.o.ListPendingApprovals(bg, "u1")
	if err != nil || len(pending) != 1 || pending[0].ActionSummary != "Send an email to team@example.com" {
		t.Fatalf("after the kill, pending approvals = %+v, %v; want the email", pending, err)
	}
	id := pending[0].ID
	if got := sends(t, a.db); len(got) != 0 {
		t.Fatalf("emails sent before any approval: %v", got)
	}

	var wg sync.WaitGroup
	errs := make([]error, 2)
	gate := make(chan struct{})
	for i, p := range []*process{a, b} {
		wg.Go(func() {
			<-gate
			_, errs[i] = p.o.ResolveApproval(bg, "u1", id, approval.Decision{Action: approval.Approve})
		})
	}
	close(gate)
	wg.Wait()
	wins := 0
	for _, err := range errs {
		switch {
		case err == nil:
			wins++
		case !errors.Is(err, approval.ErrNotFound):
			t.Errorf("the losing decision: %v, want approval.ErrNotFound", err)
		}
	}
	if wins != 1 {
		t.Errorf("%d decisions won (errors %v); want exactly one", wins, errs)
	}
	if got := sends(t, b.db); got[os.Getpid()] != 1 || len(got) != 1 {
		t.Errorf("emails sent, by process id: %v; want one, by this process (%d)", got, os.Getpid())
	}
	if left, err := b.store.List(bg, "u1"); err != nil || len(left) != 0 {
		t.Errorf("left in the pool: %d entries, %v", len(left), err)
	}
	a.stop(t)
	b.stop(t)
}
