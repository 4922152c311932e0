package memory

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/valetkit/valet/internal/ids"
	"github.com/valetkit/valet/llm"
)

// SummaryName marks a history message as a summary of the conversation
// before it (see IsSummary): a compaction (agent.LoopConfig) appends it,
// followed by the messages it kept verbatim, and History starts at the
// newest one, so what it summarises is never loaded again.
const SummaryName = "valet_summary"

// IsSummary reports whether m is a summary message: a system message named
// SummaryName.
func IsSummary(m *llm.Message) bool { return m.Role == llm.RoleSystem && m.Name == SummaryName }

// Errors, checked with errors.Is.
var (
	// ErrInvalid: an empty or malformed tenant or conversation ID, a
	// negative History limit or Budget, an item without text or with an
	// ID of its own, a turn whose tool calls and results do not pair up,
	// or an empty Provenance given to Forget. Nothing was changed.
	ErrInvalid = errors.New("memory: invalid")
)

// MaxIDLen is the longest tenant or conversation ID, in bytes: the one
// limit of every valet package that takes IDs (trigger.MaxIDLen,
// agent.MaxIDLen, pool.MaxIDLen and credentials.MaxNameLen are equal).
const MaxIDLen = ids.MaxLen

// Limits on what a Provider indexes and reads, the same for every
// provider (they pass through CheckItem and RecallQuery).
const (
	// MaxItemBytes is the longest Item.Text, in bytes: Remember refuses a
	// longer item with ErrInvalid. An item's whole text is indexed for
	// Recall (pgmemory: a tsvector, which holds at most 1 MB of words).
	// It is trigger.MaxTextLen, so a task's result fits.
	MaxItemBytes = 64 << 10
	// MaxQueryBytes is how much of a Recall query is read, in bytes: a
	// longer query is cut before the word that crosses the limit (see
	// RecallQuery), and the rest of it is ignored, never an error.
	MaxQueryBytes = 16 << 10
)

// CharsPerToken is the ratio behind [Item.Tokens]: a memory item of n
// bytes of text is estimated at ceil(n / CharsPerToken) tokens.
const CharsPerToken = 3

// Provider is where an assistant keeps what it remembers: each
// conversation's history, and long-term items (facts about the user) that
// any later conversation of the tenant can recall.
//
// Every method is scoped to one tenant: the same conversation or item ID
// in two tenants names two different things, and no method ever returns,
// changes or removes another tenant's data. Implementations are safe for
// concurrent use, honour ctx, and return errors wrapping [ErrInvalid] for
// bad input (before changing anything) and ctx.Err() when ctx is done.
//
// memory/memorytest.Run is the conformance suite every Provider passes.
type Provider interface {
	// History returns the newest limit messages of the conversation,
	// oldest first; limit 0 means all the provider keeps. The window never
	// starts with a tool result (whose call it would have cut off): it
	// starts after such results, so it may hold fewer than limit messages.
	// When the newest limit messages hold a summary (IsSummary), the window
	// starts at the newest summary: what precedes it is summarised by it.
	// An unknown conversation has no messages. The slice and the messages
	// are the caller's to modify.
	History(ctx context.Context, tenantID, conversationID string, limit int) ([]llm.Message, error)
	// Append adds one completed turn to the conversation's history. The
	// turn must pair on its own (llm.CheckPairing): every tool call it
	// makes is answered within it and every tool result answers one of
	// its calls; otherwise Append fails with ErrInvalid and stores nothing.
	// The provider keeps copies: the caller may reuse msgs.
	Append(ctx context.Context, tenantID, conversationID string, msgs ...llm.Message) error
	// Remember stores items and returns their new IDs, in order. Each
	// needs Text; ID, Tokens and Score are the provider's to set (an item
	// with an ID is ErrInvalid), CreatedAt defaults to now. An item whose
	// Supersedes names another item of the tenant hides that item from
	// Recall for as long as it exists itself.
	Remember(ctx context.Context, tenantID string, items ...Item) ([]string, error)
	// Recall returns the tenant's items most relevant to query, most
	// relevant first with Score set, within b (see Budget); of equally
	// relevant items the newest (by CreatedAt, then the later written)
	// comes first. query is text as a user typed it; an item matches when
	// it shares any normalised word with it (see the package
	// documentation) or, for a provider given an llm.Embedder, when its
	// vector is among those most similar to the query's (see "Hybrid
	// recall" there). A query with no words left after normalisation
	// (only stop words, punctuation, nothing) matches no item lexically
	// and is not an error; without an Embedder it recalls nothing. Items
	// superseded by another item of the tenant are not recalled.
	Recall(ctx context.Context, tenantID, query string, b Budget) ([]Item, error)
	// Forget removes the tenant's items whose Source matches every
	// non-empty field of by, and returns how many items and history
	// messages it removed. When by names a conversation and nothing else,
	// that conversation's history goes too. An empty by is ErrInvalid.
	Forget(ctx context.Context, tenantID string, by Provenance) (int, error)
}

