package credentials

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

// testKey returns a distinct, recognisable 32-byte key.
func testKey(seed byte) []byte {
	k := make([]byte, KeySize)
	for i := range k {
		k[i] = seed + byte(i)*7
	}
	return k
}

func mustRing(t *testing.T, primary string, keys map[string][]byte) *KeyRing {
	t.Helper()
	r, err := NewKeyRing(primary, keys)
	if err != nil {
		t.Fatalf("NewKeyRing: %v", err)
	}
	return r
}

// keyForms lists renderings of key that must never appear in output.
func keyForms(key []byte) []string {
	return []string{
		string(key),
		hex.EncodeToString(key),
		strings.ToUpper(hex.EncodeToString(key)),
		base64.StdEncoding.EncodeToString(key),
		strings.Trim(fmt.Sprint(key), "[]"),
		strings.Trim(fmt.Sprintf("%x", key[:8]), "[]"),
		fmt.Sprintf("% x", key[:8]),
	}
}

func TestNewKeyRingRejects(t *testing.T) {
	good := testKey(1)
	for _, tc := range []struct {
		name    string
		primary string
		keys    map[string][]byte
		want    []string // substrings of the error
	}{
		{"no keys", "k1", nil, []string{"at least one key"}},
		{"short key", "k1", map[string][]byte{"k1": good[:16]}, []string{`key "k1" is 16 bytes`, "exactly 32"}},
		{"long key", "k1", map[string][]byte{"k1": append(good, 1)}, []string{`key "k1" is 33 bytes`}},
		{"hex key", "k1", map[string][]byte{"k1": []byte(hex.EncodeToString(good))}, []string{`key "k1" is 64 bytes`, "hex-encoded"}},
		{"base64 key", "k1", map[string][]byte{"k1": []byte(base64.StdEncoding.EncodeToString(good))}, []string{`key "k1" is 44 bytes`, "base64"}},
		{"missing key", "k1", map[string][]byte{"k1": nil}, []string{`key "k1" is 0 bytes`, "missing"}},
		{"other key wrong", "k1", map[string][]byte{"k1": good, "old": good[:31]}, []string{`key "old" is 31 bytes`}},
		{"zero key", "k1", map[string][]byte{"k1": make([]byte, 32)}, []string{`key "k1" is all zero`}},
		{"primary absent", "k3", map[string][]byte{"k1": good, "k2": testKey(2)}, []string{`primary key "k3" is not in the key ring`, `"k1", "k2"`}},
		{"empty primary", "", map[string][]byte{"k1": good}, []string{"empty primary key id"}},
		{"empty id", "", map[string][]byte{"": good}, []string{"key id must be 1 to 64 bytes"}},
		{"bad id", "k 1", map[string][]byte{"k 1": good}, []string{"letters, digits"}},
		{"long id", strings.Repeat("k", 65), map[string][]byte{strings.Repeat("k", 65): good}, []string{"1 to 64 bytes, got 65"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := NewKeyRing(tc.primary, tc.keys)
			if err == nil {
				t.Fatalf("NewKeyRing succeeded: %v", r)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error does not wrap ErrInvalid: %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			for _, k := range tc.keys {
				if len(k) < 8 {
					continue
				}
				for _, f := range keyForms(k) {
					if strings.Contains(err.Error(), f) {
						t.Errorf("error shows key bytes")
					}
				}
			}
		})
	}
}

func TestKeyRingNeverPrintsKeys(t *testing.T) {
	k1, k2 := testKey(1), testKey(100)
	r := mustRing(t, "k2", map[string][]byte{"k1": k1, "k2": k2})
	type holder struct {
		r  *KeyRing
		v  KeyRing
		R  *KeyRing
		in struct{ r *KeyRing }
	}
	h := holder{r: r, v: *r, R: r}
	h.in.r = r
	var outs []string
	for _, v := range []any{r, *r, h, &h, []*KeyRing{r}, map[string]*KeyRing{"a": r}} {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%d", "%x", "%X", "% x", "%o", "%b", "%c", "%U"} {
			outs = append(outs, fmt.Sprintf(verb, v))
		}
	}
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("ring", "ring", r)
	slog.New(slog.NewTextHandler(&buf, nil)).Info("ring", "ring", r)
	outs = append(outs, buf.String())
	j, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	j2, _ := json.Marshal(r)
	outs = append(outs, string(j), string(j2))
	for _, out := range outs {
		for _, key := range [][]byte{k1, k2} {
			for _, f := range keyForms(key) {
				if strings.Contains(out, f) {
					t.Fatalf("key material printed (output of %d bytes)", len(out))
				}
			}
		}
	}
	if got, want := r.String(), `credentials.KeyRing{primary: "k2", keys: ["k1" "k2"], material: REDACTED}`; got != want {
		t.Errorf("String = %s, want %s", got, want)
	}
	if got := fmt.Sprintf("%d", r); got != r.String() {
		t.Errorf("%%d = %s", got)
	}
	if !strings.Contains(buf.String(), `"material":"REDACTED"`) || !strings.Contains(buf.String(), `"primary":"k2"`) {
		t.Errorf("slog output: %s", buf.String())
	}
}

