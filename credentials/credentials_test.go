package credentials

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

func TestSecretNeverPrints(t *testing.T) {
	s := NewSecret(json.RawMessage(`{"access_token":"tok-123"}`))
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("x", "secret", s)
	b, _ := json.Marshal(struct{ S Secret }{s})
	for _, out := range []string{fmt.Sprint(s), fmt.Sprintf("%v %+v %#v %s", s, s, s, s), buf.String(), string(b)} {
		if strings.Contains(out, "tok-123") || !strings.Contains(out, "REDACTED") {
			t.Errorf("secret leaked or not redacted: %s", out)
		}
	}
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	if err := s.Decode(&tok); err != nil || tok.AccessToken != "tok-123" {
		t.Fatalf("Decode = %v, %+v", err, tok)
	}
	if err := (Secret{}).Decode(&tok); err == nil {
		t.Fatal("decoding an empty secret should fail")
	}
}
