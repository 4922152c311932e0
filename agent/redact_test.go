package agent_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/valetkit/valet/agent"
)

// Credential shapes, assembled so that no scanner mistakes this file for a
// leak.
var (
	credOpenAIProj = "sk-" + "proj-abcdefghijklmnopqrstuvwxyz0123456789"
	credOpenAIAll  = "sk-" + "abcdefghijklmnopqrstuvwx"
	credAnthropic  = "sk-" + "ant-api03-abcdefghijklmnopqrstuvwxyz0123456789_ABCDEF"
	credBearer     = "abcdefghijklmnopqrstuvwxyz012345"
	credGitHubS    = "ghs_" + "abcdefghijklmnopqrstuvwxyz0123456789"
	credSlackP     = "xoxp-" + "1234567890-abcdefghij"
	credAWSSession = "ASIA" + "IOSFODNN7EXAMPLE"
	credGoogle     = "AIza" + "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q"
	credStripe     = "sk_" + "live_51AbCdEfGhIjKlMnOpQrStUv"
	credStripeR    = "rk_" + "live_51AbCdEfGhIjKlMnOpQrStUv"
	credJWT        = "eyJhbGciOiJIUzI1NiJ9" + "." + "eyJzdWIiOiIxMjM0NTY3ODkwIn0" + "." + "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
)

// RedactText masks well-known credential shapes in running text, whatever
// word comes before them, and keeps the words around them.
func TestRedactTextMasksCredentialShapes(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"token " + credOpenAIProj, "token ***"},
		{"key " + credOpenAIAll, "key ***"},
		{"Bearer " + credBearer, "Bearer ***"},
		{"curl -H 'Authorization=Bearer " + credBearer + "' x", "curl -H 'Authorization=*** x"},
		{"use " + credAnthropic + " today", "use *** today"},
		{"gh " + credGitHubS + ".", "gh ***."},
		{"slack " + credSlackP, "slack ***"},
		{"aws " + credAWSSession + " eu", "aws *** eu"},
		{"maps " + credGoogle + " ok", "maps *** ok"},
		{"stripe " + credStripe + " / " + credStripeR, "stripe *** / ***"},
		{"jwt " + credJWT, "jwt ***"},
		{"OPENAI_API_KEY " + credOpenAIAll, "OPENAI_API_KEY ***"},
	} {
		if got := agent.RedactText(tc.in); got != tc.want {
			t.Errorf("RedactText(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// Text that only resembles a credential stays as it is.
func TestRedactTextKeepsLookalikes(t *testing.T) {
	for _, s := range []string{
		"sk-learn-is-a-python-library-name",
		"the sk-" + strings.Repeat("a", 30) + " string",
		"a Bearer token is sent; Bearers are fine; the basic idea",
		"Bearer authentication",
		"AIzaShort and ASIAN food",
		"sk_live_ alone, rk_live_x",
		"keyboard sk-abc",
	} {
		if got := agent.RedactText(s); got != s {
			t.Errorf("RedactText(%q) = %q, want it unchanged", s, got)
		}
	}
}

// RedactText does not allocate on text that holds no secret.
func TestRedactTextCleanDoesNotAllocate(t *testing.T) {
	s := "The weather in Paris is sunny, 21°C; Bearer of good news: sk-learn, basic ASIAN AIza."
	if n := testing.AllocsPerRun(100, func() { _ = agent.RedactText(s) }); n != 0 {
		t.Errorf("%v allocations, want 0", n)
	}
}

// RedactArguments renders the whole arguments, not a summary cut to a
// length, with secret keys and secret values masked.
func TestRedactArgumentsWholeAndMasked(t *testing.T) {
	long := strings.Repeat("museum ", 80)
	raw := json.RawMessage(`{"q":"` + long + `","password":"hunter2","headers":[{"name":"Authorization","value":"Bearer x"}],` +
		`"note":"key ` + credOpenAIAll + `","n":12345678901234567890,"body":"{\"api_key\":\"S3CR3T\"}"}`)
	got := agent.RedactArguments(raw)
	for _, secret := range []string{"hunter2", "Bearer x", credOpenAIAll, "S3CR3T"} {
		if strings.Contains(got, secret) {
			t.Errorf("RedactArguments leaks %q: %s", secret, got)
		}
	}
	if !strings.Contains(got, long) {
		t.Errorf("RedactArguments cut the arguments: %s", got)
	}
	if !strings.Contains(got, "12345678901234567890") {
		t.Errorf("RedactArguments changed a number: %s", got)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(got), &v); err != nil {
		t.Fatalf("RedactArguments wrote invalid JSON %s: %v", got, err)
	}
	if v["password"] != "***" || v["note"] != "key ***" {
		t.Errorf("RedactArguments = %s", got)
	}
	clean := `{"city":"Paris","days":3}`
	if got := agent.RedactArguments(json.RawMessage(clean)); got != clean {
		t.Errorf("RedactArguments(%s) = %s, want it unchanged", clean, got)
	}
	// Not JSON: withheld when it may hold a secret, shown otherwise.
	if got := agent.RedactArguments(json.RawMessage(`{password: 'hunter2'`)); strings.Contains(got, "hunter2") {
		t.Errorf("RedactArguments on invalid JSON leaks: %s", got)
	}
	if got := agent.RedactArguments(json.RawMessage(`{city: Paris`)); got != `{city: Paris` {
		t.Errorf("RedactArguments on harmless invalid JSON = %s", got)
	}
}

// FuzzRedactArguments: what RedactArguments writes is valid UTF-8, and
// valid JSON when the arguments were.
//
//	go test -run '^$' -fuzz FuzzRedactArguments -fuzztime 30s ./agent/
func FuzzRedactArguments(f *testing.F) {
	for _, s := range []string{
		`{"city":"Paris"}`, `{"password":"x"}`, `{"n":1e999}`, `{"v":"key sk-abcdefghijklmnopqrstuvwx"}`,
		`{"body":"{\"token\":\"x\"}"}`, `{password: 'x'}`, `[1,2`, `"\ud800"`, `{"a":"Bearer abcdefghijklmnop0123"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		out := agent.RedactArguments(raw)
		if !utf8.ValidString(out) {
			t.Errorf("RedactArguments(%q) = %q, not valid UTF-8", raw, out)
		}
		if json.Valid(raw) && !json.Valid([]byte(out)) {
			t.Errorf("RedactArguments(%q) = %q, not valid JSON", raw, out)
		}
	})
}
