package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/valetkit/valet/agent/transcript"
)

// With -transcript DIR the demo writes one file for its conversation: a
// run per message the model answered, all ended, no token in it; the
// demo's own output only gains the line naming the file.
func TestDemoTranscript(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tx")
	var plain, out bytes.Buffer
	if err := run(context.Background(), &plain, options{Offline: true}); err != nil {
		t.Fatal(err)
	}
	if err := run(context.Background(), &out, options{Offline: true, Transcript: dir}); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	file := filepath.Join(dir, transcript.FileName("demo-user", "demo"))
	first, rest, _ := strings.Cut(out.String(), "\n")
	if !strings.HasPrefix(first, "model: offline script") || !strings.Contains(rest, "transcript: "+file+"\n") {
		t.Errorf("output does not name the transcript file %s:\n%s", file, out.String())
	}
	if n, m := strings.Count(plain.String(), "\n"), strings.Count(out.String(), "\n"); m != n+1 {
		t.Errorf("the demo wrote %d lines with -transcript, %d without: want one more", m, n)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), demoToken) {
		t.Error("the transcript holds the demo's token")
	}
	recs, err := transcript.Read(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	runs := transcript.Summarize(recs)
	answered := strings.Count(plain.String(), "[completed")
	if len(runs) != answered || answered == 0 {
		t.Fatalf("%d runs in the transcript, %d answered in the demo", len(runs), answered)
	}
	for _, r := range runs {
		if !r.Ended || r.Status != "completed" || r.Turns == 0 {
			t.Errorf("run %+v", r)
		}
	}
}
