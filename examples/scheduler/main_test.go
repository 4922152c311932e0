package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/valetkit/valet/internal/pgtest"
	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/rivertrigger"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// notes collects the notifications of one or more engines.
type notes struct {
	mu  sync.Mutex
	all []trigger.Notification
}

func (n *notes) add(x trigger.Notification) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.all = append(n.all, x)
}

// byTask returns the run ids notified per task, and fails on a run
// notified twice.
func (n *notes) byTask(t *testing.T) map[string][]string {
	t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	seen := map[string]bool{}
	out := map[string][]string{}
	for _, x := range n.all {
		if seen[x.RunID] {
			t.Errorf("run %s of %s notified twice", x.RunID, x.TaskID)
		}
		seen[x.RunID] = true
		if x.Kind != trigger.NotifyResult {
			t.Errorf("notification %+v: want a result", x)
		}
		out[x.TaskID] = append(out[x.TaskID], x.RunID)
	}
	return out
}

// chatLines returns the chat lines of out for the task name: "[time] name: text".
func chatLines(out, name string) []string {
	re := regexp.MustCompile(`(?m)^(?:\S+ \| )?\[[^\]]+\] ` + regexp.QuoteMeta(name) + `: .*$`)
	return re.FindAllString(out, -1)
}

func TestOffline(t *testing.T) {
	var got notes
	var buf bytes.Buffer
	if err := run(context.Background(), &buf, config{notified: got.add}); err != nil {
		t.Fatalf("run: %v\n%s", err, buf.String())
	}
	out := buf.String()
	t.Log("\n" + out)

	paris := mustLoad(userZone)
	runs := got.byTask(t)
	want := map[string][]string{
		// 08:00 in Paris on Monday and on Tuesday.
		taskDigest: {
			trigger.RunID(taskDigest, time.Date(2026, 3, 2, 8, 0, 0, 0, paris)),
			trigger.RunID(taskDigest, time.Date(2026, 3, 3, 8, 0, 0, 0, paris)),
		},
		// Amazon's mail, once though delivered twice; not Medium's nor Alice's.
		taskAmazon: {trigger.EventRunID(taskAmazon, "gmail-1002")},
		// The fare's first poll under 300 €, and not the later ones.
		taskFlight: {trigger.RunID(taskFlight, time.Date(2026, 3, 3, 14, 0, 0, 0, paris))},
		// 3 pm on Monday.
		taskReminder: {trigger.RunID(taskReminder, time.Date(2026, 3, 2, 15, 0, 0, 0, paris))},
	}
	for task, ids := range want {
		if fmt.Sprint(runs[task]) != fmt.Sprint(ids) {
			t.Errorf("%s: runs notified %v, want %v", task, runs[task], ids)
		}
	}
	if len(runs) != len(want) {
		t.Errorf("tasks notified: %v", runs)
	}

	// What the user sees.
	for _, c := range []struct {
		name  string
		lines []string // the start of each line, in order
	}{
		{"Morning digest", []string{"[Mon 08:00] Morning digest: Good morning! It's Monday 2 March. 2 emails", "[Tue 08:00] Morning digest: Good morning! It's Tuesday 3 March. 3 emails"}},
		{"Amazon mail", []string{"[Mon 10:30] Amazon mail: 📦 Amazon: Your order has shipped"}},
		{"Flight price watch", []string{"[Tue 14:00] Flight price watch: ✈ Good news: Paris → New York on 14 April is down to 289 €"}},
		{"Dentist reminder", []string{"[Mon 15:00] Dentist reminder: ⏰ Reminder: call the dentist back"}},
	} {
		lines := chatLines(out, c.name)
		if len(lines) != len(c.lines) {
			t.Errorf("%s: %d chat lines, want %d: %q", c.name, len(lines), len(c.lines), lines)
			continue
		}
		for i, l := range lines {
			if !strings.HasPrefix(l, c.lines[i]) {
				t.Errorf("%s: line %d = %q, want it to start with %q", c.name, i, l, c.lines[i])
			}
		}
	}
	// Tuesday's digest lists the mail of Monday and Tuesday morning.
	for _, s := range []string{"• Alice — Standup moved to 10:00", "• Medium — Daily Digest", "• Amazon — Your order has shipped"} {
		if !strings.Contains(out, s) {
			t.Errorf("the output lacks %q", s)
		}
	}
	for _, s := range []string{
		"Morning digest      2 runs Mon 08:00, Tue 08:00",
		"Amazon mail         1 run  Mon 10:30",
		"Flight price watch  1 run  Tue 14:00  (fare checked 193 times, under 300 € from Tue 14:00)",
		"Dentist reminder    1 run  Mon 15:00  (task COMPLETED)",
		"no second run: a task runs once per event id",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("the output lacks %q", s)
		}
	}
	if n := strings.Count(out, "· no task fires"); n != 2 {
		t.Errorf("%d emails fired nothing, want 2 (Medium's and Alice's)", n)
	}
}

