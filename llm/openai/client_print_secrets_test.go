package openai_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/valetkit/valet/llm/openai"
)

// A Client printed with fmt (%v, %+v) or logged as an slog attribute
// shows none of its API keys: hosts log their wiring.
func TestClientPrintedShowsNoKey(t *testing.T) {
	keys := []string{"sk-proj-first-0123456789abcdefABCDEF", "sk-proj-second-0123456789abcdefABCDE"}
	c := openai.New(openai.Config{APIKey: keys[0], APIKeys: keys[1:]})
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("wired", "client", c)
	for _, s := range []string{fmt.Sprintf("%v", c), fmt.Sprintf("%+v", c), buf.String()} {
		for _, k := range keys {
			if strings.Contains(s, k) {
				t.Fatalf("printed client shows a key: %.300s", s)
			}
		}
	}
}
