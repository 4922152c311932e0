package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/valetkit/valet/internal/pgtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// checkDemo asserts the demo's main path in its output: the graph starts
// in the background, the writer is given the research resolved from
// [agent_result:research] and framed as data, the graph's end arrives as
// a new message with the coordinator's reaction, the writer's email waits
// for the user's approval, and once approved it is sent once.
func checkDemo(t *testing.T, got string) {
	t.Helper()
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
		"→ spawn_agent: waiting_for_approval",
		`⏸ approval send_email: Send the email "Lisbon next week" to ana@example.com`,
		"asked by the specialist at send",
		"bot> Done. Sent: Email sent to ana@example.com.",
		`to ana@example.com: "Lisbon next week"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if n := strings.Count(got, `to ana@example.com: "`); n != 1 {
		t.Errorf("%d emails sent, want 1:\n%s", n, got)
	}
	if strings.Contains(got, "Baixa Central") {
		t.Errorf("the noisy hotel reached the research:\n%s", got)
	}
}

// The demo offline, in memory.
func TestDemo(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), &out, options{}); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	checkDemo(t, out.String())
}

// The demo on PostgreSQL (pgdelegate) and Redis (redispool), each in a
// schema and under a prefix of its own.
func TestDemoDurable(t *testing.T) {
	url := os.Getenv("VALET_TEST_REDIS")
	if url == "" {
		t.Skip("VALET_TEST_REDIS is not set")
	}
	db := pgtest.DB(t)
	opt := options{postgres: pgtest.URL(t), schema: pgtest.Schema(t, db), redis: url,
		redisPrefix: "valet:specialists-test:" + rand.Text()[:8] + ":"}
	var out bytes.Buffer
	if err := run(context.Background(), &out, opt); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	checkDemo(t, out.String())
	if !strings.Contains(out.String(), "PostgreSQL (pgdelegate") || !strings.Contains(out.String(), "Redis at ") {
		t.Errorf("the demo did not run on the services:\n%s", out.String())
	}
}
