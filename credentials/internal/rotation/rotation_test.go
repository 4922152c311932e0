package rotation_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/valetkit/valet/credentials/internal/rotation"
)

// TestWalk: batches follow one another from the last key read until one
// is not full; rows that failed are counted, the first MaxListed listed.
func TestWalk(t *testing.T) {
	var afters []int
	total, failed, err := rotation.Walk(func(after int) (int, int, bool, []error, error) {
		afters = append(afters, after)
		var bad []error
		for i := range 3 {
			bad = append(bad, fmt.Errorf("row %d", after+i))
		}
		return 2, after + 10, after < 20, bad, nil
	})
	if err != nil || total != 6 || failed.N != 9 || len(failed.Listed) != rotation.MaxListed {
		t.Fatalf("Walk = %d, %+v, %v; want 6 rows, 9 failed, %d listed", total, failed, err, rotation.MaxListed)
	}
	if fmt.Sprint(afters) != "[0 10 20]" {
		t.Errorf("batches started after %v, want [0 10 20]", afters)
	}
	msg := failed.Err("xstore: rotate", total).Error()
	for _, want := range []string{"xstore: rotate: re-encrypted 6 rows; 9 rows could not be decrypted", "(the first 5 listed)", "row 0", "row 11"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Err = %q, want it to hold %q", msg, want)
		}
	}
	if strings.Contains(msg, "row 12") {
		t.Errorf("Err = %q lists more than %d rows", msg, rotation.MaxListed)
	}
}

// TestWalkStopsAtAnError: a failing batch ends the walk with its error
// and what was re-encrypted before it; no failed rows, no Err.
func TestWalkStopsAtAnError(t *testing.T) {
	boom := errors.New("boom")
	calls := 0
	total, failed, err := rotation.Walk(func(after string) (int, string, bool, []error, error) {
		calls++
		if calls == 2 {
			return 1, "", true, nil, boom
		}
		return 4, "k", true, nil, nil
	})
	if !errors.Is(err, boom) || total != 5 || calls != 2 {
		t.Fatalf("Walk = %d, %v after %d batches; want 5, boom, 2", total, err, calls)
	}
	if failed.Err("x", total) != nil {
		t.Errorf("Err with no failed rows = %v, want nil", failed.Err("x", total))
	}
}
