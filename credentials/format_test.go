package credentials

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// leakForms returns every rendering of the secret bytes that must never
// appear in formatted output: the text itself and the decimal, hex and octal
// renderings fmt uses for a byte slice.
func leakForms(secret string) []string {
	b := []byte(secret)
	return []string{
		secret,
		strings.Trim(fmt.Sprintf("%d", b), "[]"),
		fmt.Sprintf("%x", b),
		fmt.Sprintf("%X", b),
		fmt.Sprintf("% x", b),
		strings.Trim(fmt.Sprintf("%o", b), "[]"),
		strings.Trim(fmt.Sprintf("%b", b), "[]"),
	}
}

func TestSecretFormatNeverLeaks(t *testing.T) {
	const tok = "tok-s3cr3t-value"
	s := NewSecret(json.RawMessage(`{"access_token":"` + tok + `"}`))

	type exported struct {
		Name string
		S    Secret
	}
	type unexported struct {
		name string
		s    Secret
	}
	type nested struct {
		In unexported
		in exported
		P  *unexported
	}
	subjects := map[string]any{
		"alone":             s,
		"pointer":           &s,
		"exported field":    exported{"n", s},
		"unexported field":  unexported{"n", s},
		"ptr to exported":   &exported{"n", s},
		"ptr to unexported": &unexported{"n", s},
		"nested":            nested{unexported{"n", s}, exported{"n", s}, &unexported{"n", s}},
		"slice":             []Secret{s, s},
		"map":               map[string]Secret{"a": s},
		"slice of structs":  []unexported{{"n", s}},
		"map of structs":    map[string]unexported{"a": {"n", s}},
		"any slice":         []any{s, unexported{"n", s}},
		// fmt prints an unexported reflect.Value at depth 0, and re-prints a
		// pointer at depth 0 for a verb pointers do not take (%s, %q).
		"reflect.Value": reflect.ValueOf(unexported{"n", s}).Field(1),
	}
	verbs := []string{"%v", "%+v", "%#v", "%s", "%q", "%d", "%x", "%X", "% x", "%o", "%b", "%T", "%10v", "%-12s", "%08d", "%c", "%U", "%e", "%t"}
	forms := leakForms(tok)
	for name, v := range subjects {
		for _, verb := range verbs {
			out := fmt.Sprintf(verb, v)
			for _, f := range forms {
				if strings.Contains(out, f) {
					t.Errorf("%s with %s leaked %q: %s", name, verb, f, out)
				}
			}
		}
		// Println and Sprint go through the same paths as %v but check anyway.
		for _, out := range []string{fmt.Sprint(v), fmt.Sprintln(v)} {
			for _, f := range forms {
				if strings.Contains(out, f) {
					t.Errorf("%s with Sprint leaked %q: %s", name, f, out)
				}
			}
		}
	}
}

func TestSecretFormatOutput(t *testing.T) {
	s := NewSecret(json.RawMessage(`{"k":"v"}`))
	for _, tc := range []struct{ format, want string }{
		{"%v", "REDACTED"},
		{"%+v", "REDACTED"},
		{"%s", "REDACTED"},
		{"%d", "REDACTED"},
		{"%x", "REDACTED"},
		{"%X", "REDACTED"},
		{"%o", "REDACTED"},
		{"%b", "REDACTED"},
		{"%q", `"REDACTED"`},
		{"%#v", "credentials.Secret(REDACTED)"},
		{"%10v", "  REDACTED"},
		{"%-10v|", "REDACTED  |"},
	} {
		if got := fmt.Sprintf(tc.format, s); got != tc.want {
			t.Errorf("Sprintf(%q) = %q, want %q", tc.format, got, tc.want)
		}
	}
	type exported struct{ S Secret }
	if got, want := fmt.Sprintf("%+v", exported{s}), "{S:REDACTED}"; got != want {
		t.Errorf("exported field: %q, want %q", got, want)
	}
	if got, want := fmt.Sprintf("%d", []Secret{s}), "[REDACTED]"; got != want {
		t.Errorf("slice: %q, want %q", got, want)
	}
	if got := s.GoString(); got != "credentials.Secret(REDACTED)" {
		t.Errorf("GoString = %q", got)
	}
}

func TestSecretZeroValue(t *testing.T) {
	var z Secret
	if !z.IsZero() {
		t.Fatal("zero Secret is not IsZero")
	}
	if !NewSecret(nil).IsZero() {
		t.Fatal("NewSecret(nil) is not IsZero")
	}
	if err := z.Decode(&struct{}{}); err == nil {
		t.Fatal("decoding a zero Secret should fail")
	}
	for _, f := range []string{"%v", "%d", "%x", "%#v"} {
		if out := fmt.Sprintf(f, z); !strings.Contains(out, "REDACTED") {
			t.Errorf("zero Secret %s = %q", f, out)
		}
	}
	if b, err := json.Marshal(z); err != nil || string(b) != `"REDACTED"` {
		t.Errorf("json.Marshal(zero) = %s, %v", b, err)
	}
}

func TestSecretCopiesInput(t *testing.T) {
	raw := json.RawMessage(`{"a":"b"}`)
	s := NewSecret(raw)
	raw[6] = 'X'
	var m map[string]string
	if err := s.Decode(&m); err != nil || m["a"] != "b" {
		t.Fatalf("Decode after mutating input = %v, %v", m, err)
	}
}
