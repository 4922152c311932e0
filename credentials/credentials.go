package credentials

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/valetkit/valet/internal/ids"
)

// Errors, checked with errors.Is. None of them, and no error of this
// package or its stores, contains secret or key bytes.
var (
	// ErrNotFound is returned when a tenant has no credentials for a
	// service and account, and by a tenant-bound store (ForTenant) for
	// every other tenant.
	ErrNotFound = errors.New("credentials: not found")
	// ErrInvalid: an empty tenant or service, a name that is not valid
	// UTF-8, holds a NUL byte or is longer than MaxNameLen, creds that do
	// not encode to a JSON object, or a bad key ring.
	ErrInvalid = errors.New("credentials: invalid")
	// ErrTenantMismatch: Save through a tenant-bound store (ForTenant)
	// named another tenant. Nothing was written.
	ErrTenantMismatch = errors.New("credentials: store is bound to another tenant")
	// ErrConflict: an Update kept losing to concurrent writes and gave up.
	ErrConflict = errors.New("credentials: changed concurrently")
	// ErrUnknownKey: a stored row names a key id the key ring does not
	// hold. The message names the key id.
	ErrUnknownKey = errors.New("credentials: unknown key id")
	// ErrWrongKey: the key ring holds a key id with other key material
	// than the key that wrote under that id. The message names the key
	// id. Stores detect it before writing, so nothing is overwritten.
	ErrWrongKey = errors.New("credentials: wrong key material")
	// ErrDecrypt: a stored row does not decrypt under its key: it was
	// moved to another tenant, service or account, or altered, or (when
	// the store cannot tell) the key material is wrong. The message names
	// the key id and the row.
	ErrDecrypt = errors.New("credentials: cannot decrypt")
)

// PrimaryAccount is the account the empty account "" stands for: Save,
// Get, Update and Delete treat "" and "primary" as the same account, and
// Info.Account reports it as "primary".
const PrimaryAccount = "primary"

// MaxNameLen is the longest tenant ID, service or account name, in bytes:
// the one ID limit of every valet package (memory.MaxIDLen,
// trigger.MaxIDLen and agent.MaxIDLen are equal).
const MaxNameLen = ids.MaxLen

// Store keeps credentials per tenant, service and account. Implementations
// must never let one tenant read another's secrets. They are safe for
// concurrent use.
//
// Every method checks its names first: an empty tenant or service, or a
// name that is not valid UTF-8, holds a NUL byte or is longer than
// MaxNameLen, gives an error wrapping ErrInvalid. The account "" means
// PrimaryAccount. A method called with a done ctx returns an error
// wrapping ctx.Err() and changes nothing.
//
// credentials/credtest.Run is the conformance suite every Store passes.
type Store interface {
	// Save stores creds, which must encode to a JSON object (a struct, a
	// map, a json.RawMessage, a Secret), replacing what was there.
	// Anything else fails with ErrInvalid and stores nothing.
	Save(ctx context.Context, tenantID, service, account string, creds any) error
	// Get returns the secret or an error wrapping ErrNotFound.
	Get(ctx context.Context, tenantID, service, account string) (Secret, error)
	// List returns metadata only, sorted by service then account (byte
	// order); service "" lists every service.
	List(ctx context.Context, tenantID, service string) ([]Info, error)
	// Delete removes the credentials; deleting what is absent is not an error.
	Delete(ctx context.Context, tenantID, service, account string) error
}

// Updater is implemented by stores that can change a credential without
// losing a concurrent change: Memory, pgstore.Store, and the store
// ForTenant returns for either. Use it to refresh OAuth tokens, so that a
// refresh token the provider rotated is never overwritten by a refresh
// that started from the old one.
type Updater interface {
	// Update calls fn with the stored secret and stores what fn returns,
	// which must encode to a JSON object, as Save would. Updates of one
	// credential run one at a time, so fn sees what the previous Update
	// stored, and no Save is lost: the write checks the revision fn's
	// secret was read at, and a Save in between either waits for the
	// Update (pgstore) or makes fn run again on the saved secret (Memory).
	//
	// When the credential does not exist Update returns ErrNotFound and
	// does not call fn. When fn returns an error, Update returns it as is
	// and writes nothing. fn must not call Update for the same credential
	// (it would wait for itself until ctx ends). fn runs while the update
	// holds the credential, so keep it short: one token refresh.
	Update(ctx context.Context, tenantID, service, account string, fn func(ctx context.Context, old Secret) (any, error)) error
}

