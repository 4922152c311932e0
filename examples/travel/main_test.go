package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/clock/clocktest"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/pool"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// ---------------------------------------------------------------- instrumented backends

// rendezvous makes its callers wait for each other: arrive returns once
// want callers have arrived. Two tool calls that both arrive overlapped:
// each started before the other finished. Run one after the other, the
// first would wait for a second that never comes, and give up.
type rendezvous struct {
	want   int
	mu     sync.Mutex
	n      int
	all    chan struct{}
	gaveUp atomic.Bool
}

func newRendezvous(want int) *rendezvous { return &rendezvous{want: want, all: make(chan struct{})} }

func (r *rendezvous) arrive(ctx context.Context) error {
	r.mu.Lock()
	r.n++
	if r.n == r.want {
		close(r.all)
	}
	r.mu.Unlock()
	t := time.NewTimer(10 * time.Second)
	defer t.Stop()
	select {
	case <-r.all:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		r.gaveUp.Store(true)
		return errors.New("the other call never started while this one ran: the calls did not overlap")
	}
}

// met reports whether every caller arrived while the others waited.
func (r *rendezvous) met() bool {
	select {
	case <-r.all:
		return !r.gaveUp.Load()
	default:
		return false
	}
}

type countingFlights struct {
	FlightSearcher
	meet  *rendezvous
	calls atomic.Int32
}

func (f *countingFlights) Search(ctx context.Context, q FlightQuery) ([]Flight, error) {
	f.calls.Add(1)
	if err := f.meet.arrive(ctx); err != nil {
		return nil, err
	}
	return f.FlightSearcher.Search(ctx, q)
}

type countingWeather struct {
	Forecaster
	meet  *rendezvous
	calls atomic.Int32
}

func (w *countingWeather) Forecast(ctx context.Context, city string, day time.Time) (Forecast, error) {
	w.calls.Add(1)
	if err := w.meet.arrive(ctx); err != nil {
		return Forecast{}, err
	}
	return w.Forecaster.Forecast(ctx, city, day)
}

// testKit holds the fakes without latency, counting calls; the flight
// search and the weather meet at a rendezvous.
type testKit struct {
	*backends
	flights *countingFlights
	weather *countingWeather
	meet    *rendezvous
}

func newKit(now func() time.Time) *testKit {
	meet := newRendezvous(2)
	k := &testKit{
		flights: &countingFlights{FlightSearcher: &FakeFlights{}, meet: meet},
		weather: &countingWeather{Forecaster: &FakeWeather{Now: now}, meet: meet},
		meet:    meet,
	}
	k.backends = &backends{Flights: k.flights, Weather: k.weather, Outbox: &Outbox{}}
	return k
}

func pinned() time.Time { return demoNow }

// ---------------------------------------------------------------- the demo, step by step

