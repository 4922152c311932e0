package sqlitestore

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/valetkit/valet/credentials"
	"github.com/valetkit/valet/credentials/internal/rotation"
	"github.com/valetkit/valet/internal/sqlitex"
)

// inUpdate is the key of the ctx value an Update gives its fn: an
// *updating naming the store and the connection holding its transaction.
type inUpdate struct{}

type updating struct {
	s    *Store
	q    sqlitex.Querier
	over atomic.Bool // fn returned: the ctx is an ordinary one again
}

// updateOf returns the connection of the Update of this store whose fn got
// ctx, or nil.
func (s *Store) updateOf(ctx context.Context) sqlitex.Querier {
	if u, ok := ctx.Value(inUpdate{}).(*updating); ok && u.s == s && !u.over.Load() {
		return u.q
	}
	return nil
}

// reader is what Get and List read with: the Update's connection when
// called from its fn (on one connection it is the only one, and Update
// holds it until fn returns), otherwise the pool.
func (s *Store) reader(ctx context.Context) sqlitex.Querier {
	if q := s.updateOf(ctx); q != nil {
		return q
	}
	return s.db
}

// notInUpdate refuses a write called with the ctx an Update of this store
// gave its fn: Update holds the store's turn to write and the file's write
// lock until fn returns, so the write could never start and would wait
// until ctx ends.
func (s *Store) notInUpdate(ctx context.Context) error {
	if s.updateOf(ctx) != nil {
		return fmt.Errorf("%w: a write called from the fn of an Update of this store would wait for that Update to end: write after Update returns", credentials.ErrInvalid)
	}
	return nil
}

