package mcptool_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool/mcptool"
)

type searchIn struct {
	Query string `json:"query" jsonschema:"what to look for"`
}

// An MCP server's tools, offered to the model through
// agent.Config.ToolSources. The server here runs in this process over
// streamable HTTP; a real one is a URL, or a Command such as
// "npx -y @modelcontextprotocol/server-filesystem /srv/notes".
func Example() {
	ctx := context.Background()
	srv := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "search", Description: "Searches the user's notes", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in searchIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "1 note matches " + in.Query + ": buy milk"}}}, nil, nil
		})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	defer hs.Close()

	notes, err := mcptool.Connect(ctx, mcptool.Server{Name: "notes", URL: hs.URL}, mcptool.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer notes.Close()

	model := llmtest.NewScript(
		llmtest.Calls(llmtest.Call("notes_search", `{"query":"milk"}`)),
		llmtest.Text("Your note says: buy milk."),
	)
	o, err := agent.NewOrchestrator(agent.Config{
		LLM:         model,
		ToolSources: []agent.ToolSource{notes},
		Logger:      slog.New(slog.DiscardHandler),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer o.Close(ctx)
	res, err := o.HandleMessage(ctx, agent.Message{TenantID: "u1", Text: "What did I note about milk?"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("offered:", model.Requests()[0].Tools[0].Name)
	fmt.Println("called:", res.ToolCalls[0].Name, res.ToolCalls[0].ResultStatus)
	fmt.Println(res.Response)
	// Output:
	// offered: notes_search
	// called: notes_search completed
	// Your note says: buy milk.
}
