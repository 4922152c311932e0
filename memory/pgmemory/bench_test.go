package pgmemory_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/memory"
	"github.com/valetkit/valet/memory/pgmemory"
)

// The benchmarks need a PostgreSQL; without VALET_TEST_POSTGRES they skip.
// Each works in a schema of its own, dropped when it ends. Run them with:
//
//	VALET_TEST_POSTGRES='postgres://postgres@127.0.0.1:5432/test?sslmode=disable' \
//	  go test -run '^$' -bench 'BenchmarkRecallLexical|BenchmarkRecallHybrid|BenchmarkHistoryTurn' -benchtime 200x ./memory/pgmemory/

const (
	benchItems     = 100_000
	benchBatch     = 1_000 // items per Remember while seeding
	benchTenant    = "tenant-bench"
	benchHistoryID = "conv-bench"
	benchDims      = 1536 // text-embedding-3-small's vectors
)

// Vocabulary of the seeded items: sentences such as an extractor would
// write, with topics, names and places varied so that a query matches a
// few hundred to a few thousand of the 100,000 items, not all of them.
var (
	benchRoles = []string{"dentist", "doctor", "plumber", "accountant", "lawyer", "vet", "hairdresser",
		"landlord", "mechanic", "tutor", "physiotherapist", "optician", "electrician", "gardener",
		"babysitter", "therapist", "pharmacist", "banker", "architect", "notary"}
	benchRelations = []string{"sister", "brother", "mother", "father", "daughter", "son", "wife", "husband",
		"cousin", "aunt", "uncle", "grandmother", "colleague", "manager", "neighbour", "best friend"}
	benchFirst = []string{"Ana", "Bruno", "Carla", "David", "Elena", "Farid", "Grace", "Hugo", "Ines", "Jonas",
		"Keiko", "Luis", "Maya", "Nikolai", "Olga", "Pedro", "Quentin", "Rosa", "Samir", "Tomas",
		"Ursula", "Victor", "Wanda", "Xavier", "Yara", "Zoe"}
	benchLast = []string{"Ruiz", "Silva", "Kim", "Novak", "Okafor", "Schmidt", "Rossi", "Dubois", "Tanaka",
		"Kowalski", "Haddad", "Jensen", "Moreau", "Costa", "Ivanova", "Murphy"}
	benchCities = []string{"Lisbon", "Porto", "Madrid", "Barcelona", "Paris", "Lyon", "Berlin", "Munich",
		"Vienna", "Prague", "Warsaw", "Rome", "Milan", "Athens", "Dublin", "London", "Edinburgh",
		"Amsterdam", "Brussels", "Copenhagen", "Oslo", "Stockholm", "Helsinki", "Zurich", "Geneva",
		"Toronto", "Boston", "Chicago", "Denver", "Seattle", "Austin", "Tokyo", "Osaka", "Seoul",
		"Sydney", "Melbourne", "Nairobi", "Lagos", "Cairo", "Mumbai"}
	benchMonths = []string{"January", "February", "March", "April", "May", "June", "July", "August",
		"September", "October", "November", "December"}
	benchFoods = []string{"sushi", "ramen", "tapas", "pizza", "curry", "dim sum", "tacos", "falafel",
		"pho", "paella", "risotto", "burgers", "salads", "dumplings"}
	benchPets      = []string{"dog", "cat", "parrot", "rabbit", "hamster", "tortoise", "goldfish"}
	benchAllergens = []string{"peanuts", "shellfish", "penicillin", "pollen", "cats", "gluten",
		"lactose", "sesame", "bee stings", "latex"}
	benchCompanies = []string{"Acme", "Globex", "Initech", "Umbrella", "Hooli", "Stark Industries",
		"Wayne Enterprises", "Wonka", "Soylent", "Cyberdyne"}
	benchJobs = []string{"engineer", "designer", "nurse", "teacher", "product manager", "chef", "pilot",
		"researcher", "sales lead", "data analyst"}
	benchCars = []string{"Volvo", "Toyota", "Tesla", "Renault", "Fiat", "Honda", "Skoda", "BMW"}
)

// benchText is the i-th seeded item's text, the same on every run.
func benchText(r *rand.Rand) string {
	pick := func(s []string) string { return s[r.IntN(len(s))] }
	name := pick(benchFirst) + " " + pick(benchLast)
	switch r.IntN(10) {
	case 0:
		return fmt.Sprintf("The user's %s is Dr %s in %s.", pick(benchRoles), name, pick(benchCities))
	case 1:
		return fmt.Sprintf("The user's %s %s has a birthday on %s %d.", pick(benchRelations), name, pick(benchMonths), 1+r.IntN(28))
	case 2:
		return fmt.Sprintf("The user prefers %s when eating out in %s.", pick(benchFoods), pick(benchCities))
	case 3:
		return fmt.Sprintf("The user's %s is called %s.", pick(benchPets), pick(benchFirst))
	case 4:
		return fmt.Sprintf("The user is allergic to %s.", pick(benchAllergens))
	case 5:
		return fmt.Sprintf("The user works at %s as a %s in %s.", pick(benchCompanies), pick(benchJobs), pick(benchCities))
	case 6:
		return fmt.Sprintf("The user's flight to %s leaves on %s %d.", pick(benchCities), pick(benchMonths), 1+r.IntN(28))
	case 7:
		return fmt.Sprintf("The user's %s needs a service in %s.", pick(benchCars), pick(benchMonths))
	case 8:
		return fmt.Sprintf("The user's %s %s lives in %s.", pick(benchRelations), name, pick(benchCities))
	default:
		return fmt.Sprintf("The user has an appointment with the %s on %s %d.", pick(benchRoles), pick(benchMonths), 1+r.IntN(28))
	}
}

