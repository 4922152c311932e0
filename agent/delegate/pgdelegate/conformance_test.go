package pgdelegate_test

import (
	"context"
	"testing"
	"time"

	"github.com/valetkit/valet/agent/delegate"
	"github.com/valetkit/valet/agent/delegate/delegatetest"
	"github.com/valetkit/valet/agent/delegate/pgdelegate"
	"github.com/valetkit/valet/internal/pgtest"
)

// The tests need a PostgreSQL; without VALET_TEST_POSTGRES they skip:
//
//	VALET_TEST_POSTGRES='postgres://postgres@127.0.0.1:5432/test?sslmode=disable' \
//	  go test ./agent/delegate/pgdelegate/
//
// Each test works in a schema of its own (River's tables included),
// dropped at the end.

// testConfig is quick to fetch and retry, as the suite wants.
func testConfig(schema string) pgdelegate.Config {
	return pgdelegate.Config{Schema: schema, Parallel: delegatetest.Parallel, RetryDelay: 50 * time.Millisecond,
		FetchCooldown: 10 * time.Millisecond, FetchPollInterval: 50 * time.Millisecond}
}

// openSchema returns a factory of migrated engines on one new schema.
func openSchema(t *testing.T, cfg func(schema string) pgdelegate.Config) func() delegate.Engine {
	db := pgtest.DB(t)
	schema := pgtest.Schema(t, db)
	return func() delegate.Engine {
		e, err := pgdelegate.New(db, cfg(schema))
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		return e
	}
}

func TestConformance(t *testing.T) {
	pgtest.URL(t)
	delegatetest.Run(t, func(t *testing.T) delegate.Engine { return openSchema(t, testConfig)() })
}

func TestDurable(t *testing.T) {
	pgtest.URL(t)
	delegatetest.RunDurable(t, func(t *testing.T) func() delegate.Engine { return openSchema(t, testConfig) })
}
