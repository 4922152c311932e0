// Package memorytest is the conformance suite for implementations of
// memory.Provider, in the manner of testing/slogtest: a provider's own
// tests call [Run] with a constructor, and every behaviour the memory
// package documents is checked as a parallel subtest with a provider of
// its own.
//
//	func TestProvider(t *testing.T) {
//		memorytest.Run(t, func(t *testing.T) memory.Provider {
//			schema := createSchema(t)                  // isolate this subtest
//			t.Cleanup(func() { dropSchema(schema) })   // and leave nothing behind
//			p, err := myprovider.New(db, myprovider.Config{Schema: schema})
//			if err != nil {
//				t.Fatal(err)
//			}
//			return p
//		})
//	}
//
// Run checks History (newest messages oldest first, the limit, a window
// never starting with a tool result, every window passing
// llm.CheckPairing, every message field kept), Append (copies kept, bad
// turns and IDs rejected with memory.ErrInvalid and nothing stored),
// tenant isolation of histories, items, Supersedes and Forget, Remember
// (new unique IDs, Tokens estimated at write, CreatedAt defaulted or kept),
// Recall (relevance order, any word matching, case and English stemming
// normalised so "dentists" finds "dentist", queries of only stop words or
// punctuation recalling nothing without an error, budgets of tokens and
// entries, an item too large for the budget skipped), Supersedes hiding
// an item while the superseding one exists, Forget by conversation (items
// and history), task and skill, with counts and an empty Provenance
// rejected, DeleteTenant when the provider is a memory.TenantDeleter,
// a done ctx changing nothing, concurrent use, and the limits: an item of
// memory.MaxItemBytes stored, a longer one (2 MB among them) refused, a 1 MB
// query read up to memory.MaxQueryBytes and cut between words, and a 2 MB
// history message kept whole.
//
// A provider that takes an llm.Embedder runs [RunHybrid] too, with a
// constructor that passes it the embedder of each subtest (an
// llmtest.Embedder):
//
//	memorytest.RunHybrid(t, func(t *testing.T, e llm.Embedder) memory.Provider {
//		return newProvider(t, myprovider.Config{Embedder: e})
//	})
//
// It checks what the memory package documents under "Hybrid recall": an
// item found by similarity alone, the lexical and vector rankings merged
// by reciprocal rank fusion (their order, equal weights, the budget
// applied after), a query of stop words answered by similarity, embedder
// failures and bad vectors at Remember and at Recall leaving lexical
// recall working, tenant isolation and Supersedes for vector matches, and
// concurrent use.
//
// The suites write at most 100 messages to one conversation, 100 items to
// one tenant and 10 conversations to one provider, and need a provider
// that keeps at least that many.
// It uses the real clock and never sleeps.
package memorytest
