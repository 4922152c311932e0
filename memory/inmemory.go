package memory

import (
	"cmp"
	"container/list"
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/valetkit/valet/clock"

	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/memory/internal/hybrid"
)

// Defaults of a zero [Config].
const (
	// DefaultMaxConversations is how many conversations' histories the
	// in-memory provider keeps; past it the least recently used goes.
	DefaultMaxConversations = 10_000
	// DefaultIdleTTL is how long a conversation's history is kept after
	// its last History or Append.
	DefaultIdleTTL = 24 * time.Hour
	// DefaultMaxMessages is how many messages of one conversation's
	// history are kept (five times agentctx.DefaultMaxHistoryMessages);
	// past it the oldest go.
	DefaultMaxMessages = 200
	// DefaultMaxItemsPerTenant is how many items one tenant keeps; past
	// it the tenant's oldest item goes.
	DefaultMaxItemsPerTenant = 1_000
	// DefaultMaxItems is how many items all tenants keep together; past
	// it the oldest item of all goes.
	DefaultMaxItems = 100_000
)

// Config configures [NewInMemory]. The zero value means the documented
// defaults; a zero number means its default and a negative one is refused
// by NewInMemory.
type Config struct {
	// Embedder, when set, adds vector similarity to Recall (see "Hybrid
	// recall" in the package documentation). Remember embeds its items'
	// texts with one Embed call, outside the provider's locks; when that
	// fails (or returns vectors that do not answer the texts), the items
	// are stored without vectors and Remember still succeeds: they are
	// recalled lexically only. Recall embeds the query with one call;
	// when that fails, it answers lexically, as without an Embedder. Each
	// item keeps its vector: 6 KiB for 1,536 dimensions.
	// Default: nil, lexical recall only.
	Embedder llm.Embedder
	// IdleTTL is how long a conversation's history is kept after its
	// last History or Append. Default: DefaultIdleTTL (24h).
	IdleTTL time.Duration
	// MaxConversations is how many conversations' histories are kept,
	// over all tenants; storing one more drops the least recently used
	// (History or Append). Default: DefaultMaxConversations (10,000).
	MaxConversations int
	// MaxItems is how many items all tenants keep together; Remember drops
	// the oldest of all past it. Default: DefaultMaxItems (100,000).
	MaxItems int
	// MaxItemsPerTenant is how many items one tenant keeps; Remember
	// drops the tenant's oldest (by the order they were remembered) past
	// it; never more than MaxItems. Default: DefaultMaxItemsPerTenant
	// (1,000), or MaxItems when that is lower.
	MaxItemsPerTenant int
	// MaxMessages is how many messages of one conversation's history are
	// kept; Append drops the oldest past it, cutting so that the history
	// never starts with a tool result. Default: DefaultMaxMessages (200).
	MaxMessages int
	// MinSimilarity is the least cosine similarity to the query an item
	// needs to enter the vector ranking of hybrid recall (with an
	// Embedder), from 0 to 1: an item below it is recalled only as a
	// lexical match, so that items merely less dissimilar than the rest
	// do not fill the budget. Default: 0, any positive similarity.
	MinSimilarity float64
	// Clock is the provider's clock. Nil: clock.System.
	Clock clock.Clock
}

// withDefaults returns c with every zero field set to its default, or an
// error wrapping ErrInvalid naming the negative field it refuses.
func (c Config) withDefaults() (Config, error) {
	switch {
	case c.IdleTTL < 0:
		return c, fmt.Errorf("%w: Config.IdleTTL %v is negative", ErrInvalid, c.IdleTTL)
	case c.MaxConversations < 0:
		return c, fmt.Errorf("%w: Config.MaxConversations %d is negative", ErrInvalid, c.MaxConversations)
	case c.MaxItems < 0:
		return c, fmt.Errorf("%w: Config.MaxItems %d is negative", ErrInvalid, c.MaxItems)
	case c.MaxItemsPerTenant < 0:
		return c, fmt.Errorf("%w: Config.MaxItemsPerTenant %d is negative", ErrInvalid, c.MaxItemsPerTenant)
	case c.MaxMessages < 0:
		return c, fmt.Errorf("%w: Config.MaxMessages %d is negative", ErrInvalid, c.MaxMessages)
	case !(c.MinSimilarity >= 0 && c.MinSimilarity <= 1): // NaN too
		return c, fmt.Errorf("%w: Config.MinSimilarity %v is not between 0 and 1", ErrInvalid, c.MinSimilarity)
	}
	c.MaxConversations = cmp.Or(c.MaxConversations, DefaultMaxConversations)
	c.MaxMessages = cmp.Or(c.MaxMessages, DefaultMaxMessages)
	c.MaxItems = cmp.Or(c.MaxItems, DefaultMaxItems)
	c.MaxItemsPerTenant = min(cmp.Or(c.MaxItemsPerTenant, DefaultMaxItemsPerTenant), c.MaxItems)
	c.IdleTTL = cmp.Or(c.IdleTTL, DefaultIdleTTL)
	c.Clock = clock.Or(c.Clock)
	return c, nil
}

