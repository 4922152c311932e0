package agent

import (
	"strings"
	"testing"
)

// Arguments that encode the same JSON value up to key order and spacing
// have one hash; others differ. Text that is not JSON, or nested past
// maxJSONDepth, hashes as its bytes, without recursing without bound.
func TestArgsHashCanonical(t *testing.T) {
	same := [][]string{
		{`{"a":1,"b":{"c":[1,2],"d":"x"}}`, `{ "b" : { "d":"x", "c":[ 1 , 2 ] }, "a" : 1 }`, "{\n\t\"b\":{\"c\":[1,2],\"d\":\"x\"},\r\n\"a\":1}"},
		{``, `{}`, ` { } `},
		{`[]`, ` [ ] `},
		{`[2,0,-1.5]`, `[2.0,-0,-15e-1]`, `[2e0,0.0,-1.50]`, `[20E-1,0e5,-0.15e1]`},
		{`"Paris/é"`, `"\u0050aris\/\u00e9"`, `"Paris\u002F\u00E9"`},
		{`"😀"`, `"\ud83d\ude00"`},
		{`"a\tb\n"`, `"a\u0009b\u000a"`},
		{`"\ud83d x"`, `"\ufffd x"`}, // a lone surrogate reads as U+FFFD
	}
	for _, g := range same {
		for _, s := range g[1:] {
			if argsHash([]byte(s)) != argsHash([]byte(g[0])) {
				t.Errorf("%q and %q hash differently", s, g[0])
			}
		}
	}
	differ := []string{
		`{"a":1,"b":{"c":[1,2],"d":"x"}}`,
		`{"a":1,"b":{"c":[2,1],"d":"x"}}`,
		`{"a":2,"b":{"c":[1,2],"d":"x"}}`,
		`{"a":"1","b":{"c":[1,2],"d":"x"}}`,
		`{"a":1,"b":{"c":[1,2],"e":"x"}}`,
		`{"a":1,"b":{"c":[1,2]},"d":"x"}`,
		`{"a":1}`, `{"b":1}`, `{"a":1,"b":1}`, `{"ab":1}`, `[1]`, `["1"]`, `[[1]]`, `{"a":[]}`, `{"a":{}}`, `{"a":null}`,
		`{"a":"x\"y"}`, `{"a":"x"}`, `not json`, `{"a":1`,
		`{"a":1.5}`, `{"a":true}`, `{"a":"\u0031"}`, `{"a":"\\u0031"}`, `{"a":"x\q"}`, `{"a":"x\u12"}`,
	}
	seen := map[uint64]string{}
	for _, s := range differ {
		h := argsHash([]byte(s))
		if o, ok := seen[h]; ok {
			t.Errorf("%q and %q hash the same", s, o)
		}
		seen[h] = s
	}
	deep := []byte(strings.Repeat("[", 100000) + strings.Repeat("]", 100000))
	if argsHash(deep) == argsHash([]byte("[]")) {
		t.Error("deep nesting hashed as []")
	}
}