func TestSealOpen(t *testing.T) {
	r := mustRing(t, "k1", map[string][]byte{"k1": testKey(1)})
	const marker = "plaintext-marker-1234"
	s, err := Encode(map[string]string{"access_token": marker})
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := r.Seal("alice", "google", "", s)
	if err != nil {
		t.Fatal(err)
	}
	if sealed.KeyID != "k1" || len(sealed.Nonce) != NonceSize || bytes.Contains(sealed.Ciphertext, []byte(marker)) {
		t.Fatalf("sealed: key %q, nonce %d bytes, plaintext visible %v", sealed.KeyID, len(sealed.Nonce), bytes.Contains(sealed.Ciphertext, []byte(marker)))
	}
	again, _ := r.Seal("alice", "google", "", s)
	if bytes.Equal(again.Nonce, sealed.Nonce) || bytes.Equal(again.Ciphertext, sealed.Ciphertext) {
		t.Error("two seals share a nonce or a ciphertext")
	}
	// "" and "primary" are the same account.
	got, err := r.Open("alice", "google", PrimaryAccount, sealed)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]string
	if err := got.Decode(&m); err != nil || m["access_token"] != marker {
		t.Fatal("Open did not return what was sealed")
	}

	// Other names: each field, and the same bytes split differently.
	moved := []struct{ tenant, service, account string }{
		{"bob", "google", ""},
		{"alice", "github", ""},
		{"alice", "google", "work"},
	}
	for _, mv := range moved {
		_, err := r.Open(mv.tenant, mv.service, mv.account, sealed)
		if !errors.Is(err, ErrDecrypt) || !strings.Contains(err.Error(), `key "k1"`) {
			t.Errorf("open as %v: %v", mv, err)
		}
		if strings.Contains(err.Error(), marker) {
			t.Error("error shows the secret")
		}
	}
	split, err := r.Seal("a", "bc", "d", s)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Open("ab", "c", "d", split); !errors.Is(err, ErrDecrypt) {
		t.Errorf(`"a"+"bc" opened as "ab"+"c": %v`, err)
	}
	if _, err := r.Open("a", "b", "cd", split); !errors.Is(err, ErrDecrypt) {
		t.Errorf(`"bc"+"d" opened as "b"+"cd": %v`, err)
	}

	// Altered rows fail cleanly.
	flip := func(b []byte, i int) []byte { c := bytes.Clone(b); c[i] ^= 1; return c }
	for name, bad := range map[string]Sealed{
		"ciphertext": {KeyID: "k1", Nonce: sealed.Nonce, Ciphertext: flip(sealed.Ciphertext, 0)},
		"tag":        {KeyID: "k1", Nonce: sealed.Nonce, Ciphertext: flip(sealed.Ciphertext, len(sealed.Ciphertext)-1)},
		"nonce":      {KeyID: "k1", Nonce: flip(sealed.Nonce, 3), Ciphertext: sealed.Ciphertext},
		"short":      {KeyID: "k1", Nonce: sealed.Nonce[:4], Ciphertext: sealed.Ciphertext},
		"empty":      {KeyID: "k1"},
		"truncated":  {KeyID: "k1", Nonce: sealed.Nonce, Ciphertext: sealed.Ciphertext[:5]},
	} {
		if _, err := r.Open("alice", "google", "", bad); !errors.Is(err, ErrDecrypt) {
			t.Errorf("%s altered: %v", name, err)
		}
	}
}

