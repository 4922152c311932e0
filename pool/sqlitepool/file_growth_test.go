package sqlitepool_test

import (
	"fmt"
	"testing"

	"github.com/valetkit/valet/internal/sqlitetest"
	"github.com/valetkit/valet/pool/pooltest"
	"github.com/valetkit/valet/pool/sqlitepool"
)

// TestFileStaysBounded: an assistant parks and resolves approvals all
// day; the pages of taken entries are used again, so the file is as
// large after 2,000 approvals as after 200.
func TestFileStaysBounded(t *testing.T) {
	db := sqlitetest.Open(t, 1)
	s := open(t, db, sqlitepool.Config{})
	pages := func() int {
		t.Helper()
		var n int
		if err := db.QueryRow(`PRAGMA page_count`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	cycle := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			e := pooltest.NewEntry(fmt.Sprint("tenant-", i%7), fmt.Sprint("agt_", i))
			if err := s.Create(bg, e); err != nil {
				t.Fatal(err)
			}
			// Three waiting at a time, as when approvals pile up.
			if i >= 2 {
				old := fmt.Sprint("agt_", i-2)
				if _, err := s.Take(bg, fmt.Sprint("tenant-", (i-2)%7), old); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	cycle(0, 100)
	after100 := pages()
	cycle(100, 1000)
	after1000 := pages()
	t.Logf("pages after 100 approvals: %d, after 1,000: %d", after100, after1000)
	if after1000 > after100+2 {
		t.Errorf("the file grew from %d to %d pages while never holding more than 3 entries", after100, after1000)
	}
}
