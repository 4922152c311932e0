package pgmemory

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/valetkit/valet/internal/pgtest"
)

// TestTsqueryOfHostileText: the tsquery Recall builds from a query by
// rewriting strip(to_tsvector(...))'s text is the OR of exactly the
// query's lexemes, as one built lexeme by lexeme is, for text with
// quotes, backslashes, tsquery operators, URLs, paths and scripts; NULL
// when no lexeme is left.
func TestTsqueryOfHostileText(t *testing.T) {
	db := pgtest.DB(t)
	ctx := context.Background()
	const byLexeme = `(SELECT string_agg('''' || replace(replace(l, '\', '\\'), '''', '''''') || '''', ' | ')
		FROM unnest(tsvector_to_array(to_tsvector('english', $2::text))) AS l)::tsquery`
	for _, q := range []string{
		`it's O'Brien's \ back\slash 'quoted' "dq" a&b a|b !not x:* (paren) <-> <2>`,
		`http://example.com/a?b=c&d=e user@example.org /usr/local/bin 12.5e3 foo-bar café naïve 東京 ''''`,
		`a' 'b`, `x'' ''y`, `\\\\ '' \' '\ `, `-1.5 +3 1/2 ' | ' & ' '`, `don''t 'won't' ''can''t''`,
		`the and of`, `'`, ``, `?!`, "tab\tnew\nline\r\u00a0nbsp\u2003em", strings.Repeat("word' ", 300),
		`C:\Users\ana\file.txt \\server\share 'a\'b' \x27 \u0027`,
	} {
		var want, got *string
		if err := db.QueryRow(ctx, `SELECT (`+byLexeme+`)::text, (`+tsquerySQL+`)::text WHERE $1`, true, q).Scan(&want, &got); err != nil {
			t.Fatalf("%q: %v", q, err)
		}
		switch {
		case want == nil && got == nil:
		case want == nil || got == nil || *want != *got:
			t.Errorf("%q: tsquery %v, want %v", q, deref(got), deref(want))
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return "NULL"
	}
	return *s
}

// TestPlanMode: Recall's statements run unnamed (planned per call) when
// the pool would cache their plans, and in the pool's own mode otherwise.
func TestPlanMode(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want pgx.QueryExecMode
	}{
		{"postgres://x@127.0.0.1:1/db", pgx.QueryExecModeCacheDescribe},
		{"postgres://x@127.0.0.1:1/db?description_cache_capacity=0", pgx.QueryExecModeDescribeExec},
		{"postgres://x@127.0.0.1:1/db?default_query_exec_mode=exec", pgx.QueryExecModeExec},
		{"postgres://x@127.0.0.1:1/db?default_query_exec_mode=simple_protocol", pgx.QueryExecModeSimpleProtocol},
	} {
		db, err := pgxpool.New(context.Background(), tc.url) // never connects
		if err != nil {
			t.Fatal(err)
		}
		if got := planMode(db); got != tc.want {
			t.Errorf("%s: planMode = %v, want %v", tc.url, got, tc.want)
		}
		db.Close()
	}
}
