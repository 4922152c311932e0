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
	checkTrip(t, got)
}

// checkTrip asserts the later scenes' outcomes: the booking keeps a plan;
// the correction sent while reserve_room waits is routed into the loop and
// is the coordinator's next message, which redoes the reservation; the
// 250 EUR deposit (HIGH by its amount) waits for approval and is paid once
// when approved; the 5400 EUR payment (CRITICAL) is denied and never
// runs, the model saying so; the repeated check_availability gets two
// notes and the run ends with ErrDoomLoop and a partial answer.
func checkTrip(t *testing.T, got string) {
	t.Helper()
	_, trip, ok := strings.Cut(got, "you> "+bookMessage)
	if !ok {
		t.Fatalf("the booking scene did not run:\n%s", got)
	}
	_, tail, _ := strings.Cut(trip, "you> "+groupMessage)
	for _, want := range []string{
		"(routed into the running loop: status injected, signal inject)",
		"ended with:\n  | [The user sent this while you were working on the request; take it into account from now on:]\n  | " + correctMessage,
		"→ update_plan: completed\n  → reserve_room: completed\n  → reserve_room: completed\n  → update_plan: completed\n  → pay_deposit: waiting_for_approval",
		`⏸ approval tool:pay_deposit: Run pay_deposit {"to":"Hotel Jardim","amount_eur":250,"booking":"JAR-4N"}`,
		"→ pay_deposit: completed\n  → update_plan: completed\nbot> Booked: Hotel Jardim, 4 nights",
		"- [x] reserve: Reserve Hotel Jardim from Monday (done)",
		"- [x] deposit: Pay the deposit (done)",
		"- [ ] tell: Tell Ana the dates (pending)",
		"→ pay_deposit: denied\nbot> I did not pay it: payments above 1000 EUR are refused",
		"↻ check_availability called 9 times; 2 notes, then stopped:",
		`Note: you called "check_availability" with the same arguments 3 times`,
		`Warning: you called "check_availability" with the same arguments 3 times`,
		"run ended: agent: the run was stopped going round in circles",
		"bot> I could not reach Casa do Rio",
		"payments (what was really paid):\n  250 EUR to Hotel Jardim (booking JAR-4N)\n",
	} {
		if !strings.Contains(trip, want) {
			t.Errorf("the later scenes lack %q:\n%s", want, trip)
		}
	}
	if n := strings.Count(tail, " EUR to Hotel Jardim (booking"); n != 1 {
		t.Errorf("%d payments made, want the one deposit:\n%s", n, tail)
	}
	if strings.Contains(tail, "5400 EUR to Hotel Jardim (booking") {
		t.Errorf("the refused payment was made:\n%s", tail)
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
