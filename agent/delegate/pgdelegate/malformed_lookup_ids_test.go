package pgdelegate_test

import (
	"context"
	"errors"
	"testing"

	"github.com/valetkit/valet/agent/delegate"
)

// A lookup by a tenant or id no stored row can have (a NUL byte, bytes
// not UTF-8, which PostgreSQL's text refuses) finds nothing: ErrNotFound,
// as the in-memory engine says, not a raw PostgreSQL error that a caller
// would take for the database failing (and retry, or log as an outage).
func TestLookupByMalformedIDIsNotFound(t *testing.T) {
	eng := openSchema(t, testConfig)()
	ctx := context.Background()
	for name, c := range map[string]struct{ tenant, id string }{
		"NUL in tenant":      {"alice\x00", "r1"},
		"NUL in id":          {"alice", "r1\x00"},
		"not UTF-8 tenant":   {"alice\xff", "r1"},
		"not UTF-8 id":       {"alice", "r\xff1"},
		"NUL in both, ASCII": {"\x00", "\x00"},
	} {
		if _, err := eng.Result(ctx, c.tenant, c.id); !errors.Is(err, delegate.ErrNotFound) && !errors.Is(err, delegate.ErrInvalid) {
			t.Errorf("%s: Result: %v, want ErrNotFound (or ErrInvalid)", name, err)
		}
		if _, err := eng.Graph(ctx, c.tenant, c.id); !errors.Is(err, delegate.ErrNotFound) && !errors.Is(err, delegate.ErrInvalid) {
			t.Errorf("%s: Graph: %v, want ErrNotFound (or ErrInvalid)", name, err)
		}
	}
}
