package sqlitememory

import (
	"crypto/sha256"
	"encoding/hex"
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

// tenantToken is the one token the full-text index holds in an item's
// tenant column: "t" and 16 hex digits of the tenant ID's SHA-256. Two
// tenants whose tokens collide only read each other's index entries;
// Recall keeps to its tenant's items by their tenant_id.
func tenantToken(tenantID string) string {
	h := sha256.Sum256([]byte(tenantID))
	return "t" + hex.EncodeToString(h[:8])
}

// matchQuery returns the FTS5 query matching the tenant's items that
// share any normalised word with query — the tenant's token in the tenant
// column, and in the terms column each distinct word a quoted string,
// joined by OR — or "" when query has none.
func matchQuery(tenantID, query string) string {
	ws := words(query)
	seen := make(map[string]bool, len(ws))
	var b strings.Builder
	b.WriteString(`tenant : "` + tenantToken(tenantID) + `" AND terms : (`)
	n := 0
	for _, w := range ws {
		if seen[w] {
			continue
		}
		seen[w] = true
		if n > 0 {
			b.WriteString(" OR ")
		}
		n++
		b.WriteByte('"')
		b.WriteString(strings.ReplaceAll(w, `"`, `""`)) // none: a word is letters and digits
		b.WriteByte('"')
	}
	if n == 0 {
		return ""
	}
	b.WriteByte(')')
	return b.String()
}