func TestOpenUnknownAndWrongKey(t *testing.T) {
	old := mustRing(t, "k1", map[string][]byte{"k1": testKey(1)})
	s, _ := Encode(map[string]int{"n": 1})
	sealed, err := old.Seal("t", "s", "a", s)
	if err != nil {
		t.Fatal(err)
	}
	other := mustRing(t, "k2", map[string][]byte{"k2": testKey(2), "k3": testKey(3)})
	_, err = other.Open("t", "s", "a", sealed)
	if !errors.Is(err, ErrUnknownKey) || !strings.Contains(err.Error(), `"k1"`) || !strings.Contains(err.Error(), `"k2", "k3"`) {
		t.Errorf("unknown key: %v", err)
	}
	wrong := mustRing(t, "k1", map[string][]byte{"k1": testKey(9)})
	_, err = wrong.Open("t", "s", "a", sealed)
	if !errors.Is(err, ErrDecrypt) || !strings.Contains(err.Error(), `"k1"`) {
		t.Errorf("wrong key: %v", err)
	}

	check, err := old.KeyCheck("k1")
	if err != nil {
		t.Fatal(err)
	}
	if err := old.VerifyKeyCheck(check); err != nil {
		t.Errorf("the same ring fails its key check: %v", err)
	}
	rotated := mustRing(t, "k2", map[string][]byte{"k1": testKey(1), "k2": testKey(2)})
	if err := rotated.VerifyKeyCheck(check); err != nil {
		t.Errorf("a ring with the same k1 fails its key check: %v", err)
	}
	if err := wrong.VerifyKeyCheck(check); !errors.Is(err, ErrWrongKey) || !strings.Contains(err.Error(), `"k1"`) {
		t.Errorf("wrong material: %v", err)
	}
	if err := other.VerifyKeyCheck(check); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("unknown id: %v", err)
	}
	if _, err := other.KeyCheck("k1"); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("KeyCheck of an absent id: %v", err)
	}
	// A key check never opens as a credential, nor a credential as a check.
	if _, err := old.Open("t", "s", "a", check); !errors.Is(err, ErrDecrypt) {
		t.Errorf("key check opened as a row: %v", err)
	}
	if err := old.VerifyKeyCheck(sealed); !errors.Is(err, ErrWrongKey) {
		t.Errorf("row verified as a key check: %v", err)
	}
}

func TestSealRejects(t *testing.T) {
	r := mustRing(t, "k1", map[string][]byte{"k1": testKey(1)})
	s, _ := Encode(map[string]int{"n": 1})
	if _, err := r.Seal("", "s", "a", s); !errors.Is(err, ErrInvalid) {
		t.Errorf("empty tenant: %v", err)
	}
	if _, err := r.Seal("t", "", "a", s); !errors.Is(err, ErrInvalid) {
		t.Errorf("empty service: %v", err)
	}
	if _, err := r.Seal("t", "s", "a", Secret{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("empty secret: %v", err)
	}
}

func TestKeyRingAccessors(t *testing.T) {
	keys := map[string][]byte{"b": testKey(1), "a": testKey(2)}
	r := mustRing(t, "b", keys)
	clear(keys["b"]) // the ring keeps its own copy
	if r.PrimaryID() != "b" || fmt.Sprint(r.KeyIDs()) != "[a b]" || !r.Has("a") || r.Has("c") {
		t.Errorf("PrimaryID %q, KeyIDs %v", r.PrimaryID(), r.KeyIDs())
	}
	ids := r.KeyIDs()
	ids[0] = "x"
	if r.KeyIDs()[0] != "a" {
		t.Error("KeyIDs shares its slice")
	}
	s, _ := Encode(map[string]int{"n": 1})
	sealed, err := r.Seal("t", "s", "", s)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Open("t", "s", "", sealed); err != nil {
		t.Errorf("clearing the caller's key broke the ring: %v", err)
	}
}
