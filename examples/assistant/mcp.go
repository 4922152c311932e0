package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/valetkit/valet/tool/mcptool"
)

// connectMCP starts the MCP server of the -mcp flag, a command line such
// as "npx -y @modelcontextprotocol/server-everything", and prints the
// tools it offers (named "mcp_<tool>"). The orchestrator reads the Set
// at the start of each message, so tools the server adds or removes
// meanwhile follow; a tool whose description or schema changes is held
// back (a WARN in the logs) until the host accepts it with Set.Accept.
func connectMCP(ctx context.Context, w io.Writer, cmdline string, log *slog.Logger) (*mcptool.Set, error) {
	f := strings.Fields(cmdline)
	if len(f) == 0 {
		return nil, errors.New("-mcp: an empty command")
	}
	set, err := mcptool.Connect(ctx, mcptool.Server{Name: "mcp", Command: f[0], Args: f[1:]}, mcptool.Config{Logger: log})
	if err != nil {
		return nil, fmt.Errorf("-mcp: %w", err)
	}
	ts, err := set.Tools(ctx)
	if err != nil {
		_ = set.Close()
		return nil, fmt.Errorf("-mcp: %w", err)
	}
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.Spec().Name
	}
	fmt.Fprintf(w, "mcp tools: %s\n", strings.Join(names, ", "))
	for _, r := range set.Refused() {
		fmt.Fprintf(w, "mcp tool refused: %v\n", r.Err)
	}
	return set, nil
}
