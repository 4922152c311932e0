package rivertrigger_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/valetkit/valet/trigger/rivertrigger"
)

// namespaceOf is the default namespace of a Store on a pool of url. No
// PostgreSQL needed: neither pgxpool.NewWithConfig nor New connects.
func namespaceOf(t *testing.T, url string) string {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s, err := rivertrigger.New(pool, rivertrigger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return s.Namespace()
}

// Two environments whose connection strings put their tasks in different
// schemas, the way libpq lets a connection string say it, get different
// default namespaces, so their buses (redisbus.Config{Namespace:
// store.Namespace()}) never share a stream: the schema set through the
// options parameter ("-c search_path=…", as libpq documents it) is the
// pool's schema as much as a search_path parameter.
func TestNamespaceFollowsTheSchemaTheConnectionStringSets(t *testing.T) {
	for _, c := range []struct{ name, a, b string }{
		{"options", "postgres://u@db:5432/valet?options=-c%20search_path%3Dprod",
			"postgres://u@db:5432/valet?options=-c%20search_path%3Dstaging"},
	} {
		na, nb := namespaceOf(t, c.a), namespaceOf(t, c.b)
		if na == nb {
			t.Errorf("%s: two schemas share the namespace %q (%s and %s)", c.name, na, c.a, c.b)
		}
	}
	if got := namespaceOf(t, "postgres://u@db:5432/valet?options=-c%20search_path%3Dstaging"); got != "valet/staging" {
		t.Errorf("options search_path=staging: namespace %q, want valet/staging", got)
	}
}
