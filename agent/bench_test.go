package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/tool"
)

// The workload: a conversation of 5 tool turns with 3 parallel calls each,
// then a final answer, on a scripted model and zero-latency tools. The same
// model and tool functions serve valet and a hand-written bare loop, so the
// difference is the framework's own cost.

type benchWeatherIn struct {
	City string `json:"city" jsonschema:"description=City name"`
	Days int    `json:"days,omitempty" jsonschema:"minimum=1,maximum=7"`
}
type benchSearchIn struct {
	Query string `json:"query"`
	Limit int    `json:"limit,omitempty" jsonschema:"minimum=1,maximum=20"`
}
type benchCalcIn struct {
	Expression string `json:"expression"`
}

func benchWeather(_ context.Context, in benchWeatherIn) (string, error) {
	return "Sunny, 21°C in " + in.City, nil
}
func benchSearch(_ context.Context, in benchSearchIn) (string, error) {
	return "3 results for " + in.Query, nil
}
func benchCalc(_ context.Context, in benchCalcIn) (string, error) { return "42", nil }

const benchTurns, benchCalls = 5, 3

const benchText = "Plan my trip to Paris"

// benchModel answers by position: tool calls until benchTurns assistant
// messages follow the user's message, then a final text. Replies are built
// once, so the model itself costs (almost) nothing.
type benchModel struct {
	turns []*llm.Response
	final *llm.Response
	delay time.Duration
	sent  atomic.Int64 // messages in the last request, for the checks of sequential benchmarks
}

func newBenchModel(turns, calls int, names ...string) *benchModel {
	m := &benchModel{final: &llm.Response{Message: llm.AssistantMessage("All done: sunny, 3 results, 42."), Usage: llm.Usage{InputTokens: 500, OutputTokens: 20}}}
	// Each call's arguments differ from every other call's, as a model
	// making progress writes them: identical calls repeated would be a
	// doom loop (LoopConfig.DoomRepeats), which the loop intervenes in.
	args := map[string]string{
		"get_weather": `{"city":"Paris","days":%d}`,
		"web_search":  `{"query":"flights to Paris","limit":%d}`,
		"calculator":  `{"expression":"6*%d"}`,
		"sleep":       `{"n":%d}`,
		"park":        `{}`,
	}
	for t := range turns {
		r := &llm.Response{Usage: llm.Usage{InputTokens: 400, OutputTokens: 30}}
		for c := range calls {
			name := names[c%len(names)]
			a := args[name]
			if strings.Contains(a, "%d") {
				// 2 to 6: strictly inside days' and limit's bounds, which
				// tool's fast validation checks without the full validator.
				a = fmt.Sprintf(a, 2+(t*calls+c)%5)
			}
			r.Message.ToolCalls = append(r.Message.ToolCalls, llm.ToolCall{
				ID: fmt.Sprintf("call_%d_%d", t, c), Name: name, Arguments: json.RawMessage(a),
			})
		}
		r.Message.Role = llm.RoleAssistant
		m.turns = append(m.turns, r)
	}
	return m
}

func (m *benchModel) Complete(ctx context.Context, req llm.Request) (*llm.Response, error) {
	m.sent.Store(int64(len(req.Messages)))
	n := 0
	for i := len(req.Messages) - 1; i >= 0 && req.Messages[i].Role != llm.RoleUser; i-- {
		if req.Messages[i].Role == llm.RoleAssistant {
			n++
		}
	}
	if n < len(m.turns) {
		return m.turns[n], nil
	}
	return m.final, nil
}

func (m *benchModel) Stream(ctx context.Context, req llm.Request) iter.Seq2[llm.Chunk, error] {
	return func(yield func(llm.Chunk, error) bool) {
		r, err := m.Complete(ctx, req)
		yield(llm.Chunk{Response: r}, err)
	}
}

func benchTools() []tool.Tool {
	return []tool.Tool{
		tool.New("get_weather", "Current weather for a city", benchWeather),
		tool.New("web_search", "Search the web", benchSearch),
		tool.New("calculator", "Evaluate an arithmetic expression", benchCalc),
	}
}

// benchHandler is a bare loop's tool: raw arguments in, text out.
type benchHandler = func(context.Context, json.RawMessage) (string, error)

