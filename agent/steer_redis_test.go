package agent_test

import (
	"context"
	"crypto/rand"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/memory"
	"github.com/valetkit/valet/pool/redispool"
	"github.com/valetkit/valet/tool"
)

// replicas returns two orchestrators sharing a memory provider and a
// Redis Control (each its own Control, one prefix), as two processes
// would; the loop runs on the first.
func replicas(t *testing.T, s1, s2 llm.Client, g *gate, loop agent.LoopConfig) (*agent.Orchestrator, *agent.Orchestrator, *redispool.Control) {
	t.Helper()
	prefix := "valettest:steer:" + rand.Text()[:12] + ":"
	rdb := redisClient(t, prefix)
	mem := newMem(t, memory.Config{})
	var os [2]*agent.Orchestrator
	var first *redispool.Control
	for i, s := range []llm.Client{s1, s2} {
		ctl, err := redispool.NewControl(rdb, redispool.ControlConfig{Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ctl.Close() })
		if i == 0 {
			first = ctl
		}
		os[i] = newOrch(t, s, agent.Config{Control: ctl, Memory: mem, Tools: []tool.Tool{g.tool()}, Loop: loop})
	}
	return os[0], os[1], first
}

// heard returns a channel closed once ctl (the running replica's Control)
// has handed the conversation's next signal to the running loop: its
// subscribers are called in order, the loop's (subscribed when it began)
// first. Call it after the loop began and before the signal is sent.
func heard(t *testing.T, ctl agent.Control, tenant, conv string) <-chan struct{} {
	t.Helper()
	ch := make(chan struct{})
	var stop func()
	var once sync.Once
	id, err := ctl.Running(context.Background(), tenant, conv)
	if err != nil || id == "" {
		t.Fatalf("no loop running to hear a signal (%q, %v)", id, err)
	}
	stop = ctl.Subscribe(tenant, conv, id, func(agent.Signal) { once.Do(func() { close(ch) }) })
	go func() { <-ch; stop() }()
	return ch
}

func TestInjectFromAnotherReplicaReachesTheLoop(t *testing.T) {
	needRedis(t)
	g := newGate()
	s1 := llmtest.NewStrictScript(t,
		llmtest.Calls(llmtest.Call("work", `{}`)),
		llmtest.Text("Done, in metric."),
	)
	o1, o2, ctl1 := replicas(t, s1, llmtest.NewStrictScript(t), g, agent.LoopConfig{})
	done := start(o1, msg("Measure the room"))
	<-g.started
	h := heard(t, ctl1, "u1", "c1")
	if err := o2.Inject(context.Background(), "u1", "c1", "Use metric units please"); err != nil {
		t.Fatal(err)
	}
	<-h // through Redis to the running replica: the loop has the signal
	close(g.release)
	out := <-done
	if out.err != nil {
		t.Fatal(out.err)
	}
	reqs := s1.Requests()
	last := reqs[1].Messages[len(reqs[1].Messages)-1]
	if last.Role != llm.RoleUser || !strings.Contains(last.Content, "Use metric units please") {
		t.Fatalf("the second request ends with %s %q; want the text injected on the other replica", last.Role, last.Content)
	}
}

func TestCancelFromAnotherReplicaStopsTheLoop(t *testing.T) {
	needRedis(t)
	g := newGate()
	s1 := llmtest.NewStrictScript(t, llmtest.Calls(llmtest.Call("work", `{}`)))
	o1, o2, _ := replicas(t, s1, llmtest.NewStrictScript(t), g, agent.LoopConfig{})
	done := start(o1, msg("Do the long thing"))
	<-g.started
	if err := o2.Cancel(context.Background(), "u1", "c1"); err != nil {
		t.Fatal(err)
	}
	out := <-done // the tool blocks until its ctx is cancelled: no release
	if out.res.Status != agent.StatusCancelled || !errors.Is(out.err, agent.ErrCancelled) {
		t.Fatalf("status %s, err %v", out.res.Status, out.err)
	}
	checkPaired(t, history(t, o2, "u1", "c1"))
	if err := o2.Pause(context.Background(), "u1", "c1"); !errors.Is(err, agent.ErrNotRunning) {
		t.Fatalf("Pause after the end: %v, want ErrNotRunning", err)
	}
}

func TestPauseFromAnotherReplicaAndResumeThere(t *testing.T) {
	needRedis(t)
	g := newGate()
	s1 := llmtest.NewStrictScript(t, llmtest.Calls(llmtest.Call("work", `{}`)))
	s2 := llmtest.NewStrictScript(t, llmtest.Text("Picking up where I stopped."))
	o1, o2, ctl1 := replicas(t, s1, s2, g, agent.LoopConfig{})
	done := start(o1, msg("Do the long thing"))
	<-g.started
	h := heard(t, ctl1, "u1", "c1")
	if err := o2.Pause(context.Background(), "u1", "c1"); err != nil {
		t.Fatal(err)
	}
	<-h
	close(g.release)
	out := <-done
	if out.err != nil || out.res.Status != agent.StatusPaused {
		t.Fatalf("status %s, err %v", out.res.Status, out.err)
	}
	if _, err := o2.HandleMessage(context.Background(), msg("Go on")); err != nil {
		t.Fatal(err)
	}
	noted := false
	for _, m := range s2.Requests()[0].Messages {
		noted = noted || strings.Contains(m.Content, "paused the previous request")
	}
	if !noted {
		t.Fatal("the other replica's next run was not told the task was paused")
	}
}

func TestRoutedMessageOnAnotherReplicaReachesTheLoop(t *testing.T) {
	needRedis(t)
	g := newGate()
	s1 := llmtest.NewStrictScript(t,
		llmtest.Calls(llmtest.Call("work", `{}`)),
		llmtest.Text("Done, in metric."),
	)
	s2 := llmtest.NewStrictScript(t).On(llm.PurposeRoute, llmtest.Text("Correction."))
	o1, o2, ctl1 := replicas(t, s1, s2, g, agent.LoopConfig{RouteWhileRunning: true})
	done := start(o1, msg("Measure the room"))
	<-g.started
	h := heard(t, ctl1, "u1", "c1")
	res, err := o2.HandleMessage(context.Background(), msg("in metric units, please"))
	if err != nil || res.Status != agent.StatusInjected || res.Steered != agent.SignalInject {
		t.Fatalf("routed on the other replica: status %s, steered %q, err %v", res.Status, res.Steered, err)
	}
	<-h
	close(g.release)
	if out := <-done; out.err != nil {
		t.Fatal(out.err)
	}
	reqs := s1.Requests()
	if last := reqs[1].Messages[len(reqs[1].Messages)-1]; !strings.Contains(last.Content, "in metric units, please") {
		t.Fatalf("the loop's next request ends with %q", last.Content)
	}
}

// needRedis skips before a strict script is made (a skipped test would
// fail it with unused replies).
func needRedis(t *testing.T) {
	t.Helper()
	if os.Getenv("VALET_TEST_REDIS") == "" {
		t.Skip("VALET_TEST_REDIS not set; set it to a Redis URL such as redis://127.0.0.1:6379/0 to run the Redis tests")
	}
}
