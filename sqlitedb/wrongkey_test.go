package sqlitedb_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/valetkit/valet/credentials"
	"github.com/valetkit/valet/sqlitedb"
)

// TestOpenRefusesAnotherKey: a file whose credentials were encrypted with
// one key, opened with other key material under the same key id (a lost
// key file replaced by a new one, the wrong variable), is refused at Open
// with credentials.ErrWrongKey naming the key id, not at the first Get of
// a tenant's credential hours later; the secret is not in the message and
// the file still opens with the right key.
func TestOpenRefusesAnotherKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "valet.db")
	right, wrong := newRing(t), newRing(t)
	db := openDB(t, sqlitedb.DSN(path))
	s, err := sqlitedb.Open(bg, db, sqlitedb.Config{KeyRing: right})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Credentials.Save(bg, "t", "google", "", map[string]string{"access_token": "tok-secret-7"}); err != nil {
		t.Fatal(err)
	}
	db.Close()

	_, err = sqlitedb.Open(bg, openDB(t, sqlitedb.DSN(path)), sqlitedb.Config{KeyRing: wrong})
	if !errors.Is(err, credentials.ErrWrongKey) || !strings.Contains(err.Error(), `"k1"`) {
		t.Fatalf("Open with another key's material under k1: %v; want ErrWrongKey naming k1", err)
	}
	if strings.Contains(err.Error(), "tok-secret-7") {
		t.Errorf("the error holds the secret: %v", err)
	}
	s, err = sqlitedb.Open(bg, openDB(t, sqlitedb.DSN(path)), sqlitedb.Config{KeyRing: right})
	if err != nil {
		t.Fatalf("Open with the right key after the refusal: %v", err)
	}
	if _, err := s.Credentials.Get(bg, "t", "google", ""); err != nil {
		t.Errorf("Get with the right key after the refusal: %v", err)
	}
}
