package credentials

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"
)

// ErrNotFound is returned when a tenant has no credentials for a service and
// account.
var ErrNotFound = errors.New("credentials: not found")

// Store keeps credentials per tenant, service and account. Implementations
// must never let one tenant read another's secrets.
type Store interface {
	// Save stores creds, which must encode to a JSON object, replacing what
	// was there.
	Save(ctx context.Context, tenantID, service, account string, creds any) error
	// Get returns the secret or an error wrapping ErrNotFound.
	Get(ctx context.Context, tenantID, service, account string) (Secret, error)
	// List returns metadata only; service "" lists every service.
	List(ctx context.Context, tenantID, service string) ([]Info, error)
	// Delete removes the credentials; deleting what is absent is not an error.
	Delete(ctx context.Context, tenantID, service, account string) error
}

// Info describes stored credentials without revealing them.
type Info struct {
	TenantID  string
	Service   string
	Account   string
	CreatedAt time.Time
	UpdatedAt time.Time
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
