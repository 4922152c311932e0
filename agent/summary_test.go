package agent

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/valetkit/valet/llm/openai"
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
		// glued words, bearer, jwt
		"secretkey", "privatekey", "accesskey", "sessionid", "authtoken", "authkey", "secretaccesskey", "authorizationkey",
		"SECRETKEY", "sessionids", "accesstokens", "bearer", "Bearer", "jwt", "JWT", "id_jwt", "jwts",
	}
	visible := []string{
		"keyword", "keywords", "author", "authors", "session_count", "token_count", "monkey", "tokenizer",
		"secretary", "possession", "keyboard", "user", "query", "city",
		"token_type", "auth_type", "secret_name", "key_name", "password_length", "token_ttl", "session_expires", "auth_url",
		"authorid", "authors_id", "accessory", "id", "keyid_count", "bearer_type", "value", "name",
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

// TestSummarizeArgsMasksInvalidJSON: arguments that do not parse are
// withheld when a sensitive word appears anywhere in them, and shown (cut)
// otherwise.
func TestSummarizeArgsMasksInvalidJSON(t *testing.T) {
	for _, raw := range []string{
		`{"password":"` + summarySecret + `"`,
		`{"api-key":"` + summarySecret + `",}`,
		`{password: "` + summarySecret + `"}`,
		`{'password': '` + summarySecret + `'}`,
		`{Password:'` + summarySecret + `'}`,
		`{"user":"ann","note":"my password is ` + summarySecret,     // unclosed string
		`{"user":"ann","note":"the token is ` + summarySecret + `"`, // unclosed object
		`{"note":"x"} jwt ` + summarySecret,                         // trailing text
		`{pass\u0077ord: "` + summarySecret + `"}`,
		`{"a":"\\u0070assword ` + summarySecret + `"`, // escaped twice
		`{'a':'\x70assword ` + summarySecret + `'}`,
		"{\"pa\u017fsword\":\"" + summarySecret + `"`,
		`{"sessionid":"` + summarySecret + `"`,
		`Bearer ` + summarySecret,
		`{"a":"C:\token ` + summarySecret + `"`,                       // \t is not only a tab here
		`{"keyword":"museum","session_count":2,"x":"` + summarySecret, // a sensitive word anywhere
	} {
		sum := summarizeArgs([]byte(raw))
		if strings.Contains(sum, summarySecret) || !strings.Contains(sum, "withheld") {
			t.Errorf("%s: summary %s, want it withheld", raw, sum)
		}
	}
	for _, raw := range []string{`{"city":"Paris"`, `{city: 'Paris', days: 3}`, `{"keyword":"museum","monkey":2,`, `not json at all`, ``} {
		if sum := summarizeArgs([]byte(raw)); sum != raw {
			t.Errorf("invalid but harmless arguments %s: summary %s", raw, sum)
		}
	}
	long := `{"note":"` + strings.Repeat("x", 500)
	if sum := summarizeArgs([]byte(long)); len(sum) > summaryMaxLen+len("…") || !strings.HasSuffix(sum, "…") {
		t.Errorf("long invalid arguments not cut: %d bytes", len(sum))
	}
}

// TestSummarizeArgsRawArguments: llm/openai wraps arguments that are not a
// JSON object as {"_raw_arguments": "<text>"}; the text is summarised as
// arguments of its own.
func TestSummarizeArgsRawArguments(t *testing.T) {
	for _, tc := range []struct{ raw, hidden, shown string }{
		{`{"_raw_arguments":"{\"user\":\"ann\",\"password\":\"` + summarySecret + `\""}`, summarySecret, "withheld"},
		{`{"_raw_arguments":"{password: ` + summarySecret + `}"}`, summarySecret, "withheld"},
		{`{"_raw_arguments":"{pass\\u0077ord: ` + summarySecret + `}"}`, summarySecret, "withheld"},
		{`{"_raw_arguments":"\"my password is ` + summarySecret + `\""}`, summarySecret, "withheld"}, // a bare string
		{`{"_raw_arguments":"[{\"token\":\"` + summarySecret + `\"},\"plain\"]"}`, summarySecret, `plain`},
		{`{"_raw_arguments":"{\"city\":\"Paris\""}`, "withheld", `{"_raw_arguments":"{\"city\":\"Paris\""}`},
		{`{"_raw_arguments":"[1,2]"}`, "withheld", `{"_raw_arguments":"[1,2]"}`},
	} {
		sum := summarizeArgs([]byte(tc.raw))
		if strings.Contains(sum, tc.hidden) || !strings.Contains(sum, tc.shown) {
			t.Errorf("%s: summary %s, want %q hidden and %q shown", tc.raw, sum, tc.hidden, tc.shown)
		}
	}
}

// TestSummarizeArgsMasksValues: name/value pairs naming a secret, values
// with an HTTP auth scheme, and JSON text inside string values.
func TestSummarizeArgsMasksValues(t *testing.T) {
	for _, tc := range []struct{ raw, hidden, shown string }{
		{`{"headers":[{"name":"Authorization","value":"Bearer ` + summarySecret + `"}]}`, summarySecret, `"name":"Authorization"`},
		{`{"headers":[{"name":"X-Api-Key","value":"` + summarySecret + `"},{"name":"Accept","value":"json"}]}`, summarySecret, `"value":"json"`},
		{`[{"value":"` + summarySecret + `","name":"session_id"}]`, summarySecret, `"value":"***"`},
		{`{"header":"Cookie","value":"` + summarySecret + `"}`, summarySecret, `"value":"***"`},
		{`{"Name":"pass\u0077ord","Value":"` + summarySecret + `"}`, summarySecret, `"Value":"***"`},
		{`{"key":"jwt","value":"` + summarySecret + `"}`, summarySecret, `"value":"***"`},
		{`{"h":"Bearer ` + summarySecret + `"}`, summarySecret, `"h":"***"`},
		{`{"h":"basic ` + summarySecret + `"}`, summarySecret, `"h":"***"`},
		{`{"h":"  BEARER\t` + summarySecret + `"}`, summarySecret, `"h":"***"`},
		{`{"h":"\u0042earer ` + summarySecret + `"}`, summarySecret, `"h":"***"`},
		{`{"h":"\n\n\n\n\n\n\n\n\n\nBasic ` + summarySecret + `"}`, summarySecret, `"h":"***"`},
		{`["Bearer ` + summarySecret + `"]`, summarySecret, `["***"]`},
		{`"Bearer ` + summarySecret + `"`, summarySecret, `"***"`},
		{`{"body":"{\"token\":\"` + summarySecret + `\",\"a\":1}"}`, summarySecret, `\"token\":\"***\"`},
		{`{"body":" [{\"password\":\"` + summarySecret + `\"}]"}`, summarySecret, `\"password\":\"***\"`},
		{`{"body":"\n{\"a\":\"{\\\"token\\\":\\\"` + summarySecret + `\\\"}\"}"}`, summarySecret, `***`}, // twice
		{`{"body":"\u007b\"token\":\"` + summarySecret + `\"}"}`, summarySecret, `***`},
		{`{"body":"{\"password\":\"` + summarySecret + `\""}`, summarySecret, `"body":"(invalid`}, // not JSON
		{`{"body":"{password: ` + summarySecret + `}"}`, summarySecret, `"body":"(invalid`},
	} {
		sum := summarizeArgs([]byte(tc.raw))
		if strings.Contains(sum, tc.hidden) || !strings.Contains(sum, tc.shown) {
			t.Errorf("%s: summary %s, want %q hidden and %q shown", tc.raw, sum, tc.hidden, tc.shown)
		}
	}
	for _, tc := range []struct{ raw, want string }{
		{`{"name":"city","value":"Paris"}`, `{"name":"city","value":"Paris"}`},
		{`{"name":"token_count","value":"5"}`, `{"name":"token_count","value":"5"}`},
		{`{"name":"Authorization"}`, `{"name":"Authorization"}`},
		{`{"name":"Authorization","values":"x"}`, `{"name":"Authorization","values":"x"}`},
		{`{"name":{"k":"Authorization"},"value":"x"}`, `{"name":{"k":"Authorization"},"value":"x"}`},
		{`{"h":"Bearers are fine","b":"Basically fine","c":"bearer"}`, `{"h":"Bearers are fine","b":"Basically fine","c":"bearer"}`},
		{`{"q":"reset my password","r":"the token is { here }","s":"[not json"}`, `{"q":"reset my password","r":"the token is { here }","s":"[not json"}`},
		{`{"body":"{\"city\":\"Paris\"}"}`, `{"body":"{\"city\":\"Paris\"}"}`},
		{`{"body":"[not json]"}`, `{"body":"[not json]"}`},
	} {
		if sum := summarizeArgs([]byte(tc.raw)); sum != tc.want {
			t.Errorf("%s: summary %s, want %s", tc.raw, sum, tc.want)
		}
	}
}

// Test tokens, assembled so that no scanner mistakes this file for a leak.
var (
	testJWT       = "eyJhbGciOiJIUzI1NiJ9" + "." + "eyJzdWIiOiIxMjM0NTY3ODkwIn0" + "." + "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
	testOpenAI    = "sk-" + "proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"
	testGitHub    = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
	testGitHubPAT = "github_pat_" + "11ABCDEFG0abcdefghijkl_mnopqrstuvwxyz0123456789"
	testSlack     = "xoxb-" + "123456789012-1234567890123-AbCdEfGhIjKlMnOp"
	testAWS       = "AKIA" + "IOSFODNN7EXAMPLE"
)

// TestSummarizeArgsMasksSecretsInText: secrets inside string values under
// harmless keys: header lines, name=value pairs of queries and forms, URL
// passwords, and token shapes.
func TestSummarizeArgsMasksSecretsInText(t *testing.T) {
	for _, tc := range []struct{ raw, want string }{
		// header lines
		{`{"headers":["Authorization: Bearer abc.def","Accept: json"]}`, `{"headers":["Authorization: ***","Accept: json"]}`},
		{`{"header":"X-Api-Key: s3cr3t"}`, `{"header":"X-Api-Key: ***"}`},
		{`{"h":"x-api-key=s3cr3t"}`, `{"h":"x-api-key=***"}`},
		{`{"h":"Cookie:sid=abc; theme=dark"}`, `{"h":"Cookie:***"}`},
		{`{"h":"Accept: json\r\nAuthorization : Basic eA==\r\nHost: h"}`, `{"h":"Accept: json\r\nAuthorization : ***\r\nHost: h"}`},
		{`{"h":"Authorization\u003a Bearer abc"}`, `{"h":"Authorization: ***"}`}, // escaped: the fast path decodes
		{`{"h":"pa\u017fsword: abc"}`, `{"h":"paſsword: ***"}`},                  // folds as keys do
		{`{"cmd":"curl -H 'X-Auth-Token: abc' https://h/x"}`, `{"cmd":"curl -H 'X-Auth-Token: ***"}`},
		{`{"note":"send {\"password\": \"hunter2\"} now"}`, `{"note":"send {\"password\": ***"}`},
		// form and query strings
		{`{"body":"user=ann&password=hunter2&x=1"}`, `{"body":"user=ann&password=***&x=1"}`},
		{`{"url":"https://h/p?api_key=S3CR3T&q=1"}`, `{"url":"https://h/p?api_key=***&q=1"}`},
		{`{"url":"https://h/p?q=1&access_token=S3CR3T#top"}`, `{"url":"https://h/p?q=1&access_token=***"}`},
		{`{"body":"user[password]=hunter2&api%5Fkey=S3CR3T"}`, `{"body":"user[password]=***&api%5Fkey=***"}`},
		{`{"env":"export DB_PASSWORD=\"a b\" PORT=5432"}`, `{"env":"export DB_PASSWORD=\"***\" PORT=5432"}`},
		{`{"args":["--user=ann","--token=S3CR3T"]}`, `{"args":["--user=ann","--token=***"]}`},
		{`{"dsn":"postgres://admin:hunter2@db:5432/app"}`, `{"dsn":"postgres://admin:***@db:5432/app"}`},
		// token shapes, whatever the key
		{`{"value":"` + testJWT + `"}`, `{"value":"***"}`},
		{`{"value":"` + testOpenAI + `"}`, `{"value":"***"}`},
		{`{"v":["` + testGitHub + `","` + testGitHubPAT + `","` + testSlack + `","` + testAWS + `"]}`, `{"v":["***","***","***","***"]}`},
		{`{"v":"gho_` + testGitHub[4:] + `"}`, `{"v":"***"}`},
		{`{"note":"use ` + testOpenAI + ` for now"}`, `{"note":"use *** for now"}`},
		{`{"link":"https://h/verify/` + testJWT + `?x=1"}`, `{"link":"https://h/verify/***?x=1"}`},
		{`{"cfg":"aws ` + testAWS + `, region eu"}`, `{"cfg":"aws ***, region eu"}`},
		{`{"_raw_arguments":"{\"a\":[\"` + testJWT + `\"]}"}`, `{"_raw_arguments":"{\"a\":[\"***\"]}"}`},
	} {
		if sum := summarizeArgs([]byte(tc.raw)); sum != tc.want {
			t.Errorf("%s:\nsummary %s\nwant    %s", tc.raw, sum, tc.want)
		}
	}
	// Raw text cannot be masked piece by piece: it is withheld.
	for _, raw := range []string{
		`{"value":"` + testJWT + `"`,
		`{"_raw_arguments":"use ` + testOpenAI + `"}`,
		`{"_raw_arguments":"{\"url\":\"https://h/?api%5Fkey=S3CR3T\""}`,
		`{"body":"[x] ` + testSlack + `"}`,
		`{url: 'postgres://admin:hunter2@db/app'}`,
	} {
		sum := summarizeArgs([]byte(raw))
		for _, secret := range []string{testJWT, testOpenAI, testSlack, "S3CR3T", "hunter2"} {
			if strings.Contains(sum, secret) || !strings.Contains(sum, "withheld") {
				t.Errorf("%s: summary %s, want it withheld", raw, sum)
				break
			}
		}
	}
}

// TestSummarizeArgsKeepsHarmlessText: what looks a little like a secret but
// is not stays visible, through the fast path.
func TestSummarizeArgsKeepsHarmlessText(t *testing.T) {
	for _, raw := range []string{
		`{"q":"hello world","email":"ann.smith@example.com","n":"Ann O'Neil"}`,
		`{"url":"https://example.com/search?q=museums&page=2#top"}`,
		`{"url":"https://ann@example.com:8443/a/b?x=y","ftp":"ftp://h/p"}`,
		`{"id":"123e4567-e89b-12d3-a456-426614174000"}`,
		`{"h":["Accept: json","Content-Type: application/json"]}`,
		`{"a":"token_type=bearer&expires_in=3600","b":"auth_url: https://h/a"}`,
		`{"a":"Subject: password reset","b":"time 12:30, ratio 3:4","c":"a=b=c"}`,
		`{"a":"keyword=museum&monkey=3","b":"author: Ann","c":"Key:"}`,
		`{"a":"sk-learn-is-a-python-library-name","b":"task-0123456789abcdefABCDEF"}`,
		`{"a":"eyes.open.wide","b":"eyJ","c":"xoxo-hugs-and-kisses-for-you","d":"ghp_short"}`,
		`{"a":"AKIAIOSFODNN7EXAMPL","b":"AKIAIOSFODNN7EXAMPLE2","c":"XAKIAIOSFODNN7EXAMPLE"}`,
		`{"a":"base64 dG9rZW4gZm9yIGFwaUtleQ==","b":"sha256:9f86d081884c7d659a2feaa0c55ad015a3"}`,
		`{"a":"sk-` + strings.Repeat("a", 30) + `","b":"sk-1234567890abcdefghij"}`,
	} {
		if !cleanArgs([]byte(raw)) {
			t.Errorf("cleanArgs(%s) = false, want the fast path", raw)
		}
		if sum := summarizeArgs([]byte(raw)); sum != raw {
			t.Errorf("%s: summary %s, want it unchanged", raw, sum)
		}
	}
}

// TestSummarizeArgsTextScanIsLinear: many token starts, pairs or URLs in one
// long string do not make the scan quadratic.
func TestSummarizeArgsTextScanIsLinear(t *testing.T) {
	for _, unit := range []string{"eyJ-", "sk-a", "ghp_", "xoxb-", "a=", "x: ", "://a", "AKIA-", "github_pat_", "Bearer ", "key sk-", "AIza-", "sk_live_", "a=Bearer ", "://a:b/", "://a:b/@", "<password>", "<password>x", `"key":"token","value":`, "name: secret\nvalue: ", "key=password value="} {
		s := strings.Repeat(unit, 1<<18/len(unit))
		raw, _ := json.Marshal(map[string]string{"v": s})
		start := time.Now()
		_ = summarizeArgs(raw)
		_ = rawText(s, summaryMaxLen)
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%q repeated to 256 KiB: %v", unit, d)
		}
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
	for _, s := range []string{
		`{"city":"Paris","days":3,"keyword":"museum","session_count":2,"units":"metric"}`,
		`{"q":"\"quoted\" text","n":"\n\tline","u":"\u00e9t\u00e9","a":[true,false,null,-1.5e3,0]}`,
		`{"headers":[{"name":"Accept","value":"json"}],"author":"Ann","monkey":"Bearers"}`,
		`{"url":"https://example.com/s?q=museums&page=2","h":"Accept: json","e":"ann@example.com"}`,
		`{"id":"123e4567-e89b-12d3-a456-426614174000","t":"12:30","x":"a\u003db","s":"sk-learn"}`,
	} {
		raw := []byte(s)
		if n := testing.AllocsPerRun(100, func() { _ = summarizeArgs(raw) }); n > 1 {
			t.Errorf("summarizeArgs(%s): %v allocations, want at most 1", s, n)
		}
	}
}

func TestRawArgumentsKeyIsOpenAIs(t *testing.T) {
	if rawArgumentsKey != openai.RawArgumentsKey {
		t.Fatalf("rawArgumentsKey = %q, llm/openai uses %q", rawArgumentsKey, openai.RawArgumentsKey)
	}
}

// TestCleanArgsValidates: the fast path returns arguments as they are only
// when they are valid JSON.
func TestCleanArgsValidates(t *testing.T) {
	for _, raw := range []string{
		``, ` `, `01`, `1.`, `.5`, `-`, `1e`, `1e+`, `+1`, `"\x"`, `"\u12"`, `"\u12G4"`, "\"a\tb\"", `"a`, `tru`, `nul`, `True`,
		`[1,]`, `[,1]`, `[1 2]`, `{"a":1,}`, `{"a" 1}`, `{,}`, `{"a":1}}`, `{"a":1} {}`, `{a:1}`, `{'a':1}`, "\"\xff\"",
		strings.Repeat("[", maxScanDepth+1) + strings.Repeat("]", maxScanDepth+1), // valid but deep: slow path
	} {
		if cleanArgs([]byte(raw)) {
			t.Errorf("cleanArgs(%q) = true", raw)
		}
	}
	for _, raw := range []string{`-0.5e+3`, ` [ ] `, `{"a":[{},[],true,false,null,0,-1,2.5E-7]}`, `"\u00e9\/\\\""`, "\"\u00e9t\u00e9\"", `{"name":"city","value":"Paris"}`} {
		if !cleanArgs([]byte(raw)) {
			t.Errorf("cleanArgs(%q) = false", raw)
		}
	}
}

// FuzzSummarizeArgs checks that the fast path agrees with the slow one: what
// cleanArgs lets through is valid JSON that redact would leave unchanged.
//
//	go test -run '^$' -fuzz FuzzSummarizeArgs -fuzztime 60s ./agent/
func FuzzSummarizeArgs(f *testing.F) {
	for _, s := range []string{
		`{"city":"Paris","days":3}`, `{"password":"x","user":"ann"}`, `{"headers":[{"name":"Authorization","value":"Bearer x"}]}`,
		`{"name":"X-Api-Key","value":"x"}`, `{"body":"{\"token\":\"x\"}"}`, `{"_raw_arguments":"{\"a\":1"}`,
		`{"h":"\u0042earer x"}`, `["basic x", " [1]"]`, `{"pass\u0077ord":1}`, `{"k\u00e9y":"\u00e9"}`, `{password: 'x'}`,
		`{"h":["Authorization: Bearer x","Accept: json"]}`, `{"u":"https://h/p?api_key=x&q=1"}`, `{"d":"pg://a:b@h/"}`,
		`{"v":"eyJa.eyJb.c"}`, `{"v":"sk-Ab3dEf6hIj9kLm2nOp5qRs"}`, `{"v":"x AKIAIOSFODNN7EXAMPLE"}`, `{"h":"pa\u017fsword=\ud83d\ude00"}`,
		`{"v":"key sk-abcdefghijklmnopqrstuvwx"}`, `{"v":"Bearer abcdefghijklmnop0123"}`, `{"v":"a=Bearer x1"}`, `{"v":"AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		sum := summarizeArgs(raw)
		if !utf8.ValidString(sum) {
			t.Errorf("summary %q is not valid UTF-8", sum)
		}
		if !cleanArgs(raw) {
			return
		}
		if !json.Valid(raw) {
			t.Fatalf("cleanArgs accepts invalid JSON %q", raw)
		}
		var v, want, got any
		if json.Unmarshal(raw, &v) != nil || json.Unmarshal(raw, &want) != nil {
			return // valid JSON that does not decode into any: 1e999
		}
		if err := json.Unmarshal([]byte(marshal(redact(v))), &got); err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("cleanArgs accepts %q, which redact changes to %v", raw, got)
		}
	})
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
