package pgstore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/valetkit/valet/credentials"
	"github.com/valetkit/valet/credentials/credtest"
	"github.com/valetkit/valet/credentials/pgstore"
	"github.com/valetkit/valet/internal/pgtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var bg = context.Background()

// The test database and schemas come from internal/pgtest.
func envURL(t *testing.T) string                      { return pgtest.URL(t) }
func testDB(t *testing.T) *pgxpool.Pool               { return pgtest.DB(t) }
func newSchema(t *testing.T, db *pgxpool.Pool) string { return pgtest.Schema(t, db) }

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

// open returns a migrated store on schema, configured by the optional
// cfg beside its KeyRing and Schema.
func open(t *testing.T, db *pgxpool.Pool, schema string, ring *credentials.KeyRing, cfg ...pgstore.Config) *pgstore.Store {
	t.Helper()
	var c pgstore.Config
	if len(cfg) > 0 {
		c = cfg[0]
	}
	c.KeyRing, c.Schema = ring, schema
	s, err := pgstore.New(db, c)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(bg); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return s
}

func table(schema string) string { return pgx.Identifier{schema, "credentials"}.Sanitize() }

func TestStore(t *testing.T) {
	db := testDB(t)
	credtest.Run(t, func(t *testing.T) credentials.Store {
		return open(t, db, newSchema(t, db), newRing(t, "k1", map[string][]byte{"k1": newKey()}))
	})
}

func TestEncrypted(t *testing.T) {
	db := testDB(t)
	credtest.RunEncrypted(t, func(t *testing.T) credtest.Backing {
		return &backing{db: db, schema: newSchema(t, db)}
	})
}

// backing lets credtest.RunEncrypted see the real table.
type backing struct {
	db     *pgxpool.Pool
	schema string
}

func (b *backing) Open(t *testing.T, ring *credentials.KeyRing) credentials.Store {
	return open(t, b.db, b.schema, ring)
}

func (b *backing) Rows(t *testing.T) []credtest.Row {
	t.Helper()
	rows, err := b.db.Query(bg, `SELECT tenant_id, service, account_name, key_id, nonce, ciphertext, c::text FROM `+table(b.schema)+` c`)
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
	tag, err := b.db.Exec(bg, `INSERT INTO `+table(b.schema)+` AS c (tenant_id, service, account_name, key_id, nonce, ciphertext, revision, created_at, updated_at)
SELECT $4, $5, $6, key_id, nonce, ciphertext, revision, created_at, updated_at FROM `+table(b.schema)+`
WHERE tenant_id = $1 AND service = $2 AND account_name = $3
ON CONFLICT (tenant_id, service, account_name) DO UPDATE SET key_id = EXCLUDED.key_id, nonce = EXCLUDED.nonce, ciphertext = EXCLUDED.ciphertext`,
		from.TenantID, from.Service, from.Account, to.TenantID, to.Service, to.Account)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("copying %v to %v: %v (%d rows)", from, to, err, tag.RowsAffected())
	}
}

