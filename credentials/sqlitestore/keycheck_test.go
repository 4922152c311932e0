package sqlitestore_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/valetkit/valet/credentials"
	"github.com/valetkit/valet/internal/sqlitetest"
)

// TestKeyCheckKeptOnlyWhenCommitted: a write that registers the primary
// key's key check and then rolls back (an Update of a credential that is
// not there) leaves no key check in the file, so the store must not go on
// as if its key had been checked. Another process whose key of the same
// id is other material then registers its own; the first store's next
// Save must be refused with ErrWrongKey, not write rows under one key id
// sealed with two different keys.
func TestKeyCheckKeptOnlyWhenCommitted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "valet.db")
	a := open(t, sqlitetest.OpenPath(t, path, 1), newRing(t, "k1", map[string][]byte{"k1": newKey()}))
	b := open(t, sqlitetest.OpenPath(t, path, 1), newRing(t, "k1", map[string][]byte{"k1": newKey()}))

	called := false
	err := a.Update(bg, "t", "svc", "", func(context.Context, credentials.Secret) (any, error) {
		called = true
		return map[string]string{"token": "x"}, nil
	})
	if !errors.Is(err, credentials.ErrNotFound) || called {
		t.Fatalf("Update of a missing credential: %v (fn called: %v); want ErrNotFound without calling fn", err, called)
	}

	if err := b.Save(bg, "t", "other", "", map[string]string{"token": "b-secret"}); err != nil {
		t.Fatalf("the first committed write under k1 (other material): %v", err)
	}
	err = a.Save(bg, "t", "svc", "", map[string]string{"token": "a-secret"})
	if !errors.Is(err, credentials.ErrWrongKey) {
		t.Errorf("Save under k1 after the file recorded another key's check for k1: %v; want ErrWrongKey", err)
	}
	if _, err := b.Get(bg, "t", "svc", ""); !errors.Is(err, credentials.ErrNotFound) {
		t.Errorf("the refused Save wrote a row: Get = %v; want ErrNotFound", err)
	}
	if _, err := a.Get(bg, "t", "other", ""); !errors.Is(err, credentials.ErrWrongKey) {
		t.Errorf("Get of the other key's row: %v; want ErrWrongKey (not a row moved or altered)", err)
	}
}
