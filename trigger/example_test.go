package trigger_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/valetkit/valet/trigger"
)

func ExampleSchedule_Next() {
	// 02:30 every night, Paris time, over the spring change of 2026.
	s := trigger.Schedule{Cron: "30 2 * * *", Zone: "Europe/Paris"}
	if err := s.Check(); err != nil {
		fmt.Println(err)
		return
	}
	t := time.Date(2026, 3, 27, 12, 0, 0, 0, time.UTC)
	for range 3 {
		t, _ = s.Next(t)
		fmt.Println(t.Format("Mon 2006-01-02 15:04 MST"))
	}
	// Output:
	// Sat 2026-03-28 02:30 CET
	// Sun 2026-03-29 03:00 CEST
	// Mon 2026-03-30 02:30 CEST
}

func ExampleSchedule_Due() {
	daily := trigger.Schedule{Cron: "0 9 * * *"}
	created := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	back := time.Date(2026, 6, 4, 8, 0, 0, 0, time.UTC) // down since the task was created

	runAt, ok, next := daily.Due(created, back, trigger.CatchUpOnce, 0)
	fmt.Println("catch up:", ok, runAt.Format(time.DateTime), "then", next.Format(time.DateTime))

	_, ok, next = daily.Due(created, back, trigger.Skip, 0)
	fmt.Println("skip:    ", ok, "then", next.Format(time.DateTime))
	// Output:
	// catch up: true 2026-06-02 09:00:00 then 2026-06-04 09:00:00
	// skip:     false then 2026-06-04 09:00:00
}

func ExampleMemoryStore() {
	ctx := context.Background()
	store := trigger.NewMemoryStore()
	task := &trigger.Task{
		ID:       "digest",
		TenantID: "u1",
		Name:     "Morning digest",
		Trigger: trigger.Trigger{
			Kind:     trigger.KindSchedule,
			Schedule: trigger.Schedule{Cron: "0 8 * * *", Zone: "Europe/Paris"},
		},
		Action:  trigger.Action{Instruction: "Summarise my unread mail."},
		Status:  trigger.StatusActive,
		NextRun: time.Date(2026, 6, 1, 6, 0, 0, 0, time.UTC),
	}
	if err := store.Create(ctx, task); err != nil {
		fmt.Println(err)
		return
	}
	due, _ := store.Due(ctx, time.Date(2026, 6, 1, 6, 0, 30, 0, time.UTC), 10)
	for _, t := range due {
		fmt.Println(t.TenantID, t.ID, t.ExecutorName(), "revision", t.Revision)
	}

	stale := *task
	task.Status = trigger.StatusPaused
	fmt.Println(store.Update(ctx, task), task.Revision)
	err := store.Update(ctx, &stale) // revision 1, no longer the stored one
	fmt.Println(errors.Is(err, trigger.ErrConflict))
	_, err = store.Get(ctx, "u2", "digest") // another tenant
	fmt.Println(errors.Is(err, trigger.ErrNotFound))
	// Output:
	// u1 digest orchestrator revision 1
	// <nil> 2
	// true
	// true
}
