package sqlitememory

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/valetkit/valet/internal/sqlitex"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/memory"
	"github.com/valetkit/valet/memory/internal/hybrid"
	"github.com/valetkit/valet/memory/internal/msgjson"
)

// Defaults of a zero [Config].
const (
	// DefaultTablePrefix starts the names of the provider's tables:
	// memory_history, memory_items and memory_items_fts.
	DefaultTablePrefix = "memory_"
	// DefaultMaxMessages is how many messages of one conversation's
	// history are kept, as in the in-memory provider.
	DefaultMaxMessages = memory.DefaultMaxMessages
	// DefaultMaxItemsPerTenant is how many items one tenant keeps, as in
	// the in-memory provider.
	DefaultMaxItemsPerTenant = memory.DefaultMaxItemsPerTenant
	// DefaultRecallCandidates is how many of a tenant's newest matches
	// Recall ranks: all the matches of a tenant within
	// DefaultMaxItemsPerTenant.
	DefaultRecallCandidates = 1000
)

// ErrSchemaTooNew is returned by Migrate for a file written by a newer
// version of valet; the error names both versions. It is the same value
// in every SQLite backend of valet.
var ErrSchemaTooNew = sqlitex.ErrSchemaTooNew

// Config configures [New]. The zero value means the documented defaults;
// a zero number means its default and a negative one is refused by New.
type Config struct {
	// Embedder, when set, adds vector similarity to Recall, as in
	// pgmemory: Remember embeds its items' texts with one Embed call,
	// before its transaction, and stores each vector; when that fails,
	// the items are stored without vectors and Remember still succeeds.
	// Recall embeds the query with one call; when that fails, it answers
	// lexically. Default: nil, lexical recall only.
	Embedder llm.Embedder
	// MaxItemsPerTenant is how many items one tenant keeps; Remember
	// drops the tenant's oldest (by the order they were remembered) past
	// it, in its transaction, and a call with more items than that is
	// memory.ErrInvalid. Default: DefaultMaxItemsPerTenant (1,000).
	MaxItemsPerTenant int
	// MaxMessages is how many messages of one conversation's history are
	// kept; Append drops the oldest past it, in its transaction, cutting
	// so that the history never starts with a tool result. Default:
	// DefaultMaxMessages (200).
	MaxMessages int
	// RecallCandidates is how many of the tenant's matches Recall ranks,
	// at most: the newest (by the order they were remembered, as
	// MaxItemsPerTenant drops the oldest), so that a query sharing a
	// common word with half of a large tenant's items ranks no more than
	// this many. FTS5 hands them over newest first and Recall stops at
	// the last (see "Recall" in the package documentation). A Recall
	// returns at most this many items, whatever the budget. Default:
	// DefaultRecallCandidates (1,000: every match of a tenant within the
	// default MaxItemsPerTenant).
	RecallCandidates int
	// TablePrefix starts the table names: <prefix>history,
	// <prefix>items and <prefix>items_fts. Providers on the same file and
	// prefix share their data. Default: DefaultTablePrefix ("memory_").
	TablePrefix string
}

// withDefaults returns c with its defaults filled in, or an error
// wrapping memory.ErrInvalid.
func (c Config) withDefaults() (Config, error) {
	if c.MaxItemsPerTenant < 0 {
		return c, fmt.Errorf("%w: sqlitememory: Config.MaxItemsPerTenant %d is negative", memory.ErrInvalid, c.MaxItemsPerTenant)
	}
	if c.MaxMessages < 0 {
		return c, fmt.Errorf("%w: sqlitememory: Config.MaxMessages %d is negative", memory.ErrInvalid, c.MaxMessages)
	}
	if c.RecallCandidates < 0 {
		return c, fmt.Errorf("%w: sqlitememory: Config.RecallCandidates %d is negative", memory.ErrInvalid, c.RecallCandidates)
	}
	c.MaxItemsPerTenant = cmp.Or(c.MaxItemsPerTenant, DefaultMaxItemsPerTenant)
	c.MaxMessages = cmp.Or(c.MaxMessages, DefaultMaxMessages)
	c.RecallCandidates = cmp.Or(c.RecallCandidates, DefaultRecallCandidates)
	c.TablePrefix = cmp.Or(c.TablePrefix, DefaultTablePrefix)
	if err := sqlitex.CheckName(c.TablePrefix); err != nil {
		return c, fmt.Errorf("%w: sqlitememory: table prefix %v", memory.ErrInvalid, err)
	}
	return c, nil
}

// Provider is a memory.Provider on an SQLite file. It implements
// memory.Provider and memory.TenantDeleter and is safe for concurrent use,
// also by several processes on one file.
type Provider struct {
	db                *sql.DB
	component         string
	maxMsgs, maxItems int
	embedder          llm.Embedder
	candidates        int             // Config.RecallCandidates
	w                 *sqlitex.Writer // queues this provider's writes in the process
	q                 queries
}