// TenantDeleter is implemented by stores that can erase a tenant: Memory
// and pgstore.Store. The store ForTenant returns does not implement it, so
// a tool can never erase its tenant.
type TenantDeleter interface {
	// DeleteTenant removes every credential of the tenant and returns how
	// many there were.
	DeleteTenant(ctx context.Context, tenantID string) (int, error)
}

// Rotator is implemented by stores that encrypt at rest (pgstore.Store).
type Rotator interface {
	// Rotate re-encrypts every credential that is not under the key
	// ring's primary key, and returns how many it re-encrypted.
	Rotate(ctx context.Context) (int, error)
}

// Normalize checks the names of one credential and returns its account,
// with "" replaced by PrimaryAccount. Errors wrap ErrInvalid. It is meant
// for Store implementations, which call it before anything else.
func Normalize(tenantID, service, account string) (string, error) {
	if err := checkName("tenant ID", tenantID, true); err != nil {
		return "", err
	}
	if err := checkName("service", service, true); err != nil {
		return "", err
	}
	if account == "" {
		return PrimaryAccount, nil
	}
	if err := checkName("account", account, false); err != nil {
		return "", err
	}
	return account, nil
}

// CheckList checks the arguments of Store.List: a tenant ID, and a service
// that may be "" (every service). Errors wrap ErrInvalid. It is meant for
// Store implementations.
func CheckList(tenantID, service string) error {
	if err := checkName("tenant ID", tenantID, true); err != nil {
		return err
	}
	return checkName("service", service, false)
}

// checkName returns an error wrapping ErrInvalid when name is empty (and
// required), too long, not UTF-8 or holds a NUL byte. The message does not
// repeat the name: a caller may have passed something else by mistake.
func checkName(what, name string, required bool) error {
	switch {
	case name == "" && required:
		return fmt.Errorf("%w: empty %s", ErrInvalid, what)
	case len(name) > MaxNameLen:
		return fmt.Errorf("%w: %s is %d bytes, longer than %d", ErrInvalid, what, len(name), MaxNameLen)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalid, what)
	case strings.IndexByte(name, 0) >= 0:
		return fmt.Errorf("%w: %s contains a NUL byte", ErrInvalid, what)
	}
	return nil
}

// Encode turns creds into a Secret, as Save does: creds must encode to a
// JSON object. A Secret (or *Secret) is taken as it is, a json.RawMessage
// as its JSON; anything else goes through json.Marshal. The JSON is
// compacted. Errors wrap ErrInvalid and name creds' type, never its
// content. It is meant for Store implementations.
func Encode(creds any) (Secret, error) {
	var raw []byte
	switch c := creds.(type) {
	case nil:
		return Secret{}, fmt.Errorf("%w: creds is nil; want a value that encodes to a JSON object", ErrInvalid)
	case Secret:
		raw = []byte(c.text())
	case *Secret:
		if c != nil {
			raw = []byte(c.text())
		}
	default:
		b, err := json.Marshal(creds)
		if err != nil {
			// Only the unsupported-type error is safe to repeat: others
			// (a Marshaler's error, a syntax error in a RawMessage) may
			// quote the value.
			var ute *json.UnsupportedTypeError
			if errors.As(err, &ute) {
				return Secret{}, fmt.Errorf("%w: creds of type %T do not encode to JSON (%v)", ErrInvalid, creds, ute)
			}
			return Secret{}, fmt.Errorf("%w: creds of type %T do not encode to JSON", ErrInvalid, creds)
		}
		raw = b
	}
	if len(raw) == 0 {
		return Secret{}, fmt.Errorf("%w: creds is an empty %T; want a value that encodes to a JSON object", ErrInvalid, creds)
	}
	if !json.Valid(raw) {
		return Secret{}, fmt.Errorf("%w: creds of type %T are not valid JSON", ErrInvalid, creds)
	}
	if kind := jsonKind(raw); kind != "object" {
		return Secret{}, fmt.Errorf("%w: creds of type %T encode to a JSON %s; want a JSON object", ErrInvalid, creds, kind)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return Secret{}, fmt.Errorf("%w: creds of type %T are not valid JSON", ErrInvalid, creds)
	}
	t := secretText(buf.String())
	return Secret{p: &t}, nil
}

