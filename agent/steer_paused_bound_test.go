package agent_test

import (
	"context"
	"testing"

	"github.com/valetkit/valet/agent"
)

// Paused flags for ever more conversations (runs paused whose next
// message never comes) do not grow the process without bound: a
// MemoryControl keeps at most MaxQueues of them; a pause beyond that is
// not remembered (its turns are saved; its next message gets no note),
// while the ones kept still are.
func TestMemoryControlPausedFlagsBounded(t *testing.T) {
	ctx := context.Background()
	ctl, err := agent.NewMemoryControl(agent.MemoryControlConfig{MaxQueues: 2})
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range []string{"c1", "c2", "c3"} {
		run := "run_" + c
		if _, err := ctl.Begin(ctx, "u1", c, run, true); err != nil {
			t.Fatal(err)
		}
		if err := ctl.End(ctx, "u1", c, run, true); err != nil {
			t.Fatalf("End %d: %v", i, err)
		}
	}
	// c1 paused again while its flag is kept: still one flag.
	if _, err := ctl.Begin(ctx, "u1", "c1", "run_x", false); err != nil {
		t.Fatal(err)
	}
	if err := ctl.End(ctx, "u1", "c1", "run_x", true); err != nil {
		t.Fatal(err)
	}
	for c, want := range map[string]bool{"c1": true, "c2": true, "c3": false} {
		b, err := ctl.Begin(ctx, "u1", c, "run_next_"+c, true)
		if err != nil || b.Paused != want {
			t.Fatalf("%s: Begun %+v, %v; want Paused %v", c, b, err, want)
		}
	}
}