// bareHandler decodes the arguments into In and calls f: what a
// hand-written loop does for each of its tools.
func bareHandler[In any](f func(context.Context, In) (string, error)) benchHandler {
	return func(ctx context.Context, raw json.RawMessage) (string, error) {
		var in In
		if err := json.Unmarshal(raw, &in); err != nil {
			return "", err
		}
		return f(ctx, in)
	}
}

// benchHandlers are the bare loop's counterparts of benchTools.
func benchHandlers() map[string]benchHandler {
	return map[string]benchHandler{
		"get_weather": bareHandler(benchWeather),
		"web_search":  bareHandler(benchSearch),
		"calculator":  bareHandler(benchCalc),
	}
}

// bareResult is what a bare loop did, so a benchmark can check that it did
// the work.
type bareResult struct {
	text          string
	turns, calls  int // model calls; tool calls run
	failed, total int // tool calls that failed; messages sent in the last model call
}

// bareLoop is the hand-written baseline: the same model, the same tool
// functions, calls of a turn in parallel, arguments decoded into the same
// structs — and nothing else (no validation, timeouts, telemetry, history).
// It builds its tool table per conversation, as it always has.
func bareLoop(ctx context.Context, model llm.Client, specs []llm.ToolSpec, text string) (bareResult, error) {
	return bareLoopWith(ctx, model, specs, benchHandlers(), nil, text)
}

// bareLoopWith is bareLoop with the given tools, sending history (which it
// does not modify) between the system prompt and the user's message.
func bareLoopWith(ctx context.Context, model llm.Client, specs []llm.ToolSpec, handlers map[string]benchHandler, history []llm.Message, text string) (bareResult, error) {
	var res bareResult
	msgs := make([]llm.Message, 0, len(history)+2)
	msgs = append(msgs, llm.SystemMessage("You are a benchmark."))
	msgs = append(msgs, history...)
	msgs = append(msgs, llm.UserMessage(text))
	for {
		res.total = len(msgs)
		resp, err := model.Complete(ctx, llm.Request{Messages: msgs, Tools: specs})
		if err != nil {
			return res, err
		}
		res.turns++
		if len(resp.Message.ToolCalls) == 0 {
			res.text = resp.Message.Content
			return res, nil
		}
		msgs = append(msgs, resp.Message)
		calls := resp.Message.ToolCalls
		out := make([]struct {
			text   string
			failed bool
		}, len(calls))
		var wg sync.WaitGroup
		for i, c := range calls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				h := handlers[c.Name]
				if h == nil {
					out[i].text, out[i].failed = "unknown tool "+c.Name, true
					return
				}
				s, err := h(ctx, c.Arguments)
				if err != nil {
					s, out[i].failed = err.Error(), true
				}
				out[i].text = s
			}()
		}
		wg.Wait()
		for i, c := range calls {
			msgs = append(msgs, llm.ToolResultMessage(c, out[i].text, out[i].failed))
			if out[i].failed {
				res.failed++
			}
		}
		res.calls += len(calls)
	}
}

// checkBare fails b unless one bare conversation did turns tool turns of
// calls successful calls each, then answered.
func checkBare(b *testing.B, r bareResult, err error, turns, calls int) {
	if err != nil || r.turns != turns+1 || r.calls != turns*calls || r.failed != 0 || r.text == "" {
		b.Fatalf("bare loop did not do the work: %+v err=%v", r, err)
	}
}

// checkValet fails b unless one message ran turns tool turns of calls
// successful calls each, then answered.
func checkValet(b *testing.B, res *agent.Result, err error, turns, calls int) {
	if err == nil && res.Status == agent.StatusCompleted && res.Turns == turns+1 && len(res.ToolCalls) == turns*calls && res.Response != "" {
		ok := true
		for _, c := range res.ToolCalls {
			ok = ok && c.Success
		}
		if ok {
			return
		}
	}
	if res == nil {
		b.Fatalf("valet did not do the work: err=%v", err)
	}
	b.Fatalf("valet did not do the work: status=%s turns=%d calls=%d err=%v", res.Status, res.Turns, len(res.ToolCalls), err)
}

