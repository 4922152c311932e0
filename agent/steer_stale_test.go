package agent_test

import (
	"context"
	"crypto/rand"
	"errors"
	"sync"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/memory"
	"github.com/valetkit/valet/pool/redispool"
	"github.com/valetkit/valet/tool"
)

// lateControl is the Control of a replica whose Cancel or Pause is slow:
// the first Running it answers (the conversation's run 1) is handed to
// the test on saw, and the call returns only once the test closes
// proceed — by then run 1 has ended and run 2 has begun.
type lateControl struct {
	agent.Control
	once    sync.Once
	saw     chan string
	proceed chan struct{}
}

func newLateControl(c agent.Control) *lateControl {
	return &lateControl{Control: c, saw: make(chan string, 1), proceed: make(chan struct{})}
}

func (l *lateControl) Running(ctx context.Context, tenant, conversation string) (string, error) {
	id, err := l.Control.Running(ctx, tenant, conversation)
	l.once.Do(func() {
		l.saw <- id
		<-l.proceed
	})
	return id, err
}

// controls returns three Controls sharing one backend, as three replicas
// would have: memory (one MemoryControl shared) or Redis (one Control
// each, one prefix).
type controlsFn func(t *testing.T) [3]agent.Control

func memoryControls(t *testing.T) [3]agent.Control {
	c := mustMemoryControl(t)
	return [3]agent.Control{c, c, c}
}

func redisControls(t *testing.T) [3]agent.Control {
	needRedis(t)
	prefix := "valettest:stale:" + rand.Text()[:12] + ":"
	rdb := redisClient(t, prefix)
	var out [3]agent.Control
	for i := range out {
		ctl, err := redispool.NewControl(rdb, redispool.ControlConfig{Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ctl.Close() })
		out[i] = ctl
	}
	return out
}

// A Cancel or a Pause that saw run 1 of a conversation running, but
// reaches the Control only after run 1 ended and run 2 began, finds run 1
// not running (ErrNotRunning) and leaves run 2 alone: run 2 answers.
func TestSteeringAnEndedRunLeavesTheNextRunAlone(t *testing.T) {
	steers := map[string]func(*agent.Orchestrator) error{
		"Cancel": func(o *agent.Orchestrator) error { return o.Cancel(context.Background(), "u1", "c1") },
		"Pause":  func(o *agent.Orchestrator) error { return o.Pause(context.Background(), "u1", "c1") },
	}
	backends := map[string]controlsFn{"Memory": memoryControls, "Redis": redisControls}
	for bname, controls := range backends {
		for sname, steer := range steers {
			t.Run(bname+"/"+sname, func(t *testing.T) {
				ctls := controls(t)
				mem := newMem(t, memory.Config{})
				g1, g2 := newGate(), newGate()
				s1 := llmtest.NewStrictScript(t, llmtest.Calls(llmtest.Call("work", `{}`)), llmtest.Text("Run 1 done."))
				s2 := llmtest.NewStrictScript(t, llmtest.Calls(llmtest.Call("work", `{}`)), llmtest.Text("Run 2 done."))
				o1 := newOrch(t, s1, agent.Config{Control: ctls[0], Memory: mem, Tools: []tool.Tool{g1.tool()}})
				o2 := newOrch(t, s2, agent.Config{Control: ctls[1], Memory: mem, Tools: []tool.Tool{g2.tool()}})
				late := newLateControl(ctls[2])
				o3 := newOrch(t, llmtest.NewStrictScript(t), agent.Config{Control: late, Memory: mem})

				done1 := start(o1, msg("First task"))
				<-g1.started
				steered := make(chan error, 1)
				go func() { steered <- steer(o3) }()
				run1 := <-late.saw
				if run1 == "" {
					t.Fatal("run 1 is not marked running while its tool runs")
				}
				close(g1.release)
				out1 := <-done1
				if out1.err != nil || out1.res.RunID != run1 {
					t.Fatalf("run 1: %v, run id %q; want it answered as %q", out1.err, out1.res.RunID, run1)
				}

				done2 := start(o2, msg("Second task"))
				<-g2.started // run 2 is running: its marker is set
				close(late.proceed)
				if err := <-steered; !errors.Is(err, agent.ErrNotRunning) {
					t.Fatalf("%s of run 1 after it ended: %v; want ErrNotRunning", sname, err)
				}
				close(g2.release)
				out2 := <-done2
				if out2.err != nil || out2.res.Status != agent.StatusCompleted || out2.res.Response != "Run 2 done." {
					t.Fatalf("run 2: status %s, response %q, err %v; want it answered", out2.res.Status, out2.res.Response, out2.err)
				}
				if g2.ctxErr != nil {
					t.Fatalf("run 2's tool was stopped: %v", g2.ctxErr)
				}
			})
		}
	}
}
