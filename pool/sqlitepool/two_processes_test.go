package sqlitepool_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/valetkit/valet/internal/sqlitetest"
	"github.com/valetkit/valet/pool"
	"github.com/valetkit/valet/pool/sqlitepool"
)

// TestTwoProcessesTakeOnce: two *sql.DB on one file, as two processes
// would open it, each with a pool of connections, race to take each
// entry, by Take and by TakeRevision: exactly one caller gets it, the
// others ErrNotFound, and nothing is left.
func TestTwoProcessesTakeOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "valet.db")
	a := open(t, sqlitetest.OpenPath(t, path, 4), sqlitepool.Config{})
	b := open(t, sqlitetest.OpenPath(t, path, 4), sqlitepool.Config{})
	const entries, racers = 10, 8
	for i := range entries {
		id := fmt.Sprint("e", i)
		if err := a.Create(bg, entry("t", id)); err != nil {
			t.Fatal(err)
		}
		var wins, misses atomic.Int32
		gate := make(chan struct{})
		var wg sync.WaitGroup
		for r := range racers {
			s := []*sqlitepool.Store{a, b}[r%2]
			wg.Go(func() {
				<-gate
				var err error
				if r%4 < 2 {
					_, err = s.Take(bg, "t", id)
				} else {
					_, err = s.TakeRevision(bg, "t", id, 1)
				}
				switch {
				case err == nil:
					wins.Add(1)
				case errors.Is(err, pool.ErrNotFound):
					misses.Add(1)
				default:
					t.Errorf("racing take of %s: %v", id, err)
				}
			})
		}
		close(gate)
		wg.Wait()
		if wins.Load() != 1 || misses.Load() != racers-1 {
			t.Errorf("%s: %d takers won, %d found nothing; want 1 and %d", id, wins.Load(), misses.Load(), racers-1)
		}
	}
	if left, err := b.List(bg, "t"); err != nil || len(left) != 0 {
		t.Errorf("left: %d entries, %v", len(left), err)
	}
}