func runBare(b *testing.B) {
	model := newBenchModel(benchTurns, benchCalls, "get_weather", "web_search", "calculator")
	reg, err := tool.NewRegistry(benchTools()...)
	if err != nil {
		b.Fatal(err)
	}
	specs := reg.Specs()
	ctx := context.Background()
	b.ReportAllocs()
	cpu := startCPU()
	for b.Loop() {
		r, err := bareLoop(ctx, model, specs, benchText)
		checkBare(b, r, err, benchTurns, benchCalls)
	}
	cpu.report(b)
}

func runValet(b *testing.B) {
	model := newBenchModel(benchTurns, benchCalls, "get_weather", "web_search", "calculator")
	o, err := agent.NewOrchestrator(agent.Config{Logger: benchLog, LLM: model, SystemPrompt: "You are a benchmark.", Tools: benchTools()})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	m := agent.Message{TenantID: "bench", ConversationID: "c", Text: benchText}
	b.ReportAllocs()
	cpu := startCPU()
	for b.Loop() {
		res, err := o.HandleMessage(ctx, m)
		checkValet(b, res, err, benchTurns, benchCalls)
		if err := o.Forget(ctx, m.TenantID, m.ConversationID); err != nil {
			b.Fatal(err)
		}
	}
	cpu.report(b)
}

// cpuClock reads the process's CPU time (user+sys) around a benchmark's
// loop, for the side-alone benchmarks.
type cpuClock struct {
	t0 time.Duration
	ok bool
}

func startCPU() cpuClock {
	t0, ok := processCPU()
	return cpuClock{t0, ok}
}

// report reports the CPU time per iteration of b's loop as cpu-ns/op,
// and the runtime's starting stack for new goroutines at its end as
// start-B.
func (c cpuClock) report(b *testing.B) {
	if t1, ok := processCPU(); ok && c.ok && b.N > 0 {
		b.ReportMetric(float64(t1-c.t0)/float64(b.N), "cpu-ns/op")
	}
	b.ReportMetric(readMetrics(metricStartStack)[0], "start-B")
}

// side is one loop measured in interleaved blocks; one call of run is one
// conversation (or message), and fails the benchmark when it did not do
// the work.
type side struct {
	name string
	run  func()
	sent *int64 // messages in the last model call of the last conversation, when recorded
}

// tally adds up the blocks of one side.
type tally struct {
	n             int // conversations
	wall, cpu     time.Duration
	cpuOK         bool
	allocs, bytes uint64
	gcs           int // collections, the one ending each block included
	// blocks; the runtime's starting stack size for new goroutines added
	// up at the start of each block and before the collection ending it.
	blocks            int
	startIn, startOut float64
}

func (t tally) nsPer() float64     { return float64(t.wall) / float64(t.n) }
func (t tally) cpuPer() float64    { return float64(t.cpu) / float64(t.n) }
func (t tally) allocsPer() float64 { return float64(t.allocs) / float64(t.n) }
func (t tally) bytesPer() float64  { return float64(t.bytes) / float64(t.n) }

