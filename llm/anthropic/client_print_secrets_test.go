package anthropic_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/valetkit/valet/llm/anthropic"
)

// A Client printed with fmt (%v, %+v) or logged as an slog attribute
// shows none of its API keys: hosts log their wiring.
func TestClientPrintedShowsNoKey(t *testing.T) {
	c := anthropic.New(anthropic.Config{APIKey: keyOutOfQuota, APIKeys: []string{keyRevoked, keyGood}})
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("wired", "client", c)
	for _, s := range []string{fmt.Sprintf("%v", c), fmt.Sprintf("%+v", c), buf.String()} {
		for _, k := range []string{keyOutOfQuota, keyRevoked, keyGood} {
			if strings.Contains(s, k) {
				t.Fatalf("printed client shows a key: %.300s", s)
			}
		}
	}
}
