package sqlitedb_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"go.uber.org/goleak"
	"modernc.org/sqlite"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/credentials"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/memory"
	"github.com/valetkit/valet/memory/sqlitememory"
	"github.com/valetkit/valet/sqlitedb"
	"github.com/valetkit/valet/tool"
)

// The child process of TestKilledMidTurn runs an orchestrator on the file
// these variables name and SIGKILLs itself at the stage they name.
const (
	envCrashStage = "VALET_SQLITEDB_CRASH_STAGE"
	envCrashFile  = "VALET_SQLITEDB_CRASH_FILE"
	envCrashKey   = "VALET_SQLITEDB_CRASH_KEY" // the key in hex: the child must read the parent's credentials
)

// Where the child dies.
const (
	stageTool        = "tool"         // inside the tool call of the second turn
	stageInAppend    = "in-append"    // after the model's answer, inside Append's transaction, after the turn's first rows are written
	stageAfterAppend = "after-append" // once Append has committed, before HandleMessage returns
	stageApproval    = "approval"     // once the second message left a transfer waiting for approval
)

// TransferIn is what the transfer Agent-Tool takes.
type TransferIn struct {
	To     string `json:"to"`
	Amount int    `json:"amount" jsonschema:"minimum=1"`
}

// transfer moves money once approved, counting its runs.
type transfer struct{ runs *int }

func (t transfer) Run(ctx context.Context, in TransferIn) (agent.Reply, error) {
	*t.runs++
	return agent.Reply{Text: fmt.Sprintf("Sent €%d to %s.", in.Amount, in.To)}, nil
}

func (transfer) Approval(in TransferIn) *approval.Request {
	return &approval.Request{ActionSummary: fmt.Sprintf("Send €%d to %s", in.Amount, in.To)}
}

func transferRegistry(runs *int) (*agent.Registry, error) {
	reg := agent.NewRegistry()
	return reg, agent.Register(reg, "transfer", "Send money to someone", transfer{runs})
}

// TestMain runs the tests, checking that no goroutine outlives them, or,
// in a child of TestKilledMidTurn, the orchestrator that kills itself.
func TestMain(m *testing.M) {
	if stage := os.Getenv(envCrashStage); stage != "" {
		err := crashChild(stage, os.Getenv(envCrashFile), os.Getenv(envCrashKey))
		fmt.Fprintln(os.Stderr, "the child did not die:", err)
		os.Exit(3)
	}
	goleak.VerifyTestMain(m)
}

func die() {
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal is on its way
}

// dyingMemory kills the process right after Append committed the turn
// that ends with the answer "done".
type dyingMemory struct{ *sqlitememory.Provider }

func (d dyingMemory) Append(ctx context.Context, tenant, conv string, msgs ...llm.Message) error {
	if err := d.Provider.Append(ctx, tenant, conv, msgs...); err != nil {
		return err
	}
	if len(msgs) > 0 && msgs[len(msgs)-1].Content == "done" {
		die()
	}
	return nil
}