var (
	_ memory.Provider      = (*Provider)(nil)
	_ memory.TenantDeleter = (*Provider)(nil)
)

// New returns a Provider on db, an SQLite database the caller opened
// (with modernc.org/sqlite, see the package documentation) and closes.
// The zero Config means the defaults. A nil db, a negative setting or a
// TablePrefix SQLite cannot name is an error wrapping memory.ErrInvalid.
// It sends nothing to the database; call Migrate once per start before
// the first use.
func New(db *sql.DB, cfg Config) (*Provider, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: sqlitememory: New needs a *sql.DB, got nil", memory.ErrInvalid)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Provider{
		db:         db,
		component:  "memory/" + cfg.TablePrefix,
		maxMsgs:    cfg.MaxMessages,
		maxItems:   cfg.MaxItemsPerTenant,
		embedder:   cfg.Embedder,
		candidates: cfg.RecallCandidates,
		w:          sqlitex.NewWriter(),
		q:          newQueries(cfg.TablePrefix),
	}, nil
}

// Migrate creates the tables, their indexes and the full-text index if
// they do not exist, and records their version; see the package
// documentation. It is idempotent and safe to run at every start, from
// several processes at once. A file whose tables are newer than this code
// is refused with ErrSchemaTooNew, naming both versions, and left as it
// is.
func (p *Provider) Migrate(ctx context.Context) error {
	err := sqlitex.Migrate(ctx, p.db, p.component, SchemaVersion, func(q sqlitex.Querier, from int) error {
		for _, stmt := range p.q.migrate {
			if _, err := q.ExecContext(ctx, stmt); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return p.fail(ctx, "migrate", err)
	}
	return nil
}

// fail is the one place errors get their context (interpretError in the
// house style): SQLite's errors say what to do (sqlitex.Explain: run
// Migrate, not a database, read-only, disk full), and an ended ctx is
// always errors.Is-visible.
func (p *Provider) fail(ctx context.Context, op string, err error) error {
	err = sqlitex.Explain(err)
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		err = fmt.Errorf("%w: %w", cerr, err)
	}
	return fmt.Errorf("sqlitememory: %s: %w", op, err)
}

// checkConv checks the IDs naming a conversation.
func checkConv(tenantID, conversationID string) error {
	if err := memory.CheckID("tenant", tenantID); err != nil {
		return err
	}
	return memory.CheckID("conversation", conversationID)
}

func micros(t time.Time) int64 { return t.UnixMicro() }

// The times an INTEGER of microseconds since 1970 holds; micros of a time
// outside them wraps around to another.
var (
	minTime = time.UnixMicro(math.MinInt64).UTC()
	maxTime = time.UnixMicro(math.MaxInt64).UTC()
)

// History returns the newest limit messages of a conversation, oldest
// first, from its newest summary (memory.IsSummary) on, in one statement;
// see memory.Provider.History. Limit 0 means all it keeps (at most
// MaxMessages).
func (p *Provider) History(ctx context.Context, tenantID, conversationID string, limit int) ([]llm.Message, error) {
	if err := checkConv(tenantID, conversationID); err != nil {
		return nil, fmt.Errorf("sqlitememory: history: %w", err)
	}
	if limit < 0 {
		return nil, fmt.Errorf("sqlitememory: history: %w: history limit %d is negative", memory.ErrInvalid, limit)
	}
	if err := ctx.Err(); err != nil {
		return nil, p.fail(ctx, "history", err)
	}
	lim := int64(-1) // no limit
	if limit > 0 {
		lim = int64(limit)
	}
	rows, err := p.db.QueryContext(ctx, p.q.history, tenantID, conversationID, lim)
	if err != nil {
		return nil, p.fail(ctx, "history", err)
	}
	defer rows.Close()
	var out []llm.Message
	for rows.Next() {
		var raw []byte
		if err := rows.Scan(&raw); err != nil {
			return nil, p.fail(ctx, "history", err)
		}
		m, err := msgjson.Decode(raw)
		if err != nil {
			return nil, p.fail(ctx, "history", err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, p.fail(ctx, "history", err)
	}
	slices.Reverse(out)
	i := 0
	for i < len(out) && out[i].Role == llm.RoleTool {
		i++ // its call was cut off: so is it
	}
	if i == len(out) {
		return nil, nil
	}
	return out[i:], nil
}

// Append adds one completed turn in one write transaction; see
// memory.Provider.Append. The transaction holds the file's write lock, so
// turns never interleave. Past MaxMessages the oldest messages go in the
// same transaction.
func (p *Provider) Append(ctx context.Context, tenantID, conversationID string, msgs ...llm.Message) error {
	if err := checkConv(tenantID, conversationID); err != nil {
		return fmt.Errorf("sqlitememory: append: %w", err)
	}
	if err := memory.CheckTurn(msgs); err != nil {
		return fmt.Errorf("sqlitememory: append: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return p.fail(ctx, "append", err)
	}
	if len(msgs) == 0 {
		return nil
	}
	if len(msgs) > p.maxMsgs {
		msgs = msgs[len(msgs)-p.maxMsgs:] // the older ones would go at once
	}
	encoded := make([]string, len(msgs))
	for i, m := range msgs {
		s, err := msgjson.Encode(m)
		if err != nil {
			return fmt.Errorf("sqlitememory: append: %w: message %d: %w", memory.ErrInvalid, i, err)
		}
		encoded[i] = s
	}
	now := micros(time.Now())
	err := p.w.Tx(ctx, p.db, func(q sqlitex.Querier) error {
		for i, m := range msgs {
			if _, err := q.ExecContext(ctx, p.q.insertMsg, tenantID, conversationID, string(m.Role), encoded[i], memory.IsSummary(&msgs[i]), now); err != nil {
				return err
			}
		}
		_, err := q.ExecContext(ctx, p.q.trimHistory, tenantID, conversationID, p.maxMsgs)
		return err
	})
	if err != nil {
		return p.fail(ctx, "append", err)
	}
	return nil
}

// Remember stores items in one write transaction and returns their IDs;
// see memory.Provider.Remember. IDs are decimal numbers, increasing in
// the order items are written and never used twice. Past
// MaxItemsPerTenant the tenant's oldest items go in the same transaction;
// a call with more than MaxItemsPerTenant items is memory.ErrInvalid, as
// is an item whose CreatedAt is outside what INTEGER microseconds since
// 1970 hold (about 292,000 years either way). With an Embedder, the items' texts are embedded first, in one call,
// outside the transaction; if that fails, the items are stored without
// vectors (see [Config]).
func (p *Provider) Remember(ctx context.Context, tenantID string, items ...memory.Item) ([]string, error) {
	if err := memory.CheckID("tenant", tenantID); err != nil {
		return nil, fmt.Errorf("sqlitememory: remember: %w", err)
	}
	if len(items) > p.maxItems {
		return nil, fmt.Errorf("sqlitememory: remember: %w: %d items at once, more than a tenant keeps (%d)", memory.ErrInvalid, len(items), p.maxItems)
	}
	for i := range items {
		if err := memory.CheckItem(i, &items[i]); err != nil {
			return nil, fmt.Errorf("sqlitememory: remember: %w", err)
		}
		if at := items[i].CreatedAt; at.Before(minTime) || at.After(maxTime) {
			return nil, fmt.Errorf("sqlitememory: remember: %w: item %d: CreatedAt %v is outside the times the file holds (microseconds since 1970 in 64 bits, %v to %v)",
				memory.ErrInvalid, i, at, minTime, maxTime)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, p.fail(ctx, "remember", err)
	}
	if len(items) == 0 {
		return nil, nil
	}
	vecs := make([][]float32, len(items)) // nil vectors are stored as NULL
	if p.embedder != nil {
		texts := make([]string, len(items))
		for i := range items {
			texts[i] = items[i].Text
		}
		if got := hybrid.Embed(ctx, p.embedder, texts); got != nil {
			vecs = got
		}
		if err := ctx.Err(); err != nil {
			return nil, p.fail(ctx, "remember", err)
		}
	}
	now := time.Now()
	ids := make([]string, len(items))
	err := p.w.Tx(ctx, p.db, func(q sqlitex.Querier) error {
		for i, it := range items {
			created := cmp.Or(it.CreatedAt, now)
			var id int64
			err := q.QueryRowContext(ctx, p.q.insertItem, tenantID, it.Text, it.Kind, it.Source.ConversationID, it.Source.TaskID, it.Source.SkillID,
				micros(created), memory.EstimateTokens(it.Text), it.Supersedes, encodeVector(vecs[i]), string(it.Origin)).Scan(&id)
			if err != nil {
				return err
			}
			if _, err := q.ExecContext(ctx, p.q.insertTerms, id, terms(tenantID, it.Text)); err != nil {
				return err
			}
			ids[i] = strconv.FormatInt(id, 10)
		}
		_, err := q.ExecContext(ctx, p.q.capItems, tenantID, p.maxItems)
		return err
	})
	if err != nil {
		return nil, p.fail(ctx, "remember", err)
	}
	return ids, nil
}

// Recall returns the items most relevant to query within b; see
// memory.Provider.Recall. Relevance is FTS5's bm25 over the items'
// normalised words, for the RecallCandidates newest matches (see the
// package documentation). With an Embedder,
// that ranking is merged with the vector similarity of the candidates to
// the query by reciprocal rank fusion. Only the first
// memory.MaxQueryBytes of query are read (memory.RecallQuery).
func (p *Provider) Recall(ctx context.Context, tenantID, query string, b memory.Budget) ([]memory.Item, error) {
	if err := memory.CheckID("tenant", tenantID); err != nil {
		return nil, fmt.Errorf("sqlitememory: recall: %w", err)
	}
	if err := memory.CheckBudget(b); err != nil {
		return nil, fmt.Errorf("sqlitememory: recall: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, p.fail(ctx, "recall", err)
	}
	query = memory.RecallQuery(query)
	match := matchQuery(tenantID, query)
	if p.embedder != nil && hybrid.HasWord(query) {
		vecs := hybrid.Embed(ctx, p.embedder, []string{query})
		if err := ctx.Err(); err != nil {
			return nil, p.fail(ctx, "recall", err)
		}
		if vecs != nil {
			return p.recallHybrid(ctx, tenantID, match, vecs[0], b)
		}
	}
	if match == "" {
		return nil, nil // no word: nothing matches
	}
	limit := int64(-1) // the candidates bound it
	if b.MaxEntries > 0 && b.MaxTokens == 0 {
		limit = int64(b.MaxEntries)
	}
	rows, err := p.db.QueryContext(ctx, p.q.recall, tenantID, match, limit, max(p.candidates, b.MaxEntries))
	if err != nil {
		return nil, p.fail(ctx, "recall", err)
	}
	defer rows.Close()
	var out []memory.Item
	tokens := 0
	for rows.Next() {
		if b.MaxEntries > 0 && len(out) == b.MaxEntries || b.MaxTokens > 0 && tokens == b.MaxTokens {
			break // full: every item holds at least one token
		}
		var r itemRow
		if err := rows.Scan(r.dest(&r.it.Score)...); err != nil {
			return nil, p.fail(ctx, "recall", err)
		}
		it := r.item()
		if b.MaxTokens > 0 && tokens+it.Tokens > b.MaxTokens {
			continue // too large for what remains; a smaller one may fit
		}
		tokens += it.Tokens
		out = append(out, it)
	}
	if err := rows.Err(); err != nil {
		return nil, p.fail(ctx, "recall", err)
	}
	return out, nil
}

// Forget removes what by names in one write transaction; see
// memory.Provider.Forget.
func (p *Provider) Forget(ctx context.Context, tenantID string, by memory.Provenance) (int, error) {
	if err := memory.CheckID("tenant", tenantID); err != nil {
		return 0, fmt.Errorf("sqlitememory: forget: %w", err)
	}
	if by == (memory.Provenance{}) {
		return 0, fmt.Errorf("sqlitememory: forget: %w: Forget needs a conversation, task or skill ID", memory.ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return 0, p.fail(ctx, "forget", err)
	}
	n := 0
	err := p.w.Tx(ctx, p.db, func(q sqlitex.Querier) error {
		n = 0
		stmts := []struct {
			q    string
			args []any
		}{{p.q.forgetItems, []any{tenantID, by.ConversationID, by.TaskID, by.SkillID}}}
		if by == (memory.Provenance{ConversationID: by.ConversationID}) {
			stmts = append(stmts, struct {
				q    string
				args []any
			}{p.q.forgetHistory, []any{tenantID, by.ConversationID}})
		}
		for _, s := range stmts {
			c, err := exec(ctx, q, s.q, s.args...)
			if err != nil {
				return err
			}
			n += c
		}
		return nil
	})
	if err != nil {
		return 0, p.fail(ctx, "forget", err)
	}
	return n, nil
}

// DeleteTenant removes all the tenant's items and histories in one write
// transaction; see memory.TenantDeleter.
func (p *Provider) DeleteTenant(ctx context.Context, tenantID string) (int, error) {
	if err := memory.CheckID("tenant", tenantID); err != nil {
		return 0, fmt.Errorf("sqlitememory: delete tenant: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return 0, p.fail(ctx, "delete tenant", err)
	}
	n := 0
	err := p.w.Tx(ctx, p.db, func(q sqlitex.Querier) error {
		n = 0
		for _, stmt := range []string{p.q.deleteTenantItems, p.q.deleteTenantHistory} {
			c, err := exec(ctx, q, stmt, tenantID)
			if err != nil {
				return err
			}
			n += c
		}
		return nil
	})
	if err != nil {
		return 0, p.fail(ctx, "delete tenant", err)
	}
	return n, nil
}

// exec runs a statement and returns how many rows it changed.
func exec(ctx context.Context, q sqlitex.Querier, stmt string, args ...any) (int, error) {
	res, err := q.ExecContext(ctx, stmt, args...)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	return int(n), err
}
