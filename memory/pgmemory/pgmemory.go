package pgmemory

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/memory"
	"github.com/valetkit/valet/memory/internal/hybrid"
	"github.com/valetkit/valet/memory/internal/msgjson"
)

// Defaults of a zero [Config].
const (
	// DefaultTablePrefix starts the names of the provider's tables:
	// memory_history and memory_items.
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

// maxIdentLen is PostgreSQL's longest identifier (NAMEDATALEN - 1).
const maxIdentLen = 63

// rollbackTimeout bounds a rollback after the caller's ctx ended.
const rollbackTimeout = 5 * time.Second

// Config configures [New]. The zero value means the documented defaults;
// a zero number means its default and a negative one is refused by New.
type Config struct {
	// Embedder, when set, adds vector similarity to Recall (see "Recall"
	// in the package documentation). Remember embeds its items' texts
	// with one Embed call, before its transaction, and stores each vector
	// in the embedding column; when that fails (or returns vectors that
	// do not answer the texts), the items are stored without vectors and
	// Remember still succeeds: they are recalled lexically only. Recall
	// embeds the query with one call; when that fails, it answers
	// lexically, as without an Embedder. Default: nil, lexical recall
	// only.
	Embedder llm.Embedder
	// MaxItemsPerTenant is how many items one tenant keeps; Remember
	// drops the tenant's oldest (by the order they were remembered) past
	// it, in its transaction, and a call with more items than that is
	// memory.ErrInvalid. Default: DefaultMaxItemsPerTenant (1,000).
	MaxItemsPerTenant int
	// MinSimilarity is the least cosine similarity to the query an item
	// needs to enter the vector ranking of hybrid recall (with an
	// Embedder), from 0 to 1: an item below it is recalled only as a
	// lexical match, so that items merely less dissimilar than the rest
	// do not fill the budget. Default: 0, any positive similarity.
	MinSimilarity float64
	// MaxMessages is how many messages of one conversation's history are
	// kept; Append drops the oldest past it, in its transaction, cutting
	// so that the history never starts with a tool result. Default:
	// DefaultMaxMessages (200).
	MaxMessages int
	// RecallCandidates is how many of the tenant's matches Recall ranks,
	// at most: the newest (by created_at, then id), so that a query
	// sharing a common word with half of a large tenant's items ranks no
	// more than this many. Recall walks at most 15 of the tenant's
	// newest items per candidate before it uses the GIN index instead
	// (see "Recall" in the package documentation). A Recall returns at
	// most this many items, whatever the budget. Default: DefaultRecallCandidates
	// (1,000: every match of a tenant within the default
	// MaxItemsPerTenant).
	RecallCandidates int
	// Schema holds the tables; it must exist. Providers in different
	// schemas of one database keep apart. Default: "", the connection's
	// search_path.
	Schema string
	// TablePrefix starts the table names: <prefix>history and
	// <prefix>items. Providers with the same schema and prefix share
	// their data. Default: DefaultTablePrefix ("memory_").
	TablePrefix string
}

// withDefaults returns c with its defaults filled in, or an error
// wrapping memory.ErrInvalid when a number is negative or a name it gives
// PostgreSQL is not one.
func (c Config) withDefaults() (Config, error) {
	if c.MaxItemsPerTenant < 0 {
		return c, fmt.Errorf("%w: pgmemory: Config.MaxItemsPerTenant %d is negative", memory.ErrInvalid, c.MaxItemsPerTenant)
	}
	if c.MaxMessages < 0 {
		return c, fmt.Errorf("%w: pgmemory: Config.MaxMessages %d is negative", memory.ErrInvalid, c.MaxMessages)
	}
	if c.RecallCandidates < 0 {
		return c, fmt.Errorf("%w: pgmemory: Config.RecallCandidates %d is negative", memory.ErrInvalid, c.RecallCandidates)
	}
	if !(c.MinSimilarity >= 0 && c.MinSimilarity <= 1) { // NaN too
		return c, fmt.Errorf("%w: pgmemory: Config.MinSimilarity %v is not between 0 and 1", memory.ErrInvalid, c.MinSimilarity)
	}
	c.MaxItemsPerTenant = cmp.Or(c.MaxItemsPerTenant, DefaultMaxItemsPerTenant)
	c.MaxMessages = cmp.Or(c.MaxMessages, DefaultMaxMessages)
	c.RecallCandidates = cmp.Or(c.RecallCandidates, DefaultRecallCandidates)
	c.TablePrefix = cmp.Or(c.TablePrefix, DefaultTablePrefix)
	// The longest name New derives from the prefix.
	if err := checkIdent("table prefix", c.TablePrefix+"history_conversation_idx"); err != nil {
		return c, err
	}
	if c.Schema != "" {
		if err := checkIdent("schema", c.Schema); err != nil {
			return c, err
		}
	}
	return c, nil
}

// Provider is a memory.Provider on PostgreSQL. It implements
// memory.Provider and memory.TenantDeleter and is safe for concurrent use,
// also by several processes on the same tables.
type Provider struct {
	db                *pgxpool.Pool
	history, items    string // quoted, qualified table names
	maxMsgs, maxItems int
	lockKey           int64 // Migrate's advisory lock
	embedder          llm.Embedder
	candidates        int     // Config.RecallCandidates
	minSimilarity     float64 // Config.MinSimilarity
	// planned is the pgx.QueryExecMode of the recall statements: one that
	// PostgreSQL plans for each call's query (see planMode).
	planned pgx.QueryExecMode
	q       queries
}

var (
	_ memory.Provider      = (*Provider)(nil)
	_ memory.TenantDeleter = (*Provider)(nil)
)

// New returns a Provider on db, a pool the caller configured and closes.
// The zero Config means the defaults. A nil db, a negative setting, or a
// Schema or TablePrefix PostgreSQL cannot name (too long, a NUL byte, not
// UTF-8), is an error wrapping memory.ErrInvalid. It sends nothing to PostgreSQL;
// call Migrate once (from any number of processes) before the first use.
func New(db *pgxpool.Pool, cfg Config) (*Provider, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: pgmemory: New needs a *pgxpool.Pool, got nil", memory.ErrInvalid)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	prefix := cfg.TablePrefix
	p := &Provider{
		db:            db,
		maxMsgs:       cfg.MaxMessages,
		maxItems:      cfg.MaxItemsPerTenant,
		embedder:      cfg.Embedder,
		candidates:    cfg.RecallCandidates,
		minSimilarity: cfg.MinSimilarity,
		planned:       planMode(db),
	}
	ident := func(name string) string {
		if cfg.Schema == "" {
			return pgx.Identifier{name}.Sanitize()
		}
		return pgx.Identifier{cfg.Schema, name}.Sanitize()
	}
	p.history, p.items = ident(prefix+"history"), ident(prefix+"items")
	p.lockKey = hashKey("valet/memory/pgmemory migrate", p.history, p.items)
	p.q = newQueries(p.history, p.items, func(name string) string { return pgx.Identifier{prefix + name}.Sanitize() })
	return p, nil
}

func checkIdent(what, name string) error {
	switch {
	case len(name) > maxIdentLen:
		return fmt.Errorf("%w: pgmemory: %s %q gives names longer than PostgreSQL's %d bytes", memory.ErrInvalid, what, name, maxIdentLen)
	case strings.IndexByte(name, 0) >= 0:
		return fmt.Errorf("%w: pgmemory: %s holds a NUL byte", memory.ErrInvalid, what)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: pgmemory: %s is not valid UTF-8", memory.ErrInvalid, what)
	}
	return nil
}

// hashKey is an advisory lock key: a hash of parts, each length-prefixed
// so that ("a", "b/c") and ("a/b", "c") differ. Two keys that collide
// only make their holders wait for each other.
func hashKey(parts ...string) int64 {
	h := fnv.New64a()
	for _, s := range parts {
		h.Write([]byte(strconv.Itoa(len(s)) + ":" + s))
	}
	return int64(h.Sum64())
}

type queries struct {
	migrate, addOrigin                     []string
	hasOrigin                              string
	history, insertMsg, trimHistory        string
	numberHistory                          string
	insertItem, capItems                   string
	recall, hybrid                         [2]string // by step: walk, index
	forgetItems, forgetHistory             string
	deleteTenantItems, deleteTenantHistory string
}

func newQueries(history, items string, index func(string) string) queries {
	r := strings.NewReplacer("{history}", history, "{items}", items)
	q := queries{
		migrate: []string{
			r.Replace(`CREATE TABLE IF NOT EXISTS {history} (
	seq             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	tenant_id       text COLLATE "C" NOT NULL,
	conversation_id text COLLATE "C" NOT NULL,
	role            text NOT NULL,
	message         json NOT NULL,
	summary         boolean NOT NULL DEFAULT false,
	created_at      timestamptz NOT NULL DEFAULT now(),
	pos             bigint
)`),
			`CREATE INDEX IF NOT EXISTS ` + index("history_conversation_idx") + ` ON ` + history + ` (tenant_id, conversation_id, seq)`,
			r.Replace(`CREATE TABLE IF NOT EXISTS {items} (
	id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	tenant_id       text COLLATE "C" NOT NULL,
	text            text NOT NULL,
	kind            text NOT NULL DEFAULT '',
	conversation_id text COLLATE "C" NOT NULL DEFAULT '',
	task_id         text COLLATE "C" NOT NULL DEFAULT '',
	skill_id        text COLLATE "C" NOT NULL DEFAULT '',
	created_at      timestamptz NOT NULL DEFAULT now(),
	tokens          integer NOT NULL,
	supersedes      text COLLATE "C" NOT NULL DEFAULT '',
	origin          text NOT NULL DEFAULT '',
	tsv             tsvector GENERATED ALWAYS AS (to_tsvector('english', text)) STORED
)`),
			`CREATE INDEX IF NOT EXISTS ` + index("items_tsv_idx") + ` ON ` + items + ` USING gin (tsv)`,
			`CREATE INDEX IF NOT EXISTS ` + index("items_tenant_idx") + ` ON ` + items + ` (tenant_id, id)`,
			`CREATE INDEX IF NOT EXISTS ` + index("items_supersedes_idx") + ` ON ` + items + ` (tenant_id, supersedes) WHERE supersedes <> ''`,
			// Added after the first release: ADD COLUMN IF NOT EXISTS
			// upgrades tables created before.
			r.Replace(`ALTER TABLE {items} ADD COLUMN IF NOT EXISTS embedding real[]`),
			// json, not jsonb: it keeps any text a message holds (jsonb
			// rejects \u0000 and lone surrogate escapes), exactly as
			// written. A no-op on a json column.
			r.Replace(`ALTER TABLE {history} ALTER COLUMN message TYPE json`),
			r.Replace(`ALTER TABLE {history} ADD COLUMN IF NOT EXISTS summary boolean NOT NULL DEFAULT false`),
			`CREATE INDEX IF NOT EXISTS ` + index("items_recent_idx") + ` ON ` + items + ` (tenant_id, created_at, id)`,
			// pos numbers a conversation's messages, so that Append finds
			// where to cut without counting them; rows written before it
			// existed (or by an earlier release since) have none until
			// their conversation's next Append numbers them.
			r.Replace(`ALTER TABLE {history} ADD COLUMN IF NOT EXISTS pos bigint`),
			`CREATE INDEX IF NOT EXISTS ` + index("history_pos_idx") + ` ON ` + history + ` (tenant_id, conversation_id, pos)`,
			`CREATE INDEX IF NOT EXISTS ` + index("history_unnumbered_idx") + ` ON ` + history + ` (tenant_id, conversation_id) WHERE pos IS NULL`,
			// The newest summary of a conversation, without reading its
			// messages.
			`CREATE INDEX IF NOT EXISTS ` + index("history_summary_idx") + ` ON ` + history + ` (tenant_id, conversation_id, seq) WHERE summary`,
			// Vectors as float32s, little-endian: PostgreSQL sends a
			// bytea as it stores it, where a real[] is sent element by
			// element (45 ms for 200 vectors of 1,536 on this 2-core
			// machine under load). Items remembered before keep their
			// real[] and are read from it.
			r.Replace(`ALTER TABLE {items} ADD COLUMN IF NOT EXISTS embedding_f32 bytea`),
		},
		// Whether the items table has its origin column (Migrate adds it
		// to tables of earlier releases): NULL when there is no table.
		hasOrigin: `SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass($1) AND attname = 'origin' AND NOT attisdropped)`,
		// Items written before the origin column existed read as the
		// host's (''), but for a memory_update route's task results,
		// which a triggered run wrote.
		addOrigin: []string{
			r.Replace(`ALTER TABLE {items} ADD COLUMN IF NOT EXISTS origin text NOT NULL DEFAULT ''`),
			r.Replace(`UPDATE {items} SET origin = 'trigger' WHERE origin = '' AND task_id <> '' AND kind = 'task_result'`),
		},
		// The newest $3 messages, from the newest summary on.
		history: r.Replace(`SELECT message FROM {history}
WHERE tenant_id = $1 AND conversation_id = $2 AND seq >= coalesce((
	SELECT max(seq) FROM {history}
	WHERE tenant_id = $1 AND conversation_id = $2 AND summary
), 0)
ORDER BY seq DESC LIMIT $3`),
		// Numbers the conversation's messages 1, 2, ... in their order
		// when one has no number; otherwise (a lookup in the empty
		// history_unnumbered_idx) it touches nothing.
		numberHistory: r.Replace(`UPDATE {history} h SET pos = r.n
FROM (SELECT seq, row_number() OVER (ORDER BY seq) AS n FROM {history} WHERE tenant_id = $1 AND conversation_id = $2) r
WHERE h.seq = r.seq
	AND EXISTS (SELECT 1 FROM {history} WHERE tenant_id = $1 AND conversation_id = $2 AND pos IS NULL)`),
		// The turn's messages in one statement, in order (seq and pos
		// both follow ordinality), numbered after the conversation's
		// newest.
		insertMsg: r.Replace(`INSERT INTO {history} (tenant_id, conversation_id, role, message, summary, pos)
SELECT $1, $2, m.role, m.message::json, m.summary, n.pos + m.i
FROM unnest($3::text[], $4::text[], $5::boolean[]) WITH ORDINALITY AS m(role, message, summary, i),
	(SELECT coalesce(max(pos), 0) AS pos FROM {history} WHERE tenant_id = $1 AND conversation_id = $2) n
ORDER BY m.i`),
		// Keep the newest $3 messages (those numbered past the newest
		// number minus $3), from the first that is not a tool result:
		// every older one goes. Nothing is read when the conversation
		// holds $3 or fewer; otherwise the messages read are the ones
		// deleted and the kept tool results at the cut.
		trimHistory: r.Replace(`WITH cut AS (
	SELECT max(pos) - $3 AS pos FROM {history} WHERE tenant_id = $1 AND conversation_id = $2
)
DELETE FROM {history} h
WHERE h.tenant_id = $1 AND h.conversation_id = $2 AND (SELECT pos FROM cut) > 0 AND h.seq < coalesce(
	(SELECT k.seq FROM {history} k
	WHERE k.tenant_id = $1 AND k.conversation_id = $2 AND k.pos > (SELECT pos FROM cut) AND k.role <> 'tool'
	ORDER BY k.pos LIMIT 1),
	(SELECT max(k.seq) + 1 FROM {history} k WHERE k.tenant_id = $1 AND k.conversation_id = $2))`),
		insertItem: r.Replace(`INSERT INTO {items} (tenant_id, text, kind, conversation_id, task_id, skill_id, created_at, tokens, supersedes, embedding_f32, origin)
VALUES ($1, $2, $3, $4, $5, $6, coalesce($7, now()), $8, $9, $10, $11) RETURNING id`),
		capItems: r.Replace(`DELETE FROM {items} WHERE tenant_id = $1 AND id <= (
	SELECT id FROM {items} WHERE tenant_id = $1 ORDER BY id DESC OFFSET $2 LIMIT 1
)`),
		forgetItems: r.Replace(`DELETE FROM {items} WHERE tenant_id = $1
	AND ($2 = '' OR conversation_id = $2) AND ($3 = '' OR task_id = $3) AND ($4 = '' OR skill_id = $4)`),
		forgetHistory:       r.Replace(`DELETE FROM {history} WHERE tenant_id = $1 AND conversation_id = $2`),
		deleteTenantItems:   r.Replace(`DELETE FROM {items} WHERE tenant_id = $1`),
		deleteTenantHistory: r.Replace(`DELETE FROM {history} WHERE tenant_id = $1`),
	}
	for step, stmt := range recallStatements(recallSQL, "$5") {
		q.recall[step] = r.Replace(stmt)
	}
	for step, stmt := range recallStatements(recallHybridSQL, "$6") {
		q.hybrid[step] = r.Replace(stmt)
	}
	return q
}

// Migrate creates the tables and their indexes if they do not exist. It
// is idempotent and safe to run from several processes at once: it runs in
// one transaction holding pg_advisory_xact_lock on a hash of the tables'
// names.
func (p *Provider) Migrate(ctx context.Context) error {
	err := p.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, p.lockKey); err != nil {
			return err
		}
		// Tables of a release before Item.Origin get the column, and
		// their task results the trigger's origin, once: under the lock,
		// a second Migrate finds the column there.
		var hasOrigin bool
		if err := tx.QueryRow(ctx, p.q.hasOrigin, p.items).Scan(&hasOrigin); err != nil {
			return err
		}
		for _, q := range p.q.migrate {
			if _, err := tx.Exec(ctx, q); err != nil {
				return err
			}
		}
		if !hasOrigin {
			for _, q := range p.q.addOrigin {
				if _, err := tx.Exec(ctx, q); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return p.fail(ctx, "migrate", err)
	}
	return nil
}

// inTx runs fn in a transaction and commits it when fn returns nil.
func (p *Provider) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	tx, err := p.db.Begin(ctx)
	if err != nil {
		return err
	}
	defer rollback(ctx, tx)
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

func rollback(ctx context.Context, tx pgx.Tx) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
	defer cancel()
	_ = tx.Rollback(ctx) // after Commit, pgx.ErrTxClosed
}

