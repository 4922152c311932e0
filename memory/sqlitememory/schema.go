package sqlitememory

import (
	"strings"

	"github.com/valetkit/valet/internal/sqlitex"
)

// SchemaVersion is the version of the tables this code writes, recorded
// in the file's valet_schema_versions table under "memory/" and the
// table prefix. Migrate refuses a file recording a newer one.
const SchemaVersion = 1

// queries are the statements of a Provider, on its tables.
type queries struct {
	migrate                                []string
	history, insertMsg, trimHistory        string
	insertItem, insertTerms, capItems      string
	recall, recallHybrid, recallRecent     string
	forgetItems, forgetHistory             string
	deleteTenantItems, deleteTenantHistory string
}

// notSuperseded is true of an item i no item of its tenant supersedes.
// s.supersedes <> ” (true of any match, as an id is never ”) lets
// SQLite use the partial index on supersedes.
const notSuperseded = `NOT EXISTS (SELECT 1 FROM {items} s WHERE s.tenant_id = i.tenant_id AND s.supersedes = CAST(i.id AS TEXT) AND s.supersedes <> '')`

// Times are INTEGER microseconds since 1970 UTC, PostgreSQL's precision.
// Text is compared byte by byte (SQLite's BINARY collation), as
// pgmemory's COLLATE "C".
func newQueries(prefix string) queries {
	q := func(name string) string { return sqlitex.Quote(prefix + name) }
	r := strings.NewReplacer(
		"{history}", q("history"), "{items}", q("items"), "{fts}", q("items_fts"),
		"{notSuperseded}", strings.ReplaceAll(notSuperseded, "{items}", q("items")),
	)
	return queries{
		migrate: []string{
			r.Replace(`CREATE TABLE IF NOT EXISTS {history} (
	seq             INTEGER PRIMARY KEY,
	tenant_id       TEXT NOT NULL,
	conversation_id TEXT NOT NULL,
	role            TEXT NOT NULL,
	message         TEXT NOT NULL,
	summary         INTEGER NOT NULL DEFAULT 0,
	created_at      INTEGER NOT NULL
)`),
			`CREATE INDEX IF NOT EXISTS ` + q("history_conversation_idx") + ` ON ` + q("history") + ` (tenant_id, conversation_id, seq)`,
			// AUTOINCREMENT: an id is never used twice, so a Supersedes
			// naming a forgotten item never hides a later one.
			r.Replace(`CREATE TABLE IF NOT EXISTS {items} (
	id              INTEGER PRIMARY KEY AUTOINCREMENT,
	tenant_id       TEXT NOT NULL,
	text            TEXT NOT NULL,
	kind            TEXT NOT NULL DEFAULT '',
	conversation_id TEXT NOT NULL DEFAULT '',
	task_id         TEXT NOT NULL DEFAULT '',
	skill_id        TEXT NOT NULL DEFAULT '',
	created_at      INTEGER NOT NULL,
	tokens          INTEGER NOT NULL,
	supersedes      TEXT NOT NULL DEFAULT '',
	origin          TEXT NOT NULL DEFAULT '',
	embedding       BLOB
)`),
			`CREATE INDEX IF NOT EXISTS ` + q("items_tenant_idx") + ` ON ` + q("items") + ` (tenant_id, id)`,
			`CREATE INDEX IF NOT EXISTS ` + q("items_recent_idx") + ` ON ` + q("items") + ` (tenant_id, created_at, id)`,
			`CREATE INDEX IF NOT EXISTS ` + q("items_supersedes_idx") + ` ON ` + q("items") + ` (tenant_id, supersedes) WHERE supersedes <> ''`,
			// The items' normalised words, each after its tenant's token
			// (tenantToken), space-separated, indexed by FTS5 without a
			// copy of the text (contentless); its rowid is the item's id.
			// unicode61 without diacritics removal splits them where they
			// are split already and folds nothing memory's normalisation
			// has not folded.
			r.Replace(`CREATE VIRTUAL TABLE IF NOT EXISTS {fts} USING fts5(
	terms, content = '', contentless_delete = 1, tokenize = 'unicode61 remove_diacritics 0'
)`),
			// An item's words leave the index with it, however it goes.
			r.Replace(`CREATE TRIGGER IF NOT EXISTS ` + q("items_fts_delete") + ` AFTER DELETE ON {items} BEGIN
	DELETE FROM {fts} WHERE rowid = old.id;
END`),
		},
		// The newest ?3 messages (all for -1), from the newest summary on.
		history: r.Replace(`SELECT message FROM {history}
WHERE tenant_id = ?1 AND conversation_id = ?2 AND seq >= coalesce((
	SELECT max(seq) FROM {history}
	WHERE tenant_id = ?1 AND conversation_id = ?2 AND summary
), 0)
ORDER BY seq DESC LIMIT ?3`),
		insertMsg: r.Replace(`INSERT INTO {history} (tenant_id, conversation_id, role, message, summary, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)`),
		// Keep the newest ?3 messages, from the first that is not a tool
		// result: every older one goes.
		trimHistory: r.Replace(`DELETE FROM {history}
WHERE tenant_id = ?1 AND conversation_id = ?2 AND seq < (
	SELECT coalesce(min(seq) FILTER (WHERE role <> 'tool'), max(seq) + 1) FROM (
		SELECT seq, role FROM {history} WHERE tenant_id = ?1 AND conversation_id = ?2 ORDER BY seq DESC LIMIT ?3
	)
)`),
		insertItem: r.Replace(`INSERT INTO {items} (tenant_id, text, kind, conversation_id, task_id, skill_id, created_at, tokens, supersedes, embedding, origin)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) RETURNING id`),
		insertTerms: r.Replace(`INSERT INTO {fts} (rowid, terms) VALUES (?1, ?2)`),
		capItems: r.Replace(`DELETE FROM {items} WHERE tenant_id = ?1 AND id <= (
	SELECT id FROM {items} WHERE tenant_id = ?1 ORDER BY id DESC LIMIT 1 OFFSET ?2
)`),
		// The best ?3 lexical matches of the FTS5 query ?2 (all for -1)
		// among the ?4 newest (cand): bm25, negated so that higher is
		// better. CROSS JOIN keeps the index the outer loop, so that
		// FTS5 hands the matches over newest (highest rowid) first, with
		// no sort, and the LIMIT stops it: bm25 and the join run for
		// the candidates only.
		recall: r.Replace(`WITH cand AS (
	SELECT i.id, i.text, i.kind, i.conversation_id, i.task_id, i.skill_id, i.created_at, i.tokens, i.supersedes, i.origin,
		-bm25({fts}) AS score
	FROM {fts} CROSS JOIN {items} i ON i.id = {fts}.rowid
	WHERE {fts} MATCH ?2 AND i.tenant_id = ?1 AND {notSuperseded}
	ORDER BY {fts}.rowid DESC
	LIMIT ?4
)
SELECT * FROM cand
ORDER BY score DESC, created_at DESC, id DESC
LIMIT ?3`),
		// The lexical candidates (?3 best of the ?5 newest matches, as
		// above) and the ?4 newest items, with their vectors; lexical
		// matches first, in their order.
		recallHybrid: r.Replace(`WITH cand AS (
	SELECT i.id, i.created_at, -bm25({fts}) AS score
	FROM {fts} CROSS JOIN {items} i ON i.id = {fts}.rowid
	WHERE {fts} MATCH ?2 AND i.tenant_id = ?1 AND {notSuperseded}
	ORDER BY {fts}.rowid DESC
	LIMIT ?5
), lex AS (
	SELECT id, score FROM cand
	ORDER BY score DESC, created_at DESC, id DESC
	LIMIT ?3
), recent AS (
	SELECT i.id FROM {items} i
	WHERE i.tenant_id = ?1 AND {notSuperseded}
	ORDER BY i.created_at DESC, i.id DESC
	LIMIT ?4
)
SELECT i.id, i.text, i.kind, i.conversation_id, i.task_id, i.skill_id, i.created_at, i.tokens, i.supersedes, i.origin,
	lex.score, i.embedding
FROM {items} i LEFT JOIN lex ON lex.id = i.id
WHERE i.tenant_id = ?1 AND i.id IN (SELECT id FROM lex UNION SELECT id FROM recent)
ORDER BY lex.score DESC NULLS LAST, i.created_at DESC, i.id DESC`),
		// recallHybrid for a query without words: the ?4 newest items.
		recallRecent: r.Replace(`SELECT i.id, i.text, i.kind, i.conversation_id, i.task_id, i.skill_id, i.created_at, i.tokens, i.supersedes, i.origin,
	NULL, i.embedding
FROM {items} i
WHERE i.tenant_id = ?1 AND {notSuperseded}
ORDER BY i.created_at DESC, i.id DESC
LIMIT ?4`),
		forgetItems: r.Replace(`DELETE FROM {items} WHERE tenant_id = ?1
	AND (?2 = '' OR conversation_id = ?2) AND (?3 = '' OR task_id = ?3) AND (?4 = '' OR skill_id = ?4)`),
		forgetHistory:       r.Replace(`DELETE FROM {history} WHERE tenant_id = ?1 AND conversation_id = ?2`),
		deleteTenantItems:   r.Replace(`DELETE FROM {items} WHERE tenant_id = ?1`),
		deleteTenantHistory: r.Replace(`DELETE FROM {history} WHERE tenant_id = ?1`),
	}
}