// TestApprovalFlow drives the two demo messages and checks what ran, how
// many times, and when.
func TestApprovalFlow(t *testing.T) {
	ctx := context.Background()
	kit := newKit(pinned)
	model := demoModel()
	clk := clocktest.New(demoNow)
	store, err := pool.NewMemory(pool.MemoryConfig{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	o, err := newOrchestrator(model, kit.backends, store, nil, clk, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer

	// 1. The request.
	res, err := send(ctx, &out, o, agent.Message{TenantID: tenantID, ConversationID: conversation, Text: askMessage})
	if err != nil {
		t.Fatalf("ask: %v\n%s", err, out.String())
	}
	if res.Status != agent.StatusWaitingForApproval {
		t.Fatalf("status after the request = %s, want waiting_for_approval\n%s", res.Status, out.String())
	}
	if n, m := kit.flights.calls.Load(), kit.weather.calls.Load(); n != 1 || m != 1 {
		t.Errorf("flight searches %d, forecasts %d; want 1 each", n, m)
	}
	if !kit.meet.met() {
		t.Error("the flight search and the weather did not run at the same time")
	}
	// Both in the first turn, send_email in the second and parked.
	var calls []string
	for _, c := range res.ToolCalls {
		calls = append(calls, c.Name+":"+c.ResultStatus)
	}
	want := []string{"search_flights:completed", "get_weather:completed", "send_email:waiting_for_approval"}
	if strings.Join(calls, " ") != strings.Join(want, " ") || res.Turns != 2 {
		t.Errorf("tool calls %v in %d turns; want %v in 2", calls, res.Turns, want)
	}
	if sent := kit.Outbox.Sent(); len(sent) != 0 {
		t.Fatalf("the email went out before the approval: %+v", sent)
	}
	if len(res.PendingApprovals) != 1 {
		t.Fatalf("pending approvals: %+v", res.PendingApprovals)
	}
	req := res.PendingApprovals[0]
	if req.AgentName != "send_email" || !req.AllowModification || req.Details["to"] != "team@example.com" ||
		req.Details["from"] != "Alex Kim <me@example.com>" || !strings.Contains(req.ActionSummary, "team@example.com") {
		t.Errorf("approval request: %+v", req)
	}
	// The draft quotes the tools' results, for the date "next Friday" means.
	body, _ := req.Details["body"].(string)
	for _, s := range []string{"Friday 12 June", "JetBlue B6 616, SFO 08:15 → JFK 16:52", "$254", "partly cloudy, 26°C"} {
		if !strings.Contains(body, s) {
			t.Errorf("draft body lacks %q:\n%s", s, body)
		}
	}
	pending, err := o.ListPendingApprovals(ctx, tenantID)
	if err != nil || len(pending) != 1 || pending[0].ID != req.ID {
		t.Fatalf("ListPendingApprovals = %+v, %v", pending, err)
	}

	// 2. The answer edits the recipient.
	res, err = send(ctx, &out, o, agent.Message{TenantID: tenantID, ConversationID: conversation, Text: answerReply})
	if err != nil {
		t.Fatalf("answer: %v\n%s", err, out.String())
	}
	if res.Status != agent.StatusCompleted || len(res.PendingApprovals) != 0 {
		t.Errorf("after the answer: status %s, pending %+v", res.Status, res.PendingApprovals)
	}
	sent := kit.Outbox.Sent()
	if len(sent) != 1 {
		t.Fatalf("%d emails sent, want exactly 1: %+v", len(sent), sent)
	}
	if sent[0].To != userEmail || sent[0].Subject != req.Details["subject"] || sent[0].Body != body {
		t.Errorf("sent %+v; want the approved draft to %s", sent[0], userEmail)
	}
	if !strings.Contains(res.Response, "to me@example.com instead of team@example.com") {
		t.Errorf("final reply: %q", res.Response)
	}
	if n, m := kit.flights.calls.Load(), kit.weather.calls.Load(); n != 1 || m != 1 {
		t.Errorf("the answer ran the tools again: %d flight searches, %d forecasts", n, m)
	}
	if pending, _ := o.ListPendingApprovals(ctx, tenantID); len(pending) != 0 {
		t.Errorf("still pending: %+v", pending)
	}

	// The model: 3 calls for the request (flights+weather, the draft, the
	// question), 2 for the answer (resolve_approvals, the report).
	reqs := model.Requests()
	var kinds []string
	for i, r := range reqs {
		if err := llm.CheckPairing(r.Messages); err != nil {
			t.Errorf("request %d: %v", i, err)
		}
		switch {
		case r.ToolChoice == approval.ResolveToolName:
			kinds = append(kinds, "resolve")
		case len(r.Tools) == 0:
			kinds = append(kinds, "phrase")
		default:
			kinds = append(kinds, "turn")
		}
	}
	if got := strings.Join(kinds, " "); got != "turn turn phrase resolve turn" {
		t.Errorf("model calls: %s", got)
	}

	// 3. Saying it again sends nothing more.
	if _, err := send(ctx, &out, o, agent.Message{TenantID: tenantID, ConversationID: conversation, Text: answerReply}); err != nil {
		t.Fatal(err)
	}
	if n := len(kit.Outbox.Sent()); n != 1 {
		t.Errorf("%d emails after repeating the answer, want 1", n)
	}
	if t.Failed() {
		t.Log(out.String())
	}
}

// TestReplies answers the approval in other ways.
func TestReplies(t *testing.T) {
	tests := []struct {
		reply    string
		to       string // "" = nothing sent
		resolves bool   // a resolve_approvals model call (not approval.Quick)
		answer   string
	}{
		{"yes", "team@example.com", false, `Done: I sent "Trip plan: SFO → NYC, Friday 12 June" to team@example.com (message msg_0001).`},
		{"no", "", false, "OK, I didn't send the email."},
		{"yes, but send it to boss@example.com", "boss@example.com", true, "to boss@example.com instead of team@example.com"},
		{"yes, but send it to me instead", "me@example.com", true, "to me@example.com instead of team@example.com"},
	}
	for _, tt := range tests {
		t.Run(tt.reply, func(t *testing.T) {
			kit := newKit(pinned)
			model := demoModel()
			var out bytes.Buffer
			if err := run(context.Background(), &out, options{Model: model, Backends: kit.backends, Reply: tt.reply}); err != nil {
				t.Fatalf("run: %v\n%s", err, out.String())
			}
			sent := kit.Outbox.Sent()
			switch {
			case tt.to == "" && len(sent) != 0:
				t.Errorf("sent %+v", sent)
			case tt.to != "" && (len(sent) != 1 || sent[0].To != tt.to):
				t.Errorf("sent %+v, want one email to %s", sent, tt.to)
			}
			resolves := false
			for _, r := range model.Requests() {
				resolves = resolves || r.ToolChoice == approval.ResolveToolName
			}
			if resolves != tt.resolves {
				t.Errorf("resolve_approvals called: %v, want %v", resolves, tt.resolves)
			}
			if !strings.Contains(out.String(), "bot> ") || !strings.Contains(out.String(), tt.answer) {
				t.Errorf("output lacks %q:\n%s", tt.answer, out.String())
			}
		})
	}
}

// TestDemo is `go run ./examples/travel`: what it prints.
func TestDemo(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), &out, options{Offline: true}); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	got := out.String()
	for _, want := range []string{
		"model: offline script",
		"pool: in memory",
		"clock: pinned to Sunday 7 June 2026 10:00 PDT",
		"tools: get_weather, search_flights, send_email",
		"you> " + askMessage,
		`→ search_flights {"from":"SFO","to":"NYC","date":"2026-06-12"}`,
		`→ get_weather {"city":"New York","date":"2026-06-12"}`,
		"✓ search_flights done",
		"✓ get_weather done",
		`→ send_email {"body":"Hi,`,
		"⏸ send_email parked in the pool: waiting_for_approval",
		"bot> Flight: JetBlue B6 616, SFO 08:15 → JFK 16:52, nonstop, 5h37m, $254 (the cheapest of 4).",
		"Weather in New York: partly cloudy, 26°C / 79°F (low 18°C), 20% chance of rain.",
		`I've drafted the email "Trip plan: SFO → NYC, Friday 12 June" to team@example.com.`,
		"… the conversation is now waiting_for_approval",
		`| 1. Send the email "Trip plan: SFO → NYC, Friday 12 June" to team@example.com`,
		"|    from: Alex Kim <me@example.com>",
		"|    Reply: approve, edit or cancel (expires 2026-06-07T17:30:00Z)",
		"[waiting_for_approval · 2 turns · 3 tool calls ·",
		"outbox: 0 sent (nothing goes out before the approval)",
		"pending approvals of alex in the pool: 1",
		"you> " + answerReply,
		`↻ send_email decided by your reply {"body":`,
		`"to":"me@example.com"}`,
		`bot> Done: I sent "Trip plan: SFO → NYC, Friday 12 June" to me@example.com instead of team@example.com (message msg_0001).`,
		"[completed · 1 turn · 1 tool call ·",
		"outbox: 1 sent by this reply",
		"outbox: 1 email sent\n  msg_0001\n    from:    Alex Kim <me@example.com>\n    to:      me@example.com\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(got)
	}
}

// TestRealMode runs the demo the way it runs with OPENAI_API_KEY set: the
// OpenAI client, over HTTP, against valet's fake OpenAI-compatible server
// playing the script. The server rejects any request whose tool calls and
// results are not paired, through parking and resuming.
func TestRealMode(t *testing.T) {
	srv := llmtest.NewServer(demoModel(), llmtest.WithAPIKey("sk-test-secret"))
	defer srv.Close()
	t.Setenv("OPENAI_API_KEY", "sk-test-secret")
	t.Setenv("OPENAI_BASE_URL", srv.URL)
	t.Setenv("OPENAI_MODEL", "gpt-test")
	kit := newKit(pinned)
	var out bytes.Buffer
	if err := run(context.Background(), &out, options{Backends: kit.backends}); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "model: gpt-test") || strings.Contains(out.String(), "sk-test-secret") {
		t.Errorf("output:\n%s", out.String())
	}
	if sent := kit.Outbox.Sent(); len(sent) != 1 || sent[0].To != userEmail {
		t.Errorf("sent %+v", sent)
	}
	for _, r := range srv.Requests() {
		if r.Status != 200 {
			t.Errorf("the server answered %d", r.Status)
		}
	}
}