// interleave runs, for each b.Loop iteration, block conversations of each
// side in turn, starting from a different side each iteration so that no
// side always follows the same one, and returns each side's totals: wall
// time, CPU time of the whole process (user+sys, GC workers included),
// allocations and collections, read around each block.
//
// Each side pays for its own garbage and only for it: a block starts on a
// collected heap and ends with runtime.GC(), inside its measurement, which
// collects what the block left. A collection costs about the same however
// much garbage it finds, so a block pays at most one collection more than
// the same conversations run alone would (gcs/kconv counts them all).
//
// Nothing of the harness may weigh on the stack new goroutines start with:
// the runtime sizes it at each collection from the average stack in use
// (GODEBUG adaptivestackstart), and the goroutine running the blocks is
// one of the few it averages. This function once held a runtime.MemStats
// (5 KB) on that stack, which alone raised the starting stack from 2 KB
// to 4 KB for both sides; the bare loop's goroutines then skipped their
// stack growth and it measured 29 µs of CPU per conversation against 43
// µs alone, valet's ratio 2.6× against 1.65× alone. The counters are read
// with runtime/metrics into heap slices instead, and start-in-B and
// start-out-B report the starting stack at the start and the end of the
// blocks, which must match what the side sees alone (2 KB for both).
func interleave(b *testing.B, block int, sides ...side) []tally {
	out := make([]tally, len(sides))
	for i := range out {
		out[i].cpuOK = true
	}
	runtime.GC()
	k := 0
	for b.Loop() {
		for j := range sides {
			i := (k + j) % len(sides)
			m0 := readMetrics(metricAllocs, metricTinyAllocs, metricAllocBytes, metricGCs, metricStartStack)
			c0, ok0 := processCPU()
			t0 := time.Now()
			for range block {
				sides[i].run()
			}
			end := readMetrics(metricStartStack)[0]
			runtime.GC()
			d := time.Since(t0)
			c1, ok1 := processCPU()
			m1 := readMetrics(metricAllocs, metricTinyAllocs, metricAllocBytes, metricGCs)
			t := &out[i]
			t.n += block
			t.wall += d
			t.cpu += c1 - c0
			t.cpuOK = t.cpuOK && ok0 && ok1
			t.allocs += uint64(m1[0] + m1[1] - m0[0] - m0[1])
			t.bytes += uint64(m1[2] - m0[2])
			t.gcs += int(m1[3] - m0[3])
			t.blocks++
			t.startIn += m0[4]
			t.startOut += end
		}
		k++
	}
	return out
}

// reportGOMAXPROCS reports GOMAXPROCS as the metric "gomaxprocs" and logs it.
func reportGOMAXPROCS(b *testing.B) {
	p := runtime.GOMAXPROCS(0)
	b.Logf("GOMAXPROCS=%d NumCPU=%d", p, runtime.NumCPU())
	b.ReportMetric(float64(p), "gomaxprocs")
}

// reportSide reports one side's cost per conversation, each metric's name
// starting with prefix: ns/conv (wall), cpu-ns/conv, allocs/conv, B/conv,
// gcs/kconv, the collections per 1,000 conversations (the one ending each
// block included), and start-in-B and start-out-B, the runtime's starting
// stack for new goroutines at the start and the end of the side's blocks
// (averaged).
func reportSide(b *testing.B, prefix string, t tally) {
	b.ReportMetric(t.nsPer(), prefix+"ns/conv")
	if t.cpuOK {
		b.ReportMetric(t.cpuPer(), prefix+"cpu-ns/conv")
	}
	b.ReportMetric(t.allocsPer(), prefix+"allocs/conv")
	b.ReportMetric(t.bytesPer(), prefix+"B/conv")
	b.ReportMetric(float64(t.gcs)*1000/float64(t.n), prefix+"gcs/kconv")
	b.ReportMetric(t.startIn/float64(t.blocks), prefix+"start-in-B")
	b.ReportMetric(t.startOut/float64(t.blocks), prefix+"start-out-B")
}

// reportRatios reports num's cost as a multiple of den's, per conversation:
// wall time as timeName, then prefix+"cpu", prefix+"allocs" and
// prefix+"bytes" (the last two only when all is true).
func reportRatios(b *testing.B, timeName, prefix string, num, den tally, all bool) {
	b.ReportMetric(num.nsPer()/den.nsPer(), timeName)
	if num.cpuOK && den.cpuOK {
		b.ReportMetric(num.cpuPer()/den.cpuPer(), prefix+"cpu")
	}
	if all {
		b.ReportMetric(num.allocsPer()/den.allocsPer(), prefix+"allocs")
		b.ReportMetric(num.bytesPer()/den.bytesPer(), prefix+"bytes")
	}
}

