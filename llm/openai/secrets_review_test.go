package openai

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/valetkit/valet/llm"
)

// TestKeyNotLeakedByTruncation: a non-JSON body is cut to a snippet; the
// key must be scrubbed before the cut, not after (else its first characters
// survive), and the cut must not split a character.
func TestKeyNotLeakedByTruncation(t *testing.T) {
	for pad := 280; pad < 300; pad++ {
		c := serve(t, func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusBadGateway)
			io.WriteString(w, strings.Repeat("é", pad/2)+strings.Repeat("x", pad%2)+"<p>bad key "+testKey+"</p>")
		})
		_, err := c.Complete(t.Context(), userReq("hi"))
		if err == nil {
			t.Fatal("no error")
		}
		if strings.Contains(err.Error(), testKey[:8]) {
			t.Fatalf("pad %d: key prefix in %q", pad, err)
		}
		if !utf8.ValidString(err.Error()) {
			t.Fatalf("pad %d: invalid UTF-8 in %q", pad, err)
		}
	}
}

// TestHeaderCredentialsScrubbed: Azure's key goes in an "api-key" header,
// not APIKey; a gateway echoing it must not put it in the error.
func TestHeaderCredentialsScrubbed(t *testing.T) {
	const azureKey = "0123456789abcdef0123456789abcdef"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"error":{"code":"401","message":"Access denied: invalid subscription key %s"}}`, r.Header.Get("api-key"))
	}))
	defer srv.Close()
	c := New(Config{BaseURL: srv.URL + "/openai/deployments/d?api-version=2024-10-21", HTTPClient: srv.Client(),
		Headers: map[string]string{"api-key": azureKey, "X-Title": "my app"}})
	_, err := c.Complete(t.Context(), userReq("hi"))
	if llm.KindOf(err) != llm.KindAuth || strings.Contains(err.Error(), azureKey) {
		t.Fatalf("%v", err)
	}
}

// TestQueryCredentialsScrubbed: a key passed in the BaseURL query (some
// gateways take ?key= or ?api-key=) must not appear in a transport error,
// whose text names the URL.
func TestQueryCredentialsScrubbed(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	const qkey = "AIzaSyQueryKey0123456789"
	c := New(Config{BaseURL: "http://user:pw-secret-1234@" + addr + "/v1?key=" + qkey})
	_, err = c.Complete(t.Context(), userReq("hi"))
	if err == nil || strings.Contains(err.Error(), qkey) || strings.Contains(err.Error(), "pw-secret-1234") {
		t.Fatalf("%v", err)
	}
}

// TestConfigPrintsNoURLSecrets: a key in the BaseURL query or a password in
// it is not printed or logged either.
func TestConfigPrintsNoURLSecrets(t *testing.T) {
	cfg := Config{BaseURL: "https://u:pw-secret@gw.example/v1?api-version=2024-10-21&key=q-secret"}
	s := fmt.Sprint(cfg) + cfg.LogValue().String()
	if strings.Contains(s, "secret") || !strings.Contains(s, "api-version=2024-10-21") {
		t.Fatalf("%s", s)
	}
}
