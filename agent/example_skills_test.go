package agent_test

import (
	"context"
	"fmt"
	"strings"
	"testing/fstest"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/skill"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

// Skills: the coordinator's system prompt lists the skill index, and
// spawn_agent's skill argument starts that skill's specialist, whose
// system prompt holds the skill's instructions and whose tools are
// exactly those it lists, on the model it names.
func ExampleConfig_skills() {
	skills, err := skill.Load(fstest.MapFS{ // os.DirFS("skills") or an embed.FS in a program
		"hotels/SKILL.md": {Data: []byte(`---
name: hotels
description: Compares hotels and picks one.
tools: [search_hotels]
model: smart
---
Compare price and distance to the centre; answer with one name.
`)},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	coordinator := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		if last := req.Messages[len(req.Messages)-1]; last.Role == llm.RoleTool {
			return llmtest.Text("Book " + strings.SplitN(last.Content, "\n", 2)[0] + "?")
		}
		return llmtest.Calls(llm.ToolCall{ID: "h", Name: agent.SpawnAgentTool,
			Arguments: []byte(`{"skill":"hotels","task":"Find the best hotel in Lyon.","context":"Under 200 EUR."}`)})
	})
	var offered []string
	specialist := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		if last := req.Messages[len(req.Messages)-1]; last.Role == llm.RoleTool {
			return llmtest.Text("Hotel Lumen")
		}
		for _, t := range req.Tools {
			offered = append(offered, t.Name)
		}
		return llmtest.Calls(llmtest.Call("search_hotels", `{"city":"Lyon"}`))
	})
	type city struct {
		City string `json:"city"`
	}
	o, err := agent.NewOrchestrator(agent.Config{
		LLM:    coordinator,
		Models: agent.ModelMap{"smart": specialist},
		Tools: []tool.Tool{
			tool.New("search_hotels", "Hotels of a city", func(_ context.Context, in city) (string, error) {
				return "Hotel Lumen 150 EUR, Hotel Rive 240 EUR", nil
			}),
			tool.New("send_email", "Send an email", func(context.Context, struct{}) (string, error) { return "sent", nil }),
		},
		SubAgents: agent.SubAgentOptions{Enabled: true},
		Skills:    skills,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer o.Close(context.Background())
	res, err := o.HandleMessage(context.Background(), agent.Message{TenantID: "u1", Text: "Find me a hotel in Lyon."})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Response)
	fmt.Println("specialist's tools:", offered)
	// Output:
	// Book Hotel Lumen?
	// specialist's tools: [search_hotels]
}
