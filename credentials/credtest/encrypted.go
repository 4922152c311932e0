package credtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/valetkit/valet/credentials"
)

// Name names one stored credential, with its account as stored
// ("primary" for "").
type Name struct{ TenantID, Service, Account string }

func (n Name) String() string { return fmt.Sprintf("(%q, %q, %q)", n.TenantID, n.Service, n.Account) }

// Row is one stored credential as it is at rest.
type Row struct {
	Name
	KeyID string // the key id the row records
	// Raw is everything the storage holds for the row besides its names,
	// as it holds it: the ciphertext, the nonce, and every other column
	// (for a SQL table, the row as text too).
	Raw []byte
}

// Backing is the storage under an encrypting store, as RunEncrypted sees
// it. A NewBacking makes a fresh, empty one for each subtest.
type Backing interface {
	// Open returns a store on this storage that encrypts with ring; every
	// store opened on one Backing shares its rows. The store implements
	// credentials.Rotator. Open is called more than once per subtest, with
	// different rings, and may be called concurrently.
	Open(t *testing.T, ring *credentials.KeyRing) credentials.Store
	// Rows returns every stored credential as it is at rest.
	Rows(t *testing.T) []Row
	// Copy writes the stored bytes of the row from under the names to,
	// unchanged, replacing a row stored there — as someone with write
	// access to the storage could.
	Copy(t *testing.T, from, to Name)
}

// NewBacking makes an empty Backing for one subtest, isolated from every
// other, removing what it leaves behind with t.Cleanup. It is called
// concurrently.
type NewBacking = func(t *testing.T) Backing

// RunEncrypted checks encryption at rest on the Backings newBacking makes:
// no plaintext at rest, key ids recorded, rows that do not decrypt under
// other names, rotation, unknown key ids and wrong key material. Each
// check is a parallel subtest with a Backing of its own. Run covers the
// rest of the store's behaviour.
func RunEncrypted(t *testing.T, newBacking NewBacking) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, b Backing)
	}{
		{"NoPlaintext", testNoPlaintext},
		{"KeyIDs", testKeyIDs},
		{"MovedRows", testMovedRows},
		{"Rotate", testRotate},
		{"RotateConcurrent", testRotateConcurrent},
		{"UnknownKey", testUnknownKey},
		{"WrongKeyMaterial", testWrongKey},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newBacking(t))
		})
	}
}

// keys makes random key material; material lists the keys a subtest
// made, which no error may show.
type keys struct {
	mu       sync.Mutex
	material [][]byte
}

func (k *keys) new() []byte {
	b := make([]byte, credentials.KeySize)
	rand.Read(b)
	k.mu.Lock()
	k.material = append(k.material, b)
	k.mu.Unlock()
	return b
}

func (k *keys) ring(t *testing.T, primary string, m map[string][]byte) *credentials.KeyRing {
	t.Helper()
	r, err := credentials.NewKeyRing(primary, m)
	if err != nil {
		t.Fatalf("NewKeyRing: %v", err)
	}
	return r
}

// forms lists renderings of b that must not appear at rest or in errors.
func forms(b []byte) [][]byte {
	return [][]byte{
		b,
		[]byte(hex.EncodeToString(b)),
		[]byte(strings.ToUpper(hex.EncodeToString(b))),
		[]byte(base64.StdEncoding.EncodeToString(b)),
		[]byte(base64.RawURLEncoding.EncodeToString(b)),
	}
}

