package rivertrigger_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/valetkit/valet/internal/pgtest"
	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/rivertrigger"
)

// proxy forwards TCP connections to target until it is cut, which closes
// every connection and refuses new ones until it is restored: PostgreSQL
// going down and coming back, as the engine sees it.
type proxy struct {
	target string
	ln     net.Listener

	mu    sync.Mutex
	down  bool
	conns []net.Conn
}

func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{target: target, ln: ln}
	go p.serve()
	t.Cleanup(func() { ln.Close(); p.cut() })
	return p
}

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.down {
			p.mu.Unlock()
			c.Close()
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		go func() { _, _ = io.Copy(s, c); s.Close() }()
		go func() { _, _ = io.Copy(c, s); c.Close() }()
	}
}

func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *proxy) restore() {
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
}

// PostgreSQL goes down while runs are due and comes back: the runs then
// fire, each once, and are recorded once.
func TestPostgresOutageWhileRunsAreDue(t *testing.T) {
	schema := newSchema(t)
	u, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	px := newProxy(t, u.Host)
	u.Host = px.ln.Addr().String()
	cfg, err := pgxpool.ParseConfig(u.String())
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	cfg.ConnConfig.ConnectTimeout = 2 * time.Second
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	var logs syncBuffer
	s, err := rivertrigger.New(pool, rivertrigger.Config{FetchPollInterval: 100 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	runs := map[string]int{}
	var total atomic.Int32
	e, stop := engineOn(t, s, trigger.ExecutorFunc(func(_ context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		mu.Lock()
		runs[run.RunID]++
		mu.Unlock()
		total.Add(1)
		return trigger.ExecResult{Result: "ok"}, nil
	}))
	const n = 20
	due := time.Now().Add(3 * time.Second)
	for i := range n {
		if err := e.CreateTask(ctx, oneTime("olga", fmt.Sprintf("t%02d", i), due.Add(time.Duration(i)*50*time.Millisecond))); err != nil {
			t.Fatal(err)
		}
	}
	px.cut()
	// While it is down: clear errors, no password, nothing runs.
	if err := e.CreateTask(ctx, oneTime("olga", "late", time.Now().Add(time.Hour))); err == nil {
		t.Error("CreateTask with PostgreSQL down: no error")
	}
	time.Sleep(6 * time.Second) // every run is due by now
	if got := total.Load(); got != 0 {
		t.Fatalf("%d runs executed while PostgreSQL was down", got)
	}
	px.restore()
	check := admin(t)
	defer func() {
		if !t.Failed() {
			return
		}
		t.Logf("logs:\n%s", logs.String())
		rows, err := check.Query(ctx, `SELECT args->>'task_id', state::text, attempt, coalesce(array_to_string(errors, ' | '), '')
			FROM `+schema+`.river_job ORDER BY 1`)
		if err != nil {
			t.Log(err)
			return
		}
		defer rows.Close()
		for rows.Next() {
			var id, st, errs string
			var a int
			_ = rows.Scan(&id, &st, &a, &errs)
			t.Logf("job %s: %s, attempt %d, errors %s", id, st, a, errs)
		}
	}()
	waitFor(t, 90*time.Second, "every task COMPLETED once PostgreSQL is back", func() (bool, error) {
		var c int
		err := check.QueryRow(ctx, `SELECT count(*) FROM `+schema+`.valet_trigger_tasks WHERE status = 'COMPLETED'`).Scan(&c)
		return c == n, err
	})
	mu.Lock()
	defer mu.Unlock()
	if len(runs) != n {
		t.Errorf("%d runs executed, want %d", len(runs), n)
	}
	for id, c := range runs {
		if c != 1 {
			t.Errorf("run %s executed %d times", id, c)
		}
	}
	var recorded int
	if err := check.QueryRow(ctx, `SELECT count(*) FROM `+schema+`.valet_trigger_runs WHERE run->>'status' = 'succeeded'`).Scan(&recorded); err != nil {
		t.Fatal(err)
	}
	if recorded != n {
		t.Errorf("%d runs recorded succeeded, want %d", recorded, n)
	}
	if err := stop(); err != nil {
		t.Errorf("Run returned %v", err)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// admin is a pool straight to the test database, past the proxy.
func admin(t *testing.T) *pgxpool.Pool { return pgtest.DB(t) }
