package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestSmokeRoundTripOverHTTP(t *testing.T) {
	var out strings.Builder
	if err := runSmoke(context.Background(), &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{"tool get_weather: completed\ntool get_weather: completed", "approval: Send an email to team@example.com",
		"assistant: Done: the forecast is on its way.", "emails sent: 1"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("the smoke run printed\n%s\nwithout %q", out.String(), want)
		}
	}
}

func TestPageIsServedWithAPolicyAndTheAPINeedsAUser(t *testing.T) {
	a, err := newApp(scripted(), time.Millisecond, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a)
	defer func() { srv.Close(); a.Close() }()
	for path, want := range map[string]string{"/": "<title>valet webchat</title>", "/app.js": "textContent", "/style.css": ".tool-card"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Fatalf("GET %s: %d", path, resp.StatusCode)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
			t.Fatalf("GET %s: CSP %q", path, csp)
		}
	}
	resp, err := http.Get(srv.URL + "/static/../main.go")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		t.Fatal("a path outside the page's files was served")
	}
	for _, user := range []string{"", "Ann", "../x", strings.Repeat("a", 40)} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/approvals", nil)
		if user != "" {
			req.Header.Set("X-User", user)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("user %q: %d", user, resp.StatusCode)
		}
	}
}

func TestThePageNeverInsertsHTML(t *testing.T) {
	js, err := staticFiles.ReadFile("static/app.js")
	if err != nil {
		t.Fatal(err)
	}
	for _, sink := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("} {
		if strings.Contains(string(js), sink) {
			t.Fatalf("app.js uses %s: model and tool text must go in with textContent", sink)
		}
	}
}
