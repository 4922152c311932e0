package sqlitepool_test

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/valetkit/valet/internal/sqlitetest"
	"github.com/valetkit/valet/pool"
	"github.com/valetkit/valet/pool/pooltest"
	"github.com/valetkit/valet/pool/sqlitepool"
)

// BenchmarkParkAndTake parks an entry with every field set (an approval,
// as the orchestrator parks it) and takes it, on the in-memory store (the
// baseline, measured in the same run) and on an SQLite file, on one
// connection and on a pool of 4, and with synchronous(NORMAL).
func BenchmarkParkAndTake(b *testing.B) {
	stores := []struct {
		name string
		make func(b *testing.B) pool.Store
	}{
		{"Memory", func(b *testing.B) pool.Store {
			s, err := pool.NewMemory(pool.MemoryConfig{})
			if err != nil {
				b.Fatal(err)
			}
			return s
		}},
		{"SQLite/OneConnection", func(b *testing.B) pool.Store { return open(b, sqlitetest.Open(b, 1), sqlitepool.Config{}) }},
		{"SQLite/Pool4", func(b *testing.B) pool.Store { return open(b, sqlitetest.Open(b, 4), sqlitepool.Config{}) }},
		// WAL's synchronous(NORMAL): a commit no longer waits for the
		// disk; a power loss may undo the last commits, a crash of the
		// process does not.
		{"SQLite/OneConnection/SynchronousNormal", func(b *testing.B) pool.Store {
			db, err := sql.Open("sqlite", sqlitetest.DSN(filepath.Join(b.TempDir(), "valet.db"), "_pragma=synchronous(NORMAL)"))
			if err != nil {
				b.Fatal(err)
			}
			db.SetMaxOpenConns(1)
			b.Cleanup(func() { db.Close() })
			return open(b, db, sqlitepool.Config{})
		}},
	}
	for _, st := range stores {
		b.Run(st.name, func(b *testing.B) {
			s := st.make(b)
			e := pooltest.NewEntry("tenant", "")
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				e.ID = fmt.Sprint("agt_", i)
				i++
				if err := s.Create(bg, e); err != nil {
					b.Fatal(err)
				}
				if _, err := s.Take(bg, "tenant", e.ID); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
