package delegate

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/valetkit/valet/budget"
	"github.com/valetkit/valet/clock"
	"github.com/valetkit/valet/internal/textsafe"
)

// Defaults of a zero MemoryConfig (pgdelegate's Config shares them).
const (
	// DefaultParallel is how many tasks an engine runs at once.
	DefaultParallel = 4
	// DefaultRetention is how long an ended, delivered graph and the
	// results are kept.
	DefaultRetention = 24 * time.Hour
	// DefaultMaxAttempts is how many runs of a task may return an error
	// before the task fails.
	DefaultMaxAttempts = 3
	// DefaultRetryDelay is the wait before the first retry of a task's
	// run or a delivery; it doubles with each further one.
	DefaultRetryDelay = time.Second
	// DefaultMaxRetryDelay caps that wait.
	DefaultMaxRetryDelay = 5 * time.Minute
	// maxErrorLen bounds a task's Error.
	maxErrorLen = 512
)

// MemoryConfig configures a Memory engine. The zero value means the
// documented defaults.
type MemoryConfig struct {
	// Parallel is how many tasks run at once, over all graphs; as many
	// deliveries may run beside them. Default: DefaultParallel (4).
	Parallel int
	// Retention is how long a graph is kept once it ended and was
	// delivered, and a result once stored (a graph's results as long as
	// their graph): older ones are dropped, so memory stays bounded.
	// Default: DefaultRetention (24h).
	Retention time.Duration
	// MaxAttempts is how many runs of a task may return an error before
	// the task fails. Default: DefaultMaxAttempts (3).
	MaxAttempts int
	// RetryDelay is the wait before a task's run is tried again after an
	// error, and before a failed delivery is tried again; it doubles with
	// each attempt, up to MaxRetryDelay. Default: DefaultRetryDelay (1s).
	RetryDelay time.Duration
	// MaxRetryDelay caps RetryDelay's doubling; a delivery is retried at
	// this interval for as long as it fails.
	// Default: DefaultMaxRetryDelay (5m).
	MaxRetryDelay time.Duration
	// Clock gives the times of results, tasks and graphs, and times the
	// retries. Default: clock.System.
	Clock clock.Clock
}

// Memory is an Engine in process memory: its graphs and results end with
// the process. It is safe for concurrent use. The zero value is not
// usable: call NewMemory.
type Memory struct {
	cfg MemoryConfig

	mu        sync.Mutex
	results   map[key]Result
	graphs    map[key]*memGraph
	ready     []taskRef // tasks whose dependencies completed, FIFO
	later     []taskRef // tasks to retry at their retryAt
	deliver   []key     // ended graphs not yet delivered
	running   bool      // a Run is working
	tasks     int       // tasks under way
	delivers  int       // deliveries under way
	lastPrune time.Time // when old graphs and results were last dropped
	wake      chan struct{}
}

var (
	_ Engine    = (*Memory)(nil)
	_ Canceller = (*Memory)(nil)
)

type key struct{ tenant, id string }

type taskRef struct {
	graph key
	task  int
}

type memGraph struct {
	g          Graph
	dependants [][]int     // by task index
	waiting    []int       // dependencies not yet completed, by task index
	retryAt    []time.Time // by task index
	left       int         // tasks not ended
	deliverAt  time.Time
	tries      int                  // failed deliveries
	delivering bool                 // a delivery is under way
	running    int                  // its tasks under way
	stop       []context.CancelFunc // by task index: cancels its run under way
}

