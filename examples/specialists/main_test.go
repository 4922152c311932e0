package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The demo's main path, offline: the graph starts in the background, the
// writer is given the research resolved from [agent_result:research] and
// framed as data, the graph's end arrives as a new message and the
// coordinator's reaction holds the note.
func TestDemo(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), &out, options{}); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	got := out.String()
	for _, want := range []string{
		"→ spawn_agent: completed",
		"Started in the background as graph ",
		"I've put a researcher and a writer on it",
		"The research: [agent_result:research]",
		`<agent_result id="research" status="completed">`,
		"Pick: Hotel Jardim",
		"(graph:",
		"[Background Tasks] The background work you started",
		"2 of 2 tasks completed",
		"Your note to Ana is ready",
		"I found us a quiet place for next week: Hotel Jardim — garden rooms in Estrela",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "Baixa Central") {
		t.Errorf("the noisy hotel reached the research:\n%s", got)
	}
}