// InMemory is the bounded in-memory [Provider], the default: for tests,
// demos and single-process bots whose memory need not survive a restart.
// It implements Provider and [TenantDeleter] and is safe for concurrent
// use.
//
// It holds at most MaxConversations histories of at most MaxMessages
// messages each, and at most MaxItems items (MaxItemsPerTenant per
// tenant); see [Config]. Idle histories expire lazily: each History,
// Append and Forget first drops the histories idle for longer than
// IdleTTL. No goroutine runs, so there is nothing to close. Items do not
// expire; only the caps remove them.
//
// The zero InMemory is not usable; call NewInMemory.
type InMemory struct {
	maxConvs, maxMsgs int
	maxTenantItems    int
	maxItems          int
	ttl               time.Duration
	now               func() time.Time
	embedder          llm.Embedder
	minSimilarity     float64

	// convMu guards the histories. Lock order: convMu, then itemMu.
	convMu sync.Mutex
	convs  map[convKey]*list.Element // of *conversation
	lru    list.List                 // of *conversation, most recently used first

	itemMu  sync.RWMutex
	tenants map[string]*tenantItems
	items   list.List // of *storedItem, oldest first, over all tenants
	nextID  uint64
}

var (
	_ Provider      = (*InMemory)(nil)
	_ TenantDeleter = (*InMemory)(nil)
)

type convKey struct{ tenant, conv string }

// conversation is one history, oldest message first. It grows like a
// slice up to MaxMessages and is then a ring of exactly MaxMessages slots
// whose oldest message is at head, so a turn is added at the cost of its
// own messages, never of the whole history.
type conversation struct {
	key  convKey
	msgs []llm.Message
	head int // the oldest message, once msgs is full; 0 until then
	used time.Time
}

// at returns the i-th message, oldest first.
func (c *conversation) at(i int) *llm.Message { return &c.msgs[(c.head+i)%len(c.msgs)] }

// window returns the index of the first message of the newest limit (all
// when limit is 0), or of the newest summary among them, past any leading
// tool results: their calls are cut off.
func (c *conversation) window(limit int) int {
	from := 0
	if limit > 0 && len(c.msgs) > limit {
		from = len(c.msgs) - limit
	}
	for i := len(c.msgs) - 1; i > from; i-- {
		if IsSummary(c.at(i)) { // what precedes it is summarised by it
			from = i
			break
		}
	}
	for from < len(c.msgs) && c.at(from).Role == llm.RoleTool {
		from++
	}
	return from
}

// add appends msgs, dropping the oldest messages past max.
func (c *conversation) add(msgs []llm.Message, max int) {
	if len(msgs) > max {
		msgs = msgs[len(msgs)-max:]
	}
	if need := len(c.msgs) + len(msgs); len(c.msgs) < max && need > cap(c.msgs) {
		// Grow by a quarter more than the turn needs (amortised O(1) per
		// message with little spare room when idle), never past max: a
		// full history holds no spare room.
		grown := make([]llm.Message, len(c.msgs), min(max, need+need/4))
		copy(grown, c.msgs)
		c.msgs = grown
	}
	for _, msg := range msgs {
		if len(c.msgs) < max {
			c.msgs = append(c.msgs, msg)
			continue
		}
		c.msgs[c.head] = msg
		c.head = (c.head + 1) % len(c.msgs)
	}
	// The turn's copies own their tool calls: cloned where they landed,
	// in one run of slots or two when the ring wraps.
	n := len(msgs)
	first := (c.head + len(c.msgs) - n) % len(c.msgs)
	if first+n <= len(c.msgs) {
		cloneTurn(c.msgs[first : first+n])
	} else {
		cloneTurn(c.msgs[first:])
		cloneTurn(c.msgs[:first+n-len(c.msgs)])
	}
}

// tenantItems is one tenant's items and their lexical index.
type tenantItems struct {
	byID     map[string]*storedItem
	order    list.List                           // of *storedItem, oldest first
	postings map[string]map[*storedItem]struct{} // word → items holding it
	words    int                                 // sum of the items' lengths in words
	hidden   map[string]int                      // item ID → how many items supersede it
}

