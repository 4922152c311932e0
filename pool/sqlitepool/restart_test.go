package sqlitepool_test

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/clock"
	"github.com/valetkit/valet/clock/clocktest"
	"github.com/valetkit/valet/internal/sqlitetest"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/memory/sqlitememory"
	"github.com/valetkit/valet/pool"
	"github.com/valetkit/valet/pool/sqlitepool"
)

// EmailIn is the input of the email Agent-Tool of these tests.
type EmailIn struct {
	To      string `json:"to" jsonschema:"description=Recipient"`
	Subject string `json:"subject"`
}

// emailAgent needs approval; each run is a row in the file's sent table
// (with the process's id), so runs in every process are counted.
type emailAgent struct{ db *sql.DB }

func (a emailAgent) Run(ctx context.Context, in EmailIn) (agent.Reply, error) {
	if _, err := a.db.ExecContext(ctx, `INSERT INTO sent (pid, to_addr) VALUES (?, ?)`, os.Getpid(), in.To); err != nil {
		return agent.Reply{}, err
	}
	return agent.Reply{Text: "Email sent to " + in.To}, nil
}

func (emailAgent) Approval(in EmailIn) *approval.Request {
	return &approval.Request{ActionSummary: "Send an email to " + in.To, Details: map[string]any{"to": in.To}}
}

// NoteIn is the input of the note Agent-Tool: its day is required.
type NoteIn struct {
	Title string `json:"title"`
	Day   string `json:"day" jsonschema:"description=Day of the week"`
}

type noteAgent struct{ runs *atomic.Int32 }

func (a noteAgent) Run(ctx context.Context, in NoteIn) (agent.Reply, error) {
	a.runs.Add(1)
	return agent.Reply{Text: "Saved " + in.Title + " on " + in.Day}, nil
}

// model is the scripted model of every orchestrator here: the user's
// "please mail the team" calls send_email, "note the gym" calls save_note
// without its day, a field extraction answers Monday, anything else is
// answered "Done.".
func model(t *testing.T) *llmtest.Script {
	return llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		if err := llm.CheckPairing(req.Messages); err != nil {
			t.Errorf("request breaks pairing: %v", err)
		}
		switch {
		case req.ToolChoice == "provide_fields":
			return llmtest.Calls(llmtest.Call("provide_fields", `{"day":"Monday"}`))
		case len(req.Tools) == 0 || len(req.Messages) == 0:
			return llmtest.Text("Please confirm.")
		}
		last := req.Messages[len(req.Messages)-1]
		switch {
		case last.Role == llm.RoleUser && last.Content == "please mail the team":
			return llmtest.Calls(llmtest.Call("send_email", `{"to":"team@example.com","subject":"Plan"}`))
		case last.Role == llm.RoleUser && last.Content == "note the gym":
			return llmtest.Calls(llmtest.Call("save_note", `{"title":"Gym"}`))
		}
		return llmtest.Text("Done.")
	})
}

// process is what one run of the host program wires on the file: the
// pool and the memory on one *sql.DB, an orchestrator over them.
type process struct {
	db    *sql.DB
	store *sqlitepool.Store
	o     *agent.Orchestrator
	notes atomic.Int32
}

