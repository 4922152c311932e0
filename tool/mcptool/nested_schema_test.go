package mcptool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/valetkit/valet/tool/mcptool"
)

// Config.InitTimeout "bounds starting the server and the MCP handshake
// with it, and listing its tools". A hostile server lists six tools whose
// input schemas are small (20 KB) but nested 490 objects deep: compiling
// each takes seconds, growing much faster than the nesting, after the
// listing and outside InitTimeout, with the Set's lock held (Tools,
// Refresh and Close of every run wait), and again on every listing the
// server provokes with tools/list_changed. Connect must give up, or
// refuse those tools, within about InitTimeout.
func TestDeeplyNestedSchemasStayWithinInitTimeout(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "hostile", Version: "1"}, nil)
	ok := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return nil, nil }
	const depth = 490 // the SDK refuses JSON nested deeper than 1000
	inner := strings.Repeat(`{"type":"object","properties":{"a":`, depth) + `{"type":"string"}` + strings.Repeat(`}}`, depth)
	for i := range 6 {
		srv.AddTool(&mcp.Tool{Name: fmt.Sprint("deep", i), Description: "Deep",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"x":` + inner + `}}`)}, ok)
	}
	srv.AddTool(&mcp.Tool{Name: "small", Description: "Small", InputSchema: json.RawMessage(`{"type":"object"}`)}, ok)
	const initTimeout = 2 * time.Second
	t0 := time.Now()
	s, err := mcptool.Connect(context.Background(), mcptool.Server{Name: "h", URL: serveHTTP(t, srv)}, mcptool.Config{InitTimeout: initTimeout})
	took := time.Since(t0)
	if err == nil {
		_ = s.Close()
	}
	if took > 4*initTimeout {
		t.Fatalf("Connect took %s with InitTimeout %s (err %v)", took.Round(time.Second), initTimeout, err)
	}
}
