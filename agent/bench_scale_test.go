package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"runtime"
	"runtime/metrics"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/tool"
)

// scaleLatency is the latency of every model call and every tool call in
// BenchmarkScale.
const scaleLatency = 5 * time.Millisecond

// scaleIdeal is the wall time of one conversation with nothing but the
// latencies: benchTurns+1 model calls and benchTurns tool turns whose calls
// run in parallel.
const scaleIdeal = (2*benchTurns + 1) * scaleLatency

// scaleHosts is how many host goroutines BenchmarkScale starts to measure
// the stack a host's new goroutine gets while the conversations are parked.
const scaleHosts = 1000

// scaleGate marks the arguments of the calls of the last tool turn, where
// the parked rounds hold every conversation.
const scaleGate = "gate"

// BenchmarkScale runs N simultaneous conversations (N = 2,000 and 20,000),
// valet and the hand-written bare loop in the same run, each conversation
// the workload of BenchmarkConversation (5 turns of 3 parallel tool calls,
// then the answer) with every model call and every tool call taking 5 ms
// (a timer, ctx honoured): the ideal wall time of one conversation is
// 55 ms.
//
//	go test -run '^$' -bench 'BenchmarkScale' -benchtime 2x ./agent/
//	go test -run '^$' -bench 'BenchmarkScale/N=2000$' -benchtime 3x ./agent/
//
// Each iteration runs four rounds, valet and bare alternating which goes
// first, after one unmeasured round of each kind (so the runtime's pools of
// goroutines and stacks are as large as a round needs on both sides):
//
// Wall rounds start the N conversations at once and wait for the last.
// Metrics per side (valet-, bare-): wall-ms and x-ideal (wall / 55 ms),
// cpu-ms (user+sys of the process over the round, GC included), gcs
// (collections during the round), peak-heap-B/conv and peak-stack-B/conv
// (the highest heap objects and goroutine stacks of the runtime sampled
// every millisecond, less a baseline read before the start, / N), and
// start-max-B (the largest starting stack of a new goroutine the runtime
// chose during the round, /gc/stack/starting-size:bytes: with
// adaptivestackstart, the average stack in use at the last collection).
// x-wall and x-cpu are valet / bare.
//
// Parked rounds hold every conversation inside the calls of its last tool
// turn (after their 5 ms), run two collections and read: heap-B/conv and
// stack-B/conv (HeapAlloc and StackInuse against a baseline read after GC
// before the start, / N; each conversation's driving goroutine counts on
// both sides), x-heap+stack (valet's heap+stack / bare's, the issue's
// target ≤ 1.5), host-start-B (the runtime's starting stack size then) and
// host-stack-B (StackInuse grown by scaleHosts host goroutines started
// then, each blocked at once, / scaleHosts: the stack a host's new
// goroutine really gets while valet, or the bare loop, is busy; x-host-stack
// is valet / bare, the target ≤ 1). idle-host-start-B is the starting size
// after two collections with nothing running.
//
// Every conversation is checked: 6 model calls, 15 successful tool calls,
// the answer. The bare loop's tool table is shared by its conversations.
func BenchmarkScale(b *testing.B) {
	for _, n := range []int{2000, 20000} {
		b.Run("N="+strconv.Itoa(n), func(b *testing.B) { runScale(b, n) })
	}
}

