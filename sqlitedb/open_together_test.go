package sqlitedb_test

import (
	"database/sql"
	"path/filepath"
	"sync"
	"testing"

	"github.com/valetkit/valet/sqlitedb"
)

// TestOpenANewFileFromSeveralAtOnce: Open is documented safe "from several
// processes at once". On a new file, every connection's first open sets
// the WAL journal (DSNParams), and SQLite refuses that change with
// SQLITE_BUSY at once, without its busy timeout, while another connection
// is making the same change: several assistants starting together on a
// new file must all open it. Each *sql.DB here is what a process has.
func TestOpenANewFileFromSeveralAtOnce(t *testing.T) {
	ring := newRing(t)
	for round := range 10 {
		path := filepath.Join(t.TempDir(), "new.db")
		errs := make([]error, 4)
		var wg sync.WaitGroup
		for i := range errs {
			wg.Go(func() {
				db, err := sql.Open("sqlite", sqlitedb.DSN(path))
				if err != nil {
					errs[i] = err
					return
				}
				defer db.Close()
				db.SetMaxOpenConns(1)
				_, errs[i] = sqlitedb.Open(bg, db, sqlitedb.Config{KeyRing: ring})
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("round %d, opener %d: %v", round, i, err)
			}
		}
	}
}
