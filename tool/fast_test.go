package tool

import (
	"encoding/json"
	"testing"
	"time"
)

// rich exercises every keyword the fast path implements.
type rich struct {
	Name   string          `json:"name" jsonschema:"minLength=2,maxLength=5,pattern=^[a-z]+$"`
	Kind   string          `json:"kind,omitempty" jsonschema:"enum=a,enum=b"`
	Level  int             `json:"level,omitempty" jsonschema:"enum=1,enum=2"`
	Score  float64         `json:"score,omitempty" jsonschema:"minimum=0.5,exclusiveMaximum=10"`
	Count  int8            `json:"count,omitempty" jsonschema:"minimum=-3,maximum=3"`
	Email  string          `json:"email,omitempty" jsonschema:"format=email"`
	When   time.Time       `json:"when,omitzero"`
	OK     *bool           `json:"ok,omitempty"`
	Tags   []string        `json:"tags,omitempty" jsonschema:"minItems=1,maxItems=2"`
	Labels map[string]int  `json:"labels,omitempty"`
	Any    any             `json:"any,omitempty"`
	Raw    json.RawMessage `json:"raw,omitempty"`
	Inner  *struct {
		ID string `json:"id"`
	} `json:"inner,omitempty"`
	List []struct {
		V int `json:"v" jsonschema:"minimum=0"`
	} `json:"list,omitempty"`
}

var fastSeeds = []string{
	`{"name":"ab"}`, `{"name":"abcde","kind":"a","level":2,"score":9.99,"count":-2}`,
	`{"name":"a"}`, `{"name":"abcdef"}`, `{"name":"AB"}`, `{"name":"a\u0062"}`, `{"name":"ab","kind":"c"}`,
	`{"name":"ab","level":3}`, `{"name":"ab","level":1.0}`, `{"name":"ab","level":"1"}`,
	`{"name":"ab","score":0.5}`, `{"name":"ab","score":0.4999999999999999999}`, `{"name":"ab","score":10}`,
	`{"name":"ab","score":1e1}`, `{"name":"ab","score":9.999999999999999999}`, `{"name":"ab","count":3}`, `{"name":"ab","count":4}`,
	`{"name":"ab","count":-4}`, `{"name":"ab","count":2.0}`, `{"name":"ab","count":1e0}`,
	`{"name":"ab","email":"x@y.z"}`, `{"name":"ab","email":"nope"}`, `{"name":"ab","when":"2024-01-02T03:04:05Z"}`,
	`{"name":"ab","when":"yesterday"}`, `{"name":"ab","ok":true}`, `{"name":"ab","ok":null}`, `{"name":"ab","ok":1}`,
	`{"name":"ab","tags":[]}`, `{"name":"ab","tags":["x"]}`, `{"name":"ab","tags":["x","y","z"]}`, `{"name":"ab","tags":[1]}`,
	`{"name":"ab","labels":{"a":1}}`, `{"name":"ab","labels":{"a":"1"}}`, `{"name":"ab","any":{"deep":[1,{"x":null}]}}`,
	`{"name":"ab","raw":[true,false]}`, `{"name":"ab","inner":{"id":"x"}}`, `{"name":"ab","inner":{}}`, `{"name":"ab","inner":{"id":"x","z":1}}`,
	`{"name":"ab","list":[{"v":0},{"v":-1}]}`, `{"name":"ab","list":[{"v":1}]}`, `{"name":"ab","name":"x"}`, `{"name":"x","name":"ab"}`,
	`{"name":"ab",}`, `{"name":"ab"`, `{"name":"ab"} x`, `{"nam\u0065":"ab"}`, `{"name":"ab","extra":1}`, `{}`, `null`, `[]`, `"x"`,
	`{"name":"ab","count":-}`, `{"name":"ab","count":01}`, `{"name":tru}`, `{"name":"ab","ok":nul}`, ``, `{`, `{"`,
	// repeated keys, escaped keys, case variants
	`{"name":"ab","inner":{"id":"x"},"inner":{"id":"y"}}`, `{"name":"ab","inner":{"id":"x","id":"y"}}`,
	`{"name":"ab","labels":{"a":1,"a":2}}`, `{"name":"ab","labels":{"a":1,"b":2,"c":3}}`,
	`{"name":"ab","any":{"x":1,"x":2}}`, `{"name":"ab","any":[{"x":1},{"x":1}]}`, `{"name":"ab","list":[{"v":1,"v":2}]}`,
	`{"name":"ab","tags":["x"],"tags":["y"]}`, `{"\u006eame":"ab"}`, `{"NAME":"ab"}`, `{"Name":"ab","name":"ab"}`,
	// escapes against string constraints
	`{"name":"a\u0062c"}`, `{"name":"\u0041b"}`, `{"name":"ab","kind":"\u0061"}`, `{"name":"ab","email":"x\u0040y.z"}`,
	`{"name":"ab\n"}`, `{"name":"ab\""}`, `{"name":"\ud83d\ude00ab"}`, "{\"name\":\"ab\xff\"}", "{\"name\":\"a\xc3\xa9\"}",
	"{\"name\":\"ab\",\"email\":\"\xff@y.z\"}", "{\"name\":\"ab\",\"kind\":\"a\x00\"}",
	// numbers
	`{"name":"ab","level":1e0}`, `{"name":"ab","level":-0}`, `{"name":"ab","level":1E0}`, `{"name":"ab","count":-0}`,
	`{"name":"ab","count":1e400}`, `{"name":"ab","score":1e-400}`, `{"name":"ab","score":-1e400}`, `{"name":"ab","count":3.0000000000000001}`,
	`{"name":"ab","count":99999999999999999999}`, `{"name":"ab","score":0.50000000000000001}`, `{"name":"ab","count":--1}`, `{"name":"ab","count":1-2}`,
	// null for non-nullable fields, nested required
	`{"name":null}`, `{"name":"ab","tags":null}`, `{"name":"ab","inner":null}`, `{"name":"ab","list":[null]}`, `{"name":"ab","list":[{}]}`,
	`{"name":"ab","labels":null}`, `{"name":"ab","when":null}`, `{"name":"ab","kind":null}`,
}

// fullValid is the authority: the compiled santhosh-tekuri schema.
func fullValid(s *Schema, args []byte) bool {
	inst, err := decodeInstance(args)
	return err == nil && s.compiled.Validate(inst) == nil
}

func checkFastAgrees(t *testing.T, s *Schema, args []byte) {
	t.Helper()
	if s.fast.validJSON(args) && json.Valid(args) && !fullValid(s, args) {
		t.Fatalf("fast path accepted %s, which the schema rejects", args)
	}
}

func TestFastPathNeverAcceptsInvalid(t *testing.T) {
	s, err := SchemaFor[rich]()
	if err != nil {
		t.Fatal(err)
	}
	if s.fast == nil {
		t.Fatal("no fast path for an ordinary struct")
	}
	for _, seed := range fastSeeds {
		checkFastAgrees(t, s, []byte(seed))
	}
	// The fast path is really taken for ordinary valid input.
	for _, ok := range []string{`{"name":"ab"}`, `{"name":"abc","kind":"b","level":1,"score":2.5,"count":0,"tags":["x"],"labels":{"k":2},"inner":{"id":"i"},"list":[{"v":3}],"ok":false,"any":[1,"2"]}`} {
		if !s.fast.validJSON([]byte(ok)) {
			t.Errorf("fast path declined valid %s", ok)
		}
	}
}

func FuzzFastPath(f *testing.F) {
	s, err := SchemaFor[rich]()
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range fastSeeds {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, args []byte) {
		checkFastAgrees(t, s, args)
	})
}