// Queries as the user types them.
var benchQueries = []string{
	"what's my dentist's name again?",
	"when is my sister's birthday?",
	"book me a table somewhere nice, I fancy sushi",
	"remind me what my dog is called",
	"am I allergic to anything I should tell the doctor about?",
	"when does my flight to Lisbon leave?",
	"does the car need a service soon",
	"Where does my brother live these days?",
	"can you find my accountant's phone number",
	"What do you know about my job at Globex?",
	"I need a plumber, the kitchen sink is leaking!!",
	"any appointments in March?",
}

// BenchmarkRecallLexical measures Recall, lexical only (no Embedder),
// for one tenant holding 100,000 items, with the budget an agent would
// give: Budget{MaxTokens: 500, MaxEntries: 10}. Each op is one Recall of
// one of benchQueries in turn; p50-ms and p99-ms are over the calls of the
// reported run. The 100,000 items are remembered once, before the
// sub-benchmark, 1,000 per Remember; seeding time is logged.
//
//	VALET_TEST_POSTGRES='postgres://postgres@127.0.0.1:5432/test?sslmode=disable' \
//	  go test -run '^$' -bench BenchmarkRecallLexical -benchtime 200x ./memory/pgmemory/
func BenchmarkRecallLexical(b *testing.B) {
	benchRecall(b, nil)
}

// BenchmarkRecallHybrid is BenchmarkRecallLexical with an Embedder: the
// same 100,000 items, each with a vector of 1,536 dimensions (the length
// of text-embedding-3-small's), the same queries and budget. Each Recall
// reads the 100 best lexical matches and the 100 newest items with their
// vectors and fuses the rankings in Go. The embedder is denseEmbedder, in
// process: the figures leave out the embedding API's round trip for the
// query, which a real Embedder adds to every Recall.
//
//	VALET_TEST_POSTGRES='postgres://postgres@127.0.0.1:5432/test?sslmode=disable' \
//	  go test -run '^$' -bench BenchmarkRecallHybrid -benchtime 200x ./memory/pgmemory/
func BenchmarkRecallHybrid(b *testing.B) {
	benchRecall(b, denseEmbedder{llmtest.NewEmbedder(benchDims)})
}

// denseEmbedder is llmtest.Embedder with every dimension filled, as in
// the vectors of real models: llmtest.Embedder's are mostly zeros, which
// PostgreSQL would compress to almost nothing and read back for free. It
// adds to each vector a small pseudo-random one seeded by the text.
type denseEmbedder struct{ e *llmtest.Embedder }

func (d denseEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	vecs, err := d.e.Embed(ctx, texts)
	for i, v := range vecs {
		h := fnv.New64a()
		h.Write([]byte(texts[i]))
		r := rand.New(rand.NewPCG(h.Sum64(), 7))
		for j := range v {
			v[j] += float32(r.NormFloat64() * 0.01)
		}
	}
	return vecs, err
}

