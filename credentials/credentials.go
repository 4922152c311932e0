package credentials

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
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
type Secret struct{ raw json.RawMessage }

// NewSecret wraps a JSON object. It is meant for Store implementations.
func NewSecret(raw json.RawMessage) Secret { return Secret{raw: append(json.RawMessage(nil), raw...)} }

// Decode unmarshals the secret into v.
func (s Secret) Decode(v any) error {
	if len(s.raw) == 0 {
		return errors.New("credentials: empty secret")
	}
	return json.Unmarshal(s.raw, v)
}

// IsZero reports whether the secret holds nothing.
func (s Secret) IsZero() bool { return len(s.raw) == 0 }

const redacted = "REDACTED"

// String implements fmt.Stringer and returns "REDACTED".
func (Secret) String() string { return redacted }

// GoString implements fmt.GoStringer and returns "REDACTED".
func (Secret) GoString() string { return redacted }

// LogValue implements slog.LogValuer and returns "REDACTED".
func (Secret) LogValue() slog.Value { return slog.StringValue(redacted) }

// MarshalJSON encodes the secret as the string "REDACTED", so it cannot leak
// through a JSON-encoded log line or tool result.
func (Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }
