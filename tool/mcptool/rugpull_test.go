package mcptool

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/valetkit/valet/tool"
)

// waitTools calls Tools until ok says the list is the expected one: the
// server's list_changed notification arrives on its own time.
func waitTools(t *testing.T, s *Set, ok func([]string) bool) []string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ts, err := s.Tools(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tl := range ts {
			names = append(names, tl.Spec().Name)
		}
		if ok(names) {
			return names
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tool list never became the expected one; last %v", names)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A tool whose description changes on the server after it was accepted
// is held back: not offered, its calls refused, a WARN once; a new tool
// is offered; Accept brings the changed tool back in its new version.
func TestChangedToolHeldBackUntilAccepted(t *testing.T) {
	var logs strings.Builder
	s := connect(t, helperServer("t"), Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	before, err := s.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	oldEcho := before[slices.IndexFunc(before, func(tl tool.Tool) bool { return tl.Spec().Name == "t_echo" })]
	reg := registry(t, s)
	if res := run(reg, "t_rugpull", `{}`); res.Content != "pulled" {
		t.Fatalf("rugpull: %+v", res)
	}
	names := waitTools(t, s, func(n []string) bool { return slices.Contains(n, "t_newcomer") })
	if slices.Contains(names, "t_echo") {
		t.Fatalf("offered %v: the changed echo must be held back", names)
	}
	// A run that started before the change still holds the old tool: its
	// call is refused rather than reaching the changed server tool.
	if res := run(reg, "t_echo", `{"text":"x"}`); !errors.Is(res.Err, ErrHeldBack) {
		t.Fatalf("a call to the held-back tool: %+v", res)
	}
	changes := s.Changed()
	if len(changes) != 1 {
		t.Fatalf("changes %+v, want one", changes)
	}
	c := changes[0]
	if c.Name != "t_echo" || c.Tool != "echo" || c.OldDescription != "Echoes text" || !strings.Contains(c.Description, "evil.example") ||
		string(c.Schema) != string(c.OldSchema) || c.Risk != tool.RiskLow {
		t.Fatalf("change %+v", c)
	}
	s.dirty.Store(true) // listing again does not warn again
	waitTools(t, s, func([]string) bool { return true })
	if n := strings.Count(logs.String(), "held back until the host accepts it"); n != 1 {
		t.Fatalf("%d WARN lines about the change, want 1:\n%s", n, logs.String())
	}

	stale := c
	stale.Fingerprint = "0000"
	if err := s.Accept(stale); !errors.Is(err, ErrNoChange) {
		t.Fatalf("Accept of another version: %v", err)
	}
	if err := s.Accept(c); err != nil {
		t.Fatal(err)
	}
	if err := s.Accept(c); !errors.Is(err, ErrNoChange) {
		t.Fatalf("a second Accept: %v", err)
	}
	if len(s.Changed()) != 0 {
		t.Fatal("the change is still listed after Accept")
	}
	after := registry(t, s)
	echo, ok := after.Get("t_echo")
	if !ok || !strings.Contains(echo.Spec().Description, "evil.example") || echo == oldEcho {
		t.Fatalf("after Accept: %v %+v", ok, echo)
	}
	if res := run(after, "t_echo", `{"text":"x"}`); res.Content != "changed echo" {
		t.Fatalf("the accepted tool: %+v", res)
	}
	if res := run(reg, "t_echo", `{"text":"x"}`); !res.IsError {
		t.Fatalf("the old version of the tool still runs: %+v", res)
	}
}

// Tools returns the same slice while nothing changed, so the
// orchestrator reuses the tool set it built.
func TestToolsSameSliceWhileUnchanged(t *testing.T) {
	s := connect(t, helperServer("t"), Config{})
	a, _ := s.Tools(context.Background())
	s.dirty.Store(true)
	b, _ := s.Tools(context.Background())
	if len(a) == 0 || &a[0] != &b[0] {
		t.Fatal("an unchanged listing gave a new slice")
	}
}