func runScale(b *testing.B, n int) {
	s := newScaleBench(n)
	rounds := [4]func() scaleFigures{
		func() scaleFigures { return s.round(b, s.valetConv(b), false) },
		func() scaleFigures { return s.round(b, s.bareConv(), false) },
		func() scaleFigures { return s.round(b, s.valetConv(b), true) },
		func() scaleFigures { return s.round(b, s.bareConv(), true) },
	}
	for _, r := range rounds { // warm-up
		r()
	}
	var sum [4]scaleFigures
	k := 0
	for b.Loop() {
		for j := range rounds {
			i := j ^ (k & 1) // valet first, then bare first
			sum[i].add(rounds[i]())
		}
		k++
	}
	for i := range sum {
		sum[i].div(float64(k))
	}
	gc2()
	idleStart := readMetrics(metricStartStack)[0]

	vw, bw, vp, bp := sum[0], sum[1], sum[2], sum[3]
	reportGOMAXPROCS(b)
	b.ReportMetric(float64(n), "conversations")
	b.ReportMetric(ms(scaleIdeal), "ideal-ms")
	for _, side := range []struct {
		name       string
		wall, park scaleFigures
	}{{"valet-", vw, vp}, {"bare-", bw, bp}} {
		b.ReportMetric(ms(side.wall.wall), side.name+"wall-ms")
		b.ReportMetric(float64(side.wall.wall)/float64(scaleIdeal), side.name+"x-ideal")
		b.ReportMetric(ms(side.wall.cpu), side.name+"cpu-ms")
		b.ReportMetric(side.wall.gcs, side.name+"gcs")
		b.ReportMetric(side.wall.peakHeap, side.name+"peak-heap-B/conv")
		b.ReportMetric(side.wall.peakStack, side.name+"peak-stack-B/conv")
		b.ReportMetric(side.wall.startMax, side.name+"start-max-B")
		b.ReportMetric(side.park.heap, side.name+"heap-B/conv")
		b.ReportMetric(side.park.stack, side.name+"stack-B/conv")
		b.ReportMetric(side.park.hostStart, side.name+"host-start-B")
		b.ReportMetric(side.park.hostStack, side.name+"host-stack-B")
	}
	b.ReportMetric(idleStart, "idle-host-start-B")
	b.ReportMetric(float64(vw.wall)/float64(bw.wall), "x-wall")
	b.ReportMetric(float64(vw.cpu)/float64(bw.cpu), "x-cpu")
	b.ReportMetric((vp.heap+vp.stack)/(bp.heap+bp.stack), "x-heap+stack")
	b.ReportMetric(vp.hostStack/bp.hostStack, "x-host-stack")
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// scaleFigures are one round's figures: wall rounds fill the first group,
// parked rounds the second; sizes are per conversation, in bytes.
type scaleFigures struct {
	wall, cpu                time.Duration
	gcs, peakHeap, peakStack float64
	startMax                 float64
	heap, stack              float64
	hostStart, hostStack     float64
}

func (f *scaleFigures) add(g scaleFigures) {
	f.wall += g.wall
	f.cpu += g.cpu
	f.gcs += g.gcs
	f.peakHeap += g.peakHeap
	f.peakStack += g.peakStack
	f.startMax += g.startMax
	f.heap += g.heap
	f.stack += g.stack
	f.hostStart += g.hostStart
	f.hostStack += g.hostStack
}

func (f *scaleFigures) div(k float64) {
	f.wall = time.Duration(float64(f.wall) / k)
	f.cpu = time.Duration(float64(f.cpu) / k)
	f.gcs /= k
	f.peakHeap /= k
	f.peakStack /= k
	f.startMax /= k
	f.heap /= k
	f.stack /= k
	f.hostStart /= k
	f.hostStack /= k
}

// The runtime metrics a wall round samples, in this order.
const (
	metricHeap       = "/memory/classes/heap/objects:bytes"
	metricStacks     = "/memory/classes/heap/stacks:bytes"
	metricStartStack = "/gc/stack/starting-size:bytes"
	metricGCs        = "/gc/cycles/total:gc-cycles"
	metricAllocs     = "/gc/heap/allocs:objects"      // tiny objects apart:
	metricTinyAllocs = "/gc/heap/tiny/allocs:objects" // their sum is MemStats.Mallocs
	metricAllocBytes = "/gc/heap/allocs:bytes"        // MemStats.TotalAlloc
)

// readMetrics reads the named runtime metrics (all uint64) as float64s.
func readMetrics(names ...string) []float64 {
	samples := make([]metrics.Sample, len(names))
	for i, name := range names {
		samples[i].Name = name
	}
	metrics.Read(samples)
	out := make([]float64, len(names))
	for i, s := range samples {
		if s.Value.Kind() == metrics.KindUint64 {
			out[i] = float64(s.Value.Uint64())
		}
	}
	return out
}

// scaleBench holds what every round of BenchmarkScale shares.
type scaleBench struct {
	n        int
	model    *slowModel
	tools    []tool.Tool
	handlers map[string]benchHandler // the bare loop's, shared
	specs    []llm.ToolSpec
	ids      []string
	gate     atomic.Pointer[parkGate] // set during parked rounds
}

// parkGate holds the calls of the last tool turn until released.
type parkGate struct {
	in      atomic.Int64
	want    int64
	allIn   chan struct{}
	release chan struct{}
}

// slowModel is the scripted model with a latency per call.
type slowModel struct{ *benchModel }

func (m slowModel) Complete(ctx context.Context, req llm.Request) (*llm.Response, error) {
	if err := sleepCtx(ctx, scaleLatency); err != nil {
		return nil, err
	}
	return m.benchModel.Complete(ctx, req)
}

func (m slowModel) Stream(ctx context.Context, req llm.Request) iter.Seq2[llm.Chunk, error] {
	return func(yield func(llm.Chunk, error) bool) {
		r, err := m.Complete(ctx, req)
		yield(llm.Chunk{Response: r}, err)
	}
}

// sleepCtx waits d, or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func newScaleBench(n int) *scaleBench {
	s := &scaleBench{n: n}
	bm := newBenchModel(benchTurns, benchCalls, "get_weather", "web_search", "calculator")
	gated := map[string]string{
		"get_weather": `{"city":"` + scaleGate + `","days":2}`,
		"web_search":  `{"query":"` + scaleGate + `","limit":2}`,
		"calculator":  `{"expression":"` + scaleGate + `"}`,
	}
	last := bm.turns[len(bm.turns)-1].Message.ToolCalls
	for i := range last {
		last[i].Arguments = json.RawMessage(gated[last[i].Name])
	}
	s.model = &slowModel{bm}
	weather := func(ctx context.Context, in benchWeatherIn) (string, error) {
		if err := s.wait(ctx, in.City); err != nil {
			return "", err
		}
		return benchWeather(ctx, in)
	}
	search := func(ctx context.Context, in benchSearchIn) (string, error) {
		if err := s.wait(ctx, in.Query); err != nil {
			return "", err
		}
		return benchSearch(ctx, in)
	}
	calc := func(ctx context.Context, in benchCalcIn) (string, error) {
		if err := s.wait(ctx, in.Expression); err != nil {
			return "", err
		}
		return benchCalc(ctx, in)
	}
	s.tools = []tool.Tool{
		tool.New("get_weather", "Current weather for a city", weather),
		tool.New("web_search", "Search the web", search),
		tool.New("calculator", "Evaluate an arithmetic expression", calc),
	}
	s.handlers = map[string]benchHandler{
		"get_weather": bareHandler(weather),
		"web_search":  bareHandler(search),
		"calculator":  bareHandler(calc),
	}
	reg, err := tool.NewRegistry(s.tools...)
	if err != nil {
		panic(err)
	}
	s.specs = reg.Specs()
	s.ids = make([]string, n)
	for i := range s.ids {
		s.ids[i] = "scale-" + strconv.Itoa(i)
	}
	return s
}

