package sqlitedb

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/valetkit/valet/credentials"
	"github.com/valetkit/valet/internal/sqlitex"
	"github.com/valetkit/valet/memory"
)

// Target is where CopyTo writes: the stores of the deployment an
// assistant moves to, such as credentials/pgstore and memory/pgmemory on
// PostgreSQL. A nil field is not copied.
type Target struct {
	Credentials credentials.Store
	Memory      memory.Provider
}

// Copied counts what CopyTo wrote.
type Copied struct {
	Credentials   int // credentials saved
	Conversations int // conversations whose history was appended
	Messages      int // messages appended, in all
	Items         int // long-term items remembered
}

// itemBatch is how many items CopyTo remembers per call.
const itemBatch = 500

// CopyTo copies what the file holds into dst, through dst's public
// methods, so any backend can receive it: every credential (decrypted
// with this file's key ring, encrypted again by dst), every
// conversation's history as History(0) returns it (from its newest
// summary on, which is what a conversation uses), appended as one turn,
// and every long-term item with its kind, provenance, origin and time,
// a Supersedes that names an item copied before it pointing to that
// item's new ID. Vectors are not copied: a target with an Embedder embeds
// the texts again. The pool's entries are not copied: let the pending
// approvals be answered or expire before the move. Tasks and their runs
// are not copied either.
//
// Run it with the assistant stopped, into empty stores: CopyTo reads the
// file while it writes, and appends to the histories and items already
// in dst, so running it twice copies twice. It stops at the first error,
// returning what it copied until then.
func (s *Stores) CopyTo(ctx context.Context, dst Target) (Copied, error) {
	var n Copied
	if dst.Credentials != nil {
		if err := s.copyCredentials(ctx, dst.Credentials, &n); err != nil {
			return n, fmt.Errorf("sqlitedb: copying credentials: %w", err)
		}
	}
	if dst.Memory != nil {
		if err := s.copyHistories(ctx, dst.Memory, &n); err != nil {
			return n, fmt.Errorf("sqlitedb: copying histories: %w", err)
		}
		if err := s.copyItems(ctx, dst.Memory, &n); err != nil {
			return n, fmt.Errorf("sqlitedb: copying items: %w", err)
		}
	}
	return n, nil
}

// strings reads the rows of a query of text columns, all of them before
// the caller writes (one connection cannot read and write at once).
func (s *Stores) strings(ctx context.Context, query string, cols int) ([][]string, error) {
	rows, err := s.db.QueryContext(ctx, query)
	if err != nil {
		return nil, sqlitex.Explain(err)
	}
	defer rows.Close()
	var out [][]string
	for rows.Next() {
		row := make([]string, cols)
		dst := make([]any, cols)
		for i := range row {
			dst[i] = &row[i]
		}
		if err := rows.Scan(dst...); err != nil {
			return nil, err
		}
		out = append(out, row)
	}
	return out, sqlitex.Explain(rows.Err())
}

func (s *Stores) copyCredentials(ctx context.Context, dst credentials.Store, n *Copied) error {
	tenants, err := s.strings(ctx, `SELECT DISTINCT tenant_id FROM `+sqlitex.Quote(s.credTable)+` ORDER BY tenant_id`, 1)
	if err != nil {
		return err
	}
	for _, t := range tenants {
		infos, err := s.Credentials.List(ctx, t[0], "")
		if err != nil {
			return err
		}
		for _, info := range infos {
			sec, err := s.Credentials.Get(ctx, t[0], info.Service, info.Account)
			if err != nil {
				return err
			}
			var raw json.RawMessage
			if err := sec.Decode(&raw); err != nil {
				return fmt.Errorf("tenant %q, service %q: %w", t[0], info.Service, err)
			}
			err = dst.Save(ctx, t[0], info.Service, info.Account, raw)
			clear(raw)
			if err != nil {
				return err
			}
			n.Credentials++
		}
	}
	return nil
}

