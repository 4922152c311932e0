package trigger_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/triggertest"
)

func TestTriggerCheck(t *testing.T) {
	at := time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC)
	good := map[string]trigger.Trigger{
		"cron":             {Kind: trigger.KindSchedule, Schedule: trigger.Schedule{Cron: "0 9 * * *"}},
		"at, skip":         {Kind: trigger.KindSchedule, Schedule: trigger.Schedule{At: at}, Missed: trigger.Skip},
		"event type only":  {Kind: trigger.KindEvent, Type: "push"},
		"event source":     {Kind: trigger.KindEvent, Source: "github"},
		"event filter":     {Kind: trigger.KindEvent, Type: "push", Filter: map[string]string{"a.b.c": "", "x": "1"}},
		"condition":        {Kind: trigger.KindCondition, Condition: "inbox", Every: trigger.MinEvery},
		"condition minute": {Kind: trigger.KindCondition, Condition: "inbox", Every: time.Minute},
	}
	for name, g := range good {
		if err := g.Check(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	bad := map[string]trigger.Trigger{
		"zero":                     {},
		"unknown kind":             {Kind: "cron", Schedule: trigger.Schedule{Cron: "0 9 * * *"}},
		"schedule, none":           {Kind: trigger.KindSchedule},
		"schedule, bad cron":       {Kind: trigger.KindSchedule, Schedule: trigger.Schedule{Cron: "0 9 * *"}},
		"schedule, bad policy":     {Kind: trigger.KindSchedule, Schedule: trigger.Schedule{At: at}, Missed: 7},
		"schedule with event type": {Kind: trigger.KindSchedule, Schedule: trigger.Schedule{At: at}, Type: "push"},
		"schedule with condition":  {Kind: trigger.KindSchedule, Schedule: trigger.Schedule{At: at}, Every: time.Minute},
		"event, nothing":           {Kind: trigger.KindEvent},
		"event, filter only":       {Kind: trigger.KindEvent, Filter: map[string]string{"a": "b"}},
		"event with schedule":      {Kind: trigger.KindEvent, Type: "push", Schedule: trigger.Schedule{At: at}},
		"event with policy":        {Kind: trigger.KindEvent, Type: "push", Missed: trigger.Skip},
		"event, empty path":        {Kind: trigger.KindEvent, Type: "push", Filter: map[string]string{"": "b"}},
		"event, leading dot":       {Kind: trigger.KindEvent, Type: "push", Filter: map[string]string{".a": "b"}},
		"event, trailing dot":      {Kind: trigger.KindEvent, Type: "push", Filter: map[string]string{"a.": "b"}},
		"event, bad utf-8 value":   {Kind: trigger.KindEvent, Type: "push", Filter: map[string]string{"a": "\xff"}},
		"event, long type":         {Kind: trigger.KindEvent, Type: strings.Repeat("t", trigger.MaxIDLen+1)},
		"condition, no name":       {Kind: trigger.KindCondition, Every: time.Minute},
		"condition, no interval":   {Kind: trigger.KindCondition, Condition: "inbox"},
		"condition, too often":     {Kind: trigger.KindCondition, Condition: "inbox", Every: time.Millisecond},
		"condition, negative":      {Kind: trigger.KindCondition, Condition: "inbox", Every: -time.Minute},
		"condition with source":    {Kind: trigger.KindCondition, Condition: "inbox", Every: time.Minute, Source: "x"},
	}
	for name, g := range bad {
		if err := g.Check(); !errors.Is(err, trigger.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

func TestTaskCheck(t *testing.T) {
	if err := triggertest.NewTask("t1", "a").Check(); err != nil {
		t.Fatalf("NewTask: %v", err)
	}
	good := map[string]func(*trigger.Task){
		"custom executor, no instruction": func(x *trigger.Task) { x.Executor = "http"; x.Action.Instruction = "" },
		"no output":                       func(x *trigger.Task) { x.Output = trigger.Output{} },
		"zero retry and budget":           func(x *trigger.Task) { x.Retry, x.Budget = trigger.Retry{}, trigger.Budget{} },
		"max priority":                    func(x *trigger.Task) { x.Priority = trigger.MaxPriority },
		"max attempts":                    func(x *trigger.Task) { x.Retry.MaxAttempts = trigger.MaxAttempts },
		"no conversation":                 func(x *trigger.Task) { x.ConversationID = "" },
	}
	for name, mutate := range good {
		x := triggertest.NewTask("t1", "a")
		mutate(x)
		if err := x.Check(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	bad := map[string]func(*trigger.Task){
		"long ID":             func(x *trigger.Task) { x.ID = strings.Repeat("i", trigger.MaxIDLen+1) },
		"long name":           func(x *trigger.Task) { x.Name = strings.Repeat("n", trigger.MaxNameLen+1) },
		"long instruction":    func(x *trigger.Task) { x.Action.Instruction = strings.Repeat("i", trigger.MaxTextLen+1) },
		"bad utf-8 tenant":    func(x *trigger.Task) { x.TenantID = "\xc3" },
		"empty config key":    func(x *trigger.Task) { x.Action.Config = map[string]string{"": "v"} },
		"too many attempts":   func(x *trigger.Task) { x.Retry.MaxAttempts = trigger.MaxAttempts + 1 },
		"negative backoff":    func(x *trigger.Task) { x.Retry.Backoff = -time.Second },
		"NaN cost":            func(x *trigger.Task) { x.Budget.MaxCostUSD = math.NaN() },
		"infinite cost":       func(x *trigger.Task) { x.Budget.MaxCostUSD = math.Inf(1) },
		"negative cost":       func(x *trigger.Task) { x.Budget.MaxCostUSD = -1 },
		"negative wall":       func(x *trigger.Task) { x.Budget.MaxWall = -1 },
		"negative tool calls": func(x *trigger.Task) { x.Budget.MaxToolCalls = -1 },
		"negative revision":   func(x *trigger.Task) { x.Revision = -1 },
		"status lower case":   func(x *trigger.Task) { x.Status = "paused" },
	}
	for name, mutate := range bad {
		x := triggertest.NewTask("t1", "a")
		mutate(x)
		if err := x.Check(); !errors.Is(err, trigger.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	var nilTask *trigger.Task
	if err := nilTask.Check(); !errors.Is(err, trigger.ErrInvalid) {
		t.Errorf("nil task: %v, want ErrInvalid", err)
	}
}

func TestTaskHelpers(t *testing.T) {
	x := triggertest.NewTask("t1", "a")
	if got := x.ExecutorName(); got != trigger.DefaultExecutor {
		t.Errorf("ExecutorName of an empty Executor = %q", got)
	}
	x.Executor = "http"
	if got := x.ExecutorName(); got != "http" {
		t.Errorf("ExecutorName = %q, want http", got)
	}
	c := x.Clone()
	c.Trigger.Filter["repo.name"] = "changed"
	c.Action.Config["lang"] = "changed"
	if x.Trigger.Filter["repo.name"] != "valet" || x.Action.Config["lang"] != "en" {
		t.Errorf("Clone shares maps: %v, %v", x.Trigger.Filter, x.Action.Config)
	}
}

func TestRunCheck(t *testing.T) {
	due := time.Date(2026, 6, 1, 9, 0, 0, 0, time.UTC)
	if err := triggertest.NewRun("t1", "a", due).Check(); err != nil {
		t.Fatalf("NewRun: %v", err)
	}
	running := triggertest.NewRun("t1", "a", due)
	running.Status, running.FinishedAt, running.Result = trigger.RunRunning, time.Time{}, ""
	if err := running.Check(); err != nil {
		t.Errorf("running run: %v", err)
	}
	bad := map[string]func(*trigger.Run){
		"no task":       func(r *trigger.Run) { r.TaskID = "" },
		"no tenant":     func(r *trigger.Run) { r.TenantID = "" },
		"no status":     func(r *trigger.Run) { r.Status = "" },
		"negative wall": func(r *trigger.Run) { r.Consumed.Wall = -1 },
		"NaN cost":      func(r *trigger.Run) { r.Consumed.CostUSD = math.NaN() },
		"long error":    func(r *trigger.Run) { r.Error = strings.Repeat("e", trigger.MaxTextLen+1) },
		"NUL in result": func(r *trigger.Run) { r.Result = "a\x00" },
	}
	for name, mutate := range bad {
		r := triggertest.NewRun("t1", "a", due)
		mutate(&r)
		if err := r.Check(); !errors.Is(err, trigger.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

func TestRunID(t *testing.T) {
	due := time.Date(2026, 6, 1, 9, 0, 0, 0, time.UTC)
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Skip(err)
	}
	if a, b := trigger.RunID("a", due), trigger.RunID("a", due.In(paris)); a != b {
		t.Errorf("RunID depends on the location: %q, %q", a, b)
	}
	if got := trigger.RunID("a", due); got != "a@2026-06-01T09:00:00Z" {
		t.Errorf("RunID = %q", got)
	}
	if trigger.RunID("a", due) == trigger.RunID("a", due.Add(time.Nanosecond)) {
		t.Error("RunID ignores nanoseconds")
	}
}
