package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The summary of a transcript file: each run with its status, turns,
// tools and tokens; a torn line is reported, not fatal.
func TestRunPrintsSummaries(t *testing.T) {
	file := filepath.Join(t.TempDir(), "t.jsonl")
	lines := `{"kind":"run_start","seq":1,"time":"2026-11-20T09:30:00Z","run_id":"run_a","tenant":"u1","conversation":"c1","text":"hi"}
{"kind":"tool_result","seq":2,"time":"2026-11-20T09:30:01Z","run_id":"run_a","tenant":"u1","conversation":"c1","tool_record":{"name":"weather","success":false,"status":"error"},"error":"backend down"}
{"kind":"run_end","seq":3,"time":"2026-11-20T09:30:02Z","run_id":"run_a","tenant":"u1","conversation":"c1","result":{"status":"completed","turns":2,"usage":{"input_tokens":280,"output_tokens":27},"cost_usd":0.001,"tool_calls":[{"name":"weather","success":false,"status":"error"}],"duration_ms":2000}}
{"kind":"run_st`
	if err := os.WriteFile(file, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(&out, []string{file}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"1 skipped", "1 runs", "run_a", "status completed · turns 2", "tokens 280 in, 27 out, $0.001000", "weather ×1 (1 failed)", "error: backend down"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if err := run(&out, []string{filepath.Join(t.TempDir(), "missing")}); err == nil {
		t.Error("a missing file: no error")
	}
}
