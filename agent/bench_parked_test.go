package agent_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/tool"
)

// parkedConvs is how many conversations BenchmarkParkedHeap holds at once.
const parkedConvs = 2000

// BenchmarkParkedHeap measures the memory of conversations parked in a tool
// call, valet and the bare loop in the same run:
//
//	go test -run '^$' -bench BenchmarkParkedHeap -benchtime 2s ./agent/
//
// 2,000 conversations start at once. The model's first reply calls three
// tools in one turn: park (blocks until released), get_weather and
// calculator (zero latency), so the parallel path is the one parked; its
// second reply is the answer. Once every conversation is inside park and
// the two other calls have returned (counted, no sleeps), two GCs run and the
// HeapAlloc and StackInuse deltas against a baseline read after GC — the
// orchestrator already made, the conversation IDs already built — are
// divided by 2,000: heap-B/conv and stack-B/conv (bare-heap-B/conv and
// bare-stack-B/conv for the bare loop; x-heap and x-stack the ratios). The
// driving goroutine of each conversation (a server's request goroutine)
// counts on both sides. The bare loop's tool table is shared by all its
// conversations, as a hand-written server would have it.
//
// After release and the end of every conversation, two more GCs:
// idle-heap-B/conv is the heap each finished conversation still holds
// (its history, the orchestrator's bookkeeping). The valet rounds run again
// with MaxTurns 50 (mt50-heap-B/conv, mt50-stack-B/conv,
// mt50-idle-heap-B/conv; x-idle-mt50 = idle at MaxTurns 50 / idle at the
// default, 1 when idle cost does not depend on MaxTurns).
// bare-idle-heap-B/conv checks the method: the bare loop keeps nothing.
//
// Every figure is the mean over the benchmark's iterations, after one
// unmeasured round of each kind (so the runtime's pools of goroutines are
// already as large as a round needs: the goroutine descriptors it keeps and
// reuses count on neither side). Each conversation is checked: 2 model
// calls, 3 successful tool calls.
func BenchmarkParkedHeap(b *testing.B) {
	p := newParkBench(parkedConvs)
	b.Logf("%d conversations parked at once; tools per turn: park, get_weather, calculator", p.n)
	cfg50 := p.config()
	cfg50.Loop.MaxTurns = 50
	rounds := []func() parkFigures{
		func() parkFigures { return p.valetRound(b, p.config()) },
		func() parkFigures { return p.bareRound(b) },
		func() parkFigures { return p.valetRound(b, cfg50) },
	}
	for _, r := range rounds { // warm-up
		r()
	}
	var sum [3]parkFigures
	n := 0
	for b.Loop() {
		for i, r := range rounds {
			f := r()
			sum[i].heap += f.heap
			sum[i].stack += f.stack
			sum[i].idle += f.idle
		}
		n++
	}
	for i := range sum {
		sum[i].heap /= float64(n)
		sum[i].stack /= float64(n)
		sum[i].idle /= float64(n)
	}
	valet, bare, mt50 := sum[0], sum[1], sum[2]
	reportGOMAXPROCS(b)
	b.ReportMetric(valet.heap, "heap-B/conv")
	b.ReportMetric(valet.stack, "stack-B/conv")
	b.ReportMetric(valet.idle, "idle-heap-B/conv")
	b.ReportMetric(bare.heap, "bare-heap-B/conv")
	b.ReportMetric(bare.stack, "bare-stack-B/conv")
	b.ReportMetric(bare.idle, "bare-idle-heap-B/conv")
	b.ReportMetric(valet.heap/bare.heap, "x-heap")
	b.ReportMetric(valet.stack/bare.stack, "x-stack")
	b.ReportMetric(mt50.heap, "mt50-heap-B/conv")
	b.ReportMetric(mt50.stack, "mt50-stack-B/conv")
	b.ReportMetric(mt50.idle, "mt50-idle-heap-B/conv")
	b.ReportMetric(mt50.idle/valet.idle, "x-idle-mt50")
}

// parkBench holds the tools, model and conversation IDs of
// BenchmarkParkedHeap, shared by every round.
type parkBench struct {
	n        int
	model    *benchModel
	tools    []tool.Tool
	handlers map[string]benchHandler // the bare loop's, shared
	specs    []llm.ToolSpec
	ids      []string

	// Set before a round's conversations start, read by the tools.
	inside  atomic.Int64  // tool calls entered in this round
	allIn   chan struct{} // closed when every call of the turn has entered
	release chan struct{} // closed to let the parked calls return
}

// parkFigures are one round's figures per conversation, in bytes.
type parkFigures struct{ heap, stack, idle float64 }

