package anthropic_test

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
	"github.com/valetkit/valet/llm/anthropic"
	"github.com/valetkit/valet/llm/llmtest"
)

const (
	keyOutOfQuota = "sk-ant-quota-0123456789abcdefABCDEF"
	keyRevoked    = "sk-ant-revoked-0123456789abcdefABCD"
	keyGood       = "sk-ant-good-0123456789abcdefABCDEFG"
)

// keysSent lists the keys of the requests srv received, by name.
func keysSent(reqs []llmtest.ServerRequest, from int) []string {
	names := map[string]string{keyOutOfQuota: "quota", keyRevoked: "revoked", keyGood: "good"}
	var out []string
	for _, r := range reqs[from:] {
		k, _ := strings.CutPrefix(r.Header.Get("x-api-key"), "")
		out = append(out, names[k])
	}
	return out
}

// A key out of quota and a revoked key are passed over for the next one,
// and rest for KeyCooldown: the next calls go straight to the good key
// until the cool-down ends.
func TestKeyRotationMovesOnAndCoolsDown(t *testing.T) {
	srv := llmtest.NewAnthropicServer(llmtest.NewScriptFunc(func(llm.Request) llmtest.Reply { return llmtest.Text("ok") }),
		llmtest.WithAPIKeys(keyOutOfQuota, keyGood), llmtest.WithQuotaExceeded(keyOutOfQuota))
	defer srv.Close()
	clk := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c := anthropic.New(anthropic.Config{BaseURL: srv.URL, APIKey: keyOutOfQuota, APIKeys: []string{keyRevoked, keyGood},
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
	srv := llmtest.NewAnthropicServer(llmtest.NewScript(), llmtest.WithAPIKeys(keyGood), llmtest.WithQuotaExceeded(keyOutOfQuota))
	defer srv.Close()
	cfg := anthropic.Config{BaseURL: srv.URL, APIKeys: []string{keyRevoked, keyOutOfQuota}}
	c := anthropic.New(cfg)
	_, err := c.Complete(context.Background(), llm.Request{Messages: []llm.Message{llm.UserMessage("hi")}})
	if k := llm.KindOf(err); k != llm.KindRateLimited {
		t.Fatalf("err = %v (kind %s), want the last key's rate limit", err, k)
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
