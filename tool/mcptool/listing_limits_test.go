package mcptool

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func bareSet(t *testing.T, cfg Config) *Set {
	t.Helper()
	cfg.Logger = quiet()
	cfg, err := cfg.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	return &Set{server: Server{Name: "x"}, cfg: cfg, log: cfg.Logger}
}

func listing(schemas ...string) []*mcp.Tool {
	var out []*mcp.Tool
	for i, sc := range schemas {
		out = append(out, &mcp.Tool{Name: string(rune('a' + i)), Description: "d", InputSchema: schema(sc)})
	}
	return out
}

// A listing that changed nothing compiles nothing: the compiled schemas
// of the last listing are reused, a changed schema is compiled anew, and
// the cache keeps only the last listing's schemas.
func TestUnchangedListingReusesCompiledSchemas(t *testing.T) {
	s := bareSet(t, Config{})
	a, b := `{"type":"object","properties":{"p":{"type":"string"}}}`, `{"type":"object"}`
	first, err := s.prepare(context.Background(), listing(a, b))
	if err != nil {
		t.Fatal(err)
	}
	second, err := s.prepare(context.Background(), listing(a, `{"type":"object","required":["q"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if first[0].rt.schema != second[0].rt.schema {
		t.Error("an unchanged schema was compiled again")
	}
	if first[1].rt.schema == second[1].rt.schema {
		t.Error("a changed schema was not compiled again")
	}
	if len(s.schemas) != 2 {
		t.Errorf("the cache holds %d schemas after a listing of 2", len(s.schemas))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.prepare(ctx, listing(a)); !errors.Is(err, context.Canceled) {
		t.Errorf("prepare with an ended ctx: %v", err)
	}
}

// Schemas too large or too deep are refused before compiling, saying
// which limit; a long description is cut within its limit, saying so.
func TestListingLimits(t *testing.T) {
	s := bareSet(t, Config{MaxSchemaBytes: 200, MaxSchemaDepth: 4, MaxDescriptionBytes: 100})
	deep := `{"type":"object","properties":{"a":{"type":"object","properties":{"b":{"type":"string"}}}}}` // 5 deep
	big := `{"type":"object","description":"` + strings.Repeat("x", 200) + `"}`
	got, err := s.prepare(context.Background(), listing(deep, big))
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"Config.MaxSchemaDepth", "Config.MaxSchemaBytes"} {
		if err := got[i].err; !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), want) {
			t.Errorf("tool %d: err %v, want ErrRefused naming %s", i, err, want)
		}
	}
	long := &mcp.Tool{Name: "long", Description: strings.Repeat("é", 300), InputSchema: schema(`{"type":"object"}`)}
	got, err = s.prepare(context.Background(), []*mcp.Tool{long})
	if err != nil || got[0].err != nil {
		t.Fatal(err, got[0].err)
	}
	d := got[0].rt.spec.Description
	if len(d) > 100 || !utf8.ValidString(d) || !strings.Contains(d, "[description cut: the first") || !strings.HasPrefix(d, "é") {
		t.Errorf("cut description %q (%d bytes)", d, len(d))
	}
}

// The HTTP response limit: a JSON body of the limit is read, one byte
// more fails; an event stream is limited per event, not in total.
func TestResponseLimit(t *testing.T) {
	read := func(body string, sep int) (int, error) {
		r := &limitReader{rc: io.NopCloser(strings.NewReader(body)), limit: 10, sep: sep}
		b, err := io.ReadAll(r)
		return len(b), err
	}
	if n, err := read(strings.Repeat("a", 10), sepNone); n != 10 || err != nil {
		t.Errorf("10 bytes with limit 10: %d, %v", n, err)
	}
	if n, err := read(strings.Repeat("a", 11), sepNone); n > 10 || err == nil || !strings.Contains(err.Error(), "Config.MaxMessageBytes") {
		t.Errorf("11 bytes with limit 10: %d, %v", n, err)
	}
	events := strings.Repeat("data: 12\n\n", 5) + "data: 1\r\n\r\n"
	if n, err := read(events, sepEvent); n != len(events) || err != nil {
		t.Errorf("small events with limit 10: %d, %v", n, err)
	}
	if _, err := read("data: 12\ndata: 34\n\n", sepEvent); err == nil {
		t.Error("an event of 18 bytes passed a limit of 10")
	}
}

// Over stdio too, Config.MaxMessageBytes bounds a message: an answer
// larger fails the call, and the next call works on a new session.
func TestStdioMessageLimit(t *testing.T) {
	s := connect(t, helperServer("s"), Config{MaxMessageBytes: 1 << 20})
	reg := registry(t, s)
	if r := run(reg, "s_flood", `{}`); !r.IsError {
		t.Fatalf("a 2 MiB answer with MaxMessageBytes 1 MiB: %.80q", r.Content)
	}
	if r := run(reg, "s_echo", `{"text":"hi"}`); r.IsError || r.Content != "echo: hi" {
		t.Errorf("the next call: %q (error %v)", r.Content, r.IsError)
	}
}
