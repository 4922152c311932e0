package credentials

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
)

// Sizes of the encryption at rest.
const (
	KeySize   = 32 // bytes of an AES-256 key
	NonceSize = 12 // bytes of a GCM nonce
	// MaxKeyIDLen is the longest key id, in bytes.
	MaxKeyIDLen = 64
)

// KeyRing holds the AES-256 keys that encrypt credentials at rest, each
// under a key id. New writes use the primary key; every key in the ring
// still decrypts what it wrote, so a key is rotated by adding a new
// primary, re-encrypting (pgstore.Store.Rotate), then dropping the old key.
//
// A KeyRing keeps no copy of the key bytes it was given, only the
// expanded AES keys, and never prints them: every fmt verb, String,
// LogValue and JSON show the key ids and "material: REDACTED". It is
// immutable and safe for concurrent use.
type KeyRing struct{ p *keyRing }

type keyRing struct {
	primary string
	ids     []string // sorted
	aead    map[string]cipher.AEAD
}

// NewKeyRing returns the key ring of keys, each exactly KeySize (32)
// random bytes under a key id, writing with the key primaryID. Key ids are
// 1 to MaxKeyIDLen letters, digits, '.', '_', ':' or '-'; they are stored
// beside every row and named in errors, so they must not be secret. The
// ring copies what it needs: keys may be cleared after the call.
//
// Errors wrap ErrInvalid and name the key id at fault, never its bytes.
func NewKeyRing(primaryID string, keys map[string][]byte) (*KeyRing, error) {
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: the key ring needs at least one key", ErrInvalid)
	}
	r := &keyRing{primary: primaryID, aead: make(map[string]cipher.AEAD, len(keys))}
	for id := range keys {
		r.ids = append(r.ids, id)
	}
	slices.Sort(r.ids)
	for _, id := range r.ids {
		if err := checkKeyID(id); err != nil {
			return nil, err
		}
		if err := checkKey(id, keys[id]); err != nil {
			return nil, err
		}
		block, err := aes.NewCipher(keys[id])
		if err != nil {
			return nil, fmt.Errorf("%w: key %q: %v", ErrInvalid, id, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("%w: key %q: %v", ErrInvalid, id, err)
		}
		r.aead[id] = aead
	}
	if _, ok := r.aead[primaryID]; !ok {
		if primaryID == "" {
			return nil, fmt.Errorf("%w: empty primary key id (the key ring holds %s)", ErrInvalid, quoteIDs(r.ids))
		}
		return nil, fmt.Errorf("%w: primary key %q is not in the key ring (it holds %s)", ErrInvalid, primaryID, quoteIDs(r.ids))
	}
	return &KeyRing{p: r}, nil
}

func checkKeyID(id string) error {
	if id == "" || len(id) > MaxKeyIDLen {
		return fmt.Errorf("%w: a key id must be 1 to %d bytes, got %d", ErrInvalid, MaxKeyIDLen, len(id))
	}
	for _, c := range []byte(id) {
		ok := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '.' || c == '_' || c == ':' || c == '-'
		if !ok {
			// The id may be key material passed by mistake: do not echo it.
			return fmt.Errorf("%w: a key id may hold only letters, digits, '.', '_', ':' and '-' (a %d-byte id does not)", ErrInvalid, len(id))
		}
	}
	return nil
}

func checkKey(id string, key []byte) error {
	if len(key) != KeySize {
		hint := ""
		switch len(key) {
		case 2 * KeySize:
			hint = " (a hex-encoded key must be decoded first)"
		case 44, 43:
			hint = " (a base64-encoded key must be decoded first)"
		case 0:
			hint = " (the key is missing)"
		}
		return fmt.Errorf("%w: key %q is %d bytes; AES-256 needs exactly %d%s", ErrInvalid, id, len(key), KeySize, hint)
	}
	var or byte
	for _, b := range key {
		or |= b
	}
	if or == 0 {
		return fmt.Errorf("%w: key %q is all zero bytes; use %d random bytes", ErrInvalid, id, KeySize)
	}
	return nil
}