// NewMemory returns an in-memory engine configured by cfg, or an error
// wrapping ErrInvalid for a negative setting.
func NewMemory(cfg MemoryConfig) (*Memory, error) {
	if cfg.Parallel < 0 || cfg.Retention < 0 || cfg.MaxAttempts < 0 || cfg.RetryDelay < 0 || cfg.MaxRetryDelay < 0 {
		return nil, fmt.Errorf("%w: negative setting in MemoryConfig %+v", ErrInvalid, cfg)
	}
	cfg.Parallel = cmp.Or(cfg.Parallel, DefaultParallel)
	cfg.Retention = cmp.Or(cfg.Retention, DefaultRetention)
	cfg.MaxAttempts = cmp.Or(cfg.MaxAttempts, DefaultMaxAttempts)
	cfg.RetryDelay = cmp.Or(cfg.RetryDelay, DefaultRetryDelay)
	cfg.MaxRetryDelay = max(cmp.Or(cfg.MaxRetryDelay, DefaultMaxRetryDelay), cfg.RetryDelay)
	cfg.Clock = clock.Or(cfg.Clock)
	return &Memory{cfg: cfg, results: map[key]Result{}, graphs: map[key]*memGraph{}, wake: make(chan struct{}, 1)}, nil
}

// RetryDelay returns the wait before retry n (1 for the first) when the
// first waits first and the waits double up to most.
func RetryDelay(first, most time.Duration, n int) time.Duration {
	d := first
	for i := 1; i < n && d < most; i++ {
		d *= 2
	}
	return min(d, most)
}

// ErrorLine returns err's text fit for a task's Error: on one line,
// bounded.
func ErrorLine(err error) string {
	s := textsafe.Line(err.Error())
	if len(s) > maxErrorLen {
		cut := maxErrorLen
		for cut > 0 && s[cut]&0xc0 == 0x80 {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

func (m *Memory) signal() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// PutResult stores r (see Results).
func (m *Memory) PutResult(ctx context.Context, r Result) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := r.Check(); err != nil {
		return err
	}
	now := m.cfg.Clock.Now()
	if r.CreatedAt.IsZero() {
		r.CreatedAt = now
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.prune(now)
	k := key{r.TenantID, r.ID}
	if _, ok := m.results[k]; ok {
		return fmt.Errorf("%w: result %q", ErrExists, r.ID)
	}
	m.results[k] = r
	return nil
}

// Result returns a stored result (see Results).
func (m *Memory) Result(ctx context.Context, tenantID, id string) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.results[key{tenantID, id}]
	if !ok {
		return Result{}, fmt.Errorf("%w: result %q", ErrNotFound, clip(id))
	}
	return r, nil
}

// Forget drops the conversation's results and graphs (see Engine).
func (m *Memory) Forget(ctx context.Context, tenantID, conversationID string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, r := range m.results {
		if k.tenant == tenantID && r.ConversationID == conversationID {
			delete(m.results, k)
		}
	}
	for k, mg := range m.graphs {
		if k.tenant == tenantID && mg.g.ConversationID == conversationID {
			delete(m.graphs, k) // dispatch, finish and delivered skip what is gone
		}
	}
	return nil
}

// Cancel ends the conversation's running graphs as cancelled (see
// Canceller): the ctx of their runs under way is cancelled before it
// returns.
func (m *Memory) Cancel(ctx context.Context, tenantID, conversationID string) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	now := m.cfg.Clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for k, mg := range m.graphs {
		if k.tenant != tenantID || mg.g.ConversationID != conversationID || mg.g.Status != GraphRunning {
			continue
		}
		for i := range mg.g.Tasks {
			t := &mg.g.Tasks[i]
			if t.Status.Ended() {
				continue
			}
			t.Status, t.Error, t.EndedAt = TaskCancelled, CancelledError, now
			if stop := mg.stop[i]; stop != nil {
				stop() // finish drops its output
			}
		}
		mg.g.Status, mg.g.EndedAt, mg.left = GraphCancelled, now, 0
		n++
	}
	return n, nil
}

// Submit checks and stores g (see Engine).
func (m *Memory) Submit(ctx context.Context, g Graph) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	g = g.Clone()
	if err := g.Check(); err != nil {
		return err
	}
	now := m.cfg.Clock.Now()
	g.Status, g.Delivered, g.CreatedAt, g.EndedAt, g.Consumed = GraphRunning, false, now, time.Time{}, budget.Consumed{}
	mg := &memGraph{g: g, dependants: make([][]int, len(g.Tasks)), waiting: make([]int, len(g.Tasks)),
		retryAt: make([]time.Time, len(g.Tasks)), left: len(g.Tasks), stop: make([]context.CancelFunc, len(g.Tasks))}
	index := make(map[string]int, len(g.Tasks))
	for i := range g.Tasks {
		index[g.Tasks[i].ID] = i
	}
	for i := range g.Tasks {
		t := &g.Tasks[i]
		t.Status, t.ResultID, t.Error, t.Attempts, t.StartedAt, t.EndedAt = TaskPending, "", "", 0, time.Time{}, time.Time{}
		mg.waiting[i] = len(t.DependsOn)
		for _, d := range t.DependsOn {
			mg.dependants[index[d]] = append(mg.dependants[index[d]], i)
		}
	}
	k := key{g.TenantID, g.ID}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.prune(now)
	if _, ok := m.graphs[k]; ok {
		return fmt.Errorf("%w: graph %q", ErrExists, g.ID)
	}
	m.graphs[k] = mg
	for i := range g.Tasks {
		if mg.waiting[i] == 0 {
			m.ready = append(m.ready, taskRef{k, i})
		}
	}
	m.signal()
	return nil
}