type storedItem struct {
	item   Item
	tenant string
	tf     map[string]int // normalised word → occurrences
	length int            // words, repeats counted
	local  *list.Element  // in tenantItems.order
	global *list.Element  // in InMemory.items
	vec    []float32      // the text's embedding; nil without one
}

// NewInMemory returns an empty in-memory provider configured by cfg; the
// zero Config means the defaults. A negative setting is an error wrapping
// ErrInvalid, as on every other backend.
func NewInMemory(cfg Config) (*InMemory, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &InMemory{
		maxConvs:       cfg.MaxConversations,
		maxMsgs:        cfg.MaxMessages,
		maxTenantItems: cfg.MaxItemsPerTenant,
		maxItems:       cfg.MaxItems,
		ttl:            cfg.IdleTTL,
		now:            cfg.Clock.Now,
		embedder:       cfg.Embedder,
		minSimilarity:  cfg.MinSimilarity,
		convs:          make(map[convKey]*list.Element),
		tenants:        make(map[string]*tenantItems),
	}, nil
}

// History returns the newest limit messages of a conversation; see
// [Provider.History]. Limit 0 means all it keeps (at most MaxMessages).
func (m *InMemory) History(ctx context.Context, tenantID, conversationID string, limit int) ([]llm.Message, error) {
	out, err := m.AppendHistory(ctx, nil, tenantID, conversationID, limit)
	if err != nil || len(out) == 0 {
		return nil, err
	}
	cloneTurn(out) // the caller's to modify: nothing shared
	return out, nil
}

// AppendHistory is History appending to dst: it returns dst with the
// newest limit messages of the conversation added, oldest first, and
// allocates nothing when dst has room. The messages added share their
// ToolCalls (and the calls' Arguments) with the provider, which never
// changes them: the caller must not modify them in place either (replacing
// a message's ToolCalls slice is fine). On error dst is returned as given.
func (m *InMemory) AppendHistory(ctx context.Context, dst []llm.Message, tenantID, conversationID string, limit int) ([]llm.Message, error) {
	if err := checkConv(tenantID, conversationID); err != nil {
		return dst, err
	}
	if limit < 0 {
		return dst, fmt.Errorf("%w: history limit %d is negative", ErrInvalid, limit)
	}
	if err := ctx.Err(); err != nil {
		return dst, err
	}
	m.convMu.Lock()
	defer m.convMu.Unlock()
	now := m.now()
	m.expire(now)
	c := m.conversation(convKey{tenantID, conversationID}, now)
	if c == nil {
		return dst, nil
	}
	from := c.window(limit)
	if head := (c.head + from) % max(len(c.msgs), 1); from < len(c.msgs) && head+len(c.msgs)-from <= len(c.msgs) {
		return append(dst, c.msgs[head:head+len(c.msgs)-from]...), nil // one contiguous run
	}
	for i := from; i < len(c.msgs); i++ {
		dst = append(dst, *c.at(i))
	}
	return dst, nil
}

// Append adds one completed turn; see [Provider.Append]. Past MaxMessages
// the oldest messages go; a new conversation past MaxConversations drops
// the least recently used one.
func (m *InMemory) Append(ctx context.Context, tenantID, conversationID string, msgs ...llm.Message) error {
	if err := checkConv(tenantID, conversationID); err != nil {
		return err
	}
	if err := CheckTurn(msgs); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(msgs) == 0 {
		return nil
	}
	m.convMu.Lock()
	defer m.convMu.Unlock()
	now := m.now()
	m.expire(now)
	key := convKey{tenantID, conversationID}
	c := m.conversation(key, now)
	if c == nil {
		for len(m.convs) >= m.maxConvs {
			m.dropConversation(m.lru.Back())
		}
		c = &conversation{key: key, used: now}
		m.convs[key] = m.lru.PushFront(c)
	}
	c.add(msgs, m.maxMsgs)
	return nil
}

// conversation returns the live conversation of key and marks it used,
// or nil. convMu is held.
func (m *InMemory) conversation(key convKey, now time.Time) *conversation {
	e, ok := m.convs[key]
	if !ok {
		return nil
	}
	c := e.Value.(*conversation)
	if now.Sub(c.used) > m.ttl {
		m.dropConversation(e)
		return nil
	}
	c.used = now
	m.lru.MoveToFront(e)
	return c
}