func quoteIDs(ids []string) string {
	q := make([]string, len(ids))
	for i, id := range ids {
		q[i] = strconv.Quote(id)
	}
	return strings.Join(q, ", ")
}

// PrimaryID returns the id of the key new writes use.
func (k *KeyRing) PrimaryID() string { return k.p.primary }

// KeyIDs returns the ids of the ring's keys, sorted.
func (k *KeyRing) KeyIDs() []string { return slices.Clone(k.p.ids) }

// Has reports whether the ring holds a key under id.
func (k *KeyRing) Has(id string) bool { _, ok := k.p.aead[id]; return ok }

// String returns the ring's key ids, never its key material:
//
//	credentials.KeyRing{primary: "k2", keys: ["k1" "k2"], material: REDACTED}
func (k *KeyRing) String() string {
	if k == nil || k.p == nil {
		return "credentials.KeyRing(nil)"
	}
	return fmt.Sprintf("credentials.KeyRing{primary: %q, keys: %q, material: %s}", k.p.primary, k.p.ids, redacted)
}

// GoString returns String.
func (k *KeyRing) GoString() string { return k.String() }

// Format implements fmt.Formatter: every verb prints String.
func (k *KeyRing) Format(f fmt.State, _ rune) { io.WriteString(f, k.String()) }

// LogValue implements slog.LogValuer: the primary id, the key ids and
// "material": "REDACTED".
func (k *KeyRing) LogValue() slog.Value {
	if k == nil || k.p == nil {
		return slog.StringValue("credentials.KeyRing(nil)")
	}
	return slog.GroupValue(
		slog.String("primary", k.p.primary),
		slog.Any("keys", slices.Clone(k.p.ids)),
		slog.String("material", redacted),
	)
}

// MarshalJSON encodes the primary id and the key ids, never the keys.
func (k *KeyRing) MarshalJSON() ([]byte, error) {
	if k == nil || k.p == nil {
		return []byte("null"), nil
	}
	return json.Marshal(struct {
		Primary  string   `json:"primary"`
		Keys     []string `json:"keys"`
		Material string   `json:"material"`
	}{k.p.primary, k.p.ids, redacted})
}

// Sealed is a credential encrypted at rest, as a store keeps it: the id of
// the key that encrypted it, a random nonce, and the AES-256-GCM
// ciphertext with its tag. None of it is secret.
type Sealed struct {
	KeyID      string
	Nonce      []byte // NonceSize bytes
	Ciphertext []byte // the sealed JSON and the 16-byte GCM tag
}

// additionalData binds a row to its names: the tenant ID, the service and
// the account (already normalised), each as a 4-byte big-endian length
// and its bytes, so "a"+"bc" and "ab"+"c" differ. Its first byte is 0
// (names are at most MaxNameLen bytes), which keeps it apart from
// keyCheckData.
func additionalData(tenantID, service, account string) []byte {
	ad := make([]byte, 0, 12+len(tenantID)+len(service)+len(account))
	for _, s := range [...]string{tenantID, service, account} {
		ad = binary.BigEndian.AppendUint32(ad, uint32(len(s)))
		ad = append(ad, s...)
	}
	return ad
}

// Seal encrypts s for the credential (tenantID, service, account) under
// the primary key with a fresh random nonce. The names are the additional
// data, so the result opens only under the same names. Errors wrap
// ErrInvalid (bad names, an empty secret).
func (k *KeyRing) Seal(tenantID, service, account string, s Secret) (Sealed, error) {
	account, err := Normalize(tenantID, service, account)
	if err != nil {
		return Sealed{}, err
	}
	if s.IsZero() {
		return Sealed{}, fmt.Errorf("%w: cannot seal an empty secret", ErrInvalid)
	}
	id := k.p.primary
	nonce := make([]byte, NonceSize)
	if _, err := rand.Read(nonce); err != nil {
		return Sealed{}, fmt.Errorf("credentials: reading a random nonce: %w", err)
	}
	ct := k.p.aead[id].Seal(nil, nonce, []byte(s.text()), additionalData(tenantID, service, account))
	return Sealed{KeyID: id, Nonce: nonce, Ciphertext: ct}, nil
}

