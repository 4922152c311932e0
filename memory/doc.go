// Package memory is what an assistant remembers: the history of each
// conversation, and long-term items — facts about the user, preferences,
// dates — that any later conversation of the same tenant can recall.
//
// [Provider] is the interface; [NewInMemory] returns the bounded
// in-memory provider, the default for tests, demos and single-process
// bots:
//
//	mem, err := memory.NewInMemory(memory.Config{}) // the defaults
//
// A zero Config field means its default and a negative one is refused
// with [ErrInvalid], as every valet constructor refuses it.
//
// Every method is scoped to a tenant: the same conversation or item ID in
// two tenants names two different things, and no call ever reads, changes
// or removes another tenant's data.
//
// # History
//
// Append adds one completed turn of a conversation — the user's message,
// the model's tool calls with their results, its answer — and History
// loads the newest messages, oldest first:
//
//	err := mem.Append(ctx, tenantID, conversationID, turn...)
//	msgs, err := mem.History(ctx, tenantID, conversationID, 40) // 0: all it keeps
//
// A turn must pair on its own (llm.CheckPairing): a tool call without its
// result, or a result without its call, is [ErrInvalid]. The window
// History returns keeps the pairing too: it never starts with a tool
// result whose call it would cut off, but after those results, so it may
// hold fewer messages than asked for. Providers copy what they are given
// and what they return; the caller may modify both.
//
// # Items
//
// Remember stores [Item]s and returns their IDs. Each records its
// [Provenance] (the conversation, trigger task or skill that wrote it),
// its [Origin] (whether the text came from the user, the assistant, a
// triggered run, a tool, or the host: the zero value), so that an
// assistant can tell the facts the user stated from the rest, and its
// estimated size, Tokens: ceil(len(Text) / 3), Text in bytes
// ([EstimateTokens]). An item whose Supersedes names an older item (the
// user's dentist changed) hides that one from Recall for as long as it
// exists itself:
//
//	ids, err := mem.Remember(ctx, tenantID, memory.Item{
//		Text:   "The user's dentist is Dr. Kim.",
//		Kind:   "fact",
//		Source: memory.Provenance{ConversationID: conversationID},
//	})
//
// # Limits
//
// Every provider indexes and reads the same amount, through the shared
// checks: an item's Text is at most [MaxItemBytes] (64 KiB; a longer one is
// ErrInvalid and the call stores nothing), and Recall reads the first
// [MaxQueryBytes] (16 KiB) of its query, cut before the word that crosses
// the limit ([RecallQuery]); the rest is ignored, never an error. History
// is not indexed: a message is kept whole, whatever its size.
//
// # Recall
//
// Recall takes the user's message as typed ("what's my dentist's name
// again?") and returns the tenant's most relevant items, most relevant
// first, with Score set, within a [Budget] of tokens and entries (zero:
// no bound). An item larger than what remains of the budget is skipped,
// never truncated; a smaller, less relevant one may still be taken.
//
//	items, err := mem.Recall(ctx, tenantID, userMessage, memory.Budget{MaxTokens: 500, MaxEntries: 10})
//
// Items and queries are read the same way: split into runs of letters and
// digits, lowercased, English stop words dropped, each word reduced to its
// English (Porter2, "snowball") stem, so "dentists" finds "dentist" and
// "What's my dentist's name?" is the words "dentist" and "name". This
// follows PostgreSQL's 'english' text search configuration, which uses the
// same Snowball stemmer and stop words (its parser differs in details:
// hyphenated words, e-mail addresses, URLs). An item matches when it shares any word
// with the query; a query left with no words (only stop words,
// punctuation, nothing) recalls nothing, without an error. The in-memory
// provider ranks by BM25 over the tenant's items. With an llm.Embedder,
// vector similarity joins in (below).
//
// Recalled items are data about the user, not instructions: whoever puts
// them in a prompt must fence them off as such.
//
// # Forgetting
//
// Forget purges what one conversation, task or skill wrote: the items
// whose Source matches every non-empty field of the [Provenance], and,
// when it names only a conversation, that conversation's history. It
// returns how many items and messages it removed; an empty Provenance is
// ErrInvalid. A provider that is a [TenantDeleter], as InMemory is, also
// erases a whole tenant:
//
//	n, err := mem.Forget(ctx, tenantID, memory.Provenance{ConversationID: conversationID})
//	n, err = mem.(memory.TenantDeleter).DeleteTenant(ctx, tenantID)
//
// # The in-memory provider
//
// [InMemory] keeps everything in the process: nothing survives a restart
// and nothing is shared between replicas. It is bounded, so that a server
// seeing a million conversations does not grow without limit; every bound
// is a [Config] field with an exported default:
//
//   - at most DefaultMaxConversations (10,000) histories; a new one past
//     that drops the least recently used (by History or Append);
//   - a history idle for DefaultIdleTTL (24 hours) is dropped;
//   - at most DefaultMaxMessages (200) messages per history, the oldest
//     dropped first, cut so the history never starts with a tool result;
//   - at most DefaultMaxItemsPerTenant (1,000) items per tenant and
//     DefaultMaxItems (100,000) in all, the oldest dropped first. With an
//     Embedder each item also keeps its vector: 6 KiB for 1,536
//     dimensions, some 600 MiB for DefaultMaxItems items.
//
// Idle histories expire lazily, when History, Append or Forget next runs;
// no goroutine runs, and there is nothing to close. Items do not expire.
// Its clock comes from Config.Clock (nil: clock.System); tests pass one
// clock/clocktest.Clock to everything they wire.
//
// # Hybrid recall
//
// Given an llm.Embedder (Config.Embedder; memory/pgmemory has the same
// option), a provider merges the lexical ranking with a vector ranking by
// reciprocal rank fusion. Remember embeds its items' texts with one Embed
// call and keeps each item's vector. Recall embeds the query with one
// call, then:
//
//   - the candidates are the [LexicalCandidates] (100) best lexical
//     matches, or Budget.MaxEntries of them when that is more, and the
//     [RecentCandidates] (100) newest items of the tenant (by CreatedAt,
//     then the later written), superseded items left out. No vector index
//     is assumed: similarity is computed in Go, for these candidates
//     alone, never for all the tenant's items;
//   - the vector ranking holds the candidates whose cosine similarity to
//     the query is positive and at least Config.MinSimilarity (0 by
//     default), most similar first; an item without a
//     vector, or with one of another length than the query's (another
//     model), is not in it;
//   - each candidate scores the sum of 1/(60+rank) over the rankings that
//     hold it (rank 1 is the first), and Score is that sum; a candidate in
//     neither ranking is not recalled; equal scores come newest first;
//   - the Budget applies to that order as it does without an Embedder.
//
// So an item sharing no word with the query ("who fixes my teeth?", "The
// user's dentist is Dr. Kim.") is found by similarity alone, when it is
// among the candidates, and a query with no word left after normalisation
// ("Where?") is answered from the newest items by similarity alone. A
// query without a letter or a digit is not embedded and recalls nothing.
// With an Embedder a Recall returns at most the candidates, whatever the
// budget.
//
// A failing embedder never fails a call. When Remember's Embed call fails,
// or returns vectors that do not answer the texts (llm.CheckEmbeddings),
// the items are stored without vectors, and are recalled lexically only,
// even once the embedder is back; when Recall's call fails, it answers
// lexically, exactly as without an Embedder. A ctx that ends during the
// call is still returned as an error. Nothing reports the failures: wrap
// the Embedder to log or count them.
//
// # Writing a provider
//
// memory/memorytest is the conformance suite every Provider passes; run it
// from the new provider's tests (memorytest.RunHybrid too, for a provider
// that takes an llm.Embedder).
//
// # Errors
//
// Methods return ErrInvalid, wrapped with what was wrong, for bad input,
// and ctx.Err() when ctx is done; check them with errors.Is. A call that
// fails changes nothing.
package memory
