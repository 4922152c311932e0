package rivertrigger

import (
	"context"
	"slices"
	"time"
)

// Promoting due runs (see The morning burst): River's scheduler, on the
// leader, moves the jobs due within its next 5 seconds from scheduled to
// available in one statement of up to 10,000 rows, which locks each row
// and looks each one's unique key up again; 10,000 runs due at 08:00 make
// it one long statement, which on a busy database can reach River's
// 30-second timeout and leave the whole burst scheduled until the next
// pass. Instead, every dispatching Store makes its queue's runs due
// within promoteAhead available itself, promoteBatch at a time, each
// batch a short statement of its own that passes over rows another
// replica holds, ahead of River's scheduler, which then finds them done.
// A run made available early keeps its scheduled time, and River fetches
// no job before it, so it still starts at its time: when that time comes,
// the Store that moved it wakes the queue's producers (River's insert
// notification) rather than leave them to their next poll.

const (
	// promoteAhead is how far ahead of their time runs are made
	// available: more than River's scheduler looks ahead (5 s), so that
	// the runs are moved before it comes to them.
	promoteAhead = 15 * time.Second
	// promoteEvery is how often a dispatching Store looks for runs to
	// make available.
	promoteEvery = time.Second
	// promoteBatch is how many runs one statement makes available at
	// most.
	promoteBatch = 1000
	// maxWakes bounds the due times a Store keeps to wake the producers
	// at; past it, the latest are left to the producers' poll.
	maxWakes = 4096
)

// promote makes the queue's due runs available every promoteEvery, and
// wakes the producers at each of their times, until ctx ends.
func (s *Store) promote(ctx context.Context) {
	tick := time.NewTicker(promoteEvery)
	defer tick.Stop()
	wake := time.NewTimer(time.Hour)
	defer wake.Stop()
	var wakes []time.Time // due times to wake the producers at, earliest first
	for promoteNow := true; ; {
		for promoteNow {
			n, due, err := s.promoteOnce(ctx)
			if err != nil {
				if ctx.Err() == nil {
					s.log.Warn("rivertrigger: making due runs available", "err", err)
				}
				break
			}
			wakes = addWakes(wakes, due)
			promoteNow = n == promoteBatch
		}
		now := time.Now()
		if len(wakes) > 0 {
			wake.Reset(max(wakes[0].Sub(now), 0))
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			promoteNow = true
		case <-wake.C:
			// The producers fetch what is due; times within a few
			// milliseconds of now go with this one.
			now = time.Now()
			i := 0
			for i < len(wakes) && !wakes[i].After(now.Add(5*time.Millisecond)) {
				i++
			}
			wakes = wakes[i:]
			if err := s.wakeProducers(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("rivertrigger: waking the producers", "err", err)
			}
			wake.Reset(time.Hour)
		}
	}
}

// addWakes merges due, a batch's distinct future due times, into wakes,
// sorted, keeping at most maxWakes.
func addWakes(wakes, due []time.Time) []time.Time {
	for _, t := range due {
		i, found := slices.BinarySearchFunc(wakes, t, time.Time.Compare)
		if !found {
			wakes = slices.Insert(wakes, i, t)
		}
	}
	if len(wakes) > maxWakes {
		wakes = wakes[:maxWakes]
	}
	return wakes
}

// promoteOnce makes available up to promoteBatch of the queue's
// scheduled runs due within promoteAhead, in River's order, passing over
// the runs the tenant window holds (they wait for their tenant) and rows
// locked elsewhere, and wakes the producers when some are due already.
// It returns how many it moved and the distinct times of those not yet
// due.
func (s *Store) promoteOnce(ctx context.Context) (n int, due []time.Time, err error) {
	err = s.pool.QueryRow(ctx, s.sql(`WITH due AS MATERIALIZED (SELECT id FROM {river_job}
			WHERE state = 'scheduled' AND queue = $1 AND kind = 'valet_trigger_run'
				AND scheduled_at <= now() + make_interval(secs => $2) AND NOT metadata ? '`+heldKey+`'
			ORDER BY priority, scheduled_at, id
			LIMIT $3
			FOR UPDATE SKIP LOCKED),
		moved AS (UPDATE {river_job} j SET state = 'available'
			FROM due WHERE j.id = due.id AND j.state = 'scheduled'
			RETURNING j.scheduled_at)
		SELECT (SELECT count(*) FROM moved),
			coalesce((SELECT array_agg(DISTINCT scheduled_at) FROM moved WHERE scheduled_at > now()), '{}'),
			(SELECT count(*) FROM (SELECT pg_notify(coalesce(nullif($4, ''), current_schema()) || '.`+insertTopic+`',
					json_build_object('queue', $1::text)::text)
				WHERE EXISTS (SELECT 1 FROM moved WHERE scheduled_at <= now())) woke)`),
		s.cfg.Queue, promoteAhead.Seconds(), promoteBatch, s.cfg.Schema).Scan(&n, &due, new(int))
	return n, due, err
}

// wakeProducers sends River's insert notification for the queue, which
// makes its producers fetch at once.
func (s *Store) wakeProducers(ctx context.Context) error {
	_, err := s.pool.Exec(ctx, s.sql(`SELECT pg_notify(coalesce(nullif($2, ''), current_schema()) || '.`+insertTopic+`',
		json_build_object('queue', $1::text)::text)`), s.cfg.Queue, s.cfg.Schema)
	return err
}