// start opens the file at path as a host would at start-up and migrates
// it; wrap, when set, wraps the pool the orchestrator uses; clk, when
// set, is the clock of the orchestrator and the pool.
func start(t *testing.T, path string, wrap func(*sqlitepool.Store) pool.Store, clk ...clock.Clock) *process {
	t.Helper()
	var c clock.Clock
	if len(clk) > 0 {
		c = clk[0]
	}
	p := &process{db: sqlitetest.OpenPath(t, path, 1)}
	p.store = open(t, p.db, sqlitepool.Config{Clock: c})
	mem, err := sqlitememory.New(p.db, sqlitememory.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := mem.Migrate(bg); err != nil {
		t.Fatal(err)
	}
	if _, err := p.db.Exec(`CREATE TABLE IF NOT EXISTS sent (pid INTEGER NOT NULL, to_addr TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	reg := agent.NewRegistry()
	if err := agent.Register(reg, "send_email", "Send an email for the user", emailAgent{p.db}); err != nil {
		t.Fatal(err)
	}
	if err := agent.Register(reg, "save_note", "Save a note", noteAgent{&p.notes}); err != nil {
		t.Fatal(err)
	}
	var store pool.Store = p.store
	if wrap != nil {
		store = wrap(p.store)
	}
	p.o, err = agent.NewOrchestrator(agent.Config{LLM: model(t), Agents: reg, Pool: store, Memory: mem,
		Clock: c, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// stop closes the process's database, as its end would.
func (p *process) stop(t *testing.T) {
	t.Helper()
	if err := p.o.Close(bg); err != nil {
		t.Errorf("closing the orchestrator: %v", err)
	}
	if err := p.db.Close(); err != nil {
		t.Fatalf("closing the database: %v", err)
	}
}

// sends returns the runs of the email agent recorded in the file, by
// process id.
func sends(t *testing.T, db *sql.DB) map[int]int {
	t.Helper()
	rows, err := db.Query(`SELECT pid, count(*) FROM sent GROUP BY pid`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[int]int{}
	for rows.Next() {
		var pid, n int
		if err := rows.Scan(&pid, &n); err != nil {
			t.Fatal(err)
		}
		out[pid] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func total(m map[int]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// TestApprovalSurvivesRestart: an approval parked by one orchestrator, and
// an Agent-Tool waiting for a field, are in the file after its database
// is closed; the orchestrator of the next start lists the approval,
// resolves it — the email is sent once, a second decision finds nothing
// — and completes the waiting agent with the user's next message.
func TestApprovalSurvivesRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "valet.db")
	first := start(t, path, nil)
	res, err := first.o.HandleMessage(bg, agent.Message{TenantID: "u1", ConversationID: "mail", Text: "please mail the team"})
	if err != nil || res.Status != agent.StatusWaitingForApproval || len(res.PendingApprovals) != 1 {
		t.Fatalf("the first message: %+v, %v; want one approval pending", res, err)
	}
	id := res.PendingApprovals[0].ID
	res, err = first.o.HandleMessage(bg, agent.Message{TenantID: "u1", ConversationID: "gym", Text: "note the gym"})
	if err != nil || res.Status != agent.StatusWaitingForInput {
		t.Fatalf("the note without its day: %+v, %v; want waiting for input", res, err)
	}
	if n := total(sends(t, first.db)); n != 0 {
		t.Fatalf("%d emails sent before the approval", n)
	}
	first.stop(t)

	next := start(t, path, nil)
	pending, err := next.o.ListPendingApprovals(bg, "u1")
	if err != nil || len(pending) != 1 || pending[0].ID != id || pending[0].ActionSummary != "Send an email to team@example.com" {
		t.Fatalf("after the restart, pending approvals = %+v, %v; want %s", pending, err, id)
	}
	if h, err := next.o.History(bg, "u1", "mail"); err != nil || len(h) == 0 || h[0].Content != "please mail the team" {
		t.Errorf("after the restart, the history = %+v, %v", h, err)
	}
	res, err = next.o.ResolveApproval(bg, "u1", id, approval.Decision{Action: approval.Approve})
	if err != nil || res.Status != agent.StatusCompleted {
		t.Fatalf("resolving after the restart: %+v, %v", res, err)
	}
	if _, err := next.o.ResolveApproval(bg, "u1", id, approval.Decision{Action: approval.Approve}); !errors.Is(err, approval.ErrNotFound) {
		t.Errorf("a second decision: %v, want approval.ErrNotFound", err)
	}
	if got := sends(t, next.db); got[os.Getpid()] != 1 || len(got) != 1 {
		t.Errorf("emails sent: %v; want one", got)
	}

	res, err = next.o.HandleMessage(bg, agent.Message{TenantID: "u1", ConversationID: "gym", Text: "on Monday"})
	if err != nil || res.Status != agent.StatusCompleted || next.notes.Load() != 1 {
		t.Fatalf("the day after the restart: %+v, %v, %d notes saved; want the note saved once", res, err, next.notes.Load())
	}
	if pending, err := next.store.List(bg, "u1"); err != nil || len(pending) != 0 {
		t.Errorf("left in the pool: %d entries, %v", len(pending), err)
	}
	if !strings.Contains(res.Response, "Done.") {
		t.Errorf("the answer: %q", res.Response)
	}
	next.stop(t)
}

// TestApprovalExpiredWhileDown: an approval whose wait ends while the
// process is down is not listed at the next start, and a decision on it
// is approval.ErrExpired: nothing is sent, and the entry leaves the file.
func TestApprovalExpiredWhileDown(t *testing.T) {
	path := filepath.Join(t.TempDir(), "valet.db")
	clk := clocktest.New(time.Now())
	first := start(t, path, nil, clk)
	res, err := first.o.HandleMessage(bg, agent.Message{TenantID: "u1", ConversationID: "mail", Text: "please mail the team"})
	if err != nil || len(res.PendingApprovals) != 1 {
		t.Fatalf("the first message: %+v, %v; want one approval pending", res, err)
	}
	id := res.PendingApprovals[0].ID
	first.stop(t)

	clk.Advance(agent.DefaultApprovalTimeout + time.Minute) // down past the wait
	next := start(t, path, nil, clk)
	if pending, err := next.o.ListPendingApprovals(bg, "u1"); err != nil || len(pending) != 0 {
		t.Errorf("after the wait ended, pending approvals = %+v, %v; want none", pending, err)
	}
	if _, err := next.o.ResolveApproval(bg, "u1", id, approval.Decision{Action: approval.Approve}); !errors.Is(err, approval.ErrExpired) {
		t.Errorf("approving after the wait ended: %v, want approval.ErrExpired", err)
	}
	if got := sends(t, next.db); len(got) != 0 {
		t.Errorf("emails sent: %v; want none", got)
	}
	if _, err := next.store.Get(bg, "u1", id); !errors.Is(err, pool.ErrNotFound) {
		t.Errorf("the expired entry after the decision: %v; want it gone", err)
	}
	next.stop(t)
}
