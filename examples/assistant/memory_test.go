package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/credentials"
	"github.com/valetkit/valet/internal/pgtest"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/memory"
)

// chatOnce runs the example in interactive mode on input, as `go run
// ./examples/assistant -i` would, and returns what it printed.
func chatOnce(t *testing.T, input string, opts options) string {
	t.Helper()
	var out bytes.Buffer
	opts.Interactive, opts.In, opts.EchoInput = true, strings.NewReader(input), true
	if err := run(context.Background(), &out, opts); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	return out.String()
}

// TestPostgresMemoryRestart is the restart scenario: a first run is told
// a fact and something else, and exits; a second run on the same database
// — a new pool, provider and orchestrator, as after a restart — knows the
// fact (recalled into the system prompt) and the conversation (its
// history). It needs VALET_TEST_POSTGRES and works in a schema of its own.
func TestPostgresMemoryRestart(t *testing.T) {
	db := pgtest.DB(t) // skips without VALET_TEST_POSTGRES
	schema := pgtest.Schema(t, db)
	u, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema) // the runs see only the test's schema
	u.RawQuery = q.Encode()
	key := make([]byte, credentials.KeySize)
	rand.Read(key)
	t.Setenv(EnvCredentialsKey, base64.StdEncoding.EncodeToString(key))
	ctx := context.Background()
	table := func(name string) string { return pgx.Identifier{schema, name}.Sanitize() }
	userMessages := func() []string {
		t.Helper()
		rows, err := db.Query(ctx, "SELECT message->>'content' FROM "+table("memory_history")+
			" WHERE tenant_id = 'demo-user' AND conversation_id = 'demo' AND role = 'user' ORDER BY seq")
		if err != nil {
			t.Fatalf("reading the history: %v", err)
		}
		said, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatalf("reading the history: %v", err)
		}
		return said
	}

	// First run: the offline model of -i, as chosen by run.
	got := chatOnce(t, "what's the weather in Rome\nMy dentist is Dr. Kim.\nexit\n", options{Offline: true, Postgres: u.String()})
	for _, want := range []string{
		"history and memory: PostgreSQL",
		"bot> Rome: sunny 25°C today.",
		"you> My dentist is Dr. Kim.\nbot> Noted: your dentist is Dr. Kim.\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("first run lacks %q:\n%s", want, got)
		}
	}

	// run returned after the extraction finished: the fact is stored,
	// with the conversation as its provenance, and so are both turns.
	rows, err := db.Query(ctx, "SELECT text, kind, conversation_id FROM "+table("memory_items")+" WHERE tenant_id = 'demo-user' ORDER BY id")
	if err != nil {
		t.Fatalf("reading the items: %v", err)
	}
	items, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct{ Text, Kind, Conv string }])
	if err != nil {
		t.Fatalf("reading the items: %v", err)
	}
	if len(items) != 1 || items[0].Text != "The user's dentist is Dr. Kim." || items[0].Kind != "fact" || items[0].Conv != "demo" {
		t.Errorf("items after the first run: %+v", items)
	}
	if said := userMessages(); !slices.Equal(said, []string{"what's the weather in Rome", "My dentist is Dr. Kim."}) {
		t.Errorf("history after the first run: %q", said)
	}

	// Second run, as after a restart; the model is supplied to read what
	// it was sent.
	model := replModel()
	got = chatOnce(t, "Who is my dentist?\nWhat did I say first?\n", options{Model: model, Postgres: u.String()})
	for _, want := range []string{
		"you> Who is my dentist?\nbot> Your dentist is Dr. Kim.\n",                                                                 // recalled
		"you> What did I say first?\nbot> The first message of yours I have in this conversation is: “what's the weather in Rome”", // history
	} {
		if !strings.Contains(got, want) {
			t.Errorf("second run lacks %q:\n%s", want, got)
		}
	}
	// The dentist came from the background block, not from the history.
	var asked *llm.Request
	for _, r := range model.Requests() {
		if user, _ := currentTurn(r.Messages); user == "Who is my dentist?" && r.ToolChoice != agent.RememberToolName {
			asked = &r
		}
	}
	if asked == nil {
		t.Fatal("no request for \"Who is my dentist?\"")
	}
	if sys := asked.Messages[0].Content; !strings.Contains(sys, "<background>") || !slices.Contains(backgroundFacts(asked.Messages), "The user's dentist is Dr. Kim.") {
		t.Errorf("the fact was not recalled into the system prompt:\n%s", sys)
	}
	if said := userMessages(); len(said) != 4 || said[3] != "What did I say first?" {
		t.Errorf("history after the second run: %q", said)
	}
	var n int
	if err := db.QueryRow(ctx, "SELECT count(*) FROM "+table("memory_items")).Scan(&n); err != nil || n != 1 {
		t.Errorf("questions became facts: %d items, %v", n, err)
	}
}