// jsonKind names the kind of the valid JSON value raw.
func jsonKind(raw []byte) string {
	b := bytes.TrimLeft(raw, " \t\r\n")
	if len(b) == 0 {
		return "nothing"
	}
	switch b[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	default:
		return "number"
	}
}

// Info describes stored credentials without revealing them.
type Info struct {
	TenantID  string
	Service   string
	Account   string    // PrimaryAccount for credentials saved under ""
	CreatedAt time.Time // the first Save
	UpdatedAt time.Time // the last Save or Update; re-encryption does not change it
}

// Secret is a stored credential: a raw JSON object. It prints, formats and
// logs as REDACTED; only Decode reveals it.
//
// Every fmt verb prints "REDACTED" (%q prints it quoted, %#v prints
// "credentials.Secret(REDACTED)"), as do String, GoString, LogValue and
// MarshalJSON. The bytes sit behind a pointer to a string, so a Secret held
// in an unexported struct field, which fmt prints by reflection without
// calling its methods, shows as a pointer address and never as the secret:
// fmt dereferences a pointer only to an array, slice, struct or map.
//
// The zero Secret is valid and empty. Copies of a Secret share its bytes,
// which are never modified.
type Secret struct{ p *secretText }

// secretText holds the JSON of a Secret. It must stay a non-composite type
// reached through a pointer (see Secret). Its methods cover dumpers that
// follow pointers and call String on unexported values.
type secretText string

func (secretText) String() string                { return redacted }
func (secretText) Format(f fmt.State, verb rune) { Secret{}.Format(f, verb) }

// NewSecret wraps a JSON object, copying raw. It is meant for Store
// implementations.
func NewSecret(raw json.RawMessage) Secret {
	if len(raw) == 0 {
		return Secret{}
	}
	t := secretText(raw)
	return Secret{p: &t}
}

func (s Secret) text() string {
	if s.p == nil {
		return ""
	}
	return string(*s.p)
}

// Decode unmarshals the secret into v.
func (s Secret) Decode(v any) error {
	raw := s.text()
	if raw == "" {
		return errors.New("credentials: empty secret")
	}
	return json.Unmarshal([]byte(raw), v)
}

// IsZero reports whether the secret holds nothing.
func (s Secret) IsZero() bool { return s.text() == "" }

const (
	redacted   = "REDACTED"
	goRedacted = "credentials.Secret(REDACTED)"
)

// String implements fmt.Stringer and returns "REDACTED".
func (Secret) String() string { return redacted }

// GoString implements fmt.GoStringer and returns
// "credentials.Secret(REDACTED)".
func (Secret) GoString() string { return goRedacted }

// Format implements fmt.Formatter so that no verb, numeric ones included,
// can print the secret: %#v prints "credentials.Secret(REDACTED)", %q prints
// "REDACTED" quoted, every other verb prints REDACTED. Width and the '-'
// flag are honoured.
func (Secret) Format(f fmt.State, verb rune) {
	text := redacted
	switch {
	case verb == 'v' && f.Flag('#'):
		text = goRedacted
	case verb == 'q':
		text = strconv.Quote(redacted)
	}
	if w, ok := f.Width(); ok && w > len(text) {
		pad := strings.Repeat(" ", w-len(text))
		if f.Flag('-') {
			text += pad
		} else {
			text = pad + text
		}
	}
	io.WriteString(f, text)
}

// LogValue implements slog.LogValuer and returns "REDACTED".
func (Secret) LogValue() slog.Value { return slog.StringValue(redacted) }

// MarshalJSON encodes the secret as the string "REDACTED", so it cannot leak
// through a JSON-encoded log line or tool result.
func (Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }
