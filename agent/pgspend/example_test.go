package pgspend_test

import (
	"context"
	"log"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/pgspend"
)

// Every replica makes the same guard on the same tables: $5 a day per
// tenant, $500 a month for all, days beginning in Paris; triggered runs
// pause at a limit, the users' own messages go on.
func Example() {
	ctx := context.Background()
	db, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		log.Fatal(err)
	}
	guard, err := pgspend.New(db, pgspend.Config{
		SpendLimitsConfig: agent.SpendLimitsConfig{
			Tenant:   agent.Limits{DailyUSD: 5},
			Global:   agent.Limits{MonthlyUSD: 500},
			OnLimit:  agent.PauseNonCritical,
			Location: paris,
			Observer: func(a agent.SpendAlert) { log.Printf("spend alert: %+v", a) },
		},
		Schema: "valet",
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := guard.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	_ = agent.Config{SpendGuard: guard} // with LLM, Prices, ...
}
