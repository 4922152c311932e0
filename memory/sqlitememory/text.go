package sqlitememory

import (
	"strings"
	"unicode"

	"github.com/kljensen/snowball/english"
)

// words splits text into its normalised words, in order, repeats kept,
// exactly as the memory package reads items and queries for the
// in-memory provider: runs of letters and digits, lowercased, without
// English stop words, each reduced to its English (Porter2, "snowball")
// stem. TestSameRecallAsInMemory holds the two to the same answers.
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

// terms is what the FTS5 index holds of an item's text: its normalised
// words, separated by spaces.
func terms(text string) string { return strings.Join(words(text), " ") }

// matchQuery returns the FTS5 query matching an item that shares any
// normalised word with query — each distinct word a quoted string, joined
// by OR — or "" when query has none.
func matchQuery(query string) string {
	ws := words(query)
	seen := make(map[string]bool, len(ws))
	var b strings.Builder
	for _, w := range ws {
		if seen[w] {
			continue
		}
		seen[w] = true
		if b.Len() > 0 {
			b.WriteString(" OR ")
		}
		b.WriteByte('"')
		b.WriteString(strings.ReplaceAll(w, `"`, `""`)) // none: a word is letters and digits
		b.WriteByte('"')
	}
	return b.String()
}