// Graph returns a copy of a stored graph (see Engine).
func (m *Memory) Graph(ctx context.Context, tenantID, id string) (Graph, error) {
	if err := ctx.Err(); err != nil {
		return Graph{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	mg, ok := m.graphs[key{tenantID, id}]
	if !ok {
		return Graph{}, fmt.Errorf("%w: graph %q", ErrNotFound, clip(id))
	}
	return mg.g.Clone(), nil
}

// Run works tasks and deliveries until ctx ends (see Engine). It returns
// ErrRunning while another Run of m works, and an error wrapping
// ErrInvalid for a nil exec. A task whose run ctx's end cut short is run
// again by the next Run, as is a delivery.
func (m *Memory) Run(ctx context.Context, exec Executor) error {
	if exec == nil {
		return fmt.Errorf("%w: Run needs an Executor", ErrInvalid)
	}
	m.mu.Lock()
	if m.running {
		m.mu.Unlock()
		return ErrRunning
	}
	m.running = true
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.running = false
		m.mu.Unlock()
	}()

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for {
		next := m.dispatch(runCtx, exec, &wg)
		var timer clock.Timer
		var fire <-chan time.Time
		if !next.IsZero() {
			timer = m.cfg.Clock.NewTimer(max(next.Sub(m.cfg.Clock.Now()), 0))
			fire = timer.C()
		}
		select {
		case <-ctx.Done():
		case <-m.wake:
		case <-fire:
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			cancel()
			wg.Wait()
			return nil
		}
	}
}

// dispatch starts the due deliveries, then the ready tasks, within the
// limits, and returns when the next retry is due (zero: none waits).
func (m *Memory) dispatch(ctx context.Context, exec Executor, wg *sync.WaitGroup) time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.cfg.Clock.Now()
	m.prune(now)
	var next time.Time
	soonest := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	// Deliveries first: a restart tells of what ended before it.
	keep := m.deliver[:0]
	for _, k := range m.deliver {
		mg, ok := m.graphs[k]
		if !ok || mg.g.Delivered {
			continue
		}
		keep = append(keep, k)
		if mg.delivering {
			continue
		}
		if mg.deliverAt.After(now) {
			soonest(mg.deliverAt)
			continue
		}
		if m.delivers >= m.cfg.Parallel {
			continue
		}
		mg.delivering = true
		m.delivers++
		g := mg.g.Clone()
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := deliver(ctx, exec, &g)
			m.delivered(ctx, k, err)
		}()
	}
	m.deliver = keep
	// Tasks whose retry is due join the ready ones.
	waitLater := m.later[:0]
	for _, ref := range m.later {
		mg, ok := m.graphs[ref.graph]
		if !ok {
			continue
		}
		if at := mg.retryAt[ref.task]; at.After(now) {
			soonest(at)
			waitLater = append(waitLater, ref)
			continue
		}
		m.ready = append(m.ready, ref)
	}
	m.later = waitLater
	var held []taskRef // of graphs that run one task at a time, busy
	for len(m.ready) > 0 && m.tasks < m.cfg.Parallel {
		ref := m.ready[0]
		m.ready = m.ready[1:]
		mg, ok := m.graphs[ref.graph]
		if !ok || mg.g.Tasks[ref.task].Status != TaskPending {
			continue
		}
		if mg.running > 0 && OneAtATime(mg.g.Budget) {
			held = append(held, ref)
			continue
		}
		t := &mg.g.Tasks[ref.task]
		spent := mg.g.Consumed
		spent.Wall = now.Sub(mg.g.CreatedAt)
		if why := Spent(mg.g.Budget, spent); why != "" {
			m.fail(ref.graph, mg, ref.task, why, now)
			continue
		}
		t.Status, t.StartedAt = TaskRunning, now
		deps := make(map[string]Result, len(t.DependsOn))
		for _, d := range t.DependsOn {
			deps[d] = m.results[key{ref.graph.tenant, ResultID(mg.g.ID, d)}]
		}
		g := mg.g.Clone()
		tc := g.Tasks[ref.task]
		m.tasks++
		mg.running++
		tctx, stop := context.WithCancel(ctx)
		mg.stop[ref.task] = stop
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer stop()
			out, err := runTask(tctx, exec, &g, &tc, deps)
			m.finish(ctx, ref, out, err)
		}()
	}
	if len(held) > 0 { // first when their graph's task ends (finish signals)
		m.ready = append(held, m.ready...)
	}
	if len(m.ready) == 0 {
		m.ready = nil // let a long queue's array go
	}
	return next
}

