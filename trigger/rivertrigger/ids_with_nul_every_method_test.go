package rivertrigger_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/rivertrigger"
)

// Every Engine method given a tenant or task id PostgreSQL cannot hold (a
// NUL byte, invalid UTF-8) answers ErrNotFound or ErrInvalid — what a
// host maps to 404 or 400 — never a raw driver error (a 500).
func TestIDsPostgresCannotHoldThroughEveryEngineMethod(t *testing.T) {
	s, _ := newStore(t, rivertrigger.Config{FetchPollInterval: 100 * time.Millisecond})
	e, _ := engineOn(t, s, trigger.ExecutorFunc(func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		return trigger.ExecResult{Result: "ok"}, nil
	}))
	ctx := context.Background()
	if err := e.CreateTask(ctx, oneTime("acme", "real", time.Now().Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, bad := range []struct{ tenant, id string }{
		{"acme", "re\x00al"}, {"ac\x00me", "real"}, {"acme", "re\xffal"}, {"ac\xffme", "real"},
		{"acme", strings.Repeat("x", 300) + "\x00"},
	} {
		calls := map[string]func() error{
			"Get":    func() error { _, err := e.Get(ctx, bad.tenant, bad.id); return err },
			"List":   func() error { _, err := e.List(ctx, bad.tenant); return err },
			"Runs":   func() error { _, err := e.Runs(ctx, bad.tenant, bad.id, 0); return err },
			"Delete": func() error { return e.Delete(ctx, bad.tenant, bad.id) },
			"Pause":  func() error { _, err := e.Pause(ctx, bad.tenant, bad.id); return err },
			"Resume": func() error { _, err := e.Resume(ctx, bad.tenant, bad.id); return err },
			"Retry":  func() error { _, err := e.Retry(ctx, bad.tenant, bad.id); return err },
			"RunNow": func() error { _, err := e.RunNow(ctx, bad.tenant, bad.id); return err },
			"CreateTask": func() error {
				return e.CreateTask(ctx, oneTime(bad.tenant, bad.id, now.Add(time.Hour)))
			},
			"ApprovalSettled": func() error {
				return e.ApprovalSettled(ctx, trigger.Settled{TenantID: bad.tenant, TaskID: bad.id, ApprovalID: "ap\x00", Outcome: trigger.OutcomeApproved})
			},
			"HandleDue": func() error {
				return e.HandleDue(ctx, trigger.Due{TenantID: bad.tenant, TaskID: bad.id, DueAt: now, Attempt: 1, MaxAttempts: 1})
			},
			"HandleExpiry": func() error { return e.HandleExpiry(ctx, bad.tenant, bad.id, "r\x00", now) },
			"HandleLost": func() error {
				return e.HandleLost(ctx, trigger.Due{TenantID: bad.tenant, TaskID: bad.id, DueAt: now, Attempt: 1, MaxAttempts: 1}, "lost")
			},
			"Publish": func() error {
				return e.Publish(ctx, trigger.Event{ID: "ev\x00", TenantID: bad.tenant, Source: "mail\x00", Type: "x"})
			},
		}
		for name, call := range calls {
			err := call()
			if err == nil || errors.Is(err, trigger.ErrNotFound) || errors.Is(err, trigger.ErrInvalid) {
				continue
			}
			t.Errorf("%s(%q, %q) = %v: want ErrNotFound or ErrInvalid", name, bad.tenant, bad.id, err)
		}
	}
	if task, err := e.Get(ctx, "acme", "real"); err != nil || task.Status != trigger.StatusActive {
		t.Fatalf("the real task after the bad ids: %+v, %v", task, err)
	}
}