func TestOptions(t *testing.T) {
	for _, tt := range []struct {
		opts options
		want string
	}{
		{options{Step: "ask", Offline: true}, "-step=ask needs -redis"},
		{options{Step: "answer", Offline: true}, "-step=answer needs -redis"},
		{options{Step: "later", Offline: true}, "-step must be all, ask or answer"},
		{options{RedisURL: "http://nope", Offline: true}, "-redis"},
	} {
		err := run(context.Background(), new(bytes.Buffer), tt.opts)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: err = %v, want %q", tt.opts, err, tt.want)
		}
	}
}

// TestSchema checks what the model is told about the agents' fields.
func TestSchema(t *testing.T) {
	o, err := newOrchestrator(demoModel(), newKit(pinned).backends, nil, nil, clocktest.New(demoNow), nil)
	if err != nil {
		t.Fatal(err)
	}
	specs := map[string]string{}
	for _, s := range o.Tools() {
		specs[s.Name] = s.Description + " " + string(s.Parameters)
	}
	for name, wants := range map[string][]string{
		"search_flights": {"Rule: today or later, at most 330 days ahead", `"format":"date"`, "task_instruction"},
		"send_email":     {"[Requires user confirmation before execution]", "Format: email", `"format":"email"`},
		"get_weather":    {`"format":"date"`},
	} {
		for _, w := range wants {
			if !strings.Contains(specs[name], w) {
				t.Errorf("%s spec lacks %q: %s", name, w, specs[name])
			}
		}
	}
}

