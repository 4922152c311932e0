package openai_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/valetkit/valet/clock/clocktest"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/llm/openai"
)

const (
	keyOutOfQuota = "sk-quota-0123456789abcdefABCDEF"
	keyRevoked    = "sk-revoked-0123456789abcdefABCD"
	keyGood       = "sk-good-0123456789abcdefABCDEFG"
)

// keysSent lists the keys of the requests srv received, by name.
func keysSent(reqs []llmtest.ServerRequest, from int) []string {
	names := map[string]string{keyOutOfQuota: "quota", keyRevoked: "revoked", keyGood: "good"}
	var out []string
	for _, r := range reqs[from:] {
		k, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		out = append(out, names[k])
	}
	return out
}

// A key out of quota and a revoked key are passed over for the next one,
// and rest for KeyCooldown: the next calls go straight to the good key
// until the cool-down ends.
func TestKeyRotationMovesOnAndCoolsDown(t *testing.T) {
	srv := llmtest.NewServer(llmtest.NewScriptFunc(func(llm.Request) llmtest.Reply { return llmtest.Text("ok") }),
		llmtest.WithAPIKeys(keyOutOfQuota, keyGood), llmtest.WithQuotaExceeded(keyOutOfQuota))
	defer srv.Close()
	clk := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c := openai.New(openai.Config{BaseURL: srv.URL, APIKey: keyOutOfQuota, APIKeys: []string{keyRevoked, keyGood},
		KeyCooldown: time.Minute, Clock: clk})

	if _, err := c.Complete(context.Background(), llm.Request{Messages: []llm.Message{llm.UserMessage("hi")}}); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(keysSent(srv.Requests(), 0)); got != "[quota revoked good]" {
		t.Fatalf("keys tried %s, want [quota revoked good]", got)
	}
	n := len(srv.Requests())
	if _, err := llm.Collect(c.Stream(context.Background(), llm.Request{Messages: []llm.Message{llm.UserMessage("hi")}})); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(keysSent(srv.Requests(), n)); got != "[good]" {
		t.Fatalf("while the others cool down, keys tried %s, want [good]", got)
	}
	clk.Advance(time.Minute)
	n = len(srv.Requests())
	if _, err := c.Complete(context.Background(), llm.Request{Messages: []llm.Message{llm.UserMessage("hi")}}); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(keysSent(srv.Requests(), n)); got != "[quota revoked good]" {
		t.Fatalf("after the cool-down, keys tried %s, want [quota revoked good]", got)
	}
}

// When every key is refused the call fails with the last refusal's kind,
// and no key appears in the error, nor in the Config printed or logged.
func TestKeyRotationNeverPrintsAKey(t *testing.T) {
	srv := llmtest.NewServer(llmtest.NewScript(), llmtest.WithAPIKeys(keyGood), llmtest.WithQuotaExceeded(keyOutOfQuota))
	defer srv.Close()
	cfg := openai.Config{BaseURL: srv.URL, APIKeys: []string{keyRevoked, keyOutOfQuota}}
	c := openai.New(cfg)
	_, err := c.Complete(context.Background(), llm.Request{Messages: []llm.Message{llm.UserMessage("hi")}})
	// The last key tried is out of quota, which this client classifies as
	// KindAuth (a quota does not come back by waiting).
	if k := llm.KindOf(err); k != llm.KindAuth || !strings.Contains(err.Error(), "insufficient_quota") {
		t.Fatalf("err = %v (kind %s), want the last key's quota refusal", err, k)
	}
	var log bytes.Buffer
	slog.New(slog.NewTextHandler(&log, nil)).Info("config", "cfg", cfg)
	for _, text := range []string{err.Error(), fmt.Sprintf("%+v", err), cfg.String(), fmt.Sprint(cfg), log.String()} {
		for _, k := range []string{keyRevoked, keyOutOfQuota, keyRevoked[3:15], keyOutOfQuota[3:15]} {
			if strings.Contains(text, k) {
				t.Fatalf("a key shows in %q", text)
			}
		}
	}
	if !strings.Contains(cfg.String(), "APIKeys: [2 REDACTED]") {
		t.Fatalf("String = %s, want the keys counted", cfg.String())
	}
}

// When every key rests, a call still goes out (with the key whose rest ends
// first) rather than failing without asking the server.
func TestKeyRotationAllCoolingStillCalls(t *testing.T) {
	srv := llmtest.NewServer(llmtest.NewScript(), llmtest.WithQuotaExceeded(keyOutOfQuota, keyRevoked))
	defer srv.Close()
	clk := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c := openai.New(openai.Config{BaseURL: srv.URL, APIKeys: []string{keyOutOfQuota, keyRevoked}, Clock: clk})
	req := llm.Request{Messages: []llm.Message{llm.UserMessage("hi")}}
	if _, err := c.Complete(context.Background(), req); err == nil {
		t.Fatal("want an error: every key is out of quota")
	}
	n := len(srv.Requests())
	if _, err := c.Complete(context.Background(), req); err == nil {
		t.Fatal("want an error")
	}
	if got := fmt.Sprint(keysSent(srv.Requests(), n)); got != "[quota revoked]" {
		t.Fatalf("with every key resting, keys tried %s, want [quota revoked]", got)
	}
}