// noSecrets fails the test when err shows the marker or key material.
func (k *keys) noSecrets(t *testing.T, sec secrets, what string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	msg := []byte(err.Error())
	for _, f := range forms([]byte(sec.marker)) {
		if bytes.Contains(msg, f) {
			t.Errorf("%s: the error shows a secret (%d bytes not shown)", what, len(msg))
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, m := range k.material {
		for _, f := range forms(m) {
			if bytes.Contains(msg, f) {
				t.Errorf("%s: the error shows key material", what)
			}
		}
	}
}

func rotator(t *testing.T, s credentials.Store) credentials.Rotator {
	t.Helper()
	r, ok := s.(credentials.Rotator)
	if !ok {
		t.Fatalf("%T does not implement credentials.Rotator", s)
	}
	return r
}

func rowMap(rows []Row) map[Name]Row {
	m := make(map[Name]Row, len(rows))
	for _, r := range rows {
		m[r.Name] = r
	}
	return m
}

// sameRows fails the test when the rows at rest changed.
func sameRows(t *testing.T, what string, before, after []Row) {
	t.Helper()
	if len(before) != len(after) {
		t.Errorf("%s: %d rows before, %d after", what, len(before), len(after))
	}
	a := rowMap(after)
	for _, r := range before {
		got, ok := a[r.Name]
		switch {
		case !ok:
			t.Errorf("%s: row %v is gone", what, r.Name)
		case got.KeyID != r.KeyID || !bytes.Equal(got.Raw, r.Raw):
			t.Errorf("%s: row %v was overwritten (key %q, now %q)", what, r.Name, r.KeyID, got.KeyID)
		}
	}
}

func testNoPlaintext(t *testing.T, b Backing) {
	var k keys
	sec := newSecrets()
	s := b.Open(t, k.ring(t, "k1", map[string][]byte{"k1": k.new()}))
	save(t, s, "t", "google", "", sec.value("g", 1))
	save(t, s, "t", "github", "work", sec.value("gh", 1))
	big := sec.value("big", 1)
	big.Pad = strings.Repeat(sec.marker, 200)
	save(t, s, "u", "big", "", big)
	// Updates write ciphertext too.
	if u, ok := s.(credentials.Updater); ok {
		if err := u.Update(bg, "t", "google", "", func(context.Context, credentials.Secret) (any, error) { return sec.value("g", 2), nil }); err != nil {
			t.Fatal(err)
		}
	}
	rows := b.Rows(t)
	if len(rows) != 3 {
		t.Fatalf("Rows = %d rows, want 3", len(rows))
	}
	for _, r := range rows {
		if len(r.Raw) == 0 {
			t.Errorf("row %v: Raw is empty", r.Name)
		}
		for _, f := range append(forms([]byte(sec.marker)), []byte(`"token"`), []byte(`"owner"`)) {
			if bytes.Contains(r.Raw, f) {
				t.Errorf("row %v holds plaintext at rest", r.Name)
			}
		}
		for _, m := range k.material {
			for _, f := range forms(m) {
				if bytes.Contains(r.Raw, f) {
					t.Errorf("row %v holds key material", r.Name)
				}
			}
		}
	}
	sec.check(t, "after the search", get(t, s, "t", "google", ""), "g", 2)
}

func testKeyIDs(t *testing.T, b Backing) {
	var k keys
	sec := newSecrets()
	k1, k2 := k.new(), k.new()
	s1 := b.Open(t, k.ring(t, "k1", map[string][]byte{"k1": k1}))
	save(t, s1, "t", "old", "", sec.value("old", 1))
	s2 := b.Open(t, k.ring(t, "k2", map[string][]byte{"k1": k1, "k2": k2}))
	save(t, s2, "t", "new", "", sec.value("new", 1))
	want := map[Name]string{{"t", "old", "primary"}: "k1", {"t", "new", "primary"}: "k2"}
	for _, r := range b.Rows(t) {
		if w, ok := want[r.Name]; !ok || r.KeyID != w {
			t.Errorf("row %v records key %q, want %q", r.Name, r.KeyID, w)
		}
	}
	// The old key still decrypts; overwriting moves a row to the primary.
	sec.check(t, "old row through the new ring", get(t, s2, "t", "old", ""), "old", 1)
	save(t, s2, "t", "old", "", sec.value("old", 2))
	if r := rowMap(b.Rows(t))[Name{"t", "old", "primary"}]; r.KeyID != "k2" {
		t.Errorf("the overwritten row records key %q, want k2", r.KeyID)
	}
	sec.check(t, "overwritten row", get(t, s2, "t", "old", ""), "old", 2)
}

func testMovedRows(t *testing.T, b Backing) {
	var k keys
	sec := newSecrets()
	s := b.Open(t, k.ring(t, "k1", map[string][]byte{"k1": k.new()}))
	save(t, s, "alice", "google", "", sec.value("alice", 1))
	save(t, s, "bob", "google", "", sec.value("bob", 1))
	save(t, s, "a", "bc", "d", sec.value("a-bc", 1))

	from := Name{"alice", "google", "primary"}
	for _, to := range []Name{
		{"bob", "google", "primary"}, // over bob's own row
		{"mallory", "google", "primary"},
		{"alice", "github", "primary"},
		{"alice", "google", "work"},
	} {
		b.Copy(t, from, to)
		_, err := s.Get(bg, to.TenantID, to.Service, to.Account)
		wantErr(t, fmt.Sprintf("Get of a row copied to %v", to), err, credentials.ErrDecrypt)
		if err != nil && !strings.Contains(err.Error(), `"k1"`) {
			t.Errorf("the error does not name the key id: %v", err)
		}
		k.noSecrets(t, sec, "a copied row", err)
	}
	b.Copy(t, Name{"a", "bc", "d"}, Name{"ab", "c", "d"})
	_, err := s.Get(bg, "ab", "c", "d")
	wantErr(t, `Get of "a"+"bc" copied to "ab"+"c"`, err, credentials.ErrDecrypt)
	k.noSecrets(t, sec, "a copied row", err)
	sec.check(t, "the original", get(t, s, "alice", "google", ""), "alice", 1)

	// A row that does not decrypt cannot be updated, but can be replaced.
	if u, ok := s.(credentials.Updater); ok {
		err := u.Update(bg, "bob", "google", "", func(context.Context, credentials.Secret) (any, error) {
			t.Error("Update called fn with a row that does not decrypt")
			return sec.value("bob", 2), nil
		})
		wantErr(t, "Update of a copied row", err, credentials.ErrDecrypt)
	}
	save(t, s, "bob", "google", "", sec.value("bob", 3))
	sec.check(t, "bob after saving again", get(t, s, "bob", "google", ""), "bob", 3)
}

// testRotate: more rows than a batch, under two old keys, rotate to a new
// primary while readers read, and stay readable with the old keys gone.
func testRotate(t *testing.T, b Backing) {
	var k keys
	sec := newSecrets()
	k0, k1, k2 := k.new(), k.new(), k.new()
	s0 := b.Open(t, k.ring(t, "k0", map[string][]byte{"k0": k0}))
	s1 := b.Open(t, k.ring(t, "k1", map[string][]byte{"k0": k0, "k1": k1}))
	const n = 250
	name := func(i int) Name { return Name{fmt.Sprintf("t%d", i%5), fmt.Sprintf("svc%03d", i), "primary"} }
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				s := s0
				if i%3 == 0 {
					s = s1
				}
				nm := name(i)
				if err := s.Save(bg, nm.TenantID, nm.Service, "", sec.value(nm.Service, i)); err != nil {
					t.Errorf("Save %v: %v", nm, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	listBefore := list(t, s0, "t1", "")

	s2 := b.Open(t, k.ring(t, "k2", map[string][]byte{"k0": k0, "k1": k1, "k2": k2}))
	save(t, s2, "t0", "fresh", "", sec.value("fresh", 0))
	// Readers read throughout the rotation.
	done := make(chan struct{})
	var reads atomic.Int64
	var readers sync.WaitGroup
	for r := range 4 {
		readers.Go(func() {
			for i := r; ; i = (i + 7) % n {
				select {
				case <-done:
					return
				default:
				}
				nm := name(i)
				sec2, err := s2.Get(bg, nm.TenantID, nm.Service, "")
				if err != nil {
					t.Errorf("Get %v during the rotation: %v", nm, err)
					return
				}
				var v value
				if err := sec2.Decode(&v); err != nil || v.Writer != i || v.Token != sec.tokenFor(nm.Service, i) {
					t.Errorf("Get %v during the rotation returned another value", nm)
					return
				}
				reads.Add(1)
			}
		})
	}
	got, err := rotator(t, s2).Rotate(bg)
	close(done)
	readers.Wait()
	if err != nil {
		t.Fatalf("Rotate: %v", err)
	}
	if got != n {
		t.Errorf("Rotate re-encrypted %d rows, want %d", got, n)
	}
	for _, r := range b.Rows(t) {
		if r.KeyID != "k2" {
			t.Errorf("after Rotate row %v is under %q", r.Name, r.KeyID)
		}
	}
	if again, err := rotator(t, s2).Rotate(bg); err != nil || again != 0 {
		t.Errorf("second Rotate = %d, %v; want 0", again, err)
	}
	// The old keys can go.
	s3 := b.Open(t, k.ring(t, "k2", map[string][]byte{"k2": k2}))
	for i := range n {
		nm := name(i)
		sec.check(t, fmt.Sprintf("row %v after Rotate", nm), get(t, s3, nm.TenantID, nm.Service, ""), nm.Service, i)
	}
	sec.check(t, "the fresh row", get(t, s3, "t0", "fresh", ""), "fresh", 0)
	listAfter := list(t, s3, "t1", "")
	if len(listAfter) != len(listBefore) {
		t.Fatalf("List after Rotate: %d rows, before: %d", len(listAfter), len(listBefore))
	}
	for i := range listBefore {
		if !listAfter[i].UpdatedAt.Equal(listBefore[i].UpdatedAt) {
			t.Errorf("Rotate changed UpdatedAt of %s from %v to %v", listBefore[i].Service, listBefore[i].UpdatedAt, listAfter[i].UpdatedAt)
		}
	}
	if reads.Load() == 0 {
		t.Log("no read completed while Rotate ran: does it block readers?")
	}
}

// testRotateConcurrent: two stores rotating at once re-encrypt each row
// once between them.
func testRotateConcurrent(t *testing.T, b Backing) {
	var k keys
	sec := newSecrets()
	k1, k2 := k.new(), k.new()
	s1 := b.Open(t, k.ring(t, "k1", map[string][]byte{"k1": k1}))
	const n = 120
	for i := range n {
		save(t, s1, "t", fmt.Sprintf("s%03d", i), "", sec.value("r", i))
	}
	ring := k.ring(t, "k2", map[string][]byte{"k1": k1, "k2": k2})
	a, c := b.Open(t, ring), b.Open(t, ring)
	var na, nc int
	var ea, ec error
	var wg sync.WaitGroup
	wg.Go(func() { na, ea = rotator(t, a).Rotate(bg) })
	wg.Go(func() { nc, ec = rotator(t, c).Rotate(bg) })
	wg.Wait()
	if ea != nil || ec != nil {
		t.Fatalf("Rotate: %v; %v", ea, ec)
	}
	if na+nc != n {
		t.Errorf("the two rotations re-encrypted %d + %d rows, want %d in all", na, nc, n)
	}
	for _, r := range b.Rows(t) {
		if r.KeyID != "k2" {
			t.Errorf("row %v is under %q", r.Name, r.KeyID)
		}
	}
	for i := range n {
		sec.check(t, "after the rotations", get(t, a, "t", fmt.Sprintf("s%03d", i), ""), "r", i)
	}
}

func testUnknownKey(t *testing.T, b Backing) {
	var k keys
	sec := newSecrets()
	k1 := k.new()
	s1 := b.Open(t, k.ring(t, "k1", map[string][]byte{"k1": k1}))
	save(t, s1, "t", "google", "", sec.value("g", 1))
	save(t, s1, "t", "github", "", sec.value("gh", 1))
	before := b.Rows(t)

	s2 := b.Open(t, k.ring(t, "k2", map[string][]byte{"k2": k.new()}))
	_, err := s2.Get(bg, "t", "google", "")
	wantErr(t, "Get of a row under a key the ring lacks", err, credentials.ErrUnknownKey)
	if err != nil && !strings.Contains(err.Error(), `"k1"`) {
		t.Errorf("the error does not name the key id k1: %v", err)
	}
	k.noSecrets(t, sec, "unknown key", err)
	if got := names(list(t, s2, "t", "")); len(got) != 2 {
		t.Errorf("List through a ring that cannot decrypt = %q; metadata needs no key", got)
	}
	if u, ok := s2.(credentials.Updater); ok {
		err := u.Update(bg, "t", "google", "", func(context.Context, credentials.Secret) (any, error) {
			t.Error("Update called fn with a row it cannot decrypt")
			return sec.value("g", 2), nil
		})
		wantErr(t, "Update of a row under an unknown key", err, credentials.ErrUnknownKey)
	}
	n, err := rotator(t, s2).Rotate(bg)
	wantErr(t, "Rotate with rows under an unknown key", err, credentials.ErrUnknownKey)
	if err != nil && !strings.Contains(err.Error(), `"k1"`) {
		t.Errorf("Rotate's error does not name the key id k1: %v", err)
	}
	k.noSecrets(t, sec, "Rotate", err)
	if n != 0 {
		t.Errorf("Rotate re-encrypted %d rows it cannot decrypt", n)
	}
	sameRows(t, "after Get, Update and Rotate through a ring that lacks the key", before, b.Rows(t))
	sec.check(t, "through the right ring", get(t, s1, "t", "google", ""), "g", 1)
}

// testWrongKey: a ring whose k1 is other material than the k1 that wrote
// the rows reads nothing, writes nothing and rotates nothing.
func testWrongKey(t *testing.T, b Backing) {
	var k keys
	sec := newSecrets()
	good := b.Open(t, k.ring(t, "k1", map[string][]byte{"k1": k.new()}))
	save(t, good, "t", "google", "", sec.value("g", 1))
	save(t, good, "t", "github", "", sec.value("gh", 1))
	before := b.Rows(t)

	wrongK1 := k.new()
	bad := b.Open(t, k.ring(t, "k1", map[string][]byte{"k1": wrongK1}))
	isKeyErr := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, credentials.ErrWrongKey) && !errors.Is(err, credentials.ErrDecrypt) {
			t.Errorf("%s: got %v, want ErrWrongKey (or ErrDecrypt)", what, err)
		} else if !strings.Contains(err.Error(), `"k1"`) {
			t.Errorf("%s: the error does not name the key id k1: %v", what, err)
		}
		k.noSecrets(t, sec, what, err)
	}
	_, err := bad.Get(bg, "t", "google", "")
	isKeyErr("Get", err)

	err = bad.Save(bg, "t", "google", "", sec.value("g", 2))
	wantErr(t, "Save over a row with the wrong key", err, credentials.ErrWrongKey)
	isKeyErr("Save over a row", err)
	err = bad.Save(bg, "t", "new", "", sec.value("new", 1))
	wantErr(t, "Save of a new row with the wrong key", err, credentials.ErrWrongKey)
	isKeyErr("Save of a new row", err)
	if u, ok := bad.(credentials.Updater); ok {
		err := u.Update(bg, "t", "google", "", func(context.Context, credentials.Secret) (any, error) {
			t.Error("Update with the wrong key called fn")
			return sec.value("g", 3), nil
		})
		isKeyErr("Update", err)
	}
	// Every row is under the primary k1: nothing to rotate, or a refusal.
	n, err := rotator(t, bad).Rotate(bg)
	if err != nil {
		isKeyErr("Rotate with only the wrong k1", err)
	}
	if n != 0 {
		t.Errorf("Rotate with only the wrong k1 re-encrypted %d rows", n)
	}
	sameRows(t, "after Save, Update and Rotate with the wrong k1", before, b.Rows(t))

	// With a right new primary but the wrong k1, rotation fails and keeps
	// the rows.
	worse := b.Open(t, k.ring(t, "k2", map[string][]byte{"k1": wrongK1, "k2": k.new()}))
	n, err = rotator(t, worse).Rotate(bg)
	isKeyErr("Rotate from the wrong k1", err)
	if n != 0 {
		t.Errorf("Rotate from the wrong k1 re-encrypted %d rows", n)
	}
	sameRows(t, "after Rotate from the wrong k1", before, b.Rows(t))

	sec.check(t, "google through the right ring", get(t, good, "t", "google", ""), "g", 1)
	sec.check(t, "github through the right ring", get(t, good, "t", "github", ""), "gh", 1)
	wantGone(t, good, "t", "new", "")
}
