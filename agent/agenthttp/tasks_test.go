package agenthttp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/agenthttp"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/trigger"
)

type echoExec struct{}

func (echoExec) Execute(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
	return trigger.ExecResult{Result: "did: " + run.Task.Action.Instruction}, nil
}

func taskEnv(t *testing.T) (*env, *trigger.Engine) {
	t.Helper()
	eng, err := trigger.New(trigger.Config{Executors: map[string]trigger.Executor{"echo": echoExec{}}})
	if err != nil {
		t.Fatal(err)
	}
	return newEnv(t, llmtest.NewScript(), agent.Config{}, agenthttp.Config{Tasks: eng}), eng
}

const briefTask = `{"id":"brief","name":"Morning brief","executor":"echo",
	"trigger":{"kind":"schedule","schedule":{"cron":"0 9 * * *","zone":"Europe/Paris"}},
	"action":{"instruction":"brief me"},"status":"ACTIVE"}`

func taskOf(t *testing.T, r reply, status int) *trigger.Task {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	var b struct{ Task *trigger.Task }
	if err := json.Unmarshal([]byte(r.body), &b); err != nil || b.Task == nil {
		t.Fatalf("body %q (%v)", r.body, err)
	}
	return b.Task
}

func TestTasksAreCreatedListedPausedResumedAndDeleted(t *testing.T) {
	e, eng := taskEnv(t)
	created := taskOf(t, e.do(http.MethodPost, "/tasks", "ann", briefTask), http.StatusCreated)
	if created.TenantID != "ann" || created.Status != trigger.StatusActive || created.NextRun.IsZero() {
		t.Fatalf("created %+v", created)
	}
	if got := taskOf(t, e.do(http.MethodGet, "/tasks/brief", "ann", ""), http.StatusOK); got.Name != "Morning brief" {
		t.Fatalf("get %+v", got)
	}
	if p := taskOf(t, e.do(http.MethodPost, "/tasks/brief/pause", "ann", ""), http.StatusOK); p.Status != trigger.StatusPaused {
		t.Fatalf("paused %+v", p)
	}
	r := e.do(http.MethodGet, "/tasks?status=PAUSED", "ann", "")
	var list struct{ Tasks []*trigger.Task }
	if err := json.Unmarshal([]byte(r.body), &list); err != nil || len(list.Tasks) != 1 || list.Tasks[0].ID != "brief" {
		t.Fatalf("list of paused: %s", r.body)
	}
	if r := e.do(http.MethodGet, "/tasks?status=ACTIVE", "ann", ""); !strings.Contains(r.body, `"tasks":[]`) {
		t.Fatalf("list of active: %s", r.body)
	}
	if p := taskOf(t, e.do(http.MethodPost, "/tasks/brief/resume", "ann", "{}"), http.StatusOK); p.Status != trigger.StatusActive {
		t.Fatalf("resumed %+v", p)
	}
	if r := e.do(http.MethodPost, "/tasks/brief/retry", "ann", ""); r.status != http.StatusBadRequest {
		t.Fatalf("retry of an ACTIVE task: %d %s", r.status, r.body)
	}

	if _, err := eng.RunNow(context.Background(), "ann", "brief"); err != nil {
		t.Fatal(err)
	}
	r = e.do(http.MethodGet, "/tasks/brief/runs?limit=5", "ann", "")
	var runs struct{ Runs []trigger.Run }
	if err := json.Unmarshal([]byte(r.body), &runs); err != nil || len(runs.Runs) != 1 || runs.Runs[0].Result != "did: brief me" {
		t.Fatalf("runs: %d %s", r.status, r.body)
	}

	if r := e.do(http.MethodDelete, "/tasks/brief", "ann", ""); r.status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	if r := e.do(http.MethodGet, "/tasks/brief", "ann", ""); r.status != http.StatusNotFound {
		t.Fatalf("get after delete: %d %s", r.status, r.body)
	}
}

func TestTasksOfAnotherTenantAreNotFound(t *testing.T) {
	e, _ := taskEnv(t)
	taskOf(t, e.do(http.MethodPost, "/tasks", "ann", briefTask), http.StatusCreated)
	for _, c := range []struct{ method, path string }{
		{http.MethodGet, "/tasks/brief"},
		{http.MethodGet, "/tasks/brief/runs"},
		{http.MethodPost, "/tasks/brief/pause"},
		{http.MethodPost, "/tasks/brief/resume"},
		{http.MethodPost, "/tasks/brief/retry"},
		{http.MethodDelete, "/tasks/brief"},
	} {
		if r := e.do(c.method, c.path, "bob", ""); r.status != http.StatusNotFound {
			t.Fatalf("bob %s %s: %d %s", c.method, c.path, r.status, r.body)
		}
	}
	if r := e.do(http.MethodGet, "/tasks", "bob", ""); !strings.Contains(r.body, `"tasks":[]`) {
		t.Fatalf("bob lists: %s", r.body)
	}
	forged := strings.Replace(briefTask, `"id":"brief"`, `"id":"x","tenant_id":"ann"`, 1)
	if r := e.do(http.MethodPost, "/tasks", "bob", forged); r.status != http.StatusBadRequest {
		t.Fatalf("bob creates a task for ann: %d %s", r.status, r.body)
	}
	if got := taskOf(t, e.do(http.MethodGet, "/tasks/brief", "ann", ""), http.StatusOK); got.Status != trigger.StatusActive {
		t.Fatalf("ann's task after bob's attempts: %+v", got)
	}
}

func TestInvalidTasksAreRefused(t *testing.T) {
	e, _ := taskEnv(t)
	for name, c := range map[string]struct {
		body   string
		status int
	}{
		"bad cron":        {strings.Replace(briefTask, "0 9 * * *", "every morning", 1), http.StatusBadRequest},
		"unknown exec":    {strings.Replace(briefTask, `"echo"`, `"rm"`, 1), http.StatusBadRequest},
		"no name":         {strings.Replace(briefTask, `"name":"Morning brief",`, ``, 1), http.StatusBadRequest},
		"unknown field":   {strings.Replace(briefTask, `"id":"brief"`, `"id":"brief","owner":"root"`, 1), http.StatusBadRequest},
		"bad status list": {"", http.StatusBadRequest},
	} {
		t.Run(name, func(t *testing.T) {
			var r reply
			if c.body == "" {
				r = e.do(http.MethodGet, "/tasks?status=RUNNING", "ann", "")
			} else {
				r = e.do(http.MethodPost, "/tasks", "ann", c.body)
			}
			if r.status != c.status {
				t.Fatalf("%d %s", r.status, r.body)
			}
			r.errorOf(t)
		})
	}
	taskOf(t, e.do(http.MethodPost, "/tasks", "ann", briefTask), http.StatusCreated)
	if r := e.do(http.MethodPost, "/tasks", "ann", briefTask); r.status < 400 {
		t.Fatalf("the same ID twice: %d %s", r.status, r.body)
	}
	if r := e.do(http.MethodGet, "/tasks/brief/runs?limit=0", "ann", ""); r.status != http.StatusBadRequest {
		t.Fatalf("limit 0: %d %s", r.status, r.body)
	}
}

func TestTasksWithoutAnEngineAreNotConfigured(t *testing.T) {
	e := newEnv(t, llmtest.NewScript(), agent.Config{}, agenthttp.Config{})
	r := e.do(http.MethodGet, "/tasks", "ann", "")
	if code, _ := r.errorOf(t); r.status != http.StatusNotFound || code != agenthttp.CodeNotConfigured {
		t.Fatalf("%d %s", r.status, r.body)
	}
}
