package delegate_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/valetkit/valet/agent/delegate"
)

// A graph's tasks may each hold up to MaxTaskBytes of text, but not more
// than MaxGraphBytes together: a graph of many large tasks is refused,
// so what an engine stores and loads for one graph stays bounded.
func TestGraphTotalTextIsBounded(t *testing.T) {
	big := strings.Repeat("a", delegate.MaxTaskBytes)
	var specs []delegate.TaskSpec
	for i := range delegate.MaxGraphBytes/delegate.MaxTaskBytes + 1 {
		specs = append(specs, delegate.TaskSpec{ID: fmt.Sprintf("t%d", i), Task: big})
	}
	if _, err := delegate.NewGraph("t", "c", specs); !errors.Is(err, delegate.ErrInvalid) {
		t.Fatalf("a graph with %d tasks of %d bytes: err %v, want ErrInvalid", len(specs), len(big), err)
	}
	if _, err := delegate.NewGraph("t", "c", specs[:len(specs)-1]); err != nil {
		t.Fatalf("a graph of exactly MaxGraphBytes: %v", err)
	}
}
