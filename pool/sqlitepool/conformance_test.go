package sqlitepool_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/valetkit/valet/internal/sqlitetest"
	"github.com/valetkit/valet/pool"
	"github.com/valetkit/valet/pool/pooltest"
	"github.com/valetkit/valet/pool/sqlitepool"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var bg = context.Background()

// open returns a migrated store on db.
func open(t testing.TB, db *sql.DB, cfg sqlitepool.Config) *sqlitepool.Store {
	t.Helper()
	s, err := sqlitepool.New(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(bg); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return s
}

// pools are the connection pools the suite runs on: River's advice (one
// connection) and a pool, where the store's transactions are what keep
// concurrent writers apart.
var pools = []struct {
	name  string
	conns int
}{{"OneConnection", 1}, {"Pool", 8}}

func TestStore(t *testing.T) {
	for _, p := range pools {
		t.Run(p.name, func(t *testing.T) {
			pooltest.Run(t, func(t *testing.T, maxPerTenant int, retention time.Duration) pool.Store {
				return open(t, sqlitetest.Open(t, p.conns), sqlitepool.Config{MaxPerTenant: maxPerTenant, Retention: retention})
			})
		})
	}
}

// TestLocker: the lock this package documents for a conversation is the
// process's own, pool.NewMemoryLocker (the orchestrator's default).
func TestLocker(t *testing.T) {
	pooltest.RunLocker(t, func(t *testing.T) pool.Locker { return pool.NewMemoryLocker() })
}