func TestNewRejects(t *testing.T) {
	ring := newRing(t, "k1", map[string][]byte{"k1": newKey()})
	db, err := pgxpool.New(bg, "postgres://nobody@127.0.0.1:1/none") // never connects
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, tc := range []struct {
		name string
		db   *pgxpool.Pool
		cfg  pgstore.Config
		want string
	}{
		{"nil pool", nil, pgstore.Config{KeyRing: ring}, "needs a *pgxpool.Pool"},
		{"nil ring", db, pgstore.Config{}, "KeyRing is nil"},
		{"long table", db, pgstore.Config{KeyRing: ring, Table: strings.Repeat("t", 60)}, "longer than"},
		{"long schema", db, pgstore.Config{KeyRing: ring, Schema: strings.Repeat("s", 64)}, "longer than"},
		{"NUL", db, pgstore.Config{KeyRing: ring, Table: "a\x00b"}, "NUL"},
		{"batch", db, pgstore.Config{KeyRing: ring, RotateBatch: -1}, "negative RotateBatch"},
		// Refused at New, as pgmemory and rivertrigger refuse them, not
		// by PostgreSQL at Migrate.
		{"schema not UTF-8", db, pgstore.Config{KeyRing: ring, Schema: "\xff"}, "UTF-8"},
		{"table not UTF-8", db, pgstore.Config{KeyRing: ring, Table: "cr\xffeds"}, "UTF-8"},
	} {
		s, err := pgstore.New(tc.db, tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, credentials.ErrInvalid) {
			t.Errorf("%s: New = %v, %v; want an error wrapping credentials.ErrInvalid with %q", tc.name, s, err, tc.want)
		}
	}
	if _, err := pgstore.New(db, pgstore.Config{KeyRing: ring, Table: "my creds", Schema: `we"ird`}); err != nil {
		t.Errorf("names that need quoting: %v", err)
	}
	if _, err := pgstore.New(db, pgstore.Config{KeyRing: ring}); err != nil {
		t.Errorf("the zero Config but its KeyRing: %v", err)
	}
}

// TestPostgresDown: with no server every call fails clearly, naming the
// operation, and holds no secret.
func TestPostgresDown(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	db, err := pgxpool.New(bg, "postgres://valet:pw-not-shown@"+addr+"/none?sslmode=disable&connect_timeout=5")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s, err := pgstore.New(db, pgstore.Config{KeyRing: newRing(t, "k1", map[string][]byte{"k1": newKey()})})
	if err != nil {
		t.Fatal(err)
	}
	const secret = "tok-down-marker"
	ctx, cancel := context.WithTimeout(bg, 30*time.Second)
	defer cancel()
	_, errGet := s.Get(ctx, "t", "s", "")
	_, errList := s.List(ctx, "t", "")
	_, errDT := s.DeleteTenant(ctx, "t")
	_, errRot := s.Rotate(ctx)
	called := false
	errUpd := s.Update(ctx, "t", "s", "", func(context.Context, credentials.Secret) (any, error) {
		called = true
		return map[string]string{"t": secret}, nil
	})
	for op, err := range map[string]error{
		"migrate":       s.Migrate(ctx),
		"save":          s.Save(ctx, "t", "s", "", map[string]string{"token": secret}),
		"get":           errGet,
		"list":          errList,
		"delete":        s.Delete(ctx, "t", "s", ""),
		"delete tenant": errDT,
		"update":        errUpd,
		"rotate":        errRot,
	} {
		if err == nil {
			t.Errorf("%s with PostgreSQL down succeeded", op)
			continue
		}
		if !strings.HasPrefix(err.Error(), "pgstore: "+op) {
			t.Errorf("%s: the error does not name the operation: %v", op, err)
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "pw-not-shown") {
			t.Errorf("%s: the error shows a secret", op)
		}
		if errors.Is(err, credentials.ErrNotFound) {
			t.Errorf("%s: PostgreSQL down reads as not found: %v", op, err)
		}
	}
	if called {
		t.Error("Update called fn with PostgreSQL down")
	}
}

func TestNotMigrated(t *testing.T) {
	db := testDB(t)
	s, err := pgstore.New(db, pgstore.Config{KeyRing: newRing(t, "k1", map[string][]byte{"k1": newKey()}), Schema: newSchema(t, db)})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Save(bg, "t", "s", "", map[string]string{"a": "b"})
	if err == nil || !strings.Contains(err.Error(), "run Migrate first") {
		t.Errorf("Save before Migrate: %v", err)
	}
	if _, err := s.Get(bg, "t", "s", ""); err == nil || errors.Is(err, credentials.ErrNotFound) || !strings.Contains(err.Error(), "run Migrate first") {
		t.Errorf("Get before Migrate: %v", err)
	}
}

