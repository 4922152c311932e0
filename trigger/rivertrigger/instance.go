package rivertrigger

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/valetkit/valet/trigger"
)

var _ trigger.InstanceIdentifier = (*Store)(nil)

// migrateInstance creates valet_trigger_instance, a table of one row
// holding the instance id of the data in this schema, and its row, unless
// they exist: the id is made once, and kept.
func (s *Store) migrateInstance(ctx context.Context, tx pgx.Tx) error {
	if _, err := tx.Exec(ctx, s.sql(`CREATE TABLE IF NOT EXISTS {instance} (
		one        boolean     PRIMARY KEY DEFAULT true CHECK (one),
		id         text        NOT NULL,
		created_at timestamptz NOT NULL DEFAULT now()
	)`)); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, s.sql(`INSERT INTO {instance} (id) VALUES ($1) ON CONFLICT DO NOTHING`), rand.Text())
	return err
}

// InstanceID implements trigger.InstanceIdentifier: the id Migrate made,
// once, for the tasks in the pool's database and schema, kept in the
// table valet_trigger_instance beside them. Every Store on that schema
// reports it, whatever host name or address its pool reaches the server
// by, and after restarts; a schema of another database, on another
// server too, has its own. Copying the schema's tables (a dump
// restored elsewhere) copies the id. trigger.Engine.Run claims the
// namespace of a bus (redisbus) for it. Before Migrate it fails, saying
// so.
func (s *Store) InstanceID(ctx context.Context) (string, error) {
	var id string
	err := s.pool.QueryRow(ctx, s.sql(`SELECT id FROM {instance}`)).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		err = errors.New("no instance id (run Migrate first)")
	}
	if err != nil {
		return "", s.fail(ctx, "instance id", err)
	}
	if id == "" {
		return "", fmt.Errorf("rivertrigger: instance id: the row of valet_trigger_instance holds an empty id")
	}
	return id, nil
}
