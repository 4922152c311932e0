package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestFileTwoFirstRunsAtOnce: several first runs on one new database
// start together (two terminals, a service and a shell). One of them
// makes the key file; the others must use that key, not fail with "file
// exists" nor make a second key. Each connects an account; every run
// then reads every account with the one key.
func TestFileTwoFirstRunsAtOnce(t *testing.T) {
	t.Setenv(EnvCredentialsKey, "")
	for round := range 5 {
		path := filepath.Join(t.TempDir(), "new.db")
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Go(func() {
				var out bytes.Buffer
				errs[i] = run(context.Background(), &out, options{Offline: true, Interactive: true, In: strings.NewReader("hi\n"), DB: path})
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("round %d, run %d: %v", round, i, err)
			}
		}
		entries, _ := os.ReadDir(filepath.Dir(path))
		for _, e := range entries {
			if strings.Contains(e.Name(), ".key.") {
				t.Errorf("round %d: a temporary key file was left behind: %s", round, e.Name())
			}
		}
		// One key: the file opens with the key file as it is now.
		if err := run(context.Background(), &bytes.Buffer{}, options{Offline: true, Interactive: true, In: strings.NewReader("/connect google tok\n"), DB: path}); err != nil {
			t.Errorf("round %d: after the first runs: %v", round, err)
		}
	}
}