// TestMemoryLostWithoutPostgres: without -db or -postgres history and facts live
// in the process, as the startup line says, and a second run has neither.
func TestMemoryLostWithoutPostgres(t *testing.T) {
	got := chatOnce(t, "My dentist is Dr. Kim.\n", options{Offline: true})
	if !strings.Contains(got, "history and memory: in memory (lost at exit; -db PATH or -postgres URL keeps them)") {
		t.Errorf("no line about history and memory:\n%s", got)
	}
	got = chatOnce(t, "What did I say first?\nWho is my dentist?\n", options{Offline: true})
	for _, want := range []string{
		"you> What did I say first?\nbot> I have no earlier message of yours in this conversation.",
		"you> Who is my dentist?\nbot> I don't remember anything about your dentist.",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
}

// TestOfflineModelLearns runs the offline model's fact extraction through
// the real orchestrator: statements become facts, questions and requests
// do not, a known fact is not stored twice, and a changed one supersedes
// the old in recall.
func TestOfflineModelLearns(t *testing.T) {
	ctx := context.Background()
	mem, err := memory.NewInMemory(memory.Config{})
	if err != nil {
		t.Fatal(err)
	}
	// say handles text with a fresh orchestrator on mem and waits for its
	// extraction, so the next message recalls what it learned.
	say := func(text string) string {
		t.Helper()
		o, err := agent.NewOrchestrator(agent.Config{LLM: replModel(), Tools: tools(nil), Memory: mem, MemoryOptions: agent.MemoryOptions{Extract: true}})
		if err != nil {
			t.Fatal(err)
		}
		res, err := o.HandleMessage(ctx, agent.Message{TenantID: "u", ConversationID: "c", Text: text})
		if err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		if err := o.Close(ctx); err != nil {
			t.Fatal(err)
		}
		return res.Response
	}
	recall := func(query string) []string {
		t.Helper()
		items, err := mem.Recall(ctx, "u", query, memory.Budget{})
		if err != nil {
			t.Fatal(err)
		}
		var texts []string
		for _, it := range items {
			texts = append(texts, it.Text+" ("+it.Kind+")")
		}
		slices.Sort(texts)
		return texts
	}

	if got := say("My dentist is Dr. Kim. I love green tea! Can you book me a taxi? I need one at 5."); got != "Noted: your dentist is Dr. Kim; you love green tea." {
		t.Errorf("answer: %q", got)
	}
	if got, want := recall("dentist tea taxi"), []string{"The user loves green tea. (preference)", "The user's dentist is Dr. Kim. (fact)"}; !slices.Equal(got, want) {
		t.Errorf("learned %q, want %q", got, want)
	}
	if got := say("Who is my dentist?"); got != "Your dentist is Dr. Kim." {
		t.Errorf("answer: %q", got)
	}
	say("My dentist is Dr. Kim.") // known: not stored twice (a copy would outlive the change below)
	say("My dentist is Dr. Lee.") // changed: supersedes
	if got, want := recall("dentist"), []string{"The user's dentist is Dr. Lee. (fact)"}; !slices.Equal(got, want) {
		t.Errorf("after the change: %q, want %q", got, want)
	}
	if got := say("Who is my dentist?"); got != "Your dentist is Dr. Lee." {
		t.Errorf("answer: %q", got)
	}
	if got := say("What did I say first?"); got != "The first message of yours I have in this conversation is: “My dentist is Dr. Kim. I love green tea! Can you book me a taxi? I need one at 5.”" {
		t.Errorf("answer: %q", got)
	}
}

func TestStatements(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []string // the facts, in the third person
	}{
		{"My dentist is Dr. Kim.", []string{"The user's dentist is Dr. Kim."}},
		{"I'm vegetarian. My sister Ana lives in Lyon with me.", []string{"The user is vegetarian.", "The user's sister Ana lives in Lyon with the user."}},
		{"I really like J. S. Bach", []string{"The user really likes J. S. Bach."}},
		{"I study Go, and my wife teaches.", []string{"The user studies Go, and the user's wife teaches."}},
		{"I’ve two cats.\nI moved to Lyon in 2019.", []string{"The user has two cats.", "The user moved to Lyon in 2019."}},
		{"Who is my dentist? I want a taxi. I need help. What's 3.5 * 2?", nil},
		{"what's the weather in Rome", nil},
	} {
		var got []string
		for _, s := range statements(tt.in) {
			got = append(got, thirdPerson(s).Text)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("facts of %q = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestRememberIgnoresTheAnswer: the extraction reads the user's part of the
// turn only, so the assistant's sentences never become facts about the
// user.
func TestRememberIgnoresTheAnswer(t *testing.T) {
	req := llm.Request{
		Messages: []llm.Message{
			llm.SystemMessage("Known facts: none"),
			llm.UserMessage("The user wrote:\nhello\n\nThe assistant answered:\nI'm the offline demo model. My tools are few."),
		},
		ToolChoice: agent.RememberToolName,
	}
	for _, model := range []*llmtest.Script{replModel(), demoModel()} {
		resp, err := model.Complete(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if c := resp.Message.ToolCalls; len(c) != 1 || c[0].Name != agent.RememberToolName || string(c[0].Arguments) != `{"facts":[]}` {
			t.Errorf("remember_facts call: %+v", c)
		}
	}
}
