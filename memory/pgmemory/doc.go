// Package pgmemory implements memory.Provider on PostgreSQL with
// github.com/jackc/pgx/v5: conversation histories and long-term items that
// survive restarts and are shared by every replica using the same tables.
//
//	db, err := pgxpool.New(ctx, url)                              // yours to configure and close
//	mem, err := pgmemory.New(db, pgmemory.Config{Schema: "valet"}) // zero fields: the defaults
//	err = mem.Migrate(ctx)                                        // once per start; idempotent
//
// New takes the pool the host already has and a Config whose zero value
// means the documented defaults. Config.Schema chooses the schema the
// tables live in, as it does for every PostgreSQL backend of valet
// (credentials/pgstore, trigger/rivertrigger); "" is the connection's
// search_path.
//
// # Tables
//
// Migrate creates, if they do not exist (the schema must exist), in one
// transaction holding pg_advisory_xact_lock on a hash of the tables' names,
// so processes starting together do not race:
//
//	memory_history  seq (identity, the order of messages), tenant_id,
//	                conversation_id, role, message json, summary, created_at,
//	                pos (the message's number in its conversation)
//	memory_items    id (identity; Item.ID is its decimal form), tenant_id,
//	                text, kind, conversation_id, task_id, skill_id,
//	                created_at, tokens, supersedes, origin,
//	                tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', text)) STORED,
//	                embedding_f32 bytea (the vector's float32s, little-endian;
//	                NULL without a vector),
//	                embedding real[] (vectors of items remembered before
//	                embedding_f32 existed)
//
// with a GIN index on tsv and a B-tree on (tenant_id, created_at, id) for
// the newest items, and B-trees on the history's (tenant_id,
// conversation_id) with seq, with pos, and with seq of its summaries
// alone. Tables made by an earlier version are brought up to
// date when Migrate runs again: the items gain the embedding and
// embedding_f32 columns (nothing is rewritten: old vectors stay in
// embedding and are read from there) and the recent-items index and the
// origin column (their old items read as
// memory.OriginHost, but a memory_update route's task results — a task
// id and kind "task_result" — as memory.OriginTrigger), the history the
// summary and pos columns and their indexes (a conversation's messages
// are numbered at its next Append, those of an earlier release still
// running included), and its message column
// becomes json (from jsonb, which rejects the \u0000 and lone surrogate
// escapes a tool result or the model may produce; the change rewrites the
// table once, locking it meanwhile). No PostgreSQL extension is needed. Config.Schema and
// Config.TablePrefix choose other names; providers on the same tables
// share their data.
//
// # History
//
// Append writes one turn in one transaction, after taking a
// transaction-level advisory lock on the conversation, so that concurrent
// turns of one conversation (two replicas answering it in turn) never
// interleave. Past Config.MaxMessages (memory.DefaultMaxMessages) it
// deletes the oldest messages in the same transaction, cutting so that
// the history never starts with a tool result. History is one SELECT of
// the newest messages; a window that would start with tool results starts
// after them. Neither reads more of a conversation than it returns or
// deletes: each message is numbered (pos), so Append finds where to cut
// from the newest number, and the newest summary has an index of its own;
// a turn costs the same in a conversation of 1,000 messages as in a new
// one. Messages are stored as JSONB: tool-call arguments come back
// with the same JSON meaning, not byte for byte (key order, spacing).
//
// # Recall
//
// Without an Embedder, Recall is PostgreSQL full-text search. The query,
// the user's message as typed, is read by to_tsvector('english', query)
// exactly as the items' text is read (lowercase, English stop words
// dropped, Snowball stems); its lexemes are joined into an OR tsquery, so
// an item matches when it shares any word with the query, and a query
// with no words left recalls nothing. The Config.RecallCandidates
// (DefaultRecallCandidates, 1,000) newest matches of the tenant (or
// Budget.MaxEntries, when more) rank by ts_rank; equally ranked items
// come newest first (CreatedAt, then ID). Items superseded by an item of
// the tenant are left out. The budget is applied as memory.Budget
// documents; a Recall returns at most the candidates, whatever the
// budget, and stops reading once the budget is full. So a tenant within
// the default MaxItemsPerTenant has every match ranked, and a larger one
// ranks its newest 1,000 matches, not all of them: a message sharing
// "appointment" with 10,000 items ranks 1,000.
//
// How the candidates are found does not depend on PostgreSQL's estimate
// of how many items match: it cannot tell a word absent from the items
// from a rare one (it counts each for 0.3 % of them), and a message of
// 10 to 40 words holds many. Recall first walks the tenant's newest
// items, at most 15 per candidate (15,000 by default), and stops at the
// last candidate: that answers every query whose words match a fifteenth
// of the items or more. When it does not (fewer matches in the walk, and
// more items), the same statement runs again in a transaction with
// enable_seqscan off (SET LOCAL) and its match scan fenced from the
// ORDER BY (OFFSET 0), so that PostgreSQL reads every match through the
// GIN index, then sorts them: fewer than a fifteenth of the items. Either
// way the candidates are the same newest matches. For a tenant of
// 100,000 items the costliest query reads about 18,000 rows (a walk, then
// the index), against 100,000 for a plan chosen on the estimates. The query's tsquery is an immutable expression of the
// query text, computed once while planning; each statement is planned
// for its call's query (pgx's QueryExecModeCacheDescribe, an unnamed
// statement in the same single round trip, when the pool's default mode
// would cache a plan). A Recall is one statement, or, when the walk did
// not answer, that and a transaction of three (BEGIN with the settings,
// the statement, COMMIT): it works behind a transaction pooler such as
// PgBouncer. Recall honours ctx; to bound it on the server too, set
// statement_timeout on the pool's connections (pgxpool's
// ConnConfig.RuntimeParams).
//
// With Config.Embedder, recall is hybrid, as "Hybrid recall" in the
// memory package documents: Remember embeds the items' texts (one Embed
// call, before the transaction) and stores the vectors in the embedding
// column; Recall embeds the query (one call), reads in one statement the
// best memory.LexicalCandidates lexical matches (or MaxEntries, when
// more) of the RecallCandidates newest matches, and the
// memory.RecentCandidates newest items of the tenant (by created_at,
// then id) with their vectors, computes their cosine similarity to the
// query in Go, merges the two rankings by reciprocal rank fusion and
// applies the budget. Config.MinSimilarity keeps the items less similar
// than it out of the vector ranking: they are recalled only as lexical
// matches, so that the newest items do not fill the budget merely for
// being less dissimilar than the rest. An embedder that fails leaves the
// items without vectors (Remember) or recall lexical (Recall); it never
// fails the call. Vectors are stored whole, as float32s in a bytea, which
// PostgreSQL sends as it stores it (a real[] is sent element by element,
// several times slower): 6 KiB per item for 1,536 dimensions
// (text-embedding-3-small; openai.Config.EmbeddingDimensions asks for
// shorter ones). During a rolling upgrade, a replica of the release
// before does not see the vectors of items this release remembered: it
// recalls them lexically only.
//
// Remember caps each tenant at Config.MaxItemsPerTenant
// (memory.DefaultMaxItemsPerTenant) items, deleting the oldest in the same
// transaction. Unlike the in-memory provider there is no cap over all
// tenants: the database is the bound.
//
// # Limits
//
// An item's text (at most memory.MaxItemBytes) is indexed whole as a
// tsvector, and a Recall query is read up to memory.MaxQueryBytes, so
// neither comes near the 1 MB a tsvector holds. History messages are
// stored as json and not indexed.
//
// PostgreSQL text cannot hold NUL bytes or invalid UTF-8: an item field
// holding them is memory.ErrInvalid (memory.CheckItem, as in the in-memory
// provider), and a message whose content holds a NUL byte fails Append
// (JSONB rejects \u0000; the in-memory provider stores it). Invalid UTF-8 in a
// message is replaced by U+FFFD when it is encoded as JSON.
//
// # Errors
//
// Errors come back as "pgmemory: <op>: ...", with memory.ErrInvalid and
// ctx.Err() visible to errors.Is. A missing table says to run Migrate.
// Every write is one transaction: a call that fails changes nothing.
//
// Tested on PostgreSQL 15.
package pgmemory
