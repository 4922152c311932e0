package sqlitestore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"fmt"
	"testing"

	"go.uber.org/goleak"

	"github.com/valetkit/valet/credentials"
	"github.com/valetkit/valet/credentials/credtest"
	"github.com/valetkit/valet/credentials/sqlitestore"
	"github.com/valetkit/valet/internal/sqlitetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var bg = context.Background()

func newKey() []byte {
	k := make([]byte, credentials.KeySize)
	rand.Read(k)
	return k
}

func newRing(t *testing.T, primary string, keys map[string][]byte) *credentials.KeyRing {
	t.Helper()
	r, err := credentials.NewKeyRing(primary, keys)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// open returns a migrated store on db, configured by the optional cfg
// beside its KeyRing.
func open(t *testing.T, db *sql.DB, ring *credentials.KeyRing, cfg ...sqlitestore.Config) *sqlitestore.Store {
	t.Helper()
	var c sqlitestore.Config
	if len(cfg) > 0 {
		c = cfg[0]
	}
	c.KeyRing = ring
	s, err := sqlitestore.New(db, c)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(bg); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return s
}

// pools are the connection pools the suites run on: River's advice (one
// connection) and a pool, where the store's own locking is what keeps
// concurrent writers apart.
var pools = []struct {
	name  string
	conns int
}{{"OneConnection", 1}, {"Pool", 8}}

func TestStore(t *testing.T) {
	for _, p := range pools {
		t.Run(p.name, func(t *testing.T) {
			credtest.Run(t, func(t *testing.T) credentials.Store {
				return open(t, sqlitetest.Open(t, p.conns), newRing(t, "k1", map[string][]byte{"k1": newKey()}))
			})
		})
	}
}

func TestEncrypted(t *testing.T) {
	for _, p := range pools {
		t.Run(p.name, func(t *testing.T) {
			credtest.RunEncrypted(t, func(t *testing.T) credtest.Backing {
				return &backing{db: sqlitetest.Open(t, p.conns)}
			})
		})
	}
}

// backing lets credtest.RunEncrypted see the real table.
type backing struct{ db *sql.DB }

func (b *backing) Open(t *testing.T, ring *credentials.KeyRing) credentials.Store {
	return open(t, b.db, ring)
}

func (b *backing) Rows(t *testing.T) []credtest.Row {
	t.Helper()
	rows, err := b.db.Query(`SELECT tenant_id, service, account_name, key_id, nonce, ciphertext,
	format('%s|%s|%s|%d|%d|%d', tenant_id, service, account_name, revision, created_at, updated_at) FROM credentials`)
	if err != nil {
		t.Fatalf("reading the table: %v", err)
	}
	defer rows.Close()
	var out []credtest.Row
	for rows.Next() {
		var r credtest.Row
		var nonce, ct []byte
		var text string
		if err := rows.Scan(&r.TenantID, &r.Service, &r.Account, &r.KeyID, &nonce, &ct, &text); err != nil {
			t.Fatalf("reading the table: %v", err)
		}
		r.Raw = bytes.Join([][]byte{[]byte(r.KeyID), nonce, ct, []byte(text)}, []byte{0})
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("reading the table: %v", err)
	}
	return out
}

func (b *backing) Copy(t *testing.T, from, to credtest.Name) {
	t.Helper()
	res, err := b.db.Exec(`INSERT INTO credentials AS c (tenant_id, service, account_name, key_id, nonce, ciphertext, revision, created_at, updated_at)
SELECT ?4, ?5, ?6, key_id, nonce, ciphertext, revision, created_at, updated_at FROM credentials
WHERE tenant_id = ?1 AND service = ?2 AND account_name = ?3
ON CONFLICT (tenant_id, service, account_name) DO UPDATE SET key_id = excluded.key_id, nonce = excluded.nonce, ciphertext = excluded.ciphertext`,
		from.TenantID, from.Service, from.Account, to.TenantID, to.Service, to.Account)
	if err != nil {
		t.Fatalf("copying %v to %v: %v", from, to, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("copying %v to %v: %d rows", from, to, n)
	}
}

// TestOneFileManyStores: two stores on other tables of one file keep
// apart, each with its own key table.
func TestOneFileManyStores(t *testing.T) {
	db := sqlitetest.Open(t, 1)
	ring := newRing(t, "k1", map[string][]byte{"k1": newKey()})
	a := open(t, db, ring, sqlitestore.Config{Table: `Creds "A"`})
	b := open(t, db, ring)
	if err := a.Save(bg, "t", "s", "", map[string]string{"in": "a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get(bg, "t", "s", ""); err == nil {
		t.Error("a store on another table sees the row")
	}
	for table, want := range map[string]int{`"Creds ""A"""`: 1, `"Creds ""A""_keys"`: 1, "credentials": 0} {
		var n int
		if err := db.QueryRow(fmt.Sprintf("SELECT count(*) FROM %s", table)).Scan(&n); err != nil || n != want {
			t.Errorf("rows in %s: %d, %v; want %d", table, n, err, want)
		}
	}
}