// crashChild answers "hello" (a whole turn, saved), then "work": the
// model calls the tool "slow", then answers "done"; the process dies at
// stage. It returns only if it did not die.
func crashChild(stage, path, hexKey string) error {
	ctx := context.Background()
	if stage == stageInAppend {
		// A function SQL can call that ends the process: a trigger calls
		// it in the middle of Append's transaction.
		if err := sqlite.RegisterScalarFunction("valet_test_die", 0, func(*sqlite.FunctionContext, []driver.Value) (driver.Value, error) {
			die()
			return nil, nil
		}); err != nil {
			return err
		}
	}
	db, err := sql.Open("sqlite", sqlitedb.DSN(path))
	if err != nil {
		return err
	}
	db.SetMaxOpenConns(1) // one connection: the temporary trigger below is on it
	ring, err := ringFromHex(hexKey)
	if err != nil {
		return err
	}
	s, err := sqlitedb.Open(ctx, db, sqlitedb.Config{KeyRing: ring})
	if err != nil {
		return err
	}
	if err := s.Credentials.Save(ctx, "ana", "google", "", map[string]string{"token": "t0k"}); err != nil {
		return err
	}
	var mem memory.Provider = s.Memory
	switch stage {
	case stageInAppend:
		// Temporary: on this connection only, gone with the process.
		if _, err := db.ExecContext(ctx, `CREATE TEMP TRIGGER die_mid_append AFTER INSERT ON main.memory_history
WHEN new.role = 'assistant' AND new.message LIKE '%"done"%' BEGIN SELECT valet_test_die(); END`); err != nil {
			return err
		}
	case stageAfterAppend:
		mem = dyingMemory{s.Memory}
	}
	slow := tool.New("slow", "does slow work", func(ctx context.Context, _ struct{}) (string, error) {
		if stage == stageTool {
			die()
		}
		return "worked", nil
	})
	call := llmtest.Call("slow", nil)
	call.ID = "call_slow_1"
	script := llmtest.NewScript(llmtest.Text("hi"), llmtest.Calls(call), llmtest.Text("done"))
	second := "work"
	var runs int
	reg, err := transferRegistry(&runs)
	if err != nil {
		return err
	}
	if stage == stageApproval {
		pay := llmtest.Call("transfer", `{"to":"Ana","amount":40}`)
		pay.ID = "call_pay_1"
		script = llmtest.NewScript(llmtest.Text("hi"), llmtest.Calls(pay), llmtest.Text("Please confirm: send €40 to Ana?"))
		second = "pay Ana 40 euros"
	}
	o, err := agent.NewOrchestrator(agent.Config{
		LLM:    script,
		Tools:  []tool.Tool{slow},
		Agents: reg,
		Memory: mem,
		Pool:   s.Pool,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return err
	}
	for _, text := range []string{"hello", second} {
		res, err := o.HandleMessage(ctx, agent.Message{TenantID: "ana", ConversationID: "c1", Text: text})
		if err != nil {
			return err
		}
		if stage == stageApproval && res.Status == agent.StatusWaitingForApproval {
			die()
		}
	}
	return errors.New("both messages were answered")
}

func ringFromHex(h string) (*credentials.KeyRing, error) {
	var key []byte
	if _, err := fmt.Sscanf(h, "%x", &key); err != nil {
		return nil, err
	}
	return credentials.NewKeyRing("k1", map[string][]byte{"k1": key})
}

// killChild runs the child of stage on a new file until it kills itself,
// then reopens the file, as a restarted process would, checking it whole.
func killChild(t *testing.T, stage string) (*sql.DB, *credentials.KeyRing) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "valet.db")
	key := make([]byte, credentials.KeySize)
	for i := range key {
		key[i] = byte(i * 7)
	}
	hexKey := fmt.Sprintf("%x", key)
	child := exec.Command(os.Args[0], "-test.run", "^$")
	child.Env = append(os.Environ(), envCrashStage+"="+stage, envCrashFile+"="+path, envCrashKey+"="+hexKey)
	out, err := child.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("the child: %v\n%s", err, out)
	}
	if ws, ok := exit.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the child ended with %v, not SIGKILL:\n%s", err, out)
	}
	ring, err := ringFromHex(hexKey)
	if err != nil {
		t.Fatal(err)
	}
	db := openDB(t, sqlitedb.DSN(path))
	var check string
	if err := db.QueryRow(`PRAGMA integrity_check`).Scan(&check); err != nil || check != "ok" {
		t.Fatalf("integrity_check: %q, %v", check, err)
	}
	return db, ring
}

