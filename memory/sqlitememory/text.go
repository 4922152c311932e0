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

// tenantToken starts every word the full-text index holds of a tenant's
// items: "t" and 16 hex digits of the tenant ID's SHA-256, so that each
// tenant has words of its own — a Recall reads only its tenant's index
// entries, and bm25 counts document frequencies within the tenant, as the
// in-memory provider does. Two tenants whose tokens collide would share
// index entries and frequencies, never items: Recall keeps to its
// tenant's items by their tenant_id.
func tenantToken(tenantID string) string {
	h := sha256.Sum256([]byte(tenantID))
	return "t" + hex.EncodeToString(h[:8])
}

// terms is what the FTS5 index holds of an item's text: its normalised
// words, each after the tenant's token, separated by spaces.
func terms(tenantID, text string) string {
	tok := tenantToken(tenantID)
	ws := words(text)
	for i, w := range ws {
		ws[i] = tok + w
	}
	return strings.Join(ws, " ")
}

// matchQuery returns the FTS5 query matching the tenant's items that
// share any normalised word with query — each distinct word, after the
// tenant's token, a quoted string, joined by OR — or "" when query has
// none.
func matchQuery(tenantID, query string) string {
	tok := tenantToken(tenantID)
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
		b.WriteString(tok)
		b.WriteString(strings.ReplaceAll(w, `"`, `""`)) // none: a word is letters and digits
		b.WriteByte('"')
	}
	return b.String()
}
