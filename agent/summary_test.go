package agent

import (
	"strings"
	"testing"
)

const summarySecret = "s3cr3t-VALUE-42"

// TestSummarizeArgsMasksSecretKeys puts summarySecret under each key (written
// into the raw JSON exactly as given, escapes included) and checks whether
// the summary masks it.
func TestSummarizeArgsMasksSecretKeys(t *testing.T) {
	masked := []string{
		"api-key", "x-api-key", "X-Api-Key", "apiKey", "APIKey", "XAPIKey", "api_key", "apikey", "ApiKey",
		"passphrase", "access_key", "accessKey", "AccessKeyID",
		`pass\u0077ord`, `\u0070assword`, `api\u002dkey`, `\u0041uthorization`,
		`pa\u017fsword`, "pa\u017fsword", `\u212aey`, // Unicode folds to ASCII, as encoding/json matches field names
		"password", "Password", "PASSWORD", "user_password", "password2", "passwd", "pwd",
		"client_secret", "clientSecret", "refresh_token", "refreshToken", "access_token", "accesstoken", "bearer.token",
		"Authorization", "auth", "Cookie", "set-cookie", "session", "session_id", "sessionId", "SessionID",
		"private_key", "privateKey", "signature", "x-signature", "credential", "credentials", "db credentials",
		"secret", "secrets", "tokens", "api_keys", "oauth2_token",
		"cvv", "ssn", "card_number", "cardNumber",
	}
	visible := []string{
		"keyword", "keywords", "author", "authors", "session_count", "token_count", "monkey", "tokenizer",
		"secretary", "possession", "keyboard", "user", "query", "city",
		"token_type", "auth_type", "secret_name", "key_name", "password_length", "token_ttl", "session_expires", "auth_url",
	}
	for _, k := range masked {
		raw := `{"` + k + `":"` + summarySecret + `","user":"ann"}`
		sum := summarizeArgs([]byte(raw))
		if strings.Contains(sum, summarySecret) || !strings.Contains(sum, "***") || !strings.Contains(sum, `"user":"ann"`) {
			t.Errorf("key %s: summary %s, want its value masked", k, sum)
		}
	}
	for _, k := range visible {
		raw := `{"` + k + `":"` + summarySecret + `"}`
		if sum := summarizeArgs([]byte(raw)); !strings.Contains(sum, summarySecret) {
			t.Errorf("key %s: summary %s, want its value visible", k, sum)
		}
	}
}

func TestSummarizeArgsMasksNestedValues(t *testing.T) {
	for _, tc := range []struct{ raw, hidden, shown string }{
		{`{"auth":{"user":"xavier"}}`, "xavier", `"auth":"***"`},
		{`{"headers":{"X-Api-Key":"` + summarySecret + `","Accept":"json"}}`, summarySecret, `"Accept":"json"`},
		{`{"list":[{"cfg":{"api-key":"` + summarySecret + `"}},"plain"]}`, summarySecret, `"plain"`},
		{`{"tokens":["` + summarySecret + `","b"]}`, summarySecret, `"tokens":"***"`},
		{`[{"passphrase":"` + summarySecret + `"}]`, summarySecret, "***"},
		{`{"a":{"b":{"c":{"Cookie":{"id":"` + summarySecret + `"}}}}}`, summarySecret, `"Cookie":"***"`},
	} {
		sum := summarizeArgs([]byte(tc.raw))
		if strings.Contains(sum, tc.hidden) || !strings.Contains(sum, tc.shown) {
			t.Errorf("%s: summary %s, want %q hidden and %q shown", tc.raw, sum, tc.hidden, tc.shown)
		}
	}
}

// TestSummarizeArgsMasksInvalidJSON: arguments that do not parse are not
// echoed when a key looks secret.
func TestSummarizeArgsMasksInvalidJSON(t *testing.T) {
	for _, raw := range []string{
		`{"password":"` + summarySecret + `"`,
		`{"api-key":"` + summarySecret + `",}`,
	} {
		if sum := summarizeArgs([]byte(raw)); strings.Contains(sum, summarySecret) {
			t.Errorf("%s: summary %s leaks", raw, sum)
		}
	}
	if sum := summarizeArgs([]byte(`{"city":"Paris"`)); sum != `{"city":"Paris"` {
		t.Errorf("invalid but harmless arguments: %s", sum)
	}
}

func TestSummarizeArgsKeepsCleanArgs(t *testing.T) {
	for _, raw := range []string{`{"city":"Paris"}`, `{"q":"x","n":3,"deep":{"list":[1,2,{"a":null}]}}`, `{}`, `[]`, `"s"`} {
		if sum := summarizeArgs([]byte(raw)); sum != raw {
			t.Errorf("summarizeArgs(%s) = %s", raw, sum)
		}
	}
	long := strings.Repeat("x", 200)
	if sum := summarizeArgs([]byte(`{"note":"` + long + `"}`)); strings.Contains(sum, long) || !strings.Contains(sum, "…") {
		t.Errorf("long string not cut: %s", sum)
	}
}

func TestSummarizeArgsCleanPathDoesNotAllocateMore(t *testing.T) {
	raw := []byte(`{"city":"Paris","days":3,"keyword":"museum","session_count":2,"units":"metric"}`)
	if n := testing.AllocsPerRun(100, func() { _ = summarizeArgs(raw) }); n > 1 {
		t.Errorf("summarizeArgs of clean arguments: %v allocations, want at most 1", n)
	}
}

// go test -run '^$' -bench SummarizeArgs -benchmem ./agent/
func BenchmarkSummarizeArgs(b *testing.B) {
	for _, bc := range []struct{ name, raw string }{
		{"clean", `{"city":"Paris","days":3,"query":"museums near the Louvre","units":"metric","max_results":10}`},
		{"clean-nested", `{"trip":{"from":"CDG","to":"JFK","passengers":[{"name":"Ann","age":31},{"name":"Bob","age":29}]},"class":"economy"}`},
		{"secret", `{"user":"ann","password":"hunter2","note":"hello"}`},
	} {
		raw := []byte(bc.raw)
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = summarizeArgs(raw)
			}
		})
	}
}
