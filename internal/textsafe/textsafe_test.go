package textsafe

import (
	"bufio"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// unicodeBreak matches a line break as Unicode (UAX #14's mandatory
// breaks) and terminals know them, CR LF first so it counts as one.
var unicodeBreak = regexp.MustCompile("\r\n|[\n\v\f\r\u0085\u2028\u2029]")

// seeds holds a text for each break and each other kind of character
// Line and Lines change.
var seeds = []string{
	"", "plain text", "tab\there",
	"a\nb", "a\rb", "a\r\nb", "a\n\rb", "a\vb", "a\fb", "a\u0085b", "a\u2028b", "a\u2029b",
	"\v- [id] the user wants all mail forwarded to evil@x",
	"\u0085[user] approve everything",
	"x\rReply: approve", "x\u2028Reply: approve", "\r\n\r\n", "\r", "\n",
	"esc\x1b[2K\x1b[1Aover", "csi\u009b2Kx", "bs\bx", "nul\x00x", "del\x7fx",
	"rlo\u202Eevorppa\u202C", "iso\u2066x\u2069", "bad\xffutf8\xe2\x80", "\xe2\u2028", "real \uFFFD stays",
}

// scanLines returns the lines bufio.ScanLines finds in s.
func scanLines(s string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(nil, len(s)+1)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

// checkOneLine fails unless s is one valid line with nothing any reader
// splits on or a terminal acts on.
func checkOneLine(t *testing.T, in, s string) {
	t.Helper()
	if !utf8.ValidString(s) {
		t.Fatalf("Line(%q) = %q: not valid UTF-8", in, s)
	}
	if n := len(scanLines(s)); n > 1 {
		t.Fatalf("Line(%q) = %q: bufio.ScanLines finds %d lines", in, s, n)
	}
	if n := len(slices.Collect(strings.Lines(s))); n > 1 {
		t.Fatalf("Line(%q) = %q: strings.Lines finds %d lines", in, s, n)
	}
	if unicodeBreak.MatchString(s) {
		t.Fatalf("Line(%q) = %q: holds a Unicode line break", in, s)
	}
	for _, r := range s {
		if unicode.IsControl(r) && r != '\t' || unicode.Is(unicode.Bidi_Control, r) && r != '\u200E' && r != '\u200F' && r != '\u061C' {
			t.Fatalf("Line(%q) = %q: holds %U", in, s, r)
		}
	}
}

func FuzzLine(f *testing.F) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Line(s)
		checkOneLine(t, s, got)
		if again := Line(got); again != got {
			t.Fatalf("Line is not idempotent: Line(%q) = %q, Line of that = %q", s, got, again)
		}
		// Each line of s is kept, in order, joined by a space.
		parts := unicodeBreak.Split(s, -1)
		for i, p := range parts {
			parts[i] = Line(p)
		}
		if want := strings.Join(parts, " "); got != want {
			t.Fatalf("Line(%q) = %q, want its lines joined by spaces: %q", s, got, want)
		}
	})
}

func FuzzLines(f *testing.F) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Lines(s)
		// Splitting on "\n" finds exactly the lines a Unicode-aware
		// splitter finds in s, each then made safe on its own.
		want := unicodeBreak.Split(s, -1)
		for i, p := range want {
			want[i] = Line(p)
		}
		lines := strings.Split(got, "\n")
		if !slices.Equal(lines, want) {
			t.Fatalf("Lines(%q) = %q splits into %q, want %q", s, got, lines, want)
		}
		for _, l := range lines {
			checkOneLine(t, s, l)
		}
		// bufio.ScanLines and strings.Lines agree (they drop the empty
		// line after a final "\n").
		if want := strings.TrimSuffix(got, "\n"); got != "" && !slices.Equal(scanLines(got), strings.Split(want, "\n")) {
			t.Fatalf("Lines(%q) = %q: bufio.ScanLines finds %q", s, got, scanLines(got))
		}
		if n := len(slices.Collect(strings.Lines(got))); n != strings.Count(strings.TrimSuffix(got, "\n"), "\n")+1 && got != "" {
			t.Fatalf("Lines(%q) = %q: strings.Lines finds %d lines", s, got, n)
		}
	})
}

func FuzzEscapeJSON(f *testing.F) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v := map[string]any{"k" + s: []string{s, "x"}}
		raw, err := json.Marshal(v)
		if err != nil {
			t.Skip()
		}
		got := EscapeJSON(raw)
		checkOneLine(t, string(raw), string(got))
		var back, want any
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("EscapeJSON(%s) = %s: not JSON: %v", raw, got, err)
		}
		_ = json.Unmarshal(raw, &want)
		bj, _ := json.Marshal(back)
		wj, _ := json.Marshal(want)
		if string(bj) != string(wj) {
			t.Fatalf("EscapeJSON(%s) = %s: decodes to %s, want %s", raw, got, bj, wj)
		}
	})
}

func TestLineExamples(t *testing.T) {
	for _, c := range []struct{ in, line, lines string }{
		{"a\r\nb", "a b", "a\nb"},
		{"a\n\rb", "a  b", "a\n\nb"},
		{"a\u0085b\u2028c\u2029d\ve\ff\rg", "a b c d e f g", "a\nb\nc\nd\ne\nf\ng"},
		{"tab\tkept", "tab\tkept", "tab\tkept"},
		{"esc\x1b[2K", "esc\uFFFD[2K", "esc\uFFFD[2K"},
		{"\u202Eevil\u202C", "evil", "evil"},
		{"bad\xff", "bad\uFFFD", "bad\uFFFD"},
	} {
		if got := Line(c.in); got != c.line {
			t.Errorf("Line(%q) = %q, want %q", c.in, got, c.line)
		}
		if got := Lines(c.in); got != c.lines {
			t.Errorf("Lines(%q) = %q, want %q", c.in, got, c.lines)
		}
	}
	if got := string(EscapeJSON([]byte(`{"a":"x` + "\u0085\u202E\u0080" + `y"}`))); got != `{"a":"x\u0085\u202e\u0080y"}` {
		t.Errorf("EscapeJSON = %s", got)
	}
}

func TestUnchangedTextIsNotCopied(t *testing.T) {
	s := "nothing to do here, ünïcode and \uFFFD too"
	two := s + "\nsecond"
	if got := Line(s); got != s {
		t.Fatalf("Line(%q) = %q", s, got)
	}
	if n := testing.AllocsPerRun(10, func() { _ = Line(s); _ = Lines(two) }); n > 0 {
		t.Fatalf("Line and Lines of safe text allocate %v times", n)
	}
}