// finish records the end of a task's run.
func (m *Memory) finish(ctx context.Context, ref taskRef, out Output, err error) {
	defer m.signal()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.tasks--
	mg, ok := m.graphs[ref.graph]
	if !ok {
		return
	}
	mg.running--
	mg.stop[ref.task] = nil
	now := m.cfg.Clock.Now()
	t := &mg.g.Tasks[ref.task]
	if t.Status == TaskCancelled { // Cancel ended it: its output is dropped
		return
	}
	if err != nil {
		if ctx.Err() != nil { // Run is stopping: the next Run runs it again
			t.Status = TaskPending
			m.ready = append([]taskRef{ref}, m.ready...)
			return
		}
		t.Attempts++
		if t.Attempts < m.cfg.MaxAttempts {
			t.Status = TaskPending
			mg.retryAt[ref.task] = now.Add(RetryDelay(m.cfg.RetryDelay, m.cfg.MaxRetryDelay, t.Attempts))
			m.later = append(m.later, ref)
			return
		}
		m.fail(ref.graph, mg, ref.task, fmt.Sprintf("its run failed %d times: %s", t.Attempts, ErrorLine(err)), now)
		return
	}
	out = out.Clean()
	g := &mg.g
	r := Result{ID: ResultID(g.ID, t.ID), TenantID: g.TenantID, ConversationID: g.ConversationID,
		GraphID: g.ID, TaskID: t.ID, Skill: t.Skill, Text: out.Text, Status: out.Status, Usage: out.Usage, CreatedAt: now}
	m.results[ref.graph.withID(r.ID)] = r // stored before the task is completed and its dependants start
	t.ResultID = r.ID
	g.Consumed = add(g.Consumed, out.Usage)
	if out.Status == ResultFailed {
		m.fail(ref.graph, mg, ref.task, "the sub-agent failed", now)
		return
	}
	t.Status, t.EndedAt = TaskCompleted, now
	for _, d := range mg.dependants[ref.task] {
		mg.waiting[d]--
		if mg.waiting[d] == 0 && g.Tasks[d].Status == TaskPending {
			m.ready = append(m.ready, taskRef{ref.graph, d})
		}
	}
	m.ended(ref.graph, mg, now)
}

