package sqlitestore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/valetkit/valet/credentials"
	"github.com/valetkit/valet/internal/sqlitetest"
)

// TestUpdateFnWritingRefused: Update holds the file's write lock, and
// the store's turn to write, while fn runs, so a write of the store called
// from fn could never start: it would wait until its ctx ends (forever,
// for a ctx without a deadline). Called with the ctx fn was given, it
// fails at once with an error wrapping credentials.ErrInvalid that says
// why, and the Update goes on.
func TestUpdateFnWritingRefused(t *testing.T) {
	s := open(t, sqlitetest.Open(t, 8), newRing(t, "k1", map[string][]byte{"k1": newKey()}))
	if err := s.Save(bg, "t", "google", "", map[string]string{"token": "old"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(bg, 20*time.Second) // a bound for the test only
	defer cancel()
	writes := map[string]func(ctx context.Context) error{
		"Save": func(ctx context.Context) error {
			return s.Save(ctx, "t", "github", "", map[string]string{"token": "x"})
		},
		"Delete": func(ctx context.Context) error { return s.Delete(ctx, "t", "github", "") },
		"Update": func(ctx context.Context) error {
			return s.Update(ctx, "t", "github", "", func(context.Context, credentials.Secret) (any, error) {
				return map[string]string{"token": "y"}, nil
			})
		},
		"DeleteTenant": func(ctx context.Context) error { _, err := s.DeleteTenant(ctx, "t"); return err },
		"Rotate":       func(ctx context.Context) error { _, err := s.Rotate(ctx); return err },
	}
	for name, write := range writes {
		err := s.Update(ctx, "t", "google", "", func(ctx context.Context, old credentials.Secret) (any, error) {
			if err := write(ctx); !errors.Is(err, credentials.ErrInvalid) || ctx.Err() != nil {
				t.Errorf("%s from Update's fn: %v (ctx: %v); want an error wrapping ErrInvalid at once", name, err, ctx.Err())
			}
			return map[string]string{"token": "new-" + name}, nil
		})
		if err != nil {
			t.Fatalf("Update whose fn tried %s: %v", name, err)
		}
		var got struct{ Token string }
		if sec, err := s.Get(bg, "t", "google", ""); err != nil || sec.Decode(&got) != nil || got.Token != "new-"+name {
			t.Errorf("after Update whose fn tried %s: token %q, %v; want %q", name, got.Token, err, "new-"+name)
		}
	}
	if _, err := s.Get(bg, "t", "github", ""); !errors.Is(err, credentials.ErrNotFound) {
		t.Errorf("a write refused inside fn stored something: Get = %v", err)
	}
}

// TestUpdateFnReadsOnOneConnection: on one connection (the advised
// SetMaxOpenConns(1)) the connection is Update's while fn runs; fn may
// still read the store with the ctx it was given — a token refresh that
// reads the OAuth client's own credential — and sees what the file holds.
func TestUpdateFnReadsOnOneConnection(t *testing.T) {
	s := open(t, sqlitetest.Open(t, 1), newRing(t, "k1", map[string][]byte{"k1": newKey()}))
	for svc, tok := range map[string]string{"google": "old", "google-client": "client-secret"} {
		if err := s.Save(bg, "t", svc, "", map[string]string{"token": tok}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(bg, 20*time.Second) // a bound for the test only
	defer cancel()
	err := s.Update(ctx, "t", "google", "", func(ctx context.Context, old credentials.Secret) (any, error) {
		var client struct{ Token string }
		sec, err := s.Get(ctx, "t", "google-client", "")
		if err != nil {
			return nil, err
		}
		if err := sec.Decode(&client); err != nil {
			return nil, err
		}
		list, err := s.List(ctx, "t", "")
		if err != nil {
			return nil, err
		}
		if len(list) != 2 {
			t.Errorf("List from fn: %d credentials; want 2", len(list))
		}
		return map[string]string{"token": "new-with-" + client.Token}, nil
	})
	if err != nil {
		t.Fatalf("Update whose fn reads the store: %v", err)
	}
	var got struct{ Token string }
	if sec, err := s.Get(bg, "t", "google", ""); err != nil || sec.Decode(&got) != nil || got.Token != "new-with-client-secret" {
		t.Errorf("after the Update: token %q, %v; want %q", got.Token, err, "new-with-client-secret")
	}
}

// TestUpdateFnCtxAfterUpdate: the ctx fn got is an ordinary one once fn
// has returned: work fn started with it (a goroutine saving the refreshed
// token elsewhere) reads and writes the store as any caller does, not on
// the Update's connection, which is gone.
func TestUpdateFnCtxAfterUpdate(t *testing.T) {
	s := open(t, sqlitetest.Open(t, 1), newRing(t, "k1", map[string][]byte{"k1": newKey()}))
	if err := s.Save(bg, "t", "google", "", map[string]string{"token": "old"}); err != nil {
		t.Fatal(err)
	}
	var kept context.Context
	err := s.Update(bg, "t", "google", "", func(ctx context.Context, old credentials.Secret) (any, error) {
		kept = ctx
		return map[string]string{"token": "new"}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(kept, 20*time.Second) // a bound for the test only
	defer cancel()
	if err := s.Save(ctx, "t", "google-copy", "", map[string]string{"token": "new"}); err != nil {
		t.Errorf("Save with fn's ctx after the Update: %v", err)
	}
	if _, err := s.Get(ctx, "t", "google-copy", ""); err != nil {
		t.Errorf("Get with fn's ctx after the Update: %v", err)
	}
	if list, err := s.List(ctx, "t", ""); err != nil || len(list) != 2 {
		t.Errorf("List with fn's ctx after the Update: %d, %v; want 2", len(list), err)
	}
}