// TestMigrateConcurrent: processes starting together all migrate; none
// fails, and the tables work after.
func TestMigrateConcurrent(t *testing.T) {
	db := testDB(t)
	for round := range 5 {
		schema := newSchema(t, db)
		ring := newRing(t, "k1", map[string][]byte{"k1": newKey()})
		var wg sync.WaitGroup
		start := make(chan struct{})
		stores := make([]*pgstore.Store, 6)
		for i := range stores {
			s, err := pgstore.New(db, pgstore.Config{KeyRing: ring, Schema: schema})
			if err != nil {
				t.Fatal(err)
			}
			stores[i] = s
			wg.Go(func() {
				<-start
				if err := s.Migrate(bg); err != nil {
					t.Errorf("round %d: Migrate %d: %v", round, i, err)
				}
			})
		}
		close(start)
		wg.Wait()
		if err := stores[0].Save(bg, "t", "s", "", map[string]int{"round": round}); err != nil {
			t.Fatalf("Save after concurrent Migrates: %v", err)
		}
		if err := stores[1].Migrate(bg); err != nil {
			t.Fatalf("Migrate again: %v", err)
		}
		if _, err := stores[2].Get(bg, "t", "s", ""); err != nil {
			t.Fatalf("Get after migrating again: %v", err)
		}
	}
}