// TestOfflineDeterministic runs the demo again: the same output.
func TestOfflineDeterministic(t *testing.T) {
	var a, b bytes.Buffer
	if err := run(context.Background(), &a, config{}); err != nil {
		t.Fatal(err)
	}
	if err := run(context.Background(), &b, config{}); err != nil {
		t.Fatal(err)
	}
	if a.String() != b.String() {
		t.Fatalf("two runs differ:\n%s\n----\n%s", a.String(), b.String())
	}
}

func TestFlagsGoTogether(t *testing.T) {
	err := run(context.Background(), &bytes.Buffer{}, config{Postgres: "postgres://localhost/x"})
	if err == nil || !strings.Contains(err.Error(), "go together") {
		t.Fatalf("run with -postgres alone = %v", err)
	}
}

// ---------------------------------------------------------------- live

// TestLiveTwoProcesses runs two engines at once on one PostgreSQL schema
// and one Redis stream, as two processes of the live demo would, one of
// them publishing the emails, and checks that each run fires once.
func TestLiveTwoProcesses(t *testing.T) {
	pgURL, redisURL := os.Getenv("VALET_TEST_POSTGRES"), os.Getenv("VALET_TEST_REDIS")
	if pgURL == "" || redisURL == "" {
		t.Skip("set VALET_TEST_POSTGRES and VALET_TEST_REDIS to a PostgreSQL and a Redis URL to run the live demo")
	}
	schema := newSchema(t, pgURL)
	dbURL := withSearchPath(t, pgURL, schema)
	stream := "valet:test:scheduler:" + randomHex()
	t.Cleanup(func() {
		ro, err := redis.ParseURL(redisURL)
		if err != nil {
			return
		}
		rdb := redis.NewClient(ro)
		defer rdb.Close()
		rdb.Del(context.Background(), stream, stream+":dead", stream+":owner")
	})

	// A compressed timeline: 24 seconds.
	fast := func() *timeline {
		tl := liveTimeline()
		tl.digest = trigger.Schedule{Every: 6 * time.Second}
		tl.reminder = 6 * time.Second
		tl.pollEvery = 2 * time.Second
		tl.priceDrop = 8 * time.Second
		at := []time.Duration{-9 * time.Hour, -30 * time.Minute, 2 * time.Second, 3 * time.Second, 5 * time.Second}
		for i := range tl.mails {
			tl.mails[i].At = at[i]
		}
		tl.mails[2].Again = 4 * time.Second
		tl.length = 24 * time.Second
		return tl
	}
	var got notes
	var outA, outB bytes.Buffer
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, p := range []struct {
		name    string
		out     *bytes.Buffer
		publish bool
	}{{"A", &outA, true}, {"B", &outB, false}} {
		wg.Go(func() {
			errs[i] = run(t.Context(), p.out, config{
				Postgres: dbURL, Redis: redisURL, Publish: p.publish, Name: p.name,
				Stream: stream, timeline: fast(), notified: got.add,
			})
		})
	}
	wg.Wait()
	t.Logf("A:\n%s\nB:\n%s", outA.String(), outB.String())
	for i, err := range errs {
		if err != nil {
			t.Fatalf("engine %d: %v", i, err)
		}
	}
	if n := strings.Count(outA.String()+outB.String(), "starts a new demo"); n != 1 {
		t.Errorf("%d processes started the demo, want 1 (the other joins)", n)
	}

	// Each run notified once, across both engines; one per task but the digest.
	runs := got.byTask(t)
	for _, task := range []string{taskAmazon, taskFlight, taskReminder} {
		if len(runs[task]) != 1 {
			t.Errorf("%s: runs notified %v, want one", task, runs[task])
		}
	}
	if len(runs[taskDigest]) < 2 {
		t.Errorf("%s: runs notified %v, want two or more in 24 s", taskDigest, runs[taskDigest])
	}
	for _, id := range runs[taskAmazon] { // the round's id of Amazon's mail 1002
		if !strings.HasPrefix(id, trigger.EventRunID(taskAmazon, "gmail-")) || !strings.HasSuffix(id, "-1002") {
			t.Errorf("the Amazon task ran for %s, want Amazon's mail 1002", id)
		}
	}

	// The history agrees: every run succeeded, once, and was notified.
	db, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	store, err := rivertrigger.New(db, rivertrigger.Config{Queue: liveQueue})
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range taskOrder {
		hist, err := store.Runs(context.Background(), tenantID, task, 0)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range hist {
			if r.Status != trigger.RunSucceeded {
				continue // a run the end of the demo interrupted
			}
			ids = append(ids, r.ID)
		}
		if len(ids) != len(runs[task]) {
			t.Errorf("%s: %d runs succeeded in the history %v, %d notified %v", task, len(ids), ids, len(runs[task]), runs[task])
		}
	}
	reminder, err := store.Get(context.Background(), tenantID, taskReminder)
	if err != nil || reminder.Status != trigger.StatusCompleted {
		t.Errorf("the reminder = %+v, %v; want it COMPLETED", reminder, err)
	}
}

// newSchema creates an empty schema for the test, dropped at the end.
func newSchema(t *testing.T, _ string) string { return pgtest.Schema(t, pgtest.DB(t)) }

// withSearchPath returns pgURL with its connections working in schema.
func withSearchPath(t *testing.T, pgURL, schema string) string {
	t.Helper()
	u, err := url.Parse(pgURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

func randomHex() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