func (s *Stores) copyHistories(ctx context.Context, dst memory.Provider, n *Copied) error {
	convs, err := s.strings(ctx, `SELECT tenant_id, conversation_id FROM `+sqlitex.Quote(s.memTable+"history")+
		` GROUP BY tenant_id, conversation_id ORDER BY min(seq)`, 2)
	if err != nil {
		return err
	}
	for _, c := range convs {
		h, err := s.Memory.History(ctx, c[0], c[1], 0)
		if err != nil {
			return err
		}
		if len(h) == 0 {
			continue
		}
		if err := dst.Append(ctx, c[0], c[1], h...); err != nil {
			return fmt.Errorf("tenant %q, conversation %q: %w", c[0], c[1], err)
		}
		n.Conversations++
		n.Messages += len(h)
	}
	return nil
}

// item is one row of the items table.
type item struct {
	id int64
	it memory.Item
}

// copyItems copies the items one tenant at a time (at most the tenant's
// cap is held at once), in id order.
func (s *Stores) copyItems(ctx context.Context, dst memory.Provider, n *Copied) error {
	table := sqlitex.Quote(s.memTable + "items")
	tenants, err := s.strings(ctx, `SELECT DISTINCT tenant_id FROM `+table+` ORDER BY tenant_id`, 1)
	if err != nil {
		return err
	}
	for _, t := range tenants {
		items, err := s.tenantItems(ctx, table, t[0])
		if err != nil {
			return err
		}
		if err := rememberAll(ctx, dst, t[0], items, n); err != nil {
			return fmt.Errorf("tenant %q: %w", t[0], err)
		}
	}
	return nil
}

func (s *Stores) tenantItems(ctx context.Context, table, tenant string) ([]item, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, text, kind, conversation_id, task_id, skill_id, created_at, supersedes, origin FROM `+
		table+` WHERE tenant_id = ? ORDER BY id`, tenant)
	if err != nil {
		return nil, sqlitex.Explain(err)
	}
	defer rows.Close()
	var out []item
	for rows.Next() {
		var r item
		var created int64
		var origin string
		if err := rows.Scan(&r.id, &r.it.Text, &r.it.Kind, &r.it.Source.ConversationID, &r.it.Source.TaskID,
			&r.it.Source.SkillID, &created, &r.it.Supersedes, &origin); err != nil {
			return nil, err
		}
		r.it.CreatedAt, r.it.Origin = time.UnixMicro(created), memory.Origin(origin)
		out = append(out, r)
	}
	return out, sqlitex.Explain(rows.Err())
}

// rememberAll remembers a tenant's items in batches of at most itemBatch,
// each Supersedes rewritten to the new ID of the item it names (""
// when that item was not copied). A batch ends before an item that
// supersedes one of the same batch, whose new ID is not known yet.
func rememberAll(ctx context.Context, dst memory.Provider, tenant string, items []item, n *Copied) error {
	newID := map[string]string{} // this file's id → dst's
	for start := 0; start < len(items); {
		pending := map[string]bool{}
		end := start
		for end < len(items) && end-start < itemBatch && !pending[items[end].it.Supersedes] {
			pending[strconv.FormatInt(items[end].id, 10)] = true
			end++
		}
		batch := make([]memory.Item, 0, end-start)
		for _, r := range items[start:end] {
			it := r.it
			if it.Supersedes != "" {
				it.Supersedes = newID[it.Supersedes]
			}
			batch = append(batch, it)
		}
		ids, err := dst.Remember(ctx, tenant, batch...)
		if err != nil {
			return err
		}
		if len(ids) != len(batch) {
			return fmt.Errorf("the target returned %d IDs for %d items", len(ids), len(batch))
		}
		for i, r := range items[start:end] {
			newID[strconv.FormatInt(r.id, 10)] = ids[i]
		}
		n.Items += len(batch)
		start = end
	}
	return nil
}