// valetSide handles m per call and then forgets conversation forget: m's
// own for a fresh conversation each time, another one (which then costs
// the same bookkeeping, on an empty conversation) to keep m's history.
// model must be o's, which keeps limit messages of history (its
// MaxHistoryMessages). The last model call of each message must have been
// sent the system prompt, the prior messages, the user's message and the
// turns of this message, or, when those pass the limit, at least all but 2
// turns' worth of the limit (the window is capped at MaxHistoryMessages
// besides the system prompt, trimmed by whole tool-call groups).
func valetSide(b *testing.B, name string, o *agent.Orchestrator, model *benchModel, m agent.Message, forget string, prior, limit int) side {
	ctx := context.Background()
	full := int64(prior + 2 + benchTurns*(1+benchCalls))
	lo, hi := full, full
	if full > int64(limit)+1 {
		lo, hi = int64(limit+1-2*(1+benchCalls)), int64(limit)+1
	}
	sent := new(int64)
	return side{name, func() {
		res, err := o.HandleMessage(ctx, m)
		checkValet(b, res, err, benchTurns, benchCalls)
		if *sent = model.sent.Load(); *sent < lo || *sent > hi {
			b.Fatalf("%s: the last model call was sent %d messages, want %d to %d", name, *sent, lo, hi)
		}
		if err := o.Forget(ctx, m.TenantID, forget); err != nil {
			b.Fatal(err)
		}
	}, sent}
}

// bareSide runs one bare conversation per call with history before the
// user's message, as bareLoop does (tool table built per conversation).
func bareSide(b *testing.B, name string, model llm.Client, specs []llm.ToolSpec, history []llm.Message) side {
	ctx := context.Background()
	sent := new(int64)
	return side{name, func() {
		r, err := bareLoopWith(ctx, model, specs, benchHandlers(), history, benchText)
		checkBare(b, r, err, benchTurns, benchCalls)
		if *sent = int64(r.total); r.total != len(history)+2+benchTurns*(1+benchCalls) {
			b.Fatalf("bare loop sent %d messages, want %d", r.total, len(history)+2+benchTurns*(1+benchCalls))
		}
	}, sent}
}

// BenchmarkConversation prints the bare loop and valet side by side, and in
// "ratio" valet's cost as a multiple of the bare loop's, measured in
// alternating blocks of 1,000 conversations of the same run, each block
// paying for its own garbage collection (see interleave): x-time (wall),
// x-cpu (user+sys of the process from getrusage, GC included), x-allocs,
// x-bytes, with each side's figures per conversation (bare-ns/conv,
// valet-cpu-ns/conv, ...) and GOMAXPROCS (metric gomaxprocs, also the
// name's -N suffix):
//
//	go test -run '^$' -bench BenchmarkConversation -benchtime 3s ./agent/
//
// x-time and x-cpu of "ratio" are the figures to read: both sides run in
// the same seconds of a shared machine, so load that comes and goes weighs
// on both. "bare" and "valet" run each side alone, one after the other;
// their ns/op move with the load between the two, and their cpu-ns/op
// agreed with bare-cpu-ns/conv and valet-cpu-ns/conv of "ratio" within a
// few percent (GOMAXPROCS 1, load average 27: 41.1 against 42.6 µs for the
// bare loop, 65.3 against 63.8 for valet).
func BenchmarkConversation(b *testing.B) {
	b.Run("bare", runBare)
	b.Run("valet", runValet)
	b.Run("ratio", func(b *testing.B) {
		model := newBenchModel(benchTurns, benchCalls, "get_weather", "web_search", "calculator")
		o, err := agent.NewOrchestrator(agent.Config{Logger: benchLog, LLM: model, SystemPrompt: "You are a benchmark.", Tools: benchTools()})
		if err != nil {
			b.Fatal(err)
		}
		m := agent.Message{TenantID: "bench", ConversationID: "c", Text: benchText}
		t := interleave(b, 1000,
			bareSide(b, "bare", model, o.Tools(), nil),
			valetSide(b, "valet", o, model, m, m.ConversationID, 0, agent.DefaultMaxHistoryMessages),
		)
		bare, valet := t[0], t[1]
		reportGOMAXPROCS(b)
		reportSide(b, "bare-", bare)
		reportSide(b, "valet-", valet)
		reportRatios(b, "x-time", "x-", valet, bare, true)
	})
}