func (k key) withID(id string) key { return key{k.tenant, id} }

// fail marks task i failed for why, and its dependants, transitively,
// blocked by it.
func (m *Memory) fail(k key, mg *memGraph, i int, why string, now time.Time) {
	t := &mg.g.Tasks[i]
	t.Status, t.Error, t.EndedAt = TaskFailed, why, now
	m.ended(k, mg, now)
	queue := append([]int(nil), mg.dependants[i]...)
	for len(queue) > 0 {
		d := queue[0]
		queue = queue[1:]
		dt := &mg.g.Tasks[d]
		if dt.Status.Ended() {
			continue
		}
		dt.Status, dt.EndedAt = TaskBlocked, now
		dt.Error = fmt.Sprintf("blocked: task %q it depends on failed", t.ID)
		m.ended(k, mg, now)
		queue = append(queue, mg.dependants[d]...)
	}
}

// ended counts a task's end, and ends the graph after its last.
func (m *Memory) ended(k key, mg *memGraph, now time.Time) {
	mg.left--
	if mg.left > 0 {
		return
	}
	mg.g.Status, mg.g.EndedAt = GraphCompleted, now
	for _, t := range mg.g.Tasks {
		if t.Status != TaskCompleted {
			mg.g.Status = GraphFailed
			break
		}
	}
	mg.deliverAt = now
	m.deliver = append(m.deliver, k)
	m.signal() // Run's next dispatch delivers it
}

// delivered records the end of a delivery.
func (m *Memory) delivered(ctx context.Context, k key, err error) {
	defer m.signal()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.delivers--
	mg, ok := m.graphs[k]
	if !ok {
		return
	}
	mg.delivering = false
	now := m.cfg.Clock.Now()
	switch {
	case err == nil:
		mg.g.Delivered = true
	case ctx.Err() != nil: // Run is stopping: the next Run delivers it
	default:
		mg.tries++
		mg.deliverAt = now.Add(RetryDelay(m.cfg.RetryDelay, m.cfg.MaxRetryDelay, mg.tries))
	}
}

// prune drops the delivered or cancelled graphs that ended more than Retention ago
// with their results, and the other results older than that; at most
// once a minute (or a Retention, when shorter).
func (m *Memory) prune(now time.Time) {
	if now.Sub(m.lastPrune) < min(m.cfg.Retention, time.Minute) {
		return
	}
	m.lastPrune = now
	cut := now.Add(-m.cfg.Retention)
	for k, mg := range m.graphs {
		if (mg.g.Delivered || mg.g.Status == GraphCancelled) && mg.g.EndedAt.Before(cut) {
			delete(m.graphs, k)
		}
	}
	for k, r := range m.results {
		if !r.CreatedAt.Before(cut) {
			continue
		}
		if r.GraphID != "" {
			if _, live := m.graphs[key{k.tenant, r.GraphID}]; live {
				continue
			}
		}
		delete(m.results, k)
	}
}

// runTask calls exec.RunTask, making a panic an error of the run.
func runTask(ctx context.Context, exec Executor, g *Graph, t *Task, deps map[string]Result) (out Output, err error) {
	defer func() {
		if p := recover(); p != nil {
			out, err = Output{}, fmt.Errorf("delegate: the executor panicked: %v", p)
		}
	}()
	return exec.RunTask(ctx, g, t, deps)
}

// deliver calls exec.Deliver, making a panic an error of the delivery.
func deliver(ctx context.Context, exec Executor, g *Graph) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("delegate: the executor panicked: %v", p)
		}
	}()
	return exec.Deliver(ctx, g)
}