// benchRecall seeds a tenant with benchItems items, embedded by emb when
// it is not nil, and measures Recall of benchQueries.
func benchRecall(b *testing.B, emb llm.Embedder) {
	db := testDB(b)
	schema := newSchema(b, db)
	p := open(b, db, pgmemory.Config{Schema: schema, MaxItemsPerTenant: benchItems, Embedder: emb})
	items := pgx.Identifier{schema, "memory_items"}.Sanitize()

	start := time.Now()
	r := rand.New(rand.NewPCG(11, 42))
	batch := make([]memory.Item, benchBatch)
	for n := 0; n < benchItems; n += benchBatch {
		for i := range batch {
			batch[i] = memory.Item{Text: benchText(r), Kind: "fact",
				Source: memory.Provenance{ConversationID: fmt.Sprintf("conv-%d", (n+i)/50)}}
		}
		if _, err := p.Remember(bg, benchTenant, batch...); err != nil {
			b.Fatalf("seeding: %v", err)
		}
	}
	seeding := time.Since(start)
	if _, err := db.Exec(bg, "ANALYZE "+items); err != nil {
		b.Fatalf("ANALYZE: %v", err)
	}
	var size string
	var vectors int
	if err := db.QueryRow(bg, `SELECT pg_size_pretty(pg_total_relation_size($1::regclass)), count(embedding) FROM `+items, items).Scan(&size, &vectors); err != nil {
		b.Fatalf("table size: %v", err)
	}
	b.Logf("seeded %d items (%d with vectors) in %v (%d per Remember); the table and its indexes take %s",
		benchItems, vectors, seeding.Round(time.Millisecond), benchBatch, size)
	if emb != nil && vectors != benchItems {
		b.Fatalf("%d of %d items have vectors", vectors, benchItems)
	}

	// How many items each query matches, and that it recalls some.
	budget := memory.Budget{MaxTokens: 500, MaxEntries: 10}
	for _, q := range benchQueries {
		var matches int
		err := db.QueryRow(bg, `SELECT count(*) FROM `+items+` i
WHERE i.tenant_id = $1 AND i.tsv @@ (SELECT string_agg('''' || replace(l, '''', '''''') || '''', ' | ')::tsquery
	FROM unnest(tsvector_to_array(to_tsvector('english', $2::text))) AS l)`, benchTenant, q).Scan(&matches)
		if err != nil {
			b.Fatalf("counting matches of %q: %v", q, err)
		}
		got, err := p.Recall(bg, benchTenant, q, budget)
		if err != nil || len(got) == 0 {
			b.Fatalf("Recall(%q) = %d items, %v; want some", q, len(got), err)
		}
		b.Logf("%-60q matches %6d items, recalls %d, first %q", q, matches, len(got), got[0].Text)
	}

	b.Run("items=100k", func(b *testing.B) {
		var times []time.Duration
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			t0 := time.Now()
			if _, err := p.Recall(bg, benchTenant, benchQueries[i%len(benchQueries)], budget); err != nil {
				b.Fatal(err)
			}
			times = append(times, time.Since(t0))
		}
		b.StopTimer()
		reportPercentiles(b, times)
	})
}

// reportPercentiles reports the p50 and p99 of times in milliseconds.
func reportPercentiles(b *testing.B, times []time.Duration) {
	if len(times) == 0 {
		return
	}
	slices.Sort(times)
	at := func(q float64) float64 {
		i := min(int(q*float64(len(times))), len(times)-1)
		return float64(times[i]) / float64(time.Millisecond)
	}
	b.ReportMetric(at(0.50), "p50-ms")
	b.ReportMetric(at(0.99), "p99-ms")
}

// benchTurn is one turn with tools: the user's message, the assistant's
// two tool calls, their two results, the final answer.
func benchTurn() []llm.Message {
	c1 := llm.ToolCall{ID: "call_1", Name: "calendar_search", Arguments: []byte(`{"query":"dentist","from":"2025-03-01","to":"2025-03-31"}`)}
	c2 := llm.ToolCall{ID: "call_2", Name: "contacts_lookup", Arguments: []byte(`{"name":"Dr Ana Ruiz","fields":["phone","address"]}`)}
	return []llm.Message{
		llm.UserMessage("When is my next dentist appointment, and what's the clinic's number?"),
		llm.AssistantMessage("Let me check your calendar and contacts.", c1, c2),
		llm.ToolResultMessage(c1, `[{"title":"Dentist - Dr Ana Ruiz","start":"2025-03-14T09:30:00+00:00","end":"2025-03-14T10:15:00+00:00","location":"Rua Augusta 120, Lisbon"}]`, false),
		llm.ToolResultMessage(c2, `{"name":"Dr Ana Ruiz","phone":"+351 21 123 4567","address":"Rua Augusta 120, 1100-048 Lisbon"}`, false),
		llm.AssistantMessage("Your next dentist appointment is on Friday 14 March at 9:30 with Dr Ana Ruiz, Rua Augusta 120 in Lisbon. The clinic's number is +351 21 123 4567."),
	}
}

// BenchmarkHistoryTurn measures what one turn costs the history on
// PostgreSQL: History(limit 40), then Append of one turn with two tool
// calls (5 messages), on a conversation holding 200 messages — the default
// MaxMessages, so every Append also trims the 5 oldest. ns/op and allocs
// are of the client side plus the round trips.
//
//	VALET_TEST_POSTGRES='postgres://postgres@127.0.0.1:5432/test?sslmode=disable' \
//	  go test -run '^$' -bench BenchmarkHistoryTurn -benchtime 200x ./memory/pgmemory/
func BenchmarkHistoryTurn(b *testing.B) {
	db := testDB(b)
	p := open(b, db, pgmemory.Config{})
	turn := benchTurn()
	for range pgmemory.DefaultMaxMessages / len(turn) { // 40 turns of 5
		if err := p.Append(bg, benchTenant, benchHistoryID, turn...); err != nil {
			b.Fatalf("seeding: %v", err)
		}
	}
	if h, err := p.History(bg, benchTenant, benchHistoryID, 0); err != nil || len(h) != pgmemory.DefaultMaxMessages {
		b.Fatalf("seeded history = %d messages, %v; want %d", len(h), err, pgmemory.DefaultMaxMessages)
	}

	b.Run("messages=200", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			h, err := p.History(bg, benchTenant, benchHistoryID, 40)
			if err != nil || len(h) == 0 {
				b.Fatalf("History = %d messages, %v", len(h), err)
			}
			if err := p.Append(bg, benchTenant, benchHistoryID, turn...); err != nil {
				b.Fatal(err)
			}
		}
	})
}