// fail is the one place errors get their context (interpretError in the
// house style): a missing table says to run Migrate, and an ended ctx is
// always errors.Is-visible.
func (p *Provider) fail(ctx context.Context, op string, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P01" { // undefined_table
		err = fmt.Errorf("%w (run Migrate first)", err)
	}
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		err = fmt.Errorf("%w: %w", cerr, err)
	}
	return fmt.Errorf("pgmemory: %s: %w", op, err)
}

// History returns the newest limit messages of a conversation, oldest
// first, from its newest summary (memory.IsSummary) on, in one statement;
// see memory.Provider.History. Limit 0 means all
// it keeps (at most MaxMessages).
func (p *Provider) History(ctx context.Context, tenantID, conversationID string, limit int) ([]llm.Message, error) {
	if err := checkConv(tenantID, conversationID); err != nil {
		return nil, fmt.Errorf("pgmemory: history: %w", err)
	}
	if limit < 0 {
		return nil, fmt.Errorf("pgmemory: history: %w: history limit %d is negative", memory.ErrInvalid, limit)
	}
	if err := ctx.Err(); err != nil {
		return nil, p.fail(ctx, "history", err)
	}
	var lim *int64
	if limit > 0 {
		l := int64(limit)
		lim = &l
	}
	rows, err := p.db.Query(ctx, p.q.history, tenantID, conversationID, lim)
	if err != nil {
		return nil, p.fail(ctx, "history", err)
	}
	var out []llm.Message
	for rows.Next() {
		var raw []byte
		if err := rows.Scan(&raw); err != nil {
			rows.Close()
			return nil, p.fail(ctx, "history", err)
		}
		m, err := msgjson.Decode(raw)
		if err != nil {
			rows.Close()
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

// Append adds one completed turn in one transaction; see
// memory.Provider.Append. Appends to one conversation run one after the
// other (a transaction-level advisory lock on the conversation), so turns
// never interleave. Past MaxMessages the oldest messages go in the same
// transaction.
func (p *Provider) Append(ctx context.Context, tenantID, conversationID string, msgs ...llm.Message) error {
	if err := checkConv(tenantID, conversationID); err != nil {
		return fmt.Errorf("pgmemory: append: %w", err)
	}
	if err := memory.CheckTurn(msgs); err != nil {
		return fmt.Errorf("pgmemory: append: %w", err)
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
	roles := make([]string, len(msgs))
	summaries := make([]bool, len(msgs))
	for i, m := range msgs {
		roles[i], summaries[i] = string(m.Role), memory.IsSummary(&msgs[i])
		s, err := msgjson.Encode(m)
		if err != nil {
			return fmt.Errorf("pgmemory: append: %w: message %d: %w", memory.ErrInvalid, i, err)
		}
		encoded[i] = s
	}
	err := p.inTx(ctx, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		b.Queue(`SELECT pg_advisory_xact_lock($1)`, hashKey(p.history, tenantID, conversationID))
		b.Queue(p.q.numberHistory, tenantID, conversationID)
		b.Queue(p.q.insertMsg, tenantID, conversationID, roles, encoded, summaries)
		b.Queue(p.q.trimHistory, tenantID, conversationID, p.maxMsgs)
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return p.fail(ctx, "append", err)
	}
	return nil
}

// Remember stores items in one transaction and returns their IDs; see
// memory.Provider.Remember. IDs are decimal numbers, increasing in the
// order items are written. Past MaxItemsPerTenant the tenant's oldest
// items go in the same transaction; a call with more than
// MaxItemsPerTenant items is memory.ErrInvalid. With an Embedder, the
// items' texts are embedded first, in one call, outside the transaction;
// if that fails, the items are stored without vectors (see [Config]).
func (p *Provider) Remember(ctx context.Context, tenantID string, items ...memory.Item) ([]string, error) {
	if err := memory.CheckID("tenant", tenantID); err != nil {
		return nil, fmt.Errorf("pgmemory: remember: %w", err)
	}
	if len(items) > p.maxItems {
		return nil, fmt.Errorf("pgmemory: remember: %w: %d items at once, more than a tenant keeps (%d)", memory.ErrInvalid, len(items), p.maxItems)
	}
	for i := range items {
		if err := memory.CheckItem(i, &items[i]); err != nil {
			return nil, fmt.Errorf("pgmemory: remember: %w", err)
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
	ids := make([]string, len(items))
	err := p.inTx(ctx, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		// Remembers of one tenant run one after the other, so that IDs
		// follow the order of commits and the cap is exact.
		b.Queue(`SELECT pg_advisory_xact_lock($1)`, hashKey(p.items, tenantID))
		for i, it := range items {
			var created *time.Time
			if !it.CreatedAt.IsZero() {
				created = &it.CreatedAt
			}
			b.Queue(p.q.insertItem, tenantID, it.Text, it.Kind, it.Source.ConversationID, it.Source.TaskID, it.Source.SkillID,
				created, memory.EstimateTokens(it.Text), it.Supersedes, encodeVector(vecs[i]), string(it.Origin)).QueryRow(func(row pgx.Row) error {
				var id int64
				if err := row.Scan(&id); err != nil {
					return err
				}
				ids[i] = strconv.FormatInt(id, 10)
				return nil
			})
		}
		b.Queue(p.q.capItems, tenantID, p.maxItems)
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return nil, p.fail(ctx, "remember", err)
	}
	return ids, nil
}

// Forget removes what by names in one transaction; see
// memory.Provider.Forget.
func (p *Provider) Forget(ctx context.Context, tenantID string, by memory.Provenance) (int, error) {
	if err := memory.CheckID("tenant", tenantID); err != nil {
		return 0, fmt.Errorf("pgmemory: forget: %w", err)
	}
	if by == (memory.Provenance{}) {
		return 0, fmt.Errorf("pgmemory: forget: %w: Forget needs a conversation, task or skill ID", memory.ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return 0, p.fail(ctx, "forget", err)
	}
	if !storable(by.ConversationID) || !storable(by.TaskID) || !storable(by.SkillID) {
		return 0, nil // no item or history can have such a field
	}
	n := 0
	err := p.inTx(ctx, func(tx pgx.Tx) error {
		n = 0
		tag, err := tx.Exec(ctx, p.q.forgetItems, tenantID, by.ConversationID, by.TaskID, by.SkillID)
		if err != nil {
			return err
		}
		n += int(tag.RowsAffected())
		if by == (memory.Provenance{ConversationID: by.ConversationID}) {
			tag, err := tx.Exec(ctx, p.q.forgetHistory, tenantID, by.ConversationID)
			if err != nil {
				return err
			}
			n += int(tag.RowsAffected())
		}
		return nil
	})
	if err != nil {
		return 0, p.fail(ctx, "forget", err)
	}
	return n, nil
}

// DeleteTenant removes all the tenant's items and histories in one
// transaction; see memory.TenantDeleter.
func (p *Provider) DeleteTenant(ctx context.Context, tenantID string) (int, error) {
	if err := memory.CheckID("tenant", tenantID); err != nil {
		return 0, fmt.Errorf("pgmemory: delete tenant: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return 0, p.fail(ctx, "delete tenant", err)
	}
	n := 0
	err := p.inTx(ctx, func(tx pgx.Tx) error {
		n = 0
		for _, q := range []string{p.q.deleteTenantItems, p.q.deleteTenantHistory} {
			tag, err := tx.Exec(ctx, q, tenantID)
			if err != nil {
				return err
			}
			n += int(tag.RowsAffected())
		}
		return nil
	})
	if err != nil {
		return 0, p.fail(ctx, "delete tenant", err)
	}
	return n, nil
}
