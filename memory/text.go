package memory

import (
	"math"
	"strings"
	"unicode"

	"github.com/kljensen/snowball/english"
)

// words splits text into its normalised words, in order, repeats kept:
// runs of letters and digits, lowercased, without English stop words,
// each reduced to its English (Porter2, "snowball") stem. It is how both
// the items and the queries of Recall are read. It follows PostgreSQL's
// 'english' text search configuration, which uses the same Snowball
// stemmer and stop words, but not its parser in every detail (hyphenated
// words, e-mail addresses, URLs): "What's my dentist's name?" gives
// "dentist", "name" in both.
func words(text string) []string {
	var out []string
	for f := range strings.FieldsFuncSeq(text, notWordRune) {
		w := strings.ToLower(f)
		if english.IsStopWord(w) {
			continue
		}
		out = append(out, english.Stem(w, false))
	}
	return out
}

func notWordRune(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }

// queryTerms returns the distinct normalised words of a query.
func queryTerms(query string) []string {
	ws := words(query)
	seen := make(map[string]bool, len(ws))
	out := ws[:0]
	for _, w := range ws {
		if !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
}

// BM25 parameters: the usual ones.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// bm25IDF is the inverse document frequency of a word found in df of n
// documents, in the form that is never negative.
func bm25IDF(n, df int) float64 {
	return math.Log(1 + (float64(n)-float64(df)+0.5)/(float64(df)+0.5))
}

// bm25Term is one word's contribution to a document's score: tf
// occurrences in a document of length dl, where documents average avgdl
// words.
func bm25Term(idf float64, tf, dl int, avgdl float64) float64 {
	norm := 1 - bm25B
	if avgdl > 0 {
		norm += bm25B * float64(dl) / avgdl
	}
	f := float64(tf)
	return idf * f * (bm25K1 + 1) / (f + bm25K1*norm)
}
