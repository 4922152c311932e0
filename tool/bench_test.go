package tool

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/valetkit/valet/llm"
)

type benchIn struct {
	City  string `json:"city" jsonschema:"description=City name"`
	Days  int    `json:"days,omitempty" jsonschema:"minimum=1,maximum=7"`
	Units string `json:"units,omitempty" jsonschema:"enum=metric,enum=imperial"`
}

var benchArgs = json.RawMessage(`{"city":"Lisbon","days":3,"units":"metric"}`)

func benchFn(_ context.Context, in benchIn) (string, error) { return in.City, nil }

// BenchmarkCall is one validated call of a tool made by New: decode for
// validation, validate, unmarshal into the struct, run the function.
func BenchmarkCall(b *testing.B) {
	tl := New("get_weather", "Weather", benchFn)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tl.Call(ctx, benchArgs); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUnmarshalOnly is the floor BenchmarkCall is compared with: a
// hand-written call that only unmarshals into the same struct.
func BenchmarkUnmarshalOnly(b *testing.B) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		var in benchIn
		if err := json.Unmarshal(benchArgs, &in); err != nil {
			b.Fatal(err)
		}
		if _, err := benchFn(ctx, in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkExecute adds the Registry lookup and result handling.
func BenchmarkExecute(b *testing.B) {
	reg, err := NewRegistry(New("get_weather", "Weather", benchFn))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	call := llm.ToolCall{ID: "c1", Name: "get_weather", Arguments: benchArgs}
	b.ReportAllocs()
	for b.Loop() {
		if res := reg.Execute(ctx, call, 0); res.IsError {
			b.Fatal(res.Content)
		}
	}
}

// BenchmarkValidateFull forces the santhosh-tekuri validator (no fast path).
func BenchmarkValidateFull(b *testing.B) {
	s, err := SchemaFor[benchIn]()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		inst, _ := decodeInstance(benchArgs)
		if err := s.compiled.Validate(inst); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSpecs(b *testing.B) {
	reg, _ := NewRegistry(New("get_weather", "Weather", benchFn))
	b.ReportAllocs()
	for b.Loop() {
		if len(reg.Specs()) != 1 {
			b.Fatal("specs")
		}
	}
}
