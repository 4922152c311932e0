// Package sqlitememory implements memory.Provider on an SQLite file,
// through database/sql and the pure-Go driver modernc.org/sqlite (no C
// compiler, FTS5 built in): conversation histories and long-term items
// that survive restarts, in one file, with no server to run.
//
//	import _ "modernc.org/sqlite" // the "sqlite" driver, in your main package
//
//	db, err := sql.Open("sqlite", "file:valet.db?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)")
//	db.SetMaxOpenConns(1)                                   // River's advice for SQLite
//	mem, err := sqlitememory.New(db, sqlitememory.Config{}) // zero fields: the defaults
//	err = mem.Migrate(ctx)                                  // once per start; idempotent
//
// New takes the *sql.DB the host opened (and closes); the file, its
// parameters and the pool are as credentials/sqlitestore documents under
// "Opening the file", and every SQLite backend of valet can share them.
// Migrate refuses a connection without a busy timeout.
//
// # Tables
//
// Migrate creates, if they do not exist, in one write transaction:
//
//	memory_history    seq (INTEGER PRIMARY KEY, the order of messages), tenant_id,
//	                  conversation_id, role, message (JSON text), summary, created_at
//	memory_items      id (AUTOINCREMENT: never used twice; Item.ID is its decimal form),
//	                  tenant_id, text, kind, conversation_id, task_id, skill_id,
//	                  created_at, tokens, supersedes, origin,
//	                  embedding (BLOB of little-endian float32s; NULL without a vector)
//	memory_items_fts  FTS5, contentless, rowid = id: the item's normalised words,
//	                  each after a token naming its tenant (a hash of its ID)
//
// with B-trees on (tenant_id, conversation_id, seq), (tenant_id, id),
// (tenant_id, created_at, id) and the non-empty supersedes, and a trigger
// that takes an item's words out of the index when the item goes. It
// records SchemaVersion in valet_schema_versions under "memory/" and the
// table prefix; a file recording a newer version is refused with
// ErrSchemaTooNew, naming both versions. Times are INTEGER microseconds
// since 1970 UTC; Remember refuses (memory.ErrInvalid) an item whose
// CreatedAt is outside what they hold, about 292,000 years either way. Config.TablePrefix chooses other names; providers on the
// same file and prefix share their data.
//
// # History
//
// Append writes one turn in one write transaction (BEGIN IMMEDIATE: it
// holds the file's write lock), so concurrent turns never interleave.
// Past Config.MaxMessages (memory.DefaultMaxMessages) it deletes the
// oldest messages in the same transaction, cutting so that the history
// never starts with a tool result. History is one SELECT of the newest
// messages from the newest summary on; a window that would start with
// tool results starts after them. Messages are stored as JSON text, as
// pgmemory stores them: any content survives, NUL bytes included, and
// tool-call arguments come back with the same JSON meaning.
//
// # Recall
//
// Items and queries are read exactly as the memory package reads them for
// the in-memory provider — runs of letters and digits, lowercased, English
// stop words dropped, English (Porter2) stems — so the same query finds
// the same items in every provider (TestSameRecallAsInMemory holds this
// package to it). Remember indexes an item's words, each after its
// tenant's token, in the FTS5 table (tokenizer unicode61 without
// diacritics removal, which splits them where they are split already
// and folds nothing more); Recall turns the query's
// distinct words into an FTS5 query of quoted strings joined by OR, so an
// item matches when it shares any word, and nothing a user types is read
// as FTS5 syntax. The Config.RecallCandidates (DefaultRecallCandidates,
// 1,000) newest matches of the tenant (or Budget.MaxEntries, when more)
// rank by FTS5's bm25 (negated: higher is more relevant); equally ranked
// items come newest first (CreatedAt, then ID). Items superseded by an
// item of the tenant are left out, and take no candidate's place. The
// budget is applied as memory.Budget documents; a Recall returns at most
// the candidates, whatever the budget. So a tenant within the default
// MaxItemsPerTenant has every match ranked, and a larger one ranks its
// newest 1,000 matches, not all of them: a message sharing "appointment"
// with 10,000 items ranks 1,000.
//
// "Newest" here is the order items were remembered (their IDs, the FTS5
// rowids), the order in which MaxItemsPerTenant drops the oldest: FTS5
// hands a query's matches over in rowid order, highest first, so Recall
// reads the candidates straight from the index and stops at the last,
// and bm25 and the join to the items run for the candidates only, not
// for every match. pgmemory takes its candidates by CreatedAt (then ID);
// the two agree unless items are remembered with CreatedAt out of order
// (an import of old items after newer ones).
//
// The tenants of a file share the index, but not its words: each word is
// indexed after a token naming its tenant, so a Recall reads only its own
// tenant's index entries, whatever the other tenants wrote, and bm25's
// document frequencies are the tenant's, as in the in-memory provider.
//
// With Config.Embedder, recall is hybrid as in pgmemory: Remember embeds
// the items' texts (one call, before its transaction); Recall embeds the
// query (one call), reads in one statement the best
// memory.LexicalCandidates lexical matches (or MaxEntries) of the
// RecallCandidates newest matches, and the
// memory.RecentCandidates newest items with their vectors, computes the
// cosine similarities in Go and fuses the rankings by reciprocal rank
// fusion. An embedder that fails never fails the call.
//
// Remember caps each tenant at Config.MaxItemsPerTenant
// (memory.DefaultMaxItemsPerTenant) items, deleting the oldest in the same
// transaction.
//
// # Errors
//
// Errors come back as "sqlitememory: <op>: ...", with memory.ErrInvalid
// and ctx.Err() visible to errors.Is. SQLite's errors say what to do: a
// missing table to run Migrate, a file that is not an SQLite database, a
// read-only file or directory (or mode=ro), a full disk. Every write is
// one transaction: a call that fails writes nothing, and nothing
// half-written is read back.
package sqlitememory
