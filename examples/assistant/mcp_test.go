package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// -mcp plugs an MCP server in: its tools are listed and offered, and the
// demo runs as without it. Needs the reference servers .ci/run installs.
func TestDemoWithMCPServer(t *testing.T) {
	dir := os.Getenv("VALET_TEST_MCP")
	if dir == "" {
		t.Skip("VALET_TEST_MCP is not set: run .ci/run, which installs the reference MCP servers with npm and sets it")
	}
	script := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	var out bytes.Buffer
	if err := run(context.Background(), &out, options{Offline: true, MCP: "node " + script}); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	got := out.String()
	for _, want := range []string{"mcp tools: mcp_echo, ", "mcp_get-sum", "tools: get_weather", "bot> Here's the outlook:"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
}

// A bad -mcp command fails the program with the reason.
func TestBadMCPCommand(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), &out, options{Offline: true, MCP: "/no/such/server --flag"})
	if err == nil || !strings.Contains(err.Error(), "-mcp:") || !strings.Contains(err.Error(), "/no/such/server") {
		t.Fatalf("run: %v", err)
	}
}