func TestOtherTableNames(t *testing.T) {
	db := testDB(t)
	schema := newSchema(t, db)
	ring := newRing(t, "k1", map[string][]byte{"k1": newKey()})
	a := open(t, db, schema, ring, pgstore.Config{Table: "Creds A"})
	b := open(t, db, schema, ring)
	if err := a.Save(bg, "t", "s", "", map[string]string{"in": "a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get(bg, "t", "s", ""); !errors.Is(err, credentials.ErrNotFound) {
		t.Errorf("a store on another table sees the row: %v", err)
	}
	var n int
	if err := db.QueryRow(bg, `SELECT count(*) FROM `+pgx.Identifier{schema, "Creds A"}.Sanitize()).Scan(&n); err != nil || n != 1 {
		t.Errorf("rows in the named table: %d, %v", n, err)
	}
	if err := db.QueryRow(bg, `SELECT count(*) FROM `+pgx.Identifier{schema, "Creds A_keys"}.Sanitize()).Scan(&n); err != nil || n != 1 {
		t.Errorf("key checks in the named table's key table: %d, %v", n, err)
	}
}

// TestTamper moves and alters rows in the real table: every Get fails
// cleanly, naming the key id, and shows no secret.
func TestTamper(t *testing.T) {
	db := testDB(t)
	schema := newSchema(t, db)
	k1, k2 := newKey(), newKey()
	s1 := open(t, db, schema, newRing(t, "k1", map[string][]byte{"k1": k1}))
	s := open(t, db, schema, newRing(t, "k2", map[string][]byte{"k1": k1, "k2": k2}))
	const secret = "tamper-secret-marker"
	for _, svc := range []string{"moved", "flipped", "nonce", "swapped", "unknown", "tag"} {
		if err := s1.Save(bg, "alice", svc, "", map[string]string{"token": secret + svc}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Save(bg, "alice", "registers-k2", "", map[string]string{"x": "y"}); err != nil {
		t.Fatal(err)
	}
	exec := func(q string, args ...any) {
		t.Helper()
		tag, err := db.Exec(bg, strings.ReplaceAll(q, "{t}", table(schema)), args...)
		if err != nil || tag.RowsAffected() != 1 {
			t.Fatalf("%s: %v (%d rows)", q, err, tag.RowsAffected())
		}
	}
	exec(`UPDATE {t} SET tenant_id = 'mallory' WHERE tenant_id = 'alice' AND service = 'moved'`)
	exec(`UPDATE {t} SET ciphertext = set_byte(ciphertext, 0, get_byte(ciphertext, 0) # 1) WHERE service = 'flipped'`)
	exec(`UPDATE {t} SET ciphertext = set_byte(ciphertext, length(ciphertext) - 1, get_byte(ciphertext, length(ciphertext) - 1) # 128) WHERE service = 'tag'`)
	exec(`UPDATE {t} SET nonce = substring(nonce from 1 for 4) WHERE service = 'nonce'`)
	exec(`UPDATE {t} SET key_id = 'k2' WHERE service = 'swapped'`)
	exec(`UPDATE {t} SET key_id = 'k9' WHERE service = 'unknown'`)

	check := func(what string, err, want error, keyID string) {
		t.Helper()
		if !errors.Is(err, want) {
			t.Errorf("%s: got %v, want %v", what, err, want)
			return
		}
		if !strings.Contains(err.Error(), `"`+keyID+`"`) {
			t.Errorf("%s: the error does not name key %q: %v", what, keyID, err)
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("%s: the error shows the secret", what)
		}
	}
	_, err := s.Get(bg, "mallory", "moved", "")
	check("a row moved to another tenant", err, credentials.ErrDecrypt, "k1")
	if err != nil && !strings.Contains(err.Error(), "moved or altered") {
		t.Errorf("the error does not say the row was moved or altered: %v", err)
	}
	_, err = s.Get(bg, "alice", "moved", "")
	if !errors.Is(err, credentials.ErrNotFound) {
		t.Errorf("the moved row's old place: %v", err)
	}
	for _, c := range []struct {
		svc, key string
		want     error
	}{
		{"flipped", "k1", credentials.ErrDecrypt},
		{"tag", "k1", credentials.ErrDecrypt},
		{"nonce", "k1", credentials.ErrDecrypt},
		{"swapped", "k2", credentials.ErrDecrypt},
		{"unknown", "k9", credentials.ErrUnknownKey},
	} {
		_, err := s.Get(bg, "alice", c.svc, "")
		check(c.svc, err, c.want, c.key)
	}
	// Rotate skips what it cannot decrypt (all but "swapped", which is
	// under the primary already), names it, and does the rest.
	n, err := s.Rotate(bg)
	if n != 0 || err == nil || !strings.Contains(err.Error(), "5 rows could not be decrypted") || strings.Contains(err.Error(), secret) {
		t.Errorf("Rotate over tampered rows = %d, %v", n, err)
	}
	if !errors.Is(err, credentials.ErrDecrypt) || !errors.Is(err, credentials.ErrUnknownKey) {
		t.Errorf("Rotate's error hides its causes: %v", err)
	}
}

// TestRevisionAndTimes reads the revision from the table: Save and Update
// bump it, Rotate does not, nor does it touch updated_at.
func TestRevisionAndTimes(t *testing.T) {
	db := testDB(t)
	schema := newSchema(t, db)
	k1 := newKey()
	s := open(t, db, schema, newRing(t, "k1", map[string][]byte{"k1": k1}))
	rev := func() (r int64, updated time.Time) {
		t.Helper()
		if err := db.QueryRow(bg, `SELECT revision, updated_at FROM `+table(schema)).Scan(&r, &updated); err != nil {
			t.Fatal(err)
		}
		return r, updated
	}
	if err := s.Save(bg, "t", "s", "", map[string]int{"n": 1}); err != nil {
		t.Fatal(err)
	}
	if r, _ := rev(); r != 1 {
		t.Errorf("revision after insert = %d", r)
	}
	if err := s.Save(bg, "t", "s", "", map[string]int{"n": 2}); err != nil {
		t.Fatal(err)
	}
	if r, _ := rev(); r != 2 {
		t.Errorf("revision after the second Save = %d", r)
	}
	if err := s.Update(bg, "t", "s", "", func(_ context.Context, old credentials.Secret) (any, error) { return old, nil }); err != nil {
		t.Fatal(err)
	}
	r3, u3 := rev()
	if r3 != 3 {
		t.Errorf("revision after Update = %d", r3)
	}
	s2 := open(t, db, schema, newRing(t, "k2", map[string][]byte{"k1": k1, "k2": newKey()}))
	if n, err := s2.Rotate(bg); n != 1 || err != nil {
		t.Fatalf("Rotate = %d, %v", n, err)
	}
	if r, u := rev(); r != 3 || !u.Equal(u3) {
		t.Errorf("after Rotate: revision %d (was 3), updated_at %v (was %v)", r, u, u3)
	}
}

// TestLockedRow: while another transaction holds a row, reads go on,
// a Save waits and, when its ctx ends, writes nothing.
func TestLockedRow(t *testing.T) {
	db := testDB(t)
	schema := newSchema(t, db)
	s := open(t, db, schema, newRing(t, "k1", map[string][]byte{"k1": newKey()}))
	if err := s.Save(bg, "t", "s", "", map[string]int{"n": 1}); err != nil {
		t.Fatal(err)
	}
	tx, err := db.Begin(bg)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(bg)
	if _, err := tx.Exec(bg, `SELECT 1 FROM `+table(schema)+` FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(bg, 30*time.Second)
	defer cancel()
	if _, err := s.Get(ctx, "t", "s", ""); err != nil {
		t.Errorf("Get of a locked row: %v", err)
	}
	if _, err := s.List(ctx, "t", ""); err != nil {
		t.Errorf("List with a locked row: %v", err)
	}
	short, cancel2 := context.WithTimeout(bg, 300*time.Millisecond)
	defer cancel2()
	err = s.Save(short, "t", "s", "", map[string]int{"n": 2})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Save of a locked row whose ctx ended: %v", err)
	}
	short2, cancel3 := context.WithTimeout(bg, 300*time.Millisecond)
	defer cancel3()
	err = s.Update(short2, "t", "s", "", func(context.Context, credentials.Secret) (any, error) { return map[string]int{"n": 3}, nil })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Update of a locked row whose ctx ended: %v", err)
	}
	if err := tx.Rollback(bg); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(bg, "t", "s", "")
	var v map[string]int
	if err != nil || got.Decode(&v) != nil || v["n"] != 1 {
		t.Errorf("after the Save and Update gave up: n = %d, %v", v["n"], err)
	}
}

// TestRotateInBatches: each batch commits on its own, so a row held by a
// writer stops Rotate at its batch while the batches before it are done
// and every row stays readable.
func TestRotateInBatches(t *testing.T) {
	db := testDB(t)
	schema := newSchema(t, db)
	k1 := newKey()
	s1 := open(t, db, schema, newRing(t, "k1", map[string][]byte{"k1": k1}))
	const n, batch = 30, 7
	for i := range n {
		if err := s1.Save(bg, "t", fmt.Sprintf("s%02d", i), "", map[string]int{"i": i}); err != nil {
			t.Fatal(err)
		}
	}
	s2 := open(t, db, schema, newRing(t, "k2", map[string][]byte{"k1": k1, "k2": newKey()}), pgstore.Config{RotateBatch: batch})
	// Hold row 20, in the third batch (rows 14 to 20).
	tx, err := db.Begin(bg)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(bg)
	if _, err := tx.Exec(bg, `SELECT 1 FROM `+table(schema)+` WHERE service = 's20' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	var rotated int
	var rotErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		rotated, rotErr = s2.Rotate(bg)
	}()
	underK2 := func() int {
		var c int
		if err := db.QueryRow(bg, `SELECT count(*) FROM `+table(schema)+` WHERE key_id = 'k2'`).Scan(&c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	deadline := time.Now().Add(30 * time.Second)
	for underK2() < 2*batch && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := underK2(); got != 2*batch {
		t.Fatalf("while Rotate waits for the third batch, %d rows are under k2; want the first two batches, %d", got, 2*batch)
	}
	select {
	case <-done:
		t.Fatal("Rotate finished while a row of its batch was held")
	default:
	}
	for i := range n {
		if _, err := s2.Get(bg, "t", fmt.Sprintf("s%02d", i), ""); err != nil {
			t.Errorf("Get during Rotate: %v", err)
		}
	}
	if err := tx.Rollback(bg); err != nil {
		t.Fatal(err)
	}
	<-done
	if rotErr != nil || rotated != n {
		t.Fatalf("Rotate = %d, %v; want %d", rotated, rotErr, n)
	}
	if got := underK2(); got != n {
		t.Errorf("after Rotate %d rows are under k2, want %d", got, n)
	}
}
