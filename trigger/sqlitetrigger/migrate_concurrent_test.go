package sqlitetrigger_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/valetkit/valet/internal/sqlitetest"
	"github.com/valetkit/valet/trigger/sqlitetrigger"
)

// Processes starting together on a new file each run Migrate (four
// handles on the file stand for them): every one succeeds, and the file
// ends up migrated once.
func TestMigrateConcurrently(t *testing.T) {
	path := filepath.Join(t.TempDir(), "valet.db")
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		s, err := sqlitetrigger.New(sqlitetest.OpenPath(t, path, 1), sqlitetrigger.Config{})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { errs <- s.Migrate(context.Background()) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	db := sqlitetest.OpenPath(t, path, 1)
	var versions, migrations int
	if err := db.QueryRow(`SELECT count(*) FROM valet_schema_versions WHERE component = 'trigger/valet_trigger'`).Scan(&versions); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`SELECT count(*) FROM river_migration`).Scan(&migrations); err != nil {
		t.Fatal(err)
	}
	if versions != 1 || migrations == 0 {
		t.Errorf("after four Migrates at once: %d version rows, %d River migrations", versions, migrations)
	}
}
