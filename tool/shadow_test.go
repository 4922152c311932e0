package tool

import (
	"context"
	"errors"
	"testing"
)

// The names come from the Go field names, not from tags, so that go vet's
// structtag check (which flags repeated json tags) stays quiet.
type ShadowBase struct {
	Amount int
	Memo   string `json:"memo,omitempty"`
}

// The outer Amount is the one encoding/json fills (the shallower field
// wins), but invopop lets the embedded one, declared later, define the
// schema: its bounds would never be checked.
type shadowIn struct {
	Amount int `jsonschema:"minimum=1,maximum=100"`
	ShadowBase
}

type AmbA struct {
	Name string
}
type AmbB struct {
	Name string
}

// encoding/json drops an ambiguous name entirely, yet the schema requires it.
type ambiguousIn struct {
	AmbA
	AmbB
}

type nestedShadowIn struct {
	Items []shadowIn `json:"items"`
}

func TestCollidingFieldNamesRejected(t *testing.T) {
	var got int
	pay := New("pay", "pay", func(ctx context.Context, in shadowIn) (string, error) {
		got = in.Amount
		return "paid", nil
	})
	if err := Err(pay); !errors.Is(err, ErrInvalidTool) {
		_, callErr := pay.Call(context.Background(), []byte(`{"Amount":1000000}`))
		t.Errorf("Err = %v; a call with amount 1000000 gave %v and delivered %d", err, callErr, got)
	}
	if err := Err(New("amb", "amb", func(ctx context.Context, in ambiguousIn) (string, error) { return "", nil })); !errors.Is(err, ErrInvalidTool) {
		t.Errorf("ambiguous: Err = %v, want ErrInvalidTool", err)
	}
	if err := Err(New("nested", "nested", func(ctx context.Context, in nestedShadowIn) (string, error) { return "", nil })); !errors.Is(err, ErrInvalidTool) {
		t.Errorf("nested: Err = %v, want ErrInvalidTool", err)
	}
	// Embedding without a collision still works.
	type ok struct {
		ShadowBase
		Extra string `json:"extra"`
	}
	if err := Err(New("ok", "ok", func(ctx context.Context, in ok) (string, error) { return "", nil })); err != nil {
		t.Errorf("ok: Err = %v", err)
	}
}
