package main

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestBrowserChat drives the page in headless Chromium (VALET_TEST_CHROMIUM,
// the Debian binary) with playwright-core from VALET_TEST_PLAYWRIGHT (a
// directory holding node_modules/playwright-core); .ci/run installs both.
// It sends a message, sees the streamed text and two tool cards, approves
// the drafted email by clicking, sees the final answer, and checks that
// another tenant's page shows none of it. The screenshot goes to
// $VALET_ARTIFACTS, else the temporary directory; the test logs its path.
func TestBrowserChat(t *testing.T) {
	chromium := os.Getenv("VALET_TEST_CHROMIUM")
	if chromium == "" {
		t.Skip("VALET_TEST_CHROMIUM is not set (the path of a Chromium binary; .ci/run sets it)")
	}
	pw := os.Getenv("VALET_TEST_PLAYWRIGHT")
	if pw == "" {
		t.Fatal("VALET_TEST_CHROMIUM is set but VALET_TEST_PLAYWRIGHT is not: the directory whose node_modules holds playwright-core")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("VALET_TEST_CHROMIUM is set but node is not on PATH")
	}
	a, err := newApp(scripted(), 400*time.Millisecond, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a)
	t.Cleanup(func() { srv.Close(); a.Close() })

	dir := os.Getenv("VALET_ARTIFACTS")
	if dir == "" {
		dir = os.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(dir, "webchat-"+time.Now().UTC().Format("20060102T150405")+".png")
	script, err := filepath.Abs(filepath.Join("testdata", "e2e.cjs"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script, srv.URL, shot)
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(pw, "node_modules"))
	out, err := cmd.CombinedOutput()
	t.Logf("browser steps:\n%s", out)
	if err != nil {
		t.Fatalf("the browser test failed: %v", err)
	}
	t.Logf("screenshot: %s", shot)
	if sent := a.Outbox.Sent(); len(sent) != 1 || sent[0].To != "team@example.com" {
		t.Fatalf("emails sent %+v: the click should have sent one", sent)
	}
}
