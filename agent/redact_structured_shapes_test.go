package agent_test

import (
	"testing"

	"github.com/valetkit/valet/agent"
)

// The structured shapes RedactText masks, exactly: the value after a name
// field that names a secret, the content of a secret-named XML element,
// and a URL password that holds /, ? or # unencoded, masked through to
// its @.
func TestRedactTextStructuredShapesExactly(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"name": "X-Api-Key", "value": "hunter2zq"}`, `{"name": "X-Api-Key", "value": ***`},
		{`[{\"name\":\"Authorization\",\"value\":\"Basic YW5u\"}]`, `[{\"name\":\"Authorization\",\"value\":***`},
		{`<add key="DbPassword" value="hunter2zq" />`, `<add key="***" value="***" />`},
		{"env:\n- name: DB_PASSWORD\n  value: hunter2zq\n- name: LOG_LEVEL\n  value: debug", "env:\n- name: DB_PASSWORD\n  value: ***\n- name: LOG_LEVEL\n  value: debug"},
		{"<password>hunter2zq</password><user>ann</user>", "<password>***</password><user>ann</user>"},
		{"<ns:apiKey>hunter2zq</ns:apiKey>", "<ns:apiKey>***</ns:apiKey>"},
		{"<password>hunter2zq", "<password>***"}, // cut text
		{`parse "postgres://ann:Zx9/kq+Lm2Qw@db:5432/app": invalid port`, `parse "postgres://ann:***@db:5432/app": invalid port`},
		{"dial redis://:a?b#c@cache:6379/0 failed", "dial redis://:***@cache:6379/0 failed"},
		{"postgres://ann:Zx9/kq@q@db/app", "postgres://ann:***@db/app"},
		{"postgres://ann:hunter2@db/app?x=1", "postgres://ann:***@db/app?x=1"},
	} {
		if got := agent.RedactText(tc.in); got != tc.want {
			t.Errorf("RedactText(%q)\n = %q\nwant %q", tc.in, got, tc.want)
		}
	}
}

// Structured text without a secret stays as it is, without allocating.
func TestRedactTextKeepsStructuredLookalikes(t *testing.T) {
	for _, s := range []string{
		`{"headers":[{"name":"Accept","value":"application/json"}]}`,
		`<add name="LogLevel" value="debug" />`,
		"<user>ann</user><password/><token></token>",
		"<password><hash>x</hash></password>",
		"- name: LOG_LEVEL\n  value: debug",
		"https://example.com:8443/a/b?x=y https://h/p mailto:ann@example.com",
		"https://ann@example.com:8443/a/b?x=y",
	} {
		if got := agent.RedactText(s); got != s {
			t.Errorf("RedactText(%q) = %q, want it unchanged", s, got)
		}
		if n := testing.AllocsPerRun(20, func() { _ = agent.RedactText(s) }); n != 0 {
			t.Errorf("RedactText(%q): %v allocations, want 0", s, n)
		}
	}
}