func newParkBench(n int) *parkBench {
	p := &parkBench{n: n, model: newBenchModel(1, 3, "park", "get_weather", "calculator")}
	park := func(ctx context.Context, _ struct{}) (string, error) {
		p.enter()
		select {
		case <-p.release:
			return "released", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	weather := func(ctx context.Context, in benchWeatherIn) (string, error) {
		s, err := benchWeather(ctx, in)
		p.enter() // once its result is made
		return s, err
	}
	calc := func(ctx context.Context, in benchCalcIn) (string, error) {
		s, err := benchCalc(ctx, in)
		p.enter() // once its result is made
		return s, err
	}
	p.tools = []tool.Tool{
		tool.New("park", "Waits until released", park),
		tool.New("get_weather", "Current weather for a city", weather),
		tool.New("calculator", "Evaluate an arithmetic expression", calc),
	}
	p.handlers = map[string]benchHandler{
		"park":        bareHandler(park),
		"get_weather": bareHandler(weather),
		"calculator":  bareHandler(calc),
	}
	reg, err := tool.NewRegistry(p.tools...)
	if err != nil {
		panic(err)
	}
	p.specs = reg.Specs()
	p.ids = make([]string, n)
	for i := range p.ids {
		p.ids[i] = "parked-" + strconv.Itoa(i)
	}
	return p
}

func (p *parkBench) config() agent.Config {
	return agent.Config{Logger: benchLog, LLM: p.model, SystemPrompt: "You are a benchmark.", Tools: p.tools}
}

// enter counts a tool call of the round; the last of the 3 per
// conversation to enter closes allIn.
func (p *parkBench) enter() {
	if p.inside.Add(1) == int64(3*p.n) {
		close(p.allIn)
	}
}

func (p *parkBench) valetRound(b *testing.B, cfg agent.Config) parkFigures {
	o, err := agent.NewOrchestrator(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	return p.round(b, o, func(i int) error {
		res, err := o.HandleMessage(ctx, agent.Message{TenantID: "bench", ConversationID: p.ids[i], Text: benchText})
		if err != nil {
			return err
		}
		if res.Status != agent.StatusCompleted || res.Turns != 2 || len(res.ToolCalls) != 3 {
			return fmt.Errorf("valet: status %s, %d turns, %d tool calls; want completed, 2, 3", res.Status, res.Turns, len(res.ToolCalls))
		}
		for _, c := range res.ToolCalls {
			if !c.Success {
				return fmt.Errorf("valet: tool %s failed: %s", c.Name, c.Error)
			}
		}
		return nil
	})
}

func (p *parkBench) bareRound(b *testing.B) parkFigures {
	ctx := context.Background()
	return p.round(b, nil, func(int) error {
		r, err := bareLoopWith(ctx, p.model, p.specs, p.handlers, nil, benchText)
		if err != nil {
			return err
		}
		if r.turns != 2 || r.calls != 3 || r.failed != 0 || r.text == "" {
			return fmt.Errorf("bare: %+v; want 2 turns, 3 calls, none failed", r)
		}
		return nil
	})
}

// round reads the baseline, starts p.n conversations (conv(i) runs the
// i-th), waits until all are parked, reads the parked figures, releases
// them, waits for their end and reads the idle figure. keep (the
// orchestrator) stays alive until then.
func (p *parkBench) round(b *testing.B, keep any, conv func(i int) error) parkFigures {
	p.inside.Store(0)
	p.allIn = make(chan struct{})
	p.release = make(chan struct{})
	var (
		m0, m1, m2 runtime.MemStats
		wg         sync.WaitGroup
		once       sync.Once
		firstErr   error
		failed     = make(chan struct{})
	)
	fail := func(err error) {
		once.Do(func() { firstErr = err; close(failed) })
	}
	gc2()
	runtime.ReadMemStats(&m0)
	for i := range p.n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := conv(i); err != nil {
				fail(err)
			}
			select {
			case <-p.release:
			default:
				fail(errors.New("a conversation ended before its tool call was released"))
			}
		}()
	}
	select {
	case <-p.allIn:
	case <-failed:
		close(p.release)
		wg.Wait()
		b.Fatal(firstErr)
	}
	gc2()
	runtime.ReadMemStats(&m1)
	close(p.release)
	wg.Wait()
	select {
	case <-failed:
		b.Fatal(firstErr)
	default:
	}
	gc2()
	runtime.ReadMemStats(&m2)
	runtime.KeepAlive(keep)
	per := func(after, before uint64) float64 { return float64(int64(after)-int64(before)) / float64(p.n) }
	return parkFigures{
		heap:  per(m1.HeapAlloc, m0.HeapAlloc),
		stack: per(m1.StackInuse, m0.StackInuse),
		idle:  per(m2.HeapAlloc, m0.HeapAlloc),
	}
}

// gc2 runs two full collections, so what is unreachable is gone (also what
// only a finalizer or a cleared weak pointer kept).
func gc2() {
	runtime.GC()
	runtime.GC()
}
