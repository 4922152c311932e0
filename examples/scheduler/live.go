package main

// The live demo: tasks on PostgreSQL through River (trigger/rivertrigger),
// events on a Redis stream (trigger/redisbus), the real clock. Every
// process started with the same -postgres and -redis shares the tasks:
// River runs each due run once, on one of them, and the stream's consumer
// group gives each event to one of them.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/redisbus"
	"github.com/valetkit/valet/trigger/rivertrigger"
)

// The demo's own River queue, apart from valet's default and the tests'.
// Its Redis stream is named from the store's namespace.
const liveQueue = "valet_scheduler_demo"

// setupLock is the PostgreSQL advisory lock that processes starting
// together take in turn to set up the demo's tasks.
const setupLock = 0x76616c6574 // "valet"

func runLive(ctx context.Context, w io.Writer, cfg config) error {
	tl := cmp.Or(cfg.timeline, liveTimeline())
	if cfg.Duration > 0 {
		tl.length = cfg.Duration
	}
	log := logger(cfg)
	out := &printer{w: w}
	label := cmp.Or(cfg.Name, fmt.Sprintf("pid %d", os.Getpid()))

	// The clients are the program's: valet's backends take them
	// configured, and the program closes them.
	db, err := pgxpool.New(ctx, cfg.Postgres)
	if err != nil {
		return fmt.Errorf("-postgres: %w", err)
	}
	defer db.Close()
	if err := db.Ping(ctx); err != nil {
		return fmt.Errorf("-postgres: %w", err)
	}
	store, err := rivertrigger.New(db, rivertrigger.Config{Queue: cmp.Or(cfg.Queue, liveQueue), Logger: log})
	if err != nil {
		return err
	}
	// From every process: Migrate takes an advisory lock.
	if err := store.Migrate(ctx); err != nil {
		return fmt.Errorf("migrating: %w", err)
	}
	ro, err := redis.ParseURL(cfg.Redis)
	if err != nil {
		return fmt.Errorf("-redis: %w", err)
	}
	rdb := redis.NewClient(ro)
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("-redis %s: %w", ro.Addr, err)
	}
	// The bus belongs to the store's deployment (its database and
	// schema): its stream is named from it, and trigger.New would refuse
	// a bus of another one.
	bus, err := redisbus.New(rdb, redisbus.Config{
		Namespace: store.Namespace(),
		Stream:    cfg.Stream,  // "": valet:<database>/<schema>:events
		Block:     time.Second, // Subscribe returns within a second of the end
		MaxLen:    10_000,
		Logger:    log,
	})
	if err != nil {
		return err
	}

	c := newChat(out, time.Now, tl)
	c.label, c.notified = label, cfg.notified
	d, err := newDemo(tl, out, store, bus, nil, c, log)
	if err != nil {
		return err
	}
	defer d.close()

	out.printf("valet scheduler demo — live as %q: tasks on PostgreSQL (River queue %q), events on Redis (stream %q)\n",
		label, cmp.Or(cfg.Queue, liveQueue), bus.Stream())
	start, joined, err := d.setupShared(ctx, db)
	if err != nil {
		return err
	}
	d.world.setBase(start)
	end := start.Add(tl.length)
	if joined {
		out.printf("%s joins the demo started at %s; it ends at %s\n", label, d.stamp(start), d.stamp(end))
	} else {
		out.printf("%s starts a new demo at %s; it ends at %s\n", label, d.stamp(start), d.stamp(end))
	}
	out.printf("tasks:\n")
	if err := d.listTasks(ctx); err != nil {
		return err
	}

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- d.engine.Run(runCtx) }()
	pubDone := make(chan error, 1)
	if cfg.Publish {
		go func() { pubDone <- d.publishMails(runCtx, start) }()
	} else {
		pubDone <- nil
	}

	wait := time.NewTimer(time.Until(end))
	defer wait.Stop()
	select {
	case <-wait.C:
	case <-ctx.Done():
	case err := <-done: // the engine could not start
		stop()
		<-pubDone
		if err == nil {
			err = ctx.Err()
		}
		return err
	}
	stop()
	perr := <-pubDone
	if err := <-done; err != nil {
		return err
	}
	if perr != nil && !errors.Is(perr, context.Canceled) {
		return perr
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	out.printf("%s: the demo is over\n", label)
	// The engine has stopped: read the history with a fresh context.
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return d.summary(sctx)
}

// setupShared creates the demo's tasks once for every process started
// together, and returns when the demo started and whether this process
// joined one another had started. Processes take an advisory lock in
// turn: the first finds no tasks, or those of an older demo, which it
// deletes, and creates them; the others find them fresh and keep them
// (CreateTask fails with ErrConflict, which is fine).
func (d *demo) setupShared(ctx context.Context, db *pgxpool.Pool) (time.Time, bool, error) {
	conn, err := db.Acquire(ctx)
	if err != nil {
		return time.Time{}, false, err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", int64(setupLock)); err != nil {
		return time.Time{}, false, err
	}
	defer conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", int64(setupLock))

	joined := false
	start := time.Now()
	if t, err := d.engine.Get(ctx, tenantID, taskDigest); err == nil && time.Since(t.CreatedAt) < d.tl.length {
		start, joined = t.CreatedAt, true // a demo under way
	} else if err != nil && !errors.Is(err, trigger.ErrNotFound) {
		return time.Time{}, false, err
	} else {
		// Clear an older demo's tasks and history.
		old, err := d.engine.List(ctx, tenantID)
		if err != nil {
			return time.Time{}, false, err
		}
		for _, t := range old {
			if err := d.engine.Delete(ctx, tenantID, t.ID); err != nil && !errors.Is(err, trigger.ErrNotFound) {
				return time.Time{}, false, err
			}
		}
	}
	if err := d.createTasks(ctx, start); err != nil {
		return time.Time{}, false, err
	}
	t, err := d.engine.Get(ctx, tenantID, taskDigest)
	if err != nil {
		return time.Time{}, false, err
	}
	return t.CreatedAt, joined, nil
}

// publishMails publishes the timeline's emails, each at its time from
// start, as a mail provider's webhook would.
func (d *demo) publishMails(ctx context.Context, start time.Time) error {
	round := fmt.Sprintf("%d-", start.UnixMilli()) // this demo's events, not the last one's
	for _, dv := range d.tl.deliveries() {
		tm := time.NewTimer(time.Until(start.Add(dv.at)))
		select {
		case <-ctx.Done():
			tm.Stop()
			return ctx.Err()
		case <-tm.C:
		}
		d.out.printf("%s | ✉ %s  %s\n", d.chat.label, d.stamp(time.Now()), dv.describe())
		if err := d.engine.Publish(ctx, dv.event(round, start)); err != nil {
			return fmt.Errorf("publishing %s: %w", dv.mail.ID, err)
		}
	}
	return nil
}