// expire drops the conversations idle for longer than the TTL: they are
// at the back of the LRU list. convMu is held.
func (m *InMemory) expire(now time.Time) {
	for e := m.lru.Back(); e != nil && now.Sub(e.Value.(*conversation).used) > m.ttl; e = m.lru.Back() {
		m.dropConversation(e)
	}
}

// dropConversation removes a conversation and returns how many messages
// it held. convMu is held.
func (m *InMemory) dropConversation(e *list.Element) int {
	c := m.lru.Remove(e).(*conversation)
	delete(m.convs, c.key)
	return len(c.msgs) - c.window(0) // what History could still return
}

// Remember stores items; see [Provider.Remember]. Past MaxItemsPerTenant
// the tenant's oldest item goes, past MaxItems the oldest of all; a call
// with more than MaxItemsPerTenant items is ErrInvalid. With an
// Embedder, the items' texts are embedded first, in one call; if it
// fails, the items are stored without vectors (see [Config]).
func (m *InMemory) Remember(ctx context.Context, tenantID string, items ...Item) ([]string, error) {
	if err := CheckID("tenant", tenantID); err != nil {
		return nil, err
	}
	if len(items) > m.maxTenantItems {
		return nil, fmt.Errorf("%w: %d items at once, more than a tenant keeps (%d)", ErrInvalid, len(items), m.maxTenantItems)
	}
	for i := range items {
		if err := CheckItem(i, &items[i]); err != nil {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return nil, nil
	}
	var vecs [][]float32
	if m.embedder != nil {
		texts := make([]string, len(items))
		for i := range items {
			texts[i] = items[i].Text
		}
		vecs = hybrid.Embed(ctx, m.embedder, texts)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	now := m.now()
	m.itemMu.Lock()
	defer m.itemMu.Unlock()
	t := m.tenants[tenantID]
	if t == nil {
		t = &tenantItems{
			byID:     make(map[string]*storedItem),
			postings: make(map[string]map[*storedItem]struct{}),
			hidden:   make(map[string]int),
		}
		m.tenants[tenantID] = t
	}
	ids := make([]string, len(items))
	for i, it := range items {
		m.nextID++
		it.ID = strconv.FormatUint(m.nextID, 10)
		it.Tokens = EstimateTokens(it.Text)
		it.Score = 0
		if it.CreatedAt.IsZero() {
			it.CreatedAt = now
		}
		ids[i] = it.ID
		for t.order.Len() >= m.maxTenantItems {
			m.removeItem(t.order.Front().Value.(*storedItem))
		}
		for m.items.Len() >= m.maxItems {
			m.removeItem(m.items.Front().Value.(*storedItem))
		}
		if m.tenants[tenantID] == nil { // the loops above emptied and removed it
			m.tenants[tenantID] = t
		}
		s := &storedItem{item: it, tenant: tenantID, tf: make(map[string]int)}
		if vecs != nil {
			s.vec = vecs[i]
		}
		for _, w := range words(it.Text) {
			s.tf[w]++
			s.length++
		}
		for w := range s.tf {
			p := t.postings[w]
			if p == nil {
				p = make(map[*storedItem]struct{})
				t.postings[w] = p
			}
			p[s] = struct{}{}
		}
		t.words += s.length
		if it.Supersedes != "" {
			t.hidden[it.Supersedes]++
		}
		t.byID[it.ID] = s
		s.local = t.order.PushBack(s)
		s.global = m.items.PushBack(s)
	}
	return ids, nil
}

// removeItem removes an item from its tenant and from the provider; a
// tenant left with no items is removed too. itemMu is held.
func (m *InMemory) removeItem(s *storedItem) {
	t := m.tenants[s.tenant]
	t.order.Remove(s.local)
	m.items.Remove(s.global)
	delete(t.byID, s.item.ID)
	for w := range s.tf {
		p := t.postings[w]
		delete(p, s)
		if len(p) == 0 {
			delete(t.postings, w)
		}
	}
	t.words -= s.length
	if sup := s.item.Supersedes; sup != "" {
		if t.hidden[sup]--; t.hidden[sup] <= 0 {
			delete(t.hidden, sup)
		}
	}
	if t.order.Len() == 0 {
		delete(m.tenants, s.tenant)
	}
}

// Recall returns the items most relevant to query within b; see
// [Provider.Recall]. Relevance is BM25 over the tenant's items and, with
// an Embedder, the cosine similarity of the candidates' vectors to the
// query's, the two rankings merged by reciprocal rank fusion (see
// "Hybrid recall" in the package documentation). Only the first
// MaxQueryBytes of query are read (RecallQuery).
func (m *InMemory) Recall(ctx context.Context, tenantID, query string, b Budget) ([]Item, error) {
	if err := CheckID("tenant", tenantID); err != nil {
		return nil, err
	}
	if err := CheckBudget(b); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// A tenant with no items recalls nothing: no need to read the query
	// (or to pay for embedding it), which a bot that never remembers
	// anything would otherwise do on every message.
	m.itemMu.RLock()
	empty := m.tenants[tenantID] == nil
	m.itemMu.RUnlock()
	if empty {
		return nil, nil
	}
	query = RecallQuery(query)
	terms := queryTerms(query)
	var qvec []float32
	if m.embedder != nil && hybrid.HasWord(query) {
		if vecs := hybrid.Embed(ctx, m.embedder, []string{query}); vecs != nil {
			qvec = vecs[0]
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	if len(terms) == 0 && qvec == nil {
		return nil, nil
	}
	m.itemMu.RLock()
	var hits []hit
	if t := m.tenants[tenantID]; t != nil {
		hits = t.lexical(terms)
		if qvec != nil {
			hits = t.fuse(hits, qvec, m.minSimilarity, b)
		}
	}
	out := take(hits, b)
	m.itemMu.RUnlock()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// lexical returns the items matching any of terms, ranked by BM25, best
// first, then newest first. itemMu is held.
func (t *tenantItems) lexical(terms []string) []hit {
	if len(terms) == 0 {
		return nil
	}
	n := t.order.Len()
	avgdl := float64(t.words) / float64(n)
	scores := make(map[*storedItem]float64)
	for _, w := range terms {
		p := t.postings[w]
		if len(p) == 0 {
			continue
		}
		idf := bm25IDF(n, len(p))
		for s := range p {
			if t.hidden[s.item.ID] > 0 {
				continue
			}
			scores[s] += bm25Term(idf, s.tf[w], s.length, avgdl)
		}
	}
	hits := make([]hit, 0, len(scores))
	for s, score := range scores {
		hits = append(hits, hit{s, score})
	}
	slices.SortFunc(hits, compareHits)
	return hits
}

// compareIDs orders the provider's numeric IDs by number, so that of two
// items written at the same time the later one comes first in Recall.
func compareIDs(a, b string) int {
	return cmp.Or(cmp.Compare(len(a), len(b)), cmp.Compare(a, b))
}

// Forget removes what by names; see [Provider.Forget].
func (m *InMemory) Forget(ctx context.Context, tenantID string, by Provenance) (int, error) {
	if err := CheckID("tenant", tenantID); err != nil {
		return 0, err
	}
	if by.isZero() {
		return 0, fmt.Errorf("%w: Forget needs a conversation, task or skill ID", ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	n := 0
	m.convMu.Lock()
	defer m.convMu.Unlock()
	m.expire(m.now())
	if by == (Provenance{ConversationID: by.ConversationID}) {
		if e, ok := m.convs[convKey{tenantID, by.ConversationID}]; ok {
			n += m.dropConversation(e)
		}
	}
	m.itemMu.Lock()
	defer m.itemMu.Unlock()
	if t := m.tenants[tenantID]; t != nil {
		var gone []*storedItem
		for e := t.order.Front(); e != nil; e = e.Next() {
			if s := e.Value.(*storedItem); by.matches(s.item.Source) {
				gone = append(gone, s)
			}
		}
		for _, s := range gone {
			m.removeItem(s)
		}
		n += len(gone)
	}
	return n, nil
}

// DeleteTenant removes all the tenant's items and histories; see
// [TenantDeleter].
func (m *InMemory) DeleteTenant(ctx context.Context, tenantID string) (int, error) {
	if err := CheckID("tenant", tenantID); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	n := 0
	m.convMu.Lock()
	defer m.convMu.Unlock()
	m.expire(m.now())
	for key, e := range m.convs {
		if key.tenant == tenantID {
			n += m.dropConversation(e)
		}
	}
	m.itemMu.Lock()
	defer m.itemMu.Unlock()
	if t := m.tenants[tenantID]; t != nil {
		n += t.order.Len()
		for t.order.Len() > 0 {
			m.removeItem(t.order.Front().Value.(*storedItem))
		}
	}
	return n, nil
}

// checkConv checks the IDs naming a conversation.
func checkConv(tenantID, conversationID string) error {
	if err := CheckID("tenant", tenantID); err != nil {
		return err
	}
	return CheckID("conversation", conversationID)
}