// Open decrypts what Seal returned for the same names, with the key
// sealed.KeyID. A key id the ring lacks gives ErrUnknownKey; a row that
// does not authenticate (moved to other names, altered, or wrong key
// material) gives ErrDecrypt. Both name the key id; neither panics.
func (k *KeyRing) Open(tenantID, service, account string, sealed Sealed) (Secret, error) {
	account, err := Normalize(tenantID, service, account)
	if err != nil {
		return Secret{}, err
	}
	where := fmt.Sprintf("(key %q, tenant %q, service %q, account %q)", sealed.KeyID, tenantID, service, account)
	aead, ok := k.p.aead[sealed.KeyID]
	if !ok {
		return Secret{}, fmt.Errorf("%w %q %s: the row was written under it, but the key ring holds %s; add that key to the ring", ErrUnknownKey, sealed.KeyID, where[1:len(where)-1], quoteIDs(k.p.ids))
	}
	if len(sealed.Nonce) != NonceSize {
		return Secret{}, fmt.Errorf("%w %s: the nonce is %d bytes, want %d: the row is malformed", ErrDecrypt, where, len(sealed.Nonce), NonceSize)
	}
	pt, err := aead.Open(nil, sealed.Nonce, sealed.Ciphertext, additionalData(tenantID, service, account))
	if err != nil {
		return Secret{}, fmt.Errorf("%w %s: the key does not authenticate the row: the row was moved from another tenant, service or account, or altered, or the key material is wrong", ErrDecrypt, where)
	}
	if !json.Valid(pt) || jsonKind(pt) != "object" {
		clear(pt)
		return Secret{}, fmt.Errorf("%w %s: the row decrypts to something that is not a JSON object", ErrDecrypt, where)
	}
	t := secretText(pt)
	clear(pt)
	return Secret{p: &t}, nil
}

func (k *KeyRing) unknown(id string) error {
	return fmt.Errorf("%w %q: the row was written under it, but the key ring holds %s; add that key to the ring", ErrUnknownKey, id, quoteIDs(k.p.ids))
}

// keyCheckPlain is what a key check seals. It is not a JSON object, and
// keyCheckData starts with 0xff where a row's additional data starts with
// 0, so a key check never opens as a credential nor a credential as a key
// check.
var keyCheckPlain = []byte("valet credentials key check v1")

func keyCheckData(id string) []byte {
	return append([]byte("\xffvalet/credentials/key-check/"), id...)
}

// KeyCheck seals a fixed value under the key keyID, for a store to keep
// beside its rows the first time it writes with that key. VerifyKeyCheck
// later tells whether a key ring's key of that id is the same key: a ring
// whose key material differs is then refused before it writes anything.
// A key id the ring lacks gives ErrUnknownKey.
func (k *KeyRing) KeyCheck(keyID string) (Sealed, error) {
	aead, ok := k.p.aead[keyID]
	if !ok {
		return Sealed{}, k.unknown(keyID)
	}
	nonce := make([]byte, NonceSize)
	if _, err := rand.Read(nonce); err != nil {
		return Sealed{}, fmt.Errorf("credentials: reading a random nonce: %w", err)
	}
	return Sealed{KeyID: keyID, Nonce: nonce, Ciphertext: aead.Seal(nil, nonce, keyCheckPlain, keyCheckData(keyID))}, nil
}

// VerifyKeyCheck checks c, made by KeyCheck, against the ring's key
// c.KeyID: nil when it is the same key material, ErrWrongKey naming the
// key id when it is not, ErrUnknownKey when the ring lacks the id.
func (k *KeyRing) VerifyKeyCheck(c Sealed) error {
	aead, ok := k.p.aead[c.KeyID]
	if !ok {
		return k.unknown(c.KeyID)
	}
	if len(c.Nonce) == NonceSize {
		if pt, err := aead.Open(nil, c.Nonce, c.Ciphertext, keyCheckData(c.KeyID)); err == nil && string(pt) == string(keyCheckPlain) {
			return nil
		}
	}
	return fmt.Errorf("%w: the key ring's key %q is not the key %q that this store was written with; correct the key material for that id", ErrWrongKey, c.KeyID, c.KeyID)
}
