// Package memory is what an assistant remembers: the history of each
// conversation, and long-term items — facts about the user, preferences,
// dates — that any later conversation of the same tenant can recall.
//
// [Provider] is the interface; [NewInMemory] returns the bounded
// in-memory provider, the default for tests, demos and single-process
// bots:
//
//	mem := memory.NewInMemory(memory.Options{}) // the defaults
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
// [Provenance] — the conversation, trigger task or skill that wrote it —
// and its estimated size, Tokens: ceil(len(Text) / 3), Text in bytes
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
// provider ranks by BM25 over the tenant's items.
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
// is an [Options] field with an exported default:
//
//   - at most DefaultMaxConversations (10,000) histories; a new one past
//     that drops the least recently used (by History or Append);
//   - a history idle for DefaultIdleTTL (24 hours) is dropped;
//   - at most DefaultMaxMessages (200) messages per history, the oldest
//     dropped first, cut so the history never starts with a tool result;
//   - at most DefaultMaxItemsPerTenant (1,000) items per tenant and
//     DefaultMaxItems (100,000) in all, the oldest dropped first.
//
// Idle histories expire lazily, when History, Append or Forget next runs;
// no goroutine runs, and there is nothing to close. Items do not expire.
//
// # Not yet here
//
// Vector recall — an llm.Embedder ranking items by similarity, merged with
// the lexical ranking by reciprocal rank fusion — and the PostgreSQL
// provider, memory/pgmemory, come in later changes; today recall is
// lexical only.
//
// # Writing a provider
//
// memory/memorytest is the conformance suite every Provider passes; run it
// from the new provider's tests.
//
// # Errors
//
// Methods return ErrInvalid, wrapped with what was wrong, for bad input,
// and ctx.Err() when ctx is done; check them with errors.Is. A call that
// fails changes nothing.
package memory
