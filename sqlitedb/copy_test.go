package sqlitedb_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/valetkit/valet/credentials"
	"github.com/valetkit/valet/credentials/pgstore"
	"github.com/valetkit/valet/internal/pgtest"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/memory"
	"github.com/valetkit/valet/memory/pgmemory"
	"github.com/valetkit/valet/sqlitedb"
)

// seedSource writes two tenants' credentials, histories (one with a tool
// call, one compacted behind a summary) and items, two of which supersede
// earlier ones (the copy must know the new ID of the item each names)
// into a new file.
func seedSource(t *testing.T) *sqlitedb.Stores {
	t.Helper()
	s, err := sqlitedb.Open(bg, openDB(t, sqlitedb.DSN(filepath.Join(t.TempDir(), "valet.db"))), sqlitedb.Config{KeyRing: newRing(t)})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ tenant, service, account, token string }{
		{"ana", "google", "", "ana-g"}, {"ana", "github", "work", "ana-gh"}, {"bo", "google", "", "bo-g"},
	} {
		if err := s.Credentials.Save(bg, c.tenant, c.service, c.account, map[string]string{"token": c.token, "note": "ünï \x00 \"q\""}); err != nil {
			t.Fatal(err)
		}
	}
	call := llm.ToolCall{ID: "call_1", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Rome"}`)}
	if err := s.Memory.Append(bg, "ana", "c1", llm.UserMessage("weather in Rome?"), llm.AssistantMessage("", call),
		llm.ToolResultMessage(call, "sunny", false), llm.AssistantMessage("Sunny.")); err != nil {
		t.Fatal(err)
	}
	if err := s.Memory.Append(bg, "ana", "c1", llm.UserMessage("thanks"), llm.AssistantMessage("You're welcome.")); err != nil {
		t.Fatal(err)
	}
	if err := s.Memory.Append(bg, "bo", "c9", llm.UserMessage("old"), llm.AssistantMessage("old answer")); err != nil {
		t.Fatal(err)
	}
	summary := llm.Message{Role: llm.RoleSystem, Name: memory.SummaryName, Content: "Bo asked something old."}
	if err := s.Memory.Append(bg, "bo", "c9", summary, llm.UserMessage("new"), llm.AssistantMessage("new answer")); err != nil {
		t.Fatal(err)
	}
	old, err := s.Memory.Remember(bg, "ana", memory.Item{Text: "Ana's dentist is Dr. Kim.", Kind: "fact", Origin: memory.OriginUser,
		Source: memory.Provenance{ConversationID: "c1"}, CreatedAt: time.UnixMicro(1_700_000_000_000_000)})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := s.Memory.Remember(bg, "ana",
		memory.Item{Text: "Ana's dentist is Dr. Lee.", Kind: "fact", Supersedes: old[0], Source: memory.Provenance{ConversationID: "c1"}},
		memory.Item{Text: "Ana's cat is Miso.", Kind: "fact", Source: memory.Provenance{TaskID: "task-1", SkillID: "pets"}},
	)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Memory.Remember(bg, "ana", memory.Item{Text: "Ana's cat is Tofu.", Kind: "fact", Supersedes: ids[1]}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Memory.Remember(bg, "bo", memory.Item{Text: "Bo flies to Oslo.", Origin: memory.OriginAssistant}); err != nil {
		t.Fatal(err)
	}
	return s
}

// checkMoved reads everything back from the target through its public
// methods and compares it with the source.
func checkMoved(t *testing.T, src *sqlitedb.Stores, dst sqlitedb.Target) {
	t.Helper()
	for _, tenant := range []string{"ana", "bo"} {
		infos, err := src.Credentials.List(bg, tenant, "")
		if err != nil {
			t.Fatal(err)
		}
		got, err := dst.Credentials.List(bg, tenant, "")
		if err != nil || len(got) != len(infos) {
			t.Fatalf("%s: target lists %d credentials, %v; want %d", tenant, len(got), err, len(infos))
		}
		for _, info := range infos {
			a, _ := src.Credentials.Get(bg, tenant, info.Service, info.Account)
			b, err := dst.Credentials.Get(bg, tenant, info.Service, info.Account)
			var va, vb map[string]string
			if err == nil {
				_ = a.Decode(&va)
				err = b.Decode(&vb)
			}
			if err != nil || !reflect.DeepEqual(va, vb) {
				t.Errorf("%s/%s/%s: %v, %v vs %v", tenant, info.Service, info.Account, err, vb, va)
			}
		}
	}
	for _, c := range [][2]string{{"ana", "c1"}, {"bo", "c9"}} {
		want, _ := src.Memory.History(bg, c[0], c[1], 0)
		got, err := dst.Memory.History(bg, c[0], c[1], 0)
		wj, _ := json.Marshal(want)
		gj, _ := json.Marshal(got)
		if err != nil || string(wj) != string(gj) {
			t.Errorf("history %v:\n got %s, %v\nwant %s", c, gj, err, wj)
		}
	}
	for _, q := range []struct{ tenant, query, want string }{
		{"ana", "dentist", "Ana's dentist is Dr. Lee."}, // Dr. Kim is superseded across batches
		{"ana", "cat", "Ana's cat is Tofu."},            // Miso is superseded
		{"bo", "Oslo", "Bo flies to Oslo."},
	} {
		items, err := dst.Memory.Recall(bg, q.tenant, q.query, memory.Budget{})
		if err != nil || len(items) != 1 || items[0].Text != q.want {
			t.Errorf("Recall(%s, %q) on the target = %+v, %v; want only %q", q.tenant, q.query, items, err, q.want)
		}
	}
	miso, _ := dst.Memory.Recall(bg, "ana", "Tofu", memory.Budget{})
	if len(miso) != 1 || miso[0].Source != (memory.Provenance{}) {
		t.Errorf("Tofu on the target: %+v", miso)
	}
	lee, _ := dst.Memory.Recall(bg, "ana", "Lee", memory.Budget{})
	if len(lee) != 1 || lee[0].Kind != "fact" || lee[0].Source.ConversationID != "c1" {
		t.Errorf("Lee on the target: %+v", lee)
	}
	oslo, _ := dst.Memory.Recall(bg, "bo", "Oslo", memory.Budget{})
	if len(oslo) != 1 || oslo[0].Origin != memory.OriginAssistant {
		t.Errorf("the origin was not copied: %+v", oslo)
	}
}

// TestCopyToMemory: everything the file holds reaches in-memory stores,
// read back the same through their public methods.
func TestCopyToMemory(t *testing.T) {
	src := seedSource(t)
	mem, err := memory.NewInMemory(memory.Config{})
	if err != nil {
		t.Fatal(err)
	}
	dst := sqlitedb.Target{Credentials: credentials.NewMemory(), Memory: mem}
	n, err := src.CopyTo(bg, dst)
	if err != nil {
		t.Fatal(err)
	}
	if want := (sqlitedb.Copied{Credentials: 3, Conversations: 2, Messages: 6 + 3, Items: 5}); n != want {
		t.Errorf("Copied = %+v, want %+v", n, want)
	}
	checkMoved(t, src, dst)
}

// TestCopyToPostgres is the move the README describes: from the file to
// pgstore and pgmemory, in a schema of the test's own. It needs
// VALET_TEST_POSTGRES.
func TestCopyToPostgres(t *testing.T) {
	if os.Getenv(pgtest.EnvVar) == "" {
		t.Skipf("%s not set; set it to a PostgreSQL URL to run the move to PostgreSQL", pgtest.EnvVar)
	}
	src := seedSource(t)
	db := pgtest.DB(t)
	schema := pgtest.Schema(t, db)
	creds, err := pgstore.New(db, pgstore.Config{KeyRing: newRing(t), Schema: schema}) // another key: the move re-encrypts
	if err != nil {
		t.Fatal(err)
	}
	mem, err := pgmemory.New(db, pgmemory.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []interface{ Migrate(context.Context) error }{creds, mem} {
		if err := m.Migrate(bg); err != nil {
			t.Fatal(err)
		}
	}
	dst := sqlitedb.Target{Credentials: creds, Memory: mem}
	if _, err := src.CopyTo(bg, dst); err != nil {
		t.Fatal(err)
	}
	checkMoved(t, src, dst)
}

// failingStore fails its second Save.
type failingStore struct {
	credentials.Store
	saves int
}

func (f *failingStore) Save(ctx context.Context, tenant, service, account string, v any) error {
	if f.saves++; f.saves == 2 {
		return errors.New("target down")
	}
	return f.Store.Save(ctx, tenant, service, account, v)
}

// TestCopyToStopsAtAnError: a target that fails stops the copy, saying
// what was being copied and counting what was.
func TestCopyToStopsAtAnError(t *testing.T) {
	src := seedSource(t)
	n, err := src.CopyTo(bg, sqlitedb.Target{Credentials: &failingStore{Store: credentials.NewMemory()}})
	if err == nil || err.Error() != "sqlitedb: copying credentials: target down" || n.Credentials != 1 {
		t.Errorf("CopyTo into a failing target = %+v, %v", n, err)
	}
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if _, err := src.CopyTo(ctx, sqlitedb.Target{Credentials: credentials.NewMemory()}); !errors.Is(err, context.Canceled) {
		t.Errorf("CopyTo with a cancelled ctx: %v", err)
	}
}