// Update changes the credential with fn in one write transaction: it
// takes the file's write lock (BEGIN IMMEDIATE), reads and decrypts the
// row, calls fn, encrypts what fn returns under the primary key and
// writes it with a revision check. See credentials.Updater. Every write
// to the file — not only to this credential — waits while fn runs, so fn
// should be one token refresh, not more; reads go on (WAL). fn may read
// the store with the ctx it is given (Get and List then read on Update's
// connection, so they work on one connection too) but must not write to
// it: a write called with fn's ctx fails at once with
// credentials.ErrInvalid. A row that does not decrypt fails before fn is
// called, and nothing is written.
func (s *Store) Update(ctx context.Context, tenantID, service, account string, fn func(ctx context.Context, old credentials.Secret) (any, error)) error {
	account, err := credentials.Normalize(tenantID, service, account)
	if err != nil {
		return fmt.Errorf("sqlitestore: update: %w", err)
	}
	n := &name{tenantID, service, account}
	if fn == nil {
		return fmt.Errorf("sqlitestore: update (%s): %w: Update needs a func", n, credentials.ErrInvalid)
	}
	if err := s.notInUpdate(ctx); err != nil {
		return s.fail(ctx, "update", n, err)
	}
	if err := ctx.Err(); err != nil {
		return s.fail(ctx, "update", n, err)
	}
	var fnErr error // fn's own error, returned as it is
	err = s.w.Tx(ctx, s.db, func(q sqlitex.Querier) error {
		if _, err := s.checkKey(ctx, q, s.ring.PrimaryID(), true); err != nil {
			return err
		}
		var old credentials.Sealed
		var rev int64
		if err := q.QueryRowContext(ctx, s.q.lockRow, n.tenant, n.service, n.account).Scan(&old.KeyID, &old.Nonce, &old.Ciphertext, &rev); err != nil {
			return err
		}
		sec, err := s.open(ctx, q, n, old)
		if err != nil {
			return err
		}
		u := &updating{s: s, q: q}
		v, err := fn(context.WithValue(ctx, inUpdate{}, u), sec)
		u.over.Store(true)
		if err != nil {
			fnErr = err
			return err
		}
		next, err := credentials.Encode(v)
		if err != nil {
			fnErr = fmt.Errorf("sqlitestore: update (%s): %w", n, err)
			return fnErr
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		sealed, err := s.ring.Seal(n.tenant, n.service, n.account, next)
		if err != nil {
			return err
		}
		res, err := q.ExecContext(ctx, s.q.update, n.tenant, n.service, n.account, sealed.KeyID, sealed.Nonce, sealed.Ciphertext, rev, now())
		if err != nil {
			return err
		}
		if c, err := res.RowsAffected(); err != nil || c != 1 {
			// The transaction holds the write lock, so this means the
			// row was changed outside the rules (a trigger, by hand).
			return errors.Join(credentials.ErrConflict, err)
		}
		return nil
	})
	if fnErr != nil {
		return fnErr
	}
	if err != nil {
		return s.fail(ctx, "update", n, err)
	}
	s.remember(s.ring.PrimaryID())
	return nil
}

// Rotate re-encrypts every row that is not under the key ring's primary
// key, in write transactions of Config.RotateBatch rows, and returns how
// many rows it re-encrypted. See the package documentation.
//
// It walks the table in primary-key order; each batch holds the file's
// write lock while it re-encrypts (readers go on), so writers wait at
// most one batch. A row it cannot decrypt (a key id the ring lacks, wrong
// key material, a row moved or altered) stays as it is; Rotate goes on
// with the rest and returns an error naming such rows and their key ids.
// The revision and updated_at of a row do not change.
func (s *Store) Rotate(ctx context.Context) (int, error) {
	if err := s.notInUpdate(ctx); err != nil {
		return 0, s.fail(ctx, "rotate", nil, err)
	}
	if err := ctx.Err(); err != nil {
		return 0, s.fail(ctx, "rotate", nil, err)
	}
	primary := s.ring.PrimaryID()
	total, failed, err := rotation.Walk(func(after name) (int, name, bool, []error, error) {
		return s.rotateBatch(ctx, primary, after)
	})
	if err != nil {
		return total, s.fail(ctx, "rotate", nil, err)
	}
	return total, failed.Err("sqlitestore: rotate", total)
}

// rotateBatch re-encrypts up to a batch of rows after the name after in
// one write transaction. It returns how many it re-encrypted, the last
// name it looked at, whether the batch was full (more may follow), and
// the rows it could not decrypt.
func (s *Store) rotateBatch(ctx context.Context, primary string, after name) (n int, last name, full bool, bad []error, err error) {
	last = after
	err = s.w.Tx(ctx, s.db, func(q sqlitex.Querier) error {
		n, bad = 0, nil
		if _, err := s.checkKey(ctx, q, primary, true); err != nil {
			return err
		}
		rows, err := q.QueryContext(ctx, s.q.rotateSelect, primary, after.tenant, after.service, after.account, s.batch)
		if err != nil {
			return err
		}
		type row struct {
			n      name
			sealed credentials.Sealed
		}
		var batch []row
		for rows.Next() {
			var r row
			if err := rows.Scan(&r.n.tenant, &r.n.service, &r.n.account, &r.sealed.KeyID, &r.sealed.Nonce, &r.sealed.Ciphertext); err != nil {
				rows.Close()
				return err
			}
			batch = append(batch, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(batch) == 0 {
			return nil
		}
		for _, r := range batch {
			sec, err := s.open(ctx, q, &r.n, r.sealed)
			if err != nil {
				bad = append(bad, err)
				continue
			}
			sealed, err := s.ring.Seal(r.n.tenant, r.n.service, r.n.account, sec)
			if err != nil {
				bad = append(bad, err)
				continue
			}
			res, err := q.ExecContext(ctx, s.q.rotateUpdate, r.n.tenant, r.n.service, r.n.account, sealed.KeyID, sealed.Nonce, sealed.Ciphertext, r.sealed.KeyID)
			if err != nil {
				return err
			}
			c, err := res.RowsAffected()
			if err != nil {
				return err
			}
			n += int(c)
		}
		last, full = batch[len(batch)-1].n, len(batch) == s.batch
		return nil
	})
	if err != nil {
		return 0, after, false, bad, err
	}
	s.remember(primary)
	return n, last, full, bad, nil
}
