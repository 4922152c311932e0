package pgmemory_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
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

// benchQueries are what users type: messages of 10 to 40 words, each a
// question about something the seeded items hold, wrapped in the
// greetings, asides and context of a real message, so that a query shares
// common words with thousands of items and rare ones with a few. They
// are all different: no query's plan or pages are warmer than another's.
var benchQueries = makeBenchQueries(500)

func makeBenchQueries(n int) []string {
	r := rand.New(rand.NewPCG(3, 5))
	pick := func(s []string) string { return s[r.IntN(len(s))] }
	openers := []string{"", "Hi!", "Hey, quick one:", "Morning.", "Sorry to bother you again,", "OK so",
		"Before I forget,", "Thanks for earlier.", "Hello there,", "Right,"}
	asks := []func() string{
		func() string {
			return fmt.Sprintf("could you remind me what my %s's name is and where the practice is?", pick(benchRoles))
		},
		func() string {
			return fmt.Sprintf("when is my %s's birthday, I want to plan something in %s", pick(benchRelations), pick(benchCities))
		},
		func() string {
			return fmt.Sprintf("I fancy %s tonight, do you remember where I like eating out in %s?", pick(benchFoods), pick(benchCities))
		},
		func() string { return fmt.Sprintf("what did I say my %s is called?", pick(benchPets)) },
		func() string {
			return fmt.Sprintf("am I allergic to anything, maybe %s? I need to tell the %s", pick(benchAllergens), pick(benchRoles))
		},
		func() string {
			return fmt.Sprintf("when does my flight to %s leave, is it in %s?", pick(benchCities), pick(benchMonths))
		},
		func() string {
			return fmt.Sprintf("does my %s need a service soon, maybe in %s?", pick(benchCars), pick(benchMonths))
		},
		func() string {
			return fmt.Sprintf("where does my %s live these days, still in %s?", pick(benchRelations), pick(benchCities))
		},
		func() string {
			return fmt.Sprintf("what do you know about my job at %s, am I still a %s there?", pick(benchCompanies), pick(benchJobs))
		},
		func() string {
			return fmt.Sprintf("do I have an appointment with the %s in %s? %s %s might have booked it", pick(benchRoles),
				pick(benchMonths), pick(benchFirst), pick(benchLast))
		},
	}
	asides := []string{"", "No rush.", "I keep forgetting these things.", "My phone died and I lost my notes.",
		"It's for the weekend plans.", "Thanks a lot, you're a lifesaver!", "Let me know if you need more details.",
		"I think we talked about it last month.", "Also remind me to call my mother later today.",
		"Traffic was terrible this morning, by the way."}
	out := make([]string, 0, n)
	seen := map[string]bool{}
	for len(out) < n {
		q := strings.TrimSpace(strings.Join([]string{pick(openers), asks[r.IntN(len(asks))](), pick(asides), pick(asides)}, " "))
		q = strings.Join(strings.Fields(q), " ")
		if w := len(strings.Fields(q)); w < 10 || w > 40 || seen[q] {
			continue
		}
		seen[q] = true
		out = append(out, q)
	}
	return out
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

// percentile returns the q-quantile (0 < q < 1) of times in
// milliseconds; it sorts times.
func percentile(times []time.Duration, q float64) float64 {
	if len(times) == 0 {
		return 0
	}
	slices.Sort(times)
	i := min(int(q*float64(len(times))), len(times)-1)
	return float64(times[i]) / float64(time.Millisecond)
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
