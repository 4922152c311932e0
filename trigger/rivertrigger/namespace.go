package rivertrigger

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/valetkit/valet/trigger"
)

// Namespace implements trigger.Namespaced: Config.Namespace, by default
// the database and schema of the pool, "database/schema".
func (s *Store) Namespace() string { return s.cfg.Namespace }

// namespaceOf names the database and schema a Store works in: the
// connection config's database and schema (Config.Schema), else the first
// schema of its search_path (a search_path parameter, else a "-c
// search_path=…" of its options parameter, which PostgreSQL applies
// before the other parameters), "public" when it sets none.
func namespaceOf(c pgconn.Config, schema string) string {
	if schema != "" {
		return c.Database + "/" + schema
	}
	sp := c.RuntimeParams["search_path"]
	if sp == "" {
		sp = optionSearchPath(c.RuntimeParams["options"])
	}
	schema = "public"
	if sp != "" {
		first, _, _ := strings.Cut(sp, ",")
		if first = strings.Trim(strings.TrimSpace(first), `"`); first != "" {
			schema = first
		}
	}
	return c.Database + "/" + schema
}

// optionSearchPath returns the search_path the libpq options parameter
// sets ("-c search_path=a,b", "-csearch_path=a", "--search_path=a"; the
// last one wins), "" when it sets none. Words are separated by white
// space; a backslash keeps the character after it in the word.
func optionSearchPath(opts string) string {
	var words []string
	var w strings.Builder
	inWord, esc := false, false
	for _, r := range opts {
		switch {
		case esc:
			w.WriteRune(r)
			esc = false
		case r == '\\':
			esc, inWord = true, true
		case unicode.IsSpace(r):
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	sp := ""
	for i := 0; i < len(words); i++ {
		var set string
		switch word := words[i]; {
		case word == "-c" && i+1 < len(words):
			i++
			set = words[i]
		case strings.HasPrefix(word, "--"):
			set = word[2:]
		case strings.HasPrefix(word, "-c"):
			set = word[2:]
		default:
			continue
		}
		name, value, ok := strings.Cut(set, "=")
		// PostgreSQL reads a dash in a setting's name as an underscore.
		if ok && strings.EqualFold(strings.ReplaceAll(name, "-", "_"), "search_path") {
			sp = value
		}
	}
	return sp
}

// maxIdentLen is PostgreSQL's longest identifier (NAMEDATALEN - 1).
const maxIdentLen = 63

// checkSchema checks a Config.Schema: "" (the search_path) or a name
// PostgreSQL can hold.
func checkSchema(schema string) error {
	switch {
	case len(schema) > maxIdentLen:
		return fmt.Errorf("%w: rivertrigger: schema %q is longer than PostgreSQL's %d bytes", trigger.ErrInvalid, schema, maxIdentLen)
	case strings.IndexByte(schema, 0) >= 0:
		return fmt.Errorf("%w: rivertrigger: schema holds a NUL byte", trigger.ErrInvalid)
	case !utf8.ValidString(schema):
		return fmt.Errorf("%w: rivertrigger: schema is not valid UTF-8", trigger.ErrInvalid)
	}
	return nil
}
