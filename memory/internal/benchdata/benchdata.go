// Package benchdata generates the data of the memory providers'
// benchmarks — long-term items such as an extractor writes and the
// messages users type to recall them — so that every provider is measured
// on the same items and queries (pgmemory's recall benchmarks and
// sqlitememory's side-by-side ones). It is for valet's benchmarks only.
package benchdata

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// Vocabulary of the seeded items: sentences such as an extractor would
// write, with topics, names and places varied so that a query matches a
// few hundred to a few thousand of the 100,000 items, not all of them.
var (
	roles = []string{"dentist", "doctor", "plumber", "accountant", "lawyer", "vet", "hairdresser",
		"landlord", "mechanic", "tutor", "physiotherapist", "optician", "electrician", "gardener",
		"babysitter", "therapist", "pharmacist", "banker", "architect", "notary"}
	relations = []string{"sister", "brother", "mother", "father", "daughter", "son", "wife", "husband",
		"cousin", "aunt", "uncle", "grandmother", "colleague", "manager", "neighbour", "best friend"}
	first = []string{"Ana", "Bruno", "Carla", "David", "Elena", "Farid", "Grace", "Hugo", "Ines", "Jonas",
		"Keiko", "Luis", "Maya", "Nikolai", "Olga", "Pedro", "Quentin", "Rosa", "Samir", "Tomas",
		"Ursula", "Victor", "Wanda", "Xavier", "Yara", "Zoe"}
	last = []string{"Ruiz", "Silva", "Kim", "Novak", "Okafor", "Schmidt", "Rossi", "Dubois", "Tanaka",
		"Kowalski", "Haddad", "Jensen", "Moreau", "Costa", "Ivanova", "Murphy"}
	cities = []string{"Lisbon", "Porto", "Madrid", "Barcelona", "Paris", "Lyon", "Berlin", "Munich",
		"Vienna", "Prague", "Warsaw", "Rome", "Milan", "Athens", "Dublin", "London", "Edinburgh",
		"Amsterdam", "Brussels", "Copenhagen", "Oslo", "Stockholm", "Helsinki", "Zurich", "Geneva",
		"Toronto", "Boston", "Chicago", "Denver", "Seattle", "Austin", "Tokyo", "Osaka", "Seoul",
		"Sydney", "Melbourne", "Nairobi", "Lagos", "Cairo", "Mumbai"}
	months = []string{"January", "February", "March", "April", "May", "June", "July", "August",
		"September", "October", "November", "December"}
	foods = []string{"sushi", "ramen", "tapas", "pizza", "curry", "dim sum", "tacos", "falafel",
		"pho", "paella", "risotto", "burgers", "salads", "dumplings"}
	pets      = []string{"dog", "cat", "parrot", "rabbit", "hamster", "tortoise", "goldfish"}
	allergens = []string{"peanuts", "shellfish", "penicillin", "pollen", "cats", "gluten",
		"lactose", "sesame", "bee stings", "latex"}
	companies = []string{"Acme", "Globex", "Initech", "Umbrella", "Hooli", "Stark Industries",
		"Wayne Enterprises", "Wonka", "Soylent", "Cyberdyne"}
	jobs = []string{"engineer", "designer", "nurse", "teacher", "product manager", "chef", "pilot",
		"researcher", "sales lead", "data analyst"}
	cars = []string{"Volvo", "Toyota", "Tesla", "Renault", "Fiat", "Honda", "Skoda", "BMW"}
)

// Text is the next seeded item's text drawn from r: the same sequence
// for the same seed on every run.
func Text(r *rand.Rand) string {
	pick := func(s []string) string { return s[r.IntN(len(s))] }
	name := pick(first) + " " + pick(last)
	switch r.IntN(10) {
	case 0:
		return fmt.Sprintf("The user's %s is Dr %s in %s.", pick(roles), name, pick(cities))
	case 1:
		return fmt.Sprintf("The user's %s %s has a birthday on %s %d.", pick(relations), name, pick(months), 1+r.IntN(28))
	case 2:
		return fmt.Sprintf("The user prefers %s when eating out in %s.", pick(foods), pick(cities))
	case 3:
		return fmt.Sprintf("The user's %s is called %s.", pick(pets), pick(first))
	case 4:
		return fmt.Sprintf("The user is allergic to %s.", pick(allergens))
	case 5:
		return fmt.Sprintf("The user works at %s as a %s in %s.", pick(companies), pick(jobs), pick(cities))
	case 6:
		return fmt.Sprintf("The user's flight to %s leaves on %s %d.", pick(cities), pick(months), 1+r.IntN(28))
	case 7:
		return fmt.Sprintf("The user's %s needs a service in %s.", pick(cars), pick(months))
	case 8:
		return fmt.Sprintf("The user's %s %s lives in %s.", pick(relations), name, pick(cities))
	default:
		return fmt.Sprintf("The user has an appointment with the %s on %s %d.", pick(roles), pick(months), 1+r.IntN(28))
	}
}

// Queries are what users type: messages of 10 to 40 words, each a
// question about something the seeded items hold, wrapped in the
// greetings, asides and context of a real message, so that a query shares
// common words with thousands of items and rare ones with a few. They
// are all different: no query's plan or pages are warmer than another's.
// Queries returns n such queries, the same n on every run.
func Queries(n int) []string {
	r := rand.New(rand.NewPCG(3, 5))
	pick := func(s []string) string { return s[r.IntN(len(s))] }
	openers := []string{"", "Hi!", "Hey, quick one:", "Morning.", "Sorry to bother you again,", "OK so",
		"Before I forget,", "Thanks for earlier.", "Hello there,", "Right,"}
	asks := []func() string{
		func() string {
			return fmt.Sprintf("could you remind me what my %s's name is and where the practice is?", pick(roles))
		},
		func() string {
			return fmt.Sprintf("when is my %s's birthday, I want to plan something in %s", pick(relations), pick(cities))
		},
		func() string {
			return fmt.Sprintf("I fancy %s tonight, do you remember where I like eating out in %s?", pick(foods), pick(cities))
		},
		func() string { return fmt.Sprintf("what did I say my %s is called?", pick(pets)) },
		func() string {
			return fmt.Sprintf("am I allergic to anything, maybe %s? I need to tell the %s", pick(allergens), pick(roles))
		},
		func() string {
			return fmt.Sprintf("when does my flight to %s leave, is it in %s?", pick(cities), pick(months))
		},
		func() string {
			return fmt.Sprintf("does my %s need a service soon, maybe in %s?", pick(cars), pick(months))
		},
		func() string {
			return fmt.Sprintf("where does my %s live these days, still in %s?", pick(relations), pick(cities))
		},
		func() string {
			return fmt.Sprintf("what do you know about my job at %s, am I still a %s there?", pick(companies), pick(jobs))
		},
		func() string {
			return fmt.Sprintf("do I have an appointment with the %s in %s? %s %s might have booked it", pick(roles),
				pick(months), pick(first), pick(last))
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
