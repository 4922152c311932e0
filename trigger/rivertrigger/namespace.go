package rivertrigger

import (
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// Namespace implements trigger.Namespaced: Config.Namespace, by default
// the database and schema of the pool, "database/schema".
func (s *Store) Namespace() string { return s.cfg.Namespace }

// namespaceOf names the database and schema a connection config works
// in: its database and the first schema of its search_path, "public"
// when it sets none.
func namespaceOf(c pgconn.Config) string {
	schema := "public"
	if sp := c.RuntimeParams["search_path"]; sp != "" {
		first, _, _ := strings.Cut(sp, ",")
		if first = strings.Trim(strings.TrimSpace(first), `"`); first != "" {
			schema = first
		}
	}
	return c.Database + "/" + schema
}
