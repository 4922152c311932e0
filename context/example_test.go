package context_test

import (
	"encoding/json"
	"fmt"
	"strings"

	agentctx "github.com/valetkit/valet/context"
	"github.com/valetkit/valet/llm"
)

func show(msgs []llm.Message) {
	for _, m := range msgs {
		line := string(m.Role) + ": " + m.Content
		for _, c := range m.ToolCalls {
			line += " [call " + c.ID + " " + c.Name + "]"
		}
		if m.Role == llm.RoleTool {
			line = "tool " + m.ToolCallID + ": " + m.Content
		}
		fmt.Println(line)
	}
}

// The three defences of a ReAct loop against an overflowing context window.
func Example() {
	cm, err := agentctx.NewManager(agentctx.Config{TokenLimit: 2000, MaxHistoryMessages: 10})
	if err != nil {
		panic(err)
	}
	search := llm.ToolCall{ID: "call_1", Name: "search", Arguments: json.RawMessage(`{"q":"go"}`)}

	// Defence 1: every tool result is truncated as it arrives.
	result := strings.Repeat("a result line\n", 500) // 7,000 bytes
	result, cut := cm.TruncateToolResult(result)
	fmt.Println("result cut:", cut, "kept bytes:", len(result))

	msgs := []llm.Message{llm.SystemMessage("You are Koi.")}
	for i := range 4 {
		msgs = append(msgs,
			llm.UserMessage(fmt.Sprintf("question %d", i)),
			llm.AssistantMessage("", search),
			llm.ToolResultMessage(search, result, false),
			llm.AssistantMessage(fmt.Sprintf("answer %d", i)))
	}
	fmt.Println("before:", len(msgs), "messages,", cm.Tokens(msgs), "tokens, needs trim:", cm.NeedsTrim(msgs))

	// Defence 2: before each model call, trim past the threshold.
	if cm.NeedsTrim(msgs) {
		msgs = cm.Trim(msgs)
	}
	fmt.Println("after Trim:", len(msgs), "messages,", cm.Tokens(msgs), "tokens, needs trim:", cm.NeedsTrim(msgs))

	// Defence 3: the model said llm.KindContextOverflow anyway.
	msgs = cm.TruncateToolResults(msgs, 0)
	fmt.Println("after TruncateToolResults:", cm.Tokens(msgs), "tokens")
	msgs = cm.ForceTrim(msgs)
	fmt.Println("after ForceTrim:", len(msgs), "messages; pairing ok:", llm.CheckPairing(msgs) == nil)
	// Output:
	// result cut: true kept bytes: 2442
	// before: 17 messages, 2591 tokens, needs trim: true
	// after Trim: 10 messages, 1305 tokens, needs trim: false
	// after TruncateToolResults: 225 tokens
	// after ForceTrim: 6 messages; pairing ok: true
}

func ExampleNewManager() {
	cm, err := agentctx.NewManager(agentctx.Config{TokenLimit: 32000})
	if err != nil {
		panic(err)
	}
	cfg := cm.Config()
	fmt.Println("window:", cfg.TokenLimit, "threshold:", cfg.TrimThreshold, "history:", cfg.MaxHistoryMessages)
	fmt.Println("trim above:", cm.TrimBudget(), "tokens; one tool result at most:", cm.ToolResultLimit(), "bytes")

	_, err = agentctx.NewManager(agentctx.Config{TrimThreshold: 1.5})
	fmt.Println(err)
	// Output:
	// window: 32000 threshold: 0.8 history: 40
	// trim above: 25600 tokens; one tool result at most: 38400 bytes
	// context: invalid config: TrimThreshold is 1.5, must be in [0, 1]
}

// A real tokenizer replaces the chars/4 estimate. This one counts words.
func ExampleNewManager_tokenizer() {
	words := func(text string) int { return len(strings.Fields(text)) }
	cm, err := agentctx.NewManager(agentctx.Config{CountTokens: words})
	if err != nil {
		panic(err)
	}
	estimate, _ := agentctx.NewManager(agentctx.Config{})
	text := "the quick brown fox jumps over the lazy dog"
	fmt.Println("tokenizer:", cm.CountTokens(text), "estimate:", estimate.CountTokens(text))
	fmt.Println("message:", cm.MessageTokens(llm.UserMessage(text)), "=", agentctx.MessageOverheadTokens, "+", cm.CountTokens(text))
	// Output:
	// tokenizer: 9 estimate: 11
	// message: 13 = 4 + 9
}

