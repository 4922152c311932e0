package trigger_test

import (
	"encoding/json"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/valetkit/valet/budget"
	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/triggertest"
)

// storedTask is a task as rivertrigger's Store and the MemoryStore wrote
// it (json.Marshal of a trigger.Task) before trigger.Budget became
// budget.Limits.
const storedTask = `{"id":"digest","tenant_id":"tenant-a","conversation_id":"conv-a","name":"daily digest",` +
	`"trigger":{"kind":"schedule","schedule":{"cron":"0 8 * * *","zone":"Europe/Paris"}},` +
	`"action":{"instruction":"Summarise my unread mail."},"output":{"channel":"slack","target":"#me"},` +
	`"status":"ACTIVE","priority":4,"next_run":"2026-06-02T06:00:00Z",` +
	`"retry":{"max_attempts":5,"backoff":60000000000},` +
	`"budget":{"max_tokens":20000,"max_cost_usd":0.25,"max_wall":90000000000,"max_tool_calls":6}}`

// storedRun is a run as those stores wrote it before trigger.Usage became
// budget.Consumed.
const storedRun = `{"id":"digest@2026-06-01T06:00:00Z","task_id":"digest","tenant_id":"tenant-a",` +
	`"due_at":"2026-06-01T06:00:00Z","started_at":"2026-06-01T06:00:01Z","finished_at":"2026-06-01T06:00:03Z",` +
	`"status":"succeeded","attempt":1,"result":"done",` +
	`"consumed":{"tokens":1234,"cost_usd":0.0042,"wall":3000000000,"tool_calls":2}}`

func TestStoredBudgetDecodes(t *testing.T) {
	var task trigger.Task
	if err := json.Unmarshal([]byte(storedTask), &task); err != nil {
		t.Fatalf("decoding a stored task: %v", err)
	}
	want := budget.Limits{MaxTokens: 20000, MaxCostUSD: 0.25, MaxWall: 90 * time.Second, MaxToolCalls: 6}
	if task.Budget != want {
		t.Errorf("stored task's Budget = %+v, want %+v", task.Budget, want)
	}
	if err := task.Check(); err != nil {
		t.Errorf("stored task: %v", err)
	}
	// Written again, it is the same budget object the stores hold.
	b, err := json.Marshal(task.Budget)
	if err != nil {
		t.Fatal(err)
	}
	if got, wantJSON := string(b), `{"max_tokens":20000,"max_cost_usd":0.25,"max_wall":90000000000,"max_tool_calls":6}`; got != wantJSON {
		t.Errorf("Budget encodes as %s, want %s", got, wantJSON)
	}

	var run trigger.Run
	if err := json.Unmarshal([]byte(storedRun), &run); err != nil {
		t.Fatalf("decoding a stored run: %v", err)
	}
	if want := (budget.Consumed{Tokens: 1234, CostUSD: 0.0042, Wall: 3 * time.Second, ToolCalls: 2}); run.Consumed != want {
		t.Errorf("stored run's Consumed = %+v, want %+v", run.Consumed, want)
	}
}

func TestTaskCheckRefusesBudget(t *testing.T) {
	bad := map[string]trigger.Budget{
		"negative tokens":     {MaxTokens: -1},
		"negative tool calls": {MaxToolCalls: -1},
		"negative wall":       {MaxWall: -time.Second},
		"negative cost":       {MaxCostUSD: -0.01},
		"NaN cost":            {MaxCostUSD: math.NaN()},
		"infinite cost":       {MaxCostUSD: math.Inf(1)},
	}
	for name, b := range bad {
		x := triggertest.NewTask("t1", "a")
		x.Budget = b
		err := x.Check()
		if !errors.Is(err, trigger.ErrInvalid) || !errors.Is(err, budget.ErrInvalid) {
			t.Errorf("%s: Task.Check = %v, want trigger.ErrInvalid and budget.ErrInvalid", name, err)
		}
	}
	r := triggertest.NewRun("t1", "a", time.Date(2026, 6, 1, 9, 0, 0, 0, time.UTC))
	r.Consumed.Tokens = -1
	if err := r.Check(); !errors.Is(err, trigger.ErrInvalid) || !errors.Is(err, budget.ErrInvalid) {
		t.Errorf("Run.Check of a negative usage = %v, want trigger.ErrInvalid and budget.ErrInvalid", err)
	}
}
