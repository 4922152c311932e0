package tool

import (
	"context"
	"errors"
	"strings"
	"testing"
)

type dupAddr struct {
	Street string `json:"street"`
	Note   string `json:"note,omitempty" jsonschema:"pattern=^[a-z]*$"`
}

type dupIn struct {
	Amount int               `json:"amount" jsonschema:"minimum=1,maximum=100"`
	Addr   dupAddr           `json:"addr"`
	Lines  []dupAddr         `json:"lines,omitempty"`
	Extra  map[string]string `json:"extra,omitempty"`
}

// A repeated key would let encoding/json merge two objects into one struct
// while the validator, which keeps only the last occurrence, checked just
// that one: the value a tool receives must be the value that was checked.
func TestDuplicateKeysRejected(t *testing.T) {
	var got []dupIn
	tl := New("pay", "pay", func(ctx context.Context, in dupIn) (string, error) {
		got = append(got, in)
		return "ok", nil
	})
	for _, args := range []string{
		`{"amount":5,"addr":{"street":"s","note":"BAD!"},"addr":{"street":"t"}}`,
		`{"amount":5,"addr":{"street":"s"},"lines":[{"street":"a","note":"BAD!"}],"lines":[{"street":"b"}]}`,
		`{"amount":500,"amount":5,"addr":{"street":"s"}}`,
		`{"amount":5,"addr":{"street":"s","street":"t"}}`,
		`{"amount":5,"addr":{"street":"s"},"extra":{"k":"a","k":"b"}}`,
		`{"amount":5,"addr":{"street":"s"},"amou\u006et":6}`,
	} {
		out, err := tl.Call(context.Background(), []byte(args))
		if !errors.Is(err, ErrInvalidArguments) {
			t.Errorf("%s: accepted (%q, %v), got %+v", args, out, err, got)
			continue
		}
		if !strings.Contains(err.Error(), "more than once") {
			t.Errorf("%s: error %q does not name the repeated field", args, err)
		}
		s := SchemaOf(tl)
		if err := s.Validate([]byte(args)); err == nil {
			t.Errorf("%s: Validate accepted", args)
		}
	}
	// Ordinary arguments still take the fast path and pass.
	ok := []byte(`{"amount":5,"addr":{"street":"s","note":"x"},"lines":[{"street":"a"},{"street":"b"}],"extra":{"a":"1","b":"2"}}`)
	if !SchemaOf(tl).fast.validJSON(ok) {
		t.Errorf("fast path declined %s", ok)
	}
	if _, err := tl.Call(context.Background(), ok); err != nil {
		t.Error(err)
	}
}
