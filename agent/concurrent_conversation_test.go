package agent_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/credentials"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

func TestConcurrentSameConversation(t *testing.T) {
	store := credentials.NewMemory()
	tl := tool.New("t", "t", func(ctx context.Context, in revIn) (string, error) {
		ec := tool.ExecContextFrom(ctx)
		_, _ = ec.Credentials.Get(ctx, ec.TenantID, "svc", "")
		return "r", nil
	})
	n := 0
	var mu sync.Mutex
	script := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		mu.Lock()
		defer mu.Unlock()
		n++
		if n%3 != 0 {
			return llmtest.Calls(llmtest.Call("t", `{"x":"a"}`), llmtest.Call("t", `{"x":"b"}`), llmtest.Call("t", `{"x":"c"}`))
		}
		return llmtest.Text("ok")
	})
	o, _ := agent.NewOrchestrator(agent.Config{LLM: script, Tools: []tool.Tool{tl}, Credentials: store,
		Loop: agent.LoopConfig{MaxHistoryMessages: 6, MaxParallelTools: 2}})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 30 {
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(1+i%5)*time.Millisecond)
				msg := agent.Message{TenantID: "t", ConversationID: fmt.Sprint(g % 2), Text: "hi"}
				if i%2 == 0 {
					_, _ = o.HandleMessage(ctx, msg)
				} else {
					for range o.Stream(ctx, msg) {
					}
				}
				cancel()
				h, _ := o.History(context.Background(), "t", msg.ConversationID)
				if err := llm.CheckPairing(h); err != nil {
					t.Error(err)
				}
				if i%7 == 0 {
					_ = o.Forget(context.Background(), "t", msg.ConversationID)
				}
			}
		}()
	}
	wg.Wait()
}