// TestKilledMidTurn: a process SIGKILLed mid-turn — inside a tool call,
// inside Append's transaction after the model's answer, and right after
// Append committed — leaves a file whose history is whole turns only,
// tool calls paired with their results, nothing half-written read back;
// the credential saved before is there, and the next message, in a new
// process's orchestrator on the file, works.
func TestKilledMidTurn(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	for _, tt := range []struct {
		stage string
		want  []string // the contents of the history after the kill, in order
	}{
		{stageTool, []string{"hello", "hi"}},
		{stageInAppend, []string{"hello", "hi"}},
		{stageAfterAppend, []string{"hello", "hi", "work", "", "worked", "done"}},
	} {
		t.Run(tt.stage, func(t *testing.T) {
			db, ring := killChild(t, tt.stage)
			s, err := sqlitedb.Open(bg, db, sqlitedb.Config{KeyRing: ring})
			if err != nil {
				t.Fatal(err)
			}
			history, err := s.Memory.History(bg, "ana", "c1", 0)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range history {
				got = append(got, m.Content)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("history after the kill: %q, want %q", got, tt.want)
			}
			if err := llm.CheckPairing(history); err != nil {
				t.Errorf("history after the kill: %v", err)
			}
			// Every row, not only History's window.
			var rows int
			if err := db.QueryRow(`SELECT count(*) FROM memory_history`).Scan(&rows); err != nil || rows != len(tt.want) {
				t.Errorf("%d rows in memory_history, want %d (%v)", rows, len(tt.want), err)
			}
			if _, err := s.Credentials.Get(bg, "ana", "google", ""); err != nil {
				t.Errorf("the credential saved before the kill: %v", err)
			}

			// The next message works, on the history left.
			model := llmtest.NewScript(llmtest.Text("welcome back"))
			o, err := agent.NewOrchestrator(agent.Config{LLM: model, Memory: s.Memory, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			res, err := o.HandleMessage(bg, agent.Message{TenantID: "ana", ConversationID: "c1", Text: "still there?"})
			if err != nil || res.Response != "welcome back" {
				t.Fatalf("the next message: %v, %+v", err, res)
			}
			if reqs := model.Requests(); len(reqs) != 1 || llm.CheckPairing(reqs[0].Messages) != nil {
				t.Errorf("the model was sent an unpaired history: %+v", reqs)
			}
			after, err := s.Memory.History(bg, "ana", "c1", 0)
			if err != nil || len(after) != len(tt.want)+2 || after[len(after)-1].Content != "welcome back" {
				t.Errorf("history after the next message: %d messages, %v", len(after), err)
			}
		})
	}
}

// TestKilledWithAnApprovalPending: a process that left a transfer waiting
// for the user's approval and was SIGKILLed; a new process on the file
// lists the approval, approves it, and the transfer runs once — a second
// decision finds nothing — with the history whole and paired.
func TestKilledWithAnApprovalPending(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	db, ring := killChild(t, stageApproval)
	s, err := sqlitedb.Open(bg, db, sqlitedb.Config{KeyRing: ring})
	if err != nil {
		t.Fatal(err)
	}
	var runs int
	reg, err := transferRegistry(&runs)
	if err != nil {
		t.Fatal(err)
	}
	o, err := agent.NewOrchestrator(agent.Config{
		LLM:    llmtest.NewScript(llmtest.Text("Done: €40 is on its way to Ana.")),
		Agents: reg, Memory: s.Memory, Pool: s.Pool,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	pending, err := o.ListPendingApprovals(bg, "ana")
	if err != nil || len(pending) != 1 || pending[0].ActionSummary != "Send €40 to Ana" {
		t.Fatalf("pending approvals after the kill: %+v, %v", pending, err)
	}
	res, err := o.ResolveApproval(bg, "ana", pending[0].ID, approval.Decision{Action: approval.Approve, Fingerprint: pending[0].Fingerprint})
	if err != nil || res.Status != agent.StatusCompleted || runs != 1 {
		t.Fatalf("approving after the kill: %+v, %v; the transfer ran %d times", res, err, runs)
	}
	if _, err := o.ResolveApproval(bg, "ana", pending[0].ID, approval.Decision{Action: approval.Approve}); !errors.Is(err, approval.ErrNotFound) || runs != 1 {
		t.Errorf("a second approval: %v; the transfer ran %d times", err, runs)
	}
	h, err := s.Memory.History(bg, "ana", "c1", 0)
	if err != nil || len(h) < 4 || h[0].Content != "hello" || h[len(h)-1].Content != "Done: €40 is on its way to Ana." {
		t.Fatalf("history: %d messages, %v", len(h), err)
	}
	if err := llm.CheckPairing(h); err != nil {
		t.Errorf("history: %v", err)
	}
}