// TenantDeleter is implemented by providers that can erase a tenant, as
// [InMemory] does.
type TenantDeleter interface {
	// DeleteTenant removes every item and every conversation's history of
	// the tenant and returns how many items and history messages it
	// removed.
	DeleteTenant(ctx context.Context, tenantID string) (int, error)
}

// Item is one long-term memory: a fact about the user ("Their dentist is
// Dr. Kim"), a preference, a date.
type Item struct {
	// ID is set by the provider; it is unique within the tenant.
	ID string
	// Text is what is remembered, as the model will read it.
	Text string
	// Kind is a free-form label ("preference", "fact", "summary").
	Kind string
	// Source records what wrote the item, so that Forget can purge it.
	Source Provenance
	// Origin says where the text came from: the user's own words, the
	// assistant's, a triggered run, a tool, or the host (the zero value).
	// Recall returns it, so that the model can be told which items are
	// facts the user stated and which are not.
	Origin Origin
	// CreatedAt is when the item was written; zero means now.
	CreatedAt time.Time
	// Tokens is the item's estimated size, set by the provider when the
	// item is written: ceil(len(Text) / CharsPerToken), Text in bytes.
	Tokens int
	// Supersedes is the ID of an older item this one replaces: while this
	// item exists, that one is not recalled.
	Supersedes string
	// Score is the item's relevance to the query, set by Recall; higher is
	// more relevant. Scores compare only within one Recall's result.
	Score float64
}

// Origin is where an item's text came from. The zero value,
// OriginHost, is an item the host application wrote itself (a profile it
// imported): it is shown to the model as a fact about the user, as items
// written before Origin existed are.
type Origin string

// The origins of an item.
const (
	// OriginHost: written by the host application's own code, trusted
	// like the user. The zero value.
	OriginHost Origin = ""
	// OriginUser: taken from what the user wrote (agent's fact
	// extraction of a user's message).
	OriginUser Origin = "user"
	// OriginAssistant: taken from the assistant's answers, not from the
	// user's own words.
	OriginAssistant Origin = "assistant"
	// OriginTrigger: written by or taken from a triggered run (a task's
	// result stored by a memory_update route, a scheduled task's text, an
	// event's data): not a fact about the user.
	OriginTrigger Origin = "trigger"
	// OriginTool: taken from tool results (a mail, a web page): text
	// anyone may have written, not a fact about the user.
	OriginTool Origin = "tool"
)

// Valid reports whether o is one of the origins above.
func (o Origin) Valid() bool {
	switch o {
	case OriginHost, OriginUser, OriginAssistant, OriginTrigger, OriginTool:
		return true
	}
	return false
}

// Provenance names what wrote an item: a conversation, a trigger task, a
// skill. Any of the fields may be empty.
type Provenance struct {
	ConversationID string
	TaskID         string
	SkillID        string
}

// isZero reports whether p names nothing.
func (p Provenance) isZero() bool { return p == Provenance{} }

// matches reports whether src matches every non-empty field of p.
func (p Provenance) matches(src Provenance) bool {
	return (p.ConversationID == "" || p.ConversationID == src.ConversationID) &&
		(p.TaskID == "" || p.TaskID == src.TaskID) &&
		(p.SkillID == "" || p.SkillID == src.SkillID)
}

// Budget bounds what Recall returns: at most MaxTokens tokens of items
// (the sum of their Tokens) and at most MaxEntries items. Zero means no
// bound; negative values are ErrInvalid.
//
// Recall walks the matching items from the most relevant down and takes
// each one that still fits: an item larger than what remains of MaxTokens
// is skipped (never truncated), and a smaller, less relevant one after it
// may still be taken.
type Budget struct {
	MaxTokens  int
	MaxEntries int
}

// EstimateTokens returns the token estimate of a memory item's text:
// ceil(len(text) / CharsPerToken), with len in bytes.
func EstimateTokens(text string) int {
	return (len(text) + CharsPerToken - 1) / CharsPerToken
}

// The checks below are what every Provider does to its input; they are
// exported for Provider implementations, so all behave alike.

// CheckID checks a tenant or conversation ID (what names it in the error):
// not empty, at most MaxIDLen bytes, valid UTF-8, no NUL byte. Errors wrap
// ErrInvalid.
func CheckID(what, id string) error {
	if ids.Valid(id) { // the common case allocates nothing
		return nil
	}
	return fmt.Errorf("%w: %v", ErrInvalid, ids.Check(what+" ID", id))
}

