package sqlitememory_test

import (
	"context"
	"database/sql"
	"testing"

	"go.uber.org/goleak"

	"github.com/valetkit/valet/internal/sqlitetest"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/memory"
	"github.com/valetkit/valet/memory/memorytest"
	"github.com/valetkit/valet/memory/sqlitememory"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var bg = context.Background()

// open returns a migrated provider on db.
func open(t testing.TB, db *sql.DB, cfg sqlitememory.Config) *sqlitememory.Provider {
	t.Helper()
	p, err := sqlitememory.New(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Migrate(bg); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return p
}

// pools are the connection pools the suites run on: River's advice (one
// connection) and a pool, where the provider's write transactions are
// what keeps concurrent writers apart.
var pools = []struct {
	name  string
	conns int
}{{"OneConnection", 1}, {"Pool", 8}}

func TestProvider(t *testing.T) {
	for _, p := range pools {
		t.Run(p.name, func(t *testing.T) {
			memorytest.Run(t, func(t *testing.T) memory.Provider {
				return open(t, sqlitetest.Open(t, p.conns), sqlitememory.Config{})
			})
		})
	}
}

func TestHybrid(t *testing.T) {
	for _, p := range pools {
		t.Run(p.name, func(t *testing.T) {
			memorytest.RunHybrid(t, func(t *testing.T, e llm.Embedder) memory.Provider {
				return open(t, sqlitetest.Open(t, p.conns), sqlitememory.Config{Embedder: e})
			})
		})
	}
}
