package rivertrigger

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/valetkit/valet/trigger"
)

// Namespace implements trigger.Namespaced: Config.Namespace, by default
// the database and schema of the pool, "database/schema".
func (s *Store) Namespace() string { return s.cfg.Namespace }

// namespaceOf names the database and schema a Store works in: the
// connection config's database and schema, else the first schema of its
// search_path, else "public".
func namespaceOf(c pgconn.Config, schema string) string {
	if schema != "" {
		return c.Database + "/" + schema
	}
	schema = "public"
	if sp := c.RuntimeParams["search_path"]; sp != "" {
		first, _, _ := strings.Cut(sp, ",")
		if first = strings.Trim(strings.TrimSpace(first), `"`); first != "" {
			schema = first
		}
	}
	return c.Database + "/" + schema
}

// maxIdentLen is PostgreSQL's longest identifier (NAMEDATALEN - 1).
const maxIdentLen = 63

// checkSchema checks a Config.Schema: "" (the search_path) or a name
// PostgreSQL can hold.
func checkSchema(schema string) error {
	switch {
	case len(schema) > maxIdentLen:
		return fmt.Errorf("%w: rivertrigger: schema %q is longer than PostgreSQL's %d bytes", trigger.ErrInvalid, schema, maxIdentLen)
	case strings.IndexByte(schema, 0) >= 0:
		return fmt.Errorf("%w: rivertrigger: schema holds a NUL byte", trigger.ErrInvalid)
	case !utf8.ValidString(schema):
		return fmt.Errorf("%w: rivertrigger: schema is not valid UTF-8", trigger.ErrInvalid)
	}
	return nil
}