// BenchmarkHistoryGrowth/curve measures one message (the 5 turns × 3
// parallel calls of BenchmarkConversation) in a conversation with 0, about
// 40 and about 200 prior messages, and the bare loop sending the same prior
// messages (a snapshot of valet's history) before the user's message, all
// six in interleaved blocks of one run:
//
//	go test -run '^$' -bench BenchmarkHistoryGrowth -benchtime 2s ./agent/
//
// p0 is a fresh conversation each time (Forget after each message). p40 is
// a conversation at the default MaxHistoryMessages (40), p200 one at
// MaxHistoryMessages 200; both are primed with the same workload until the
// history stops growing and stay there (each message adds 22 and the cap
// drops as many; the trim keeps tool calls paired, so a few fewer than the
// cap remain: the exact numbers are the metrics p40-prior and p200-prior,
// checked again at the end). Their messages are followed by a Forget of an
// empty conversation, so every valet side pays the same bookkeeping.
//
// valet caps what it sends at MaxHistoryMessages besides the system
// prompt, the bare loop sends every prior message: pN-valet-sent and
// pN-bare-sent are the messages of the last model call of a conversation
// (checked on every one).
//
// Metrics: per side and per conversation pN-valet-/pN-bare- ns/conv (wall),
// cpu-ns/conv (user+sys of the process), allocs/conv, B/conv;
// x-fresh-N = valet at N prior messages / valet in a fresh conversation
// (wall; x-fresh-N-cpu, -allocs, -bytes likewise), the target being
// x-fresh-40 ≤ 1.3; x-bare-N = valet / bare loop at the same history length
// (wall; x-bare-N-cpu likewise).
func BenchmarkHistoryGrowth(b *testing.B) {
	b.Run("curve", func(b *testing.B) {
		model := newBenchModel(benchTurns, benchCalls, "get_weather", "web_search", "calculator")
		cfg := agent.Config{Logger: benchLog, LLM: model, SystemPrompt: "You are a benchmark.", Tools: benchTools()}
		o40, err := agent.NewOrchestrator(cfg) // MaxHistoryMessages: the default, 40
		if err != nil {
			b.Fatal(err)
		}
		cfg.Loop.MaxHistoryMessages = 200
		o200, err := agent.NewOrchestrator(cfg)
		if err != nil {
			b.Fatal(err)
		}
		fresh := agent.Message{TenantID: "bench", ConversationID: "fresh", Text: benchText}
		long := agent.Message{TenantID: "bench", ConversationID: "long", Text: benchText}
		h40 := primeHistory(b, o40, long, 40)
		h200 := primeHistory(b, o200, long, 200)
		specs := o40.Tools()

		sides := []side{
			valetSide(b, "p0-valet", o40, model, fresh, fresh.ConversationID, 0, 40),
			bareSide(b, "p0-bare", model, specs, nil),
			valetSide(b, "p40-valet", o40, model, long, "other", len(h40), 40),
			bareSide(b, "p40-bare", model, specs, h40),
			valetSide(b, "p200-valet", o200, model, long, "other", len(h200), 200),
			bareSide(b, "p200-bare", model, specs, h200),
		}
		t := interleave(b, 200, sides...)
		checkHistoryLen(b, o40, long, len(h40))
		checkHistoryLen(b, o200, long, len(h200))

		reportGOMAXPROCS(b)
		b.ReportMetric(float64(len(h40)), "p40-prior")
		b.ReportMetric(float64(len(h200)), "p200-prior")
		for i, s := range sides {
			reportSide(b, s.name+"-", t[i])
			b.ReportMetric(float64(*s.sent), s.name+"-sent")
		}
		v0, v40, v200 := t[0], t[2], t[4]
		reportRatios(b, "x-fresh-40", "x-fresh-40-", v40, v0, true)
		reportRatios(b, "x-fresh-200", "x-fresh-200-", v200, v0, true)
		reportRatios(b, "x-bare-0", "x-bare-0-", v0, t[1], false)
		reportRatios(b, "x-bare-40", "x-bare-40-", v40, t[3], false)
		reportRatios(b, "x-bare-200", "x-bare-200-", v200, t[5], false)
	})
}