// wait is a tool's latency; a call of the last turn (its argument arg is
// scaleGate) then waits at the gate of a parked round.
func (s *scaleBench) wait(ctx context.Context, arg string) error {
	if err := sleepCtx(ctx, scaleLatency); err != nil {
		return err
	}
	g := s.gate.Load()
	if g == nil || arg != scaleGate {
		return nil
	}
	if g.in.Add(1) == g.want {
		close(g.allIn)
	}
	select {
	case <-g.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// valetConv returns a round's conversation function on a new orchestrator
// (so no round keeps the history of the one before).
func (s *scaleBench) valetConv(b *testing.B) func(i int) error {
	// Timeouts far beyond a round: on a loaded machine 20,000 conversations
	// can take longer than the default 30 s per tool turn, and the bare
	// loop has none (their timers are armed all the same).
	cfg := agent.Config{Logger: benchLog, LLM: s.model, SystemPrompt: "You are a benchmark.", Tools: s.tools}
	cfg.Loop.ToolTimeout, cfg.Loop.LLMTimeout = time.Hour, time.Hour
	o, err := agent.NewOrchestrator(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	return func(i int) error {
		res, err := o.HandleMessage(ctx, agent.Message{TenantID: "bench", ConversationID: s.ids[i], Text: benchText})
		if err != nil {
			return err
		}
		if res.Status != agent.StatusCompleted || res.Turns != benchTurns+1 || len(res.ToolCalls) != benchTurns*benchCalls || res.Response == "" {
			return fmt.Errorf("valet: status %s, %d turns, %d tool calls", res.Status, res.Turns, len(res.ToolCalls))
		}
		for _, c := range res.ToolCalls {
			if !c.Success {
				return fmt.Errorf("valet: tool %s failed: %s", c.Name, c.Error)
			}
		}
		return nil
	}
}

func (s *scaleBench) bareConv() func(int) error {
	ctx := context.Background()
	return func(int) error {
		r, err := bareLoopWith(ctx, s.model, s.specs, s.handlers, nil, benchText)
		if err != nil {
			return err
		}
		if r.turns != benchTurns+1 || r.calls != benchTurns*benchCalls || r.failed != 0 || r.text == "" {
			return fmt.Errorf("bare: %+v", r)
		}
		return nil
	}
}

// round runs s.n conversations at once (conv(i) is the i-th) and returns
// its figures: a wall round's, or with parked a parked round's.
func (s *scaleBench) round(b *testing.B, conv func(int) error, parked bool) scaleFigures {
	var (
		f        scaleFigures
		wg       sync.WaitGroup
		once     sync.Once
		firstErr error
		failed   = make(chan struct{})
	)
	fail := func(err error) { once.Do(func() { firstErr = err; close(failed) }) }
	var g *parkGate
	if parked {
		g = &parkGate{want: int64(s.n * benchCalls), allIn: make(chan struct{}), release: make(chan struct{})}
		s.gate.Store(g)
		defer s.gate.Store(nil)
	}
	gc2()
	var m0 runtime.MemStats
	runtime.ReadMemStats(&m0)
	base := readMetrics(metricHeap, metricStacks, metricStartStack, metricGCs)
	stopSampling := make(chan struct{})
	sampled := make(chan [3]float64, 1)
	if !parked {
		go sample(base, stopSampling, sampled)
	}
	c0, _ := processCPU()
	t0 := time.Now()
	for i := range s.n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := conv(i); err != nil {
				fail(err)
			}
		}()
	}
	if parked {
		select {
		case <-g.allIn:
			f.heap, f.stack, f.hostStart, f.hostStack = s.measureParked(m0)
			close(g.release)
		case <-failed:
			close(g.release)
		}
	}
	wg.Wait()
	f.wall = time.Since(t0)
	c1, _ := processCPU()
	f.cpu = c1 - c0
	select {
	case <-failed:
		b.Fatal(firstErr)
	default:
	}
	if !parked {
		close(stopSampling)
		peak := <-sampled
		end := readMetrics(metricGCs)
		f.gcs = end[0] - base[3]
		f.peakHeap = (peak[0] - base[0]) / float64(s.n)
		f.peakStack = (peak[1] - base[1]) / float64(s.n)
		f.startMax = peak[2]
	}
	return f
}

// measureParked reads, with every conversation parked, the heap and stacks
// per conversation against m0, the runtime's starting stack size and the
// stack each of scaleHosts new host goroutines gets.
func (s *scaleBench) measureParked(m0 runtime.MemStats) (heap, stack, hostStart, hostStack float64) {
	gc2()
	var m1, m2 runtime.MemStats
	runtime.ReadMemStats(&m1)
	hostStart = readMetrics(metricStartStack)[0]
	var started, ended sync.WaitGroup
	hold := make(chan struct{})
	for range scaleHosts {
		started.Add(1)
		ended.Add(1)
		go func() {
			defer ended.Done()
			started.Done()
			<-hold
		}()
	}
	started.Wait()
	runtime.ReadMemStats(&m2)
	close(hold)
	ended.Wait()
	n := float64(s.n)
	heap = float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc)) / n
	stack = float64(int64(m1.StackInuse)-int64(m0.StackInuse)) / n
	hostStack = float64(int64(m2.StackInuse)-int64(m1.StackInuse)) / scaleHosts
	return heap, stack, hostStart, hostStack
}

// sample reads the heap, the stacks and the starting stack size every
// millisecond until stop is closed, then sends their highest values.
func sample(base []float64, stop <-chan struct{}, out chan<- [3]float64) {
	peak := [3]float64{base[0], base[1], base[2]}
	samples := []metrics.Sample{{Name: metricHeap}, {Name: metricStacks}, {Name: metricStartStack}}
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for {
		metrics.Read(samples)
		for i, s := range samples {
			peak[i] = max(peak[i], float64(s.Value.Uint64()))
		}
		select {
		case <-t.C:
		case <-stop:
			out <- peak
			return
		}
	}
}
