package main

// The storage the demo runs on: in memory by default; with -postgres the
// delegation engine (results and task graphs) on PostgreSQL (pgdelegate,
// its River jobs beside), with -redis the pool of waiting agents and the
// conversation lock on Redis (redispool), so the background work and the
// approval survive a restart, and the loops are steered through Redis
// (redispool.NewControl), as replicas would share them.

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/delegate"
	"github.com/valetkit/valet/agent/delegate/pgdelegate"
	"github.com/valetkit/valet/pool"
	"github.com/valetkit/valet/pool/redispool"
)

// redisPrefix starts every Redis key of the demo.
const redisPrefix = "valet:specialists-demo:"

// storage is what the orchestrator is wired to; close releases it.
type storage struct {
	engine delegate.Engine // nil: the orchestrator's own, in memory; else the host runs it
	pool   pool.Store
	locker pool.Locker
	// control steers running loops (Inject, Cancel, Pause, messages routed
	// while a loop runs): in memory, or on Redis with -redis.
	control agent.Control
	close   func()
}

// openStorage connects what the flags name.
func openStorage(ctx context.Context, w io.Writer, opt options, log *slog.Logger) (*storage, error) {
	st := &storage{close: func() {}}
	closers := []func(){}
	st.close = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	if opt.postgres == "" {
		fmt.Fprintln(w, "results and task graphs: in memory (add -postgres URL to keep them across restarts)")
	} else {
		db, err := pgxpool.New(ctx, opt.postgres)
		if err != nil {
			return nil, fmt.Errorf("-postgres: %w", err)
		}
		closers = append(closers, db.Close)
		eng, err := pgdelegate.New(db, pgdelegate.Config{Schema: opt.schema, Logger: log})
		if err == nil {
			err = eng.Migrate(ctx)
		}
		if err != nil {
			st.close()
			return nil, fmt.Errorf("-postgres: %w", err)
		}
		st.engine = eng
		fmt.Fprintln(w, "results and task graphs: PostgreSQL (pgdelegate; tasks run as River jobs)")
	}
	if opt.redis == "" {
		fmt.Fprintln(w, "pool of waiting agents and steering: in memory (add -redis URL to keep approvals across restarts)")
		ctl, err := agent.NewMemoryControl(agent.MemoryControlConfig{})
		if err != nil {
			st.close()
			return nil, err
		}
		st.control = ctl
		return st, nil
	}
	ro, err := redis.ParseURL(opt.redis)
	if err != nil {
		st.close()
		return nil, fmt.Errorf("-redis: %w", err)
	}
	rdb := redis.NewClient(ro)
	closers = append(closers, func() { _ = rdb.Close() })
	if err := rdb.Ping(ctx).Err(); err != nil {
		st.close()
		return nil, fmt.Errorf("-redis %s: %w", ro.Addr, err)
	}
	prefix := opt.redisPrefix
	if prefix == "" {
		prefix = redisPrefix
	}
	if st.pool, err = redispool.New(rdb, redispool.Config{Prefix: prefix, Logger: log}); err == nil {
		st.locker, err = redispool.NewLocker(rdb, redispool.LockerConfig{Prefix: prefix, Logger: log})
	}
	if err == nil {
		var ctl *redispool.Control
		if ctl, err = redispool.NewControl(rdb, redispool.ControlConfig{Prefix: prefix, Logger: log}); err == nil {
			st.control = ctl
			closers = append(closers, func() { _ = ctl.Close() })
		}
	}
	if err != nil {
		st.close()
		return nil, fmt.Errorf("-redis: %w", err)
	}
	fmt.Fprintf(w, "pool of waiting agents and steering: Redis at %s, keys %q…\n", ro.Addr, prefix)
	return st, nil
}