func ExampleManager_TruncateToolResult() {
	cm, _ := agentctx.NewManager(agentctx.Config{MaxToolResultChars: 40})
	rows := "id,name\n1,alpha\n2,beta\n3,gamma\n4,delta\n5,epsilon\n6,zeta\n"
	out, cut := cm.TruncateToolResult(rows)
	fmt.Println(cut)
	fmt.Println(out)
	// Output:
	// true
	// id,name
	// 1,alpha
	// 2,beta
	// 3,gamma
	// 4,delta
	// …[truncated: showed 38 of 56 characters]
}

func ExampleManager_TruncateTo() {
	cm, _ := agentctx.NewManager(agentctx.Config{})
	out, _ := cm.TruncateTo("naïve café crème brûlée", 12) // never splits a UTF-8 character
	fmt.Println(out)
	// Output:
	// naïve café
	// …[truncated: showed 10 of 23 characters]
}

// When the cut would split a tool call from its results, the whole group
// goes. The last user message stays: it is what the loop is working on.
func ExampleManager_Trim() {
	cm, _ := agentctx.NewManager(agentctx.Config{MaxHistoryMessages: 4})
	a := llm.ToolCall{ID: "a", Name: "search", Arguments: json.RawMessage(`{}`)}
	b := llm.ToolCall{ID: "b", Name: "fetch", Arguments: json.RawMessage(`{}`)}
	c := llm.ToolCall{ID: "c", Name: "summarize", Arguments: json.RawMessage(`{}`)}
	msgs := []llm.Message{
		llm.SystemMessage("You are Koi."),
		llm.UserMessage("Research Go generics."),
		llm.AssistantMessage("", a, b),
		llm.ToolResultMessage(a, "links", false),
		llm.ToolResultMessage(b, "pages", false),
		llm.AssistantMessage("", c),
		llm.ToolResultMessage(c, "summary", false),
		llm.AssistantMessage("Generics arrived in Go 1.18."),
	}
	show(cm.Trim(msgs))
	// Output:
	// system: You are Koi.
	// user: Research Go generics.
	// assistant:  [call c summarize]
	// tool c: summary
	// assistant: Generics arrived in Go 1.18.
}

func ExampleManager_ForceTrim() {
	cm, _ := agentctx.NewManager(agentctx.Config{ForceTrimKeep: 3})
	msgs := []llm.Message{llm.SystemMessage("You are Koi.")}
	for i := range 5 {
		msgs = append(msgs, llm.UserMessage(fmt.Sprintf("q%d", i)), llm.AssistantMessage(fmt.Sprintf("a%d", i)))
	}
	show(cm.ForceTrim(msgs))
	// Output:
	// system: You are Koi.
	// assistant: a3
	// user: q4
	// assistant: a4
}

func ExampleManager_TruncateToolResults() {
	cm, _ := agentctx.NewManager(agentctx.Config{})
	call := llm.ToolCall{ID: "call_1", Name: "read_file"}
	msgs := []llm.Message{
		llm.UserMessage(strings.Repeat("u", 50)),
		llm.AssistantMessage("", call),
		llm.ToolResultMessage(call, strings.Repeat("x", 50), false),
	}
	out := cm.TruncateToolResults(msgs, 20)
	fmt.Println(len(out[0].Content), len(msgs[2].Content))
	fmt.Println(out[2].Content)
	// Output:
	// 50 50
	// xxxxxxxxxxxxxxxxxxxx
	// …[truncated: showed 20 of 50 characters]
}

func ExampleRepairPairing() {
	x := llm.ToolCall{ID: "x", Name: "search"}
	y := llm.ToolCall{ID: "y", Name: "fetch"}
	broken := []llm.Message{
		llm.ToolResultMessage(llm.ToolCall{ID: "old"}, "answers a call that was trimmed away", false),
		llm.UserMessage("hi"),
		llm.AssistantMessage("Let me look.", x, y), // y never got a result
		llm.ToolResultMessage(x, "found it", false),
	}
	fmt.Println(llm.CheckPairing(broken) != nil)
	fixed := agentctx.RepairPairing(broken)
	show(fixed)
	fmt.Println(llm.CheckPairing(fixed))
	// Output:
	// true
	// user: hi
	// assistant: Let me look. [call x search]
	// tool x: found it
	// <nil>
}
