package pgspend_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/pgspend"
	"github.com/valetkit/valet/agent/spendtest"
	"github.com/valetkit/valet/internal/pgtest"
)

// open returns a guard's opener on a fresh schema: each guard has a pool
// of its own, as a replica does.
func opener(t *testing.T, cfg pgspend.Config) func() *pgspend.Guard {
	t.Helper()
	db := pgtest.DB(t)
	cfg.Schema = pgtest.Schema(t, db)
	first := true
	return func() *pgspend.Guard {
		pool := db
		if !first {
			pool = replicaPool(t)
		}
		first = false
		g, err := pgspend.New(pool, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		return g
	}
}

func replicaPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	c, err := pgxpool.ParseConfig(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	c.MaxConns = 16
	p, err := pgxpool.NewWithConfig(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// The PostgreSQL guard passes the SpendGuard conformance suite, its
// replicas being guards with pools of their own on one schema.
func TestConformance(t *testing.T) {
	spendtest.Run(t, func(t *testing.T, cfg agent.SpendLimitsConfig) func() spendtest.Guard {
		open := opener(t, pgspend.Config{SpendLimitsConfig: cfg})
		return func() spendtest.Guard { return open() }
	})
}
