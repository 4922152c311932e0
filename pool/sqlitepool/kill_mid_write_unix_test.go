//go:build unix

package sqlitepool_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/valetkit/valet/internal/sqlitetest"
	"github.com/valetkit/valet/pool"
	"github.com/valetkit/valet/pool/pooltest"
	"github.com/valetkit/valet/pool/sqlitepool"
)

// churnChild names, in the child's environment, the file the child of
// TestKilledMidWrite writes to.
const churnChild = "VALET_SQLITEPOOL_CHURN_CHILD"

// churnEntryState makes each entry span several pages, so that a kill
// lands inside a commit more often.
var churnEntryState = []byte(`{"draft":"` + strings.Repeat("lorem ipsum ", 2000) + `"}`)

// TestKilledMidWriteChild is the child of TestKilledMidWrite: it parks
// entry n, updates it, takes entry n-1, for n = 0, 1, 2, ... on a pool
// of connections, until it kills itself (SIGKILL) at a random moment.
func TestKilledMidWriteChild(t *testing.T) {
	path := os.Getenv(churnChild)
	if path == "" {
		t.Skip("the child process of TestKilledMidWrite")
	}
	s := open(t, sqlitetest.OpenPath(t, path, 4), sqlitepool.Config{})
	for n := 0; ; n++ {
		e := pooltest.NewEntry("t", fmt.Sprint(n))
		e.State = churnEntryState
		if err := s.Create(bg, e); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			time.AfterFunc(time.Duration(50+rand.IntN(400))*time.Millisecond, func() {
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			})
		}
		if err := s.Update(bg, e); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			if _, err := s.Take(bg, "t", fmt.Sprint(n-1)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestKilledMidWrite: a process parking, updating and taking entries is
// killed (SIGKILL) at a random moment, three times over. Each time the
// file passes SQLite's integrity check, every row decodes, and the pool
// holds what a sequence of whole calls leaves: entry n (at revision 1 or
// 2) and perhaps n-1 (at revision 2, its Take not committed), never a
// half-written entry or a lost one.
func TestKilledMidWrite(t *testing.T) {
	for round := range 3 {
		path := filepath.Join(t.TempDir(), "valet.db")
		child := exec.Command(os.Args[0], "-test.run", "^TestKilledMidWriteChild$", "-test.count", "1")
		child.Env = append(os.Environ(), churnChild+"="+path)
		child.Stdout, child.Stderr = os.Stderr, os.Stderr
		if err := child.Start(); err != nil {
			t.Fatal(err)
		}
		err := child.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("round %d: the child ended with %v, not killed", round, err)
		}

		db := sqlitetest.OpenPath(t, path, 1)
		var check string
		if err := db.QueryRow(`PRAGMA integrity_check`).Scan(&check); err != nil || check != "ok" {
			t.Fatalf("round %d: integrity check: %q, %v", round, check, err)
		}
		var logs bytes.Buffer
		s := open(t, db, sqlitepool.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		list, err := s.List(bg, "t")
		if err != nil {
			t.Fatal(err)
		}
		if logs.Len() > 0 {
			t.Errorf("round %d: corrupt rows after the kill:\n%s", round, logs.String())
		}
		var got []string
		for _, e := range list {
			got = append(got, fmt.Sprintf("%s@%d", e.ID, e.Revision))
		}
		t.Logf("round %d: left %v", round, got)
		if err := wholeCalls(list); err != nil {
			t.Errorf("round %d: the pool after the kill: %v; %v", round, got, err)
		}
		for _, e := range list {
			if !bytes.Equal(e.State, churnEntryState) {
				t.Errorf("round %d: entry %s came back with a state of %d bytes, want %d", round, e.ID, len(e.State), len(churnEntryState))
			}
		}
		db.Close()
	}
}

// wholeCalls reports why list is not what a sequence of whole calls of
// the child leaves.
func wholeCalls(list []*pool.Entry) error {
	if len(list) == 0 || len(list) > 2 {
		return fmt.Errorf("%d entries, want 1 or 2", len(list))
	}
	n, err := strconv.Atoi(list[len(list)-1].ID)
	last := list[len(list)-1]
	if len(list) == 2 {
		// List is oldest first; NewEntry's CreatedAt is the time of the call.
		prev, perr := strconv.Atoi(list[0].ID)
		if perr != nil || prev != n-1 || list[0].Revision != 2 {
			return fmt.Errorf("the older entry is %s@%d, want %d@2", list[0].ID, list[0].Revision, n-1)
		}
	} else if err == nil && n > 0 && last.Revision != 2 {
		return fmt.Errorf("entry %d alone at revision %d: its predecessor was taken after it was updated", n, last.Revision)
	}
	if err != nil || last.Revision < 1 || last.Revision > 2 {
		return fmt.Errorf("the newest entry is %s@%d", last.ID, last.Revision)
	}
	return nil
}