// primeHistory handles m in o until its history stops growing, which it
// must do within 22 messages of limit, and returns that history.
func primeHistory(b *testing.B, o *agent.Orchestrator, m agent.Message, limit int) []llm.Message {
	ctx := context.Background()
	prev := -1
	for range limit + 2 {
		res, err := o.HandleMessage(ctx, m)
		checkValet(b, res, err, benchTurns, benchCalls)
		h, err := o.History(ctx, m.TenantID, m.ConversationID)
		if err != nil {
			b.Fatal(err)
		}
		if len(h) == prev {
			if per := 2 + benchTurns*(1+benchCalls); len(h) > limit || len(h) <= limit-per {
				b.Fatalf("history settled at %d messages, want %d or a few fewer", len(h), limit)
			}
			return h
		}
		prev = len(h)
	}
	b.Fatalf("history did not settle at %d messages (last %d)", limit, prev)
	return nil
}

// checkHistoryLen fails b unless the history of m's conversation has n
// messages.
func checkHistoryLen(b *testing.B, o *agent.Orchestrator, m agent.Message, n int) {
	h, err := o.History(context.Background(), m.TenantID, m.ConversationID)
	if err != nil || len(h) != n {
		b.Fatalf("history has %d messages (err=%v), want %d", len(h), err, n)
	}
}

// BenchmarkParallelTools: 3 turns of 5 tools that each take 20 ms. Run one
// after another that is 300 ms; fully parallel it is the 60 ms ideal.
// ms/conv is the wall time of one conversation, x-ideal its ratio to 60 ms.
func BenchmarkParallelTools(b *testing.B) {
	const turns, calls, latency = 3, 5, 20 * time.Millisecond
	sleep := tool.New("sleep", "waits 20ms", func(ctx context.Context, in struct {
		N int `json:"n"`
	}) (string, error) {
		t := time.NewTimer(latency)
		defer t.Stop()
		select {
		case <-t.C:
			return "slept", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	})
	model := newBenchModel(turns, calls, "sleep")
	o, err := agent.NewOrchestrator(agent.Config{Logger: benchLog, LLM: model, Tools: []tool.Tool{sleep}})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	m := agent.Message{TenantID: "bench", ConversationID: "p", Text: "go"}
	start := time.Now()
	for b.Loop() {
		res, err := o.HandleMessage(ctx, m)
		checkValet(b, res, err, turns, calls)
		_ = o.Forget(ctx, m.TenantID, m.ConversationID)
	}
	per := time.Since(start) / time.Duration(b.N)
	b.ReportMetric(float64(per)/float64(time.Millisecond), "ms/conv")
	b.ReportMetric(float64(per)/float64(turns*latency), "x-ideal")
}

// BenchmarkBudget measures what a Budget costs: one message (5 turns × 3
// parallel calls) without a budget and with one that is never reached
// (tokens, wall clock and tool calls all checked every turn), in
// interleaved blocks of one run:
//
//	go test -run '^$' -bench BenchmarkBudget -benchtime 3s ./agent/
//
// x-budget (wall), x-budget-cpu, x-budget-allocs, x-budget-bytes = with
// a budget / without. Without a budget the loop's only check is a nil
// pointer test.
func BenchmarkBudget(b *testing.B) {
	b.Run("ratio", func(b *testing.B) {
		model := newBenchModel(benchTurns, benchCalls, "get_weather", "web_search", "calculator")
		o, err := agent.NewOrchestrator(agent.Config{Logger: benchLog, LLM: model, SystemPrompt: "You are a benchmark.", Tools: benchTools()})
		if err != nil {
			b.Fatal(err)
		}
		m := agent.Message{TenantID: "bench", ConversationID: "c", Text: benchText}
		mb := m
		mb.Budget = agent.Budget{MaxTokens: 1 << 30, MaxWall: time.Hour, MaxToolCalls: 1 << 20}
		t := interleave(b, 500,
			valetSide(b, "unset", o, model, m, m.ConversationID, 0, agent.DefaultMaxHistoryMessages),
			valetSide(b, "set", o, model, mb, mb.ConversationID, 0, agent.DefaultMaxHistoryMessages),
		)
		reportGOMAXPROCS(b)
		reportSide(b, "unset-", t[0])
		reportSide(b, "set-", t[1])
		reportRatios(b, "x-budget", "x-budget-", t[1], t[0], true)
	})
}

// benchLog drops every line: benchmarks measure runs, not a log handler
// (a run writes one INFO line when it ends).
var benchLog = slog.New(slog.DiscardHandler)
