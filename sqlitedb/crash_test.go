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
)

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
	o, err := agent.NewOrchestrator(agent.Config{
		LLM:    llmtest.NewScript(llmtest.Text("hi"), llmtest.Calls(call), llmtest.Text("done")),
		Tools:  []tool.Tool{slow},
		Memory: mem,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return err
	}
	for _, text := range []string{"hello", "work"} {
		if _, err := o.HandleMessage(ctx, agent.Message{TenantID: "ana", ConversationID: "c1", Text: text}); err != nil {
			return err
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
			path := filepath.Join(t.TempDir(), "valet.db")
			key := make([]byte, credentials.KeySize)
			for i := range key {
				key[i] = byte(i * 7)
			}
			hexKey := fmt.Sprintf("%x", key)
			child := exec.Command(os.Args[0], "-test.run", "^$")
			child.Env = append(os.Environ(), envCrashStage+"="+tt.stage, envCrashFile+"="+path, envCrashKey+"="+hexKey)
			out, err := child.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("the child: %v\n%s", err, out)
			}
			if ws, ok := exit.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
				t.Fatalf("the child ended with %v, not SIGKILL:\n%s", err, out)
			}

			// The parent reopens the file, as a restarted process would.
			ring, err := ringFromHex(hexKey)
			if err != nil {
				t.Fatal(err)
			}
			db := openDB(t, sqlitedb.DSN(path))
			var check string
			if err := db.QueryRow(`PRAGMA integrity_check`).Scan(&check); err != nil || check != "ok" {
				t.Fatalf("integrity_check: %q, %v", check, err)
			}
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