// CheckTurn checks the messages of one turn for Append: known roles, and
// tool calls paired within the turn (llm.CheckPairing). Errors wrap
// ErrInvalid.
func CheckTurn(msgs []llm.Message) error {
	for i, m := range msgs {
		switch m.Role {
		case llm.RoleSystem, llm.RoleUser, llm.RoleAssistant, llm.RoleTool:
		default:
			return fmt.Errorf("%w: message %d has role %q", ErrInvalid, i, m.Role)
		}
	}
	if err := llm.CheckPairing(msgs); err != nil {
		return fmt.Errorf("%w: a turn must pair on its own: %w", ErrInvalid, err)
	}
	return nil
}

// CheckItem checks the i-th item given to Remember: no ID (the provider
// sets it), some text of at most MaxItemBytes, a known Origin, and every
// text field (Text, Kind, the Source IDs,
// Supersedes) valid UTF-8 without NUL bytes, which a database's text can
// hold. Errors wrap ErrInvalid.
func CheckItem(i int, it *Item) error {
	switch {
	case it.ID != "":
		return fmt.Errorf("%w: item %d has ID %q; IDs are the provider's to set", ErrInvalid, i, it.ID)
	case strings.TrimSpace(it.Text) == "":
		return fmt.Errorf("%w: item %d has no text", ErrInvalid, i)
	case len(it.Text) > MaxItemBytes:
		return fmt.Errorf("%w: item %d has %d bytes of text, more than %d", ErrInvalid, i, len(it.Text), MaxItemBytes)
	case !it.Origin.Valid():
		return fmt.Errorf("%w: item %d has unknown Origin %q", ErrInvalid, i, it.Origin)
	}
	for _, f := range [...]struct{ name, v string }{
		{"text", it.Text},
		{"Kind", it.Kind},
		{"Source.ConversationID", it.Source.ConversationID},
		{"Source.TaskID", it.Source.TaskID},
		{"Source.SkillID", it.Source.SkillID},
		{"Supersedes", it.Supersedes},
	} {
		if !utf8.ValidString(f.v) || strings.IndexByte(f.v, 0) >= 0 {
			return fmt.Errorf("%w: item %d: %s is not valid UTF-8 or holds a NUL byte", ErrInvalid, i, f.name)
		}
	}
	return nil
}

// RecallQuery returns query as every Provider reads it for Recall: NUL
// bytes and invalid UTF-8 replaced by spaces, and cut to at most
// MaxQueryBytes bytes at the last white space before the limit, so that
// no word is cut in two (at a rune boundary when the first MaxQueryBytes
// bytes hold no white space).
func RecallQuery(query string) string {
	if strings.IndexByte(query, 0) >= 0 || !utf8.ValidString(query) {
		query = strings.ToValidUTF8(strings.ReplaceAll(query, "\x00", " "), " ")
	}
	if len(query) <= MaxQueryBytes {
		return query
	}
	cut := MaxQueryBytes
	for cut > 0 && !utf8.RuneStart(query[cut]) {
		cut--
	}
	if r, _ := utf8.DecodeRuneInString(query[cut:]); unicode.IsSpace(r) {
		return query[:cut]
	}
	if i := strings.LastIndexFunc(query[:cut], unicode.IsSpace); i >= 0 {
		return query[:i]
	}
	return query[:cut]
}

// CheckBudget checks a Recall budget: no negative bound. Errors wrap
// ErrInvalid.
func CheckBudget(b Budget) error {
	if b.MaxTokens < 0 || b.MaxEntries < 0 {
		return fmt.Errorf("%w: budget %+v is negative", ErrInvalid, b)
	}
	return nil
}

// cloneTurn replaces the tool calls of msgs, in place, with copies that
// share nothing with the originals: two allocations for the whole turn,
// one array holding every call and one every call's arguments.
func cloneTurn(msgs []llm.Message) {
	calls, args := 0, 0
	for i := range msgs {
		calls += len(msgs[i].ToolCalls)
		for _, c := range msgs[i].ToolCalls {
			args += len(c.Arguments)
		}
	}
	if calls == 0 {
		for i := range msgs {
			if msgs[i].ToolCalls != nil {
				msgs[i].ToolCalls = []llm.ToolCall{}
			}
		}
		return
	}
	callBuf := make([]llm.ToolCall, 0, calls)
	argBuf := make([]byte, 0, args)
	for i := range msgs {
		tc := msgs[i].ToolCalls
		if tc == nil {
			continue
		}
		at := len(callBuf)
		for _, c := range tc {
			if c.Arguments != nil {
				a := len(argBuf)
				argBuf = append(argBuf, c.Arguments...)
				c.Arguments = argBuf[a:len(argBuf):len(argBuf)]
			}
			callBuf = append(callBuf, c)
		}
		msgs[i].ToolCalls = callBuf[at:len(callBuf):len(callBuf)]
	}
}
