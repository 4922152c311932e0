package sqlitetrigger_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/valetkit/valet/internal/sqlitetest"
	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/sqlitetrigger"
	"github.com/valetkit/valet/trigger/triggertest"
)

// newStore returns a migrated Store on a new file with one connection
// (River's advice), and the file's handle.
func newStore(t testing.TB, cfg sqlitetrigger.Config) (*sqlitetrigger.Store, *sql.DB) {
	t.Helper()
	db := sqlitetest.Open(t, 1)
	s, err := sqlitetrigger.New(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s, db
}

func TestStoreConformance(t *testing.T) {
	triggertest.RunStore(t, func(t *testing.T) trigger.Store {
		s, _ := newStore(t, sqlitetrigger.Config{MaxRuns: 5})
		return s
	})
}

// The suite on a pool of several connections: the Store's transactions
// take the write lock first, so concurrent writers (UpdateRace) wait
// their turn instead of failing.
func TestStoreConformanceOnAPool(t *testing.T) {
	triggertest.RunStore(t, func(t *testing.T) trigger.Store {
		db := sqlitetest.Open(t, 4)
		s, err := sqlitetrigger.New(db, sqlitetrigger.Config{MaxRuns: 5})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		return s
	})
}
