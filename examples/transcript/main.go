// Command transcript prints the summary of each run of a JSONL transcript
// written by valet's agent/transcript Observer:
//
//	go run ./examples/assistant -offline -transcript /tmp/tx
//	go run ./examples/transcript /tmp/tx/*.jsonl
//
// Each run shows its id, status, turns, model calls, tool calls by name
// (with failures), tokens, cost, duration and errors. Lines that are not
// records are skipped and counted.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/valetkit/valet/agent/transcript"
)

func main() {
	if len(os.Args) < 2 || strings.HasPrefix(os.Args[1], "-") {
		fmt.Fprintln(os.Stderr, "usage: go run ./examples/transcript FILE...")
		os.Exit(2)
	}
	if err := run(os.Stdout, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "transcript:", err)
		os.Exit(1)
	}
}

// run prints the summary of each file's runs to w.
func run(w io.Writer, files []string) error {
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		recs, err := transcript.Read(f)
		f.Close()
		switch {
		case errors.Is(err, transcript.ErrMalformed):
			fmt.Fprintf(w, "%s: %v\n", name, err)
		case err != nil:
			return fmt.Errorf("%s: %w", name, err)
		}
		runs := transcript.Summarize(recs)
		fmt.Fprintf(w, "%s: %d runs\n", name, len(runs))
		for _, r := range runs {
			printRun(w, r)
		}
	}
	return nil
}

func printRun(w io.Writer, r transcript.RunSummary) {
	status := r.Status
	if !r.Ended {
		status = "(no end recorded)"
	}
	fmt.Fprintf(w, "\n%s  %s  tenant %s  conversation %s\n", r.Start.Format("2006-01-02 15:04:05"), r.RunID, r.Tenant, r.Conversation)
	fmt.Fprintf(w, "  status %s · turns %d · model calls %d (retries %d) · %v\n", status, r.Turns, r.ModelCalls, r.Retries, r.Duration)
	fmt.Fprintf(w, "  tokens %d in, %d out", r.InputTokens, r.OutputTokens)
	if r.CostUSD > 0 {
		fmt.Fprintf(w, ", $%.6f", r.CostUSD)
	}
	fmt.Fprintln(w)
	if r.ToolCalls > 0 {
		names := make([]string, 0, len(r.Tools))
		for n := range r.Tools {
			names = append(names, n)
		}
		slices.Sort(names)
		var parts []string
		for _, n := range names {
			t := r.Tools[n]
			p := fmt.Sprintf("%s ×%d", n, t.Calls)
			if t.Errors > 0 {
				p += fmt.Sprintf(" (%d failed)", t.Errors)
			}
			parts = append(parts, p)
		}
		fmt.Fprintf(w, "  tools: %s\n", strings.Join(parts, ", "))
	}
	for _, e := range r.Errors {
		fmt.Fprintf(w, "  error: %s\n", e)
	}
}
