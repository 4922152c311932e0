package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

// goroutineID is the id the runtime prints for the calling goroutine.
func goroutineID() int {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	buf = bytes.TrimPrefix(buf, []byte("goroutine "))
	id, _ := strconv.Atoi(string(buf[:bytes.IndexByte(buf, ' ')]))
	return id
}

// decodeProbe is a string that records which goroutine decoded it.
type decodeProbe string

var probeLog struct {
	sync.Mutex
	decoded, ran []int
}

func (p *decodeProbe) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	*p = decodeProbe(s)
	probeLog.Lock()
	probeLog.decoded = append(probeLog.decoded, goroutineID())
	probeLog.Unlock()
	return nil
}

type probeIn struct {
	Text decodeProbe `json:"text"`
}

// The calls of a turn run in parallel, each on a goroutine of its own but
// the last, yet their arguments are validated and decoded on the loop's
// goroutine (the caller's, for HandleMessage): a call's goroutine then holds
// only the tool's frames and a few of valet's while the tool waits, and
// its stack stays at the size the runtime started it with.
func TestToolArgumentsDecodedOnTheLoopGoroutine(t *testing.T) {
	probeLog.Lock()
	probeLog.decoded, probeLog.ran = nil, nil
	probeLog.Unlock()
	probe := tool.New("probe", "records goroutines", func(_ context.Context, in probeIn) (string, error) {
		probeLog.Lock()
		probeLog.ran = append(probeLog.ran, goroutineID())
		probeLog.Unlock()
		return "seen " + string(in.Text), nil
	})
	script := llmtest.NewScript(
		llmtest.Calls(
			llmtest.Call("probe", map[string]string{"text": "a"}),
			llmtest.Call("probe", map[string]string{"text": "b"}),
			llmtest.Call("probe", map[string]string{"text": "c"}),
		),
		llmtest.Text("done"),
	)
	o, err := agent.NewOrchestrator(agent.Config{LLM: script, Tools: []tool.Tool{probe}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := o.HandleMessage(context.Background(), agent.Message{TenantID: "t", ConversationID: "c", Text: "go"})
	if err != nil || res.Status != agent.StatusCompleted || len(res.ToolCalls) != 3 {
		t.Fatalf("HandleMessage: %v %+v", err, res)
	}
	for _, c := range res.ToolCalls {
		if !c.Success {
			t.Fatalf("call %s failed: %s", c.ID, c.Error)
		}
	}
	loop := goroutineID()
	probeLog.Lock()
	defer probeLog.Unlock()
	if len(probeLog.decoded) != 3 || len(probeLog.ran) != 3 {
		t.Fatalf("decoded on %v, ran on %v", probeLog.decoded, probeLog.ran)
	}
	for _, g := range probeLog.decoded {
		if g != loop {
			t.Errorf("arguments decoded on goroutine %d, not the loop's %d", g, loop)
		}
	}
	elsewhere := 0
	for _, g := range probeLog.ran {
		if g != loop {
			elsewhere++
		}
	}
	if elsewhere != 2 {
		t.Errorf("%d of 3 calls ran on goroutines of their own (ran on %v, loop %d), want 2", elsewhere, probeLog.ran, loop)
	}
}
