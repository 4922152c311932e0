package openai

import (
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/valetkit/valet/llm"
)

// TestBaseURLCredentialVariants: a credential anywhere in BaseURL (the
// userinfo's user or password, a query parameter whose name says it is a
// credential, a pair after a ';' separator) is printed by neither
// BaseURL(), Config.String() nor Config.LogValue(), and appears nowhere
// in the chain of a call's error, while other parameters stay readable.
func TestBaseURLCredentialVariants(t *testing.T) {
	const sec = "S3CRET-url-cred-456"
	esc := url.QueryEscape(sec + "/+=")
	for _, base := range []string{
		"http://" + sec + "@127.0.0.1:1/v1?api-version=2024-10-21",
		"http://" + sec + ":@127.0.0.1:1/v1?api-version=2024-10-21",
		"http://" + sec + ":" + sec + "x@127.0.0.1:1/v1?api-version=2024-10-21",
		"http://me:" + sec + "@127.0.0.1:1/v1?api-version=2024-10-21",
		"http://127.0.0.1:1/v1?api-version=2024-10-21;api-key=" + sec,
		"http://127.0.0.1:1/v1?api-version=2024-10-21&x=1;key=" + sec + ";y=2",
		"http://127.0.0.1:1/v1?api-version=2024-10-21&pwd=" + sec,
		"http://127.0.0.1:1/v1?api-version=2024-10-21&pass=" + sec,
		"http://127.0.0.1:1/v1?api-version=2024-10-21&password=" + sec,
		"http://127.0.0.1:1/v1?api-version=2024-10-21&passwd=" + sec,
		"http://127.0.0.1:1/v1?api-version=2024-10-21&passphrase=" + sec,
		"http://127.0.0.1:1/v1?api-version=2024-10-21&sig=" + sec,
		"http://127.0.0.1:1/v1?api-version=2024-10-21&X-Amz-Signature=" + sec,
		"http://127.0.0.1:1/v1?api-version=2024-10-21&accessToken=" + sec,
		"http://127.0.0.1:1/v1?api-version=2024-10-21&client_secret=" + sec,
		"http://127.0.0.1:1/v1?api-version=2024-10-21&sessionId=" + sec,
		"http://127.0.0.1:1/v1?api-version=2024-10-21&code=" + sec,
		"http://127.0.0.1:1/v1?api-version=2024-10-21&apikey=" + sec,
		"http://127.0.0.1:1/v1?api-version=2024-10-21&subscription.key=" + sec,
		"http://127.0.0.1:1/v1?api-version=2024-10-21&auth=" + sec,
		"http://127.0.0.1:1/v1?api-version=2024-10-21&pwd=" + esc,
		// Does not parse (bad port): redacted as written.
		"http://" + sec + "@127.0.0.1:bad/v1?api-version=2024-10-21",
		"http://127.0.0.1:bad/v1?api-version=2024-10-21;pwd=" + sec,
	} {
		t.Run(base, func(t *testing.T) {
			cfg := Config{BaseURL: base, Model: "m"}
			c := New(cfg)
			for what, s := range map[string]string{
				"BaseURL()":       c.BaseURL(),
				"Config.String()": cfg.String(),
				"Config.LogValue": cfg.LogValue().String(),
			} {
				if strings.Contains(s, sec) || strings.Contains(s, esc) {
					t.Errorf("%s = %s", what, s)
				}
				if !strings.Contains(s, "api-version=2024-10-21") || !strings.Contains(s, "REDACTED") {
					t.Errorf("%s = %s: want api-version kept and the credential REDACTED", what, s)
				}
			}
			_, err1 := c.Complete(t.Context(), userReq("hi"))
			_, err2 := llm.Collect(c.Stream(t.Context(), userReq("hi")))
			for _, err := range []error{err1, err2} {
				if err == nil {
					t.Fatal("no error")
				}
				for _, leak := range chainSecrets(err, []string{sec, esc}) {
					t.Errorf("secret in the error chain: %s", leak)
				}
			}
		})
	}
}

// TestRedactURLKeepsOtherParameters: names that merely contain a
// credential word's letters are not credentials, and a query without
// credentials is printed exactly as written.
func TestRedactURLKeepsOtherParameters(t *testing.T) {
	for _, base := range []string{
		"http://h/v1?api-version=1&author=a&passage=b&bypass=c&signal=d&design=e&codec=f&keyword=g&tokenizer=h",
		"http://h/v1?x=1;y=2&z=%41",
		"http://h/v1",
	} {
		if got := redactURL(base); got != base {
			t.Errorf("redactURL(%q) = %q", base, got)
		}
	}
}

// TestCredentialNameWords: names are matched word by word (split at
// separators and camelCase), not by substring.
func TestCredentialNameWords(t *testing.T) {
	for name, want := range map[string]bool{
		"api-key": true, "X-Api-Key": true, "XAPIKey": true, "apikey": true, "key": true,
		"Ocp-Apim-Subscription-Key": true, "subscriptionkey": true,
		"token": true, "access_token": true, "accessToken": true, "X-Amz-Security-Token": true,
		"secret": true, "client_secret": true, "clientSecret": true,
		"password": true, "userPassword": true, "passwd": true, "pwd": true, "pass": true, "passphrase": true,
		"sig": true, "signature": true, "X-Amz-Signature": true,
		"auth": true, "Authorization": true, "Proxy-Authorization": true, "X-Auth": true,
		"credential": true, "X-Amz-Credential": true, "credentials": true,
		"keys": true, "accesstokens": true, "api_keys": true,
		"session": true, "session_id": true, "sessionId": true, "code": true, "Cookie": true,

		"api-version": false, "author": false, "passage": false, "bypass": false, "compass": false,
		"signal": false, "design": false, "codec": false, "encode": false, "keyword": false,
		"tokenizer": false, "secretary": false, "X-Title": false, "model": false, "user": false,
		"HTTP-Referer": false, "OpenAI-Organization": false, "": false,
	} {
		if got := credentialName(name); got != want {
			t.Errorf("credentialName(%q) = %v, want %v", name, got, want)
		}
	}
}

func ExampleConfig_String_userinfo() {
	fmt.Println(Config{BaseURL: "https://sk-abc123@gw.example/v1?api-version=1;pwd=hunter22"})
	// Output: openai.Config{Model: "", BaseURL: "https://REDACTED@gw.example/v1?api-version=1;pwd=REDACTED", APIKey: "", Headers: []}
}
