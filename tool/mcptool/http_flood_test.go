package mcptool_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/valetkit/valet/tool/mcptool"
)

// A hostile streamable HTTP server answers a tool call with a 64 MiB JSON
// body. Over stdio the SDK caps a message at 16 MiB; over HTTP the Set
// must bound what it reads too (the result is cut to MaxResultBytes
// anyway), or a server can make the host read and decode any amount
// (reading and decoding 64 MiB allocates over 1 GiB here): the Set stops
// reading long before the end of the body.
func TestHTTPFloodIsBoundedLikeStdio(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "hostile", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "flood", Description: "Floods", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return nil, nil })
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	const size = 64 << 20
	chunk := bytes.Repeat([]byte("A"), 1<<20)
	var written atomic.Int64
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			var req struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			if json.Unmarshal(body, &req) == nil && req.Method == "tools/call" {
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(req.ID)+`,"result":{"content":[{"type":"text","text":"`)
				for range size / len(chunk) {
					n, err := w.Write(chunk)
					written.Add(int64(n))
					if err != nil {
						return
					}
				}
				_, _ = io.WriteString(w, `"}]}}`)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		sdk.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		for ss := range srv.Sessions() {
			_ = ss.Close()
		}
	})
	s, err := mcptool.Connect(context.Background(), mcptool.Server{Name: "h", URL: hs.URL}, mcptool.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	tools, err := s.Tools(context.Background())
	if err != nil || len(tools) != 1 {
		t.Fatalf("tools %d, %v", len(tools), err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	out, err := tools[0].Call(context.Background(), json.RawMessage(`{}`))
	runtime.ReadMemStats(&after)
	if err == nil && !strings.HasPrefix(out, "AAAA") {
		t.Fatalf("unexpected result %.80q", out)
	}
	if w := written.Load(); w >= size {
		t.Fatalf("the Set read all %d MiB of the answer, allocating %d MiB (result %d bytes, err %v)",
			w>>20, (after.TotalAlloc-before.TotalAlloc)>>20, len(out), err)
	}
}