func TestValidate(t *testing.T) {
	a := SearchFlights{Now: pinned, TimeZone: mustLoad(userTimeZone)}
	for _, tt := range []struct {
		in   FlightSearchIn
		want string // "" = valid
	}{
		{FlightSearchIn{From: "SFO", To: "NYC", Date: "2026-06-12"}, ""},
		{FlightSearchIn{From: "SFO", To: "NYC", Date: "2026-06-07"}, ""}, // today
		{FlightSearchIn{From: "SFO", To: "NYC", Date: "2026-06-06"}, "is in the past: today is 2026-06-07"},
		{FlightSearchIn{From: "SFO", To: "NYC", Date: "2027-06-01"}, "is too far ahead"},
		{FlightSearchIn{From: "SFO", To: "SFO", Date: "2026-06-12"}, "must differ from the departure SFO"},
	} {
		err := a.Validate(tt.in)
		if (tt.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Validate(%+v) = %v, want %q", tt.in, err, tt.want)
		}
	}
}

// ---------------------------------------------------------------- Redis: a restart between ask and answer

// TestRedisRestart runs -step=ask in one "process" and -step=answer in two
// fresh ones at once — each a new Redis client, redispool.Store, Locker,
// orchestrator, model and outbox on the same key prefix. The approval
// survives, both see it, and the email goes out exactly once.
func TestRedisRestart(t *testing.T) {
	url := os.Getenv("VALET_TEST_REDIS")
	if url == "" {
		t.Skip("VALET_TEST_REDIS is not set (e.g. VALET_TEST_REDIS=redis://127.0.0.1:6379/0)")
	}
	ro, err := redis.ParseURL(url)
	if err != nil {
		t.Fatalf("VALET_TEST_REDIS: %v", err)
	}
	rdb := redis.NewClient(ro)
	t.Cleanup(func() { _ = rdb.Close() }) // after the keys' cleanup below
	ctx := context.Background()
	prefix := fmt.Sprintf("valet-test:travel:%d:", time.Now().UnixNano())
	keys := func() []string {
		ks, err := rdb.Keys(ctx, prefix+"*").Result()
		if err != nil {
			t.Fatal(err)
		}
		return ks
	}
	t.Cleanup(func() {
		if ks := keys(); len(ks) > 0 {
			rdb.Del(ctx, ks...)
		}
	})
	// The real clock, frozen for the test: Redis expires entries on the
	// real clock.
	clk := clocktest.New(time.Now().Truncate(time.Second))
	now := clk.Now
	process := func(step string, kit *testKit) (string, error) {
		var out bytes.Buffer
		err := run(ctx, &out, options{Step: step, RedisURL: url, RedisPrefix: prefix, Model: demoModel(), Clock: clk, Backends: kit.backends})
		return out.String(), err
	}

	a := newKit(now)
	out, err := process("ask", a)
	if err != nil {
		t.Fatalf("ask: %v\n%s", err, out)
	}
	if !strings.Contains(out, "[waiting_for_approval ·") || len(a.Outbox.Sent()) != 0 || !a.meet.met() {
		t.Fatalf("after ask: sent %+v, overlap %v\n%s", a.Outbox.Sent(), a.meet.met(), out)
	}
	if len(keys()) == 0 {
		t.Fatal("no pool entry in Redis after ask")
	}
	// Asking again while one waits is refused, and changes nothing.
	if _, err := process("ask", newKit(now)); err == nil || !strings.Contains(err.Error(), "still pending") {
		t.Errorf("second ask: %v", err)
	}

	kits := []*testKit{newKit(now), newKit(now)}
	outs := make([]string, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range kits {
		wg.Go(func() { outs[i], errs[i] = process("answer", kits[i]) })
	}
	wg.Wait()
	var sent []Email
	for i, k := range kits {
		if errs[i] != nil && !errors.Is(errs[i], errNothingPending) {
			t.Errorf("answer %d: %v\n%s", i, errs[i], outs[i])
		}
		sent = append(sent, k.Outbox.Sent()...)
		if k.flights.calls.Load()+k.weather.calls.Load() != 0 {
			t.Errorf("answer %d ran the flight search or the weather again", i)
		}
	}
	if len(sent) != 1 || sent[0].To != userEmail {
		t.Fatalf("sent %+v; want exactly one email, to %s\n%s\n%s", sent, userEmail, outs[0], outs[1])
	}
	// A third process finds nothing to answer, and nothing is left in Redis.
	if out, err := process("answer", newKit(now)); !errors.Is(err, errNothingPending) {
		t.Errorf("third answer: %v\n%s", err, out)
	}
	if ks := keys(); len(ks) != 0 {
		t.Errorf("keys left in Redis: %v", ks)
	}
}

// TestBackends checks the fakes' answers and the errors the model reads.
func TestBackends(t *testing.T) {
	ctx := context.Background()
	day := func(s string) time.Time { d, _ := time.Parse(time.DateOnly, s); return d }
	fs, err := (&FakeFlights{}).Search(ctx, FlightQuery{From: "SFO", To: "NYC", Date: day("2026-06-12"), Passengers: 2})
	if err != nil || len(fs) != 4 || fs[0].Flight != "B6 616" || fs[0].PriceUSD != 508 ||
		fs[0].Departs != "2026-06-12 08:15 PDT" || fs[0].Arrives != "2026-06-12 16:52 EDT" {
		t.Errorf("SFO→NYC: %+v, %v", fs, err)
	}
	if fs, err := (&FakeFlights{}).Search(ctx, FlightQuery{From: "JFK", To: "SFO", Date: day("2026-06-12"), Passengers: 1}); err != nil || len(fs) != 2 {
		t.Errorf("JFK→SFO: %+v, %v", fs, err)
	}
	for _, q := range []FlightQuery{{From: "SFO", To: "LHR"}, {From: "EWR", To: "JFK"}} {
		if _, err := (&FakeFlights{}).Search(ctx, q); err == nil {
			t.Errorf("%s→%s found flights", q.From, q.To)
		}
	}
	w := &FakeWeather{Now: pinned}
	if f, err := w.Forecast(ctx, "nyc", day("2026-06-12")); err != nil || f.City != "New York" || f.HighF != 79 || f.RainChance != 20 {
		t.Errorf("NYC on Friday: %+v, %v", f, err)
	}
	for _, tt := range []struct{ city, date, want string }{
		{"Atlantis", "2026-06-12", `no forecast for "Atlantis"`},
		{"New York", "2026-06-06", "forecasts cover 2026-06-07 to 2026-06-17"},
		{"New York", "2026-06-18", "forecasts cover"},
	} {
		if _, err := w.Forecast(ctx, tt.city, day(tt.date)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s on %s: %v, want %q", tt.city, tt.date, err, tt.want)
		}
	}
	ctxDone, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := (&Outbox{}).Send(ctxDone, Email{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Send with a cancelled ctx: %v", err)
	}
}
