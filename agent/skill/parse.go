package skill

import (
	"bytes"
	"fmt"
	"path"
	"regexp"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/valetkit/valet/internal/textsafe"
)

const (
	// MaxFileSize is the largest SKILL.md Load reads, in bytes: a bigger
	// file is refused unparsed, so a hostile one costs at most this much
	// memory.
	MaxFileSize = 256 << 10
	// MaxBodySize is the largest markdown body a skill may have, in bytes.
	// The body becomes a specialist's system prompt; the Agent Skills
	// format recommends under 5,000 tokens (about 20 KiB).
	MaxBodySize = 64 << 10
	// MaxNameLen is the longest skill name, in bytes (the Agent Skills
	// format's limit).
	MaxNameLen = 64
	// MaxDescriptionLen is the longest description, in characters (the
	// Agent Skills format's limit).
	MaxDescriptionLen = 1024
	// maxFieldLen caps a model name, a tool name and a trigger, in bytes.
	maxFieldLen = 256
)

// namePattern is the Agent Skills format's name: lowercase letters,
// digits and single hyphens, not at either end.
var namePattern = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// frontMatter is the YAML a SKILL.md starts with. Keys it does not name
// (license, compatibility, metadata, ...) are ignored.
type frontMatter struct {
	Name         *string    `yaml:"name"`
	Description  *string    `yaml:"description"`
	Triggers     stringList `yaml:"triggers"`
	Tools        toolList   `yaml:"tools"`
	AllowedTools toolList   `yaml:"allowed-tools"`
	Model        *string    `yaml:"model"`
}

// stringList is a YAML sequence of strings; a single string is a list of
// one.
type stringList struct {
	set   bool
	items []string
}

func (l *stringList) UnmarshalYAML(n *yaml.Node) error {
	l.set = true
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return nil
		}
		l.items = []string{n.Value}
		return nil
	case yaml.SequenceNode:
		for _, c := range n.Content {
			if c.Kind == yaml.AliasNode && c.Alias != nil {
				c = c.Alias // an alias of a string; an alias of a list is refused below
			}
			if c.Kind != yaml.ScalarNode || c.Tag == "!!null" {
				return fmt.Errorf("line %d: a list item is not a string", c.Line)
			}
			l.items = append(l.items, c.Value)
		}
		return nil
	}
	return fmt.Errorf("line %d: not a string or a list of strings", n.Line)
}

// toolList is a YAML sequence of tool names, or the Agent Skills string
// form: names separated by spaces or commas ("Read, Grep" or
// "Bash(git log:*) Read"; a separator inside parentheses does not split).
type toolList struct{ stringList }

func (l *toolList) UnmarshalYAML(n *yaml.Node) error {
	if err := l.stringList.UnmarshalYAML(n); err != nil {
		return err
	}
	if n.Kind == yaml.ScalarNode && len(l.items) == 1 {
		l.items = splitTools(l.items[0])
	}
	return nil
}

// splitTools splits the string form of a tool list at spaces and commas
// outside parentheses.
func splitTools(s string) []string {
	var out []string
	depth, start := 0, -1
	for i, r := range s {
		sep := depth == 0 && (r == ',' || r == ' ' || r == '\t' || textsafe.IsBreak(r))
		switch {
		case sep:
			if start >= 0 {
				out = append(out, s[start:i])
				start = -1
			}
			continue
		case r == '(':
			depth++
		case r == ')' && depth > 0:
			depth--
		}
		if start < 0 {
			start = i
		}
	}
	if start >= 0 {
		out = append(out, s[start:])
	}
	return out
}

// parse reads the SKILL.md at path p (its directory's name must be the
// skill's, unless p is at the root). Every problem found is returned.
func parse(p string, data []byte) (Skill, []error) {
	bad := func(format string, args ...any) error {
		return &Error{Path: p, Kind: ErrInvalid, Msg: fmt.Sprintf(format, args...)}
	}
	if len(data) > MaxFileSize {
		return Skill{}, []error{bad("file is larger than %d bytes", MaxFileSize)}
	}
	if !utf8.Valid(data) {
		return Skill{}, []error{bad("file is not valid UTF-8")}
	}
	data = bytes.TrimPrefix(data, []byte("\uFEFF"))
	fm, body, ok := split(string(data))
	if !ok {
		if line, _, _ := strings.Cut(string(data), "\n"); strings.TrimRight(line, " \t\r") == "---" {
			return Skill{}, []error{bad("front matter has no closing line \"---\"")}
		}
		return Skill{}, []error{bad("no front matter: the file must start with a line \"---\"")}
	}
	if strings.TrimSpace(fm) == "" {
		return Skill{}, []error{bad("empty front matter")}
	}
	var root yaml.Node
	if err := yaml.Unmarshal([]byte(fm), &root); err != nil {
		return Skill{}, []error{&Error{Path: p, Kind: ErrInvalid, Msg: "broken YAML front matter", Cause: err}}
	}
	if len(root.Content) != 1 || root.Content[0].Kind != yaml.MappingNode {
		return Skill{}, []error{bad("front matter is not a YAML mapping of keys to values")}
	}
	var f frontMatter
	if err := root.Content[0].Decode(&f); err != nil {
		return Skill{}, []error{&Error{Path: p, Kind: ErrInvalid, Msg: "broken YAML front matter", Cause: err}}
	}

	var errs []error
	s := Skill{Path: p}
	switch {
	case f.Name == nil || strings.TrimSpace(*f.Name) == "":
		errs = append(errs, bad("front matter has no name"))
	case len(*f.Name) > MaxNameLen || !namePattern.MatchString(*f.Name):
		errs = append(errs, bad("name %q is not lowercase letters, digits and single hyphens (not first or last), at most %d long", *f.Name, MaxNameLen))
	default:
		s.Name = *f.Name
		if dir := path.Dir(p); dir != "." && path.Base(dir) != s.Name {
			errs = append(errs, bad("name %q does not match its directory %q", s.Name, path.Base(dir)))
		}
	}
	if f.Description == nil || strings.TrimSpace(*f.Description) == "" {
		errs = append(errs, bad("front matter has no description"))
	} else if n := utf8.RuneCountInString(strings.TrimSpace(*f.Description)); n > MaxDescriptionLen {
		errs = append(errs, bad("description is %d characters, more than %d", n, MaxDescriptionLen))
	} else {
		s.Description = strings.TrimSpace(textsafe.Lines(*f.Description))
	}
	if f.Model != nil {
		m := strings.TrimSpace(*f.Model)
		if err := field("model", m); err != "" {
			errs = append(errs, bad("%s", err))
		} else {
			s.Model = m
		}
	}
	for _, t := range f.Triggers.items {
		t = strings.TrimSpace(t)
		if err := field("trigger", t); err != "" {
			errs = append(errs, bad("%s", err))
			continue
		}
		s.Triggers = append(s.Triggers, t)
	}
	if f.Tools.set && f.AllowedTools.set {
		errs = append(errs, bad("both tools and allowed-tools are set: use one"))
	}
	for _, t := range append(f.Tools.items, f.AllowedTools.items...) {
		t = strings.TrimSpace(t)
		if err := field("tool", t); err != "" {
			errs = append(errs, bad("%s", err))
			continue
		}
		if !contains(s.Tools, t) {
			s.Tools = append(s.Tools, t)
		}
	}
	body = strings.TrimSpace(textsafe.Lines(body))
	if len(body) > MaxBodySize {
		errs = append(errs, bad("body is %d bytes, more than %d", len(body), MaxBodySize))
	} else {
		s.Body = body
	}
	return s, errs
}

// field checks a one-line value: non-empty, no line break or control
// character, at most maxFieldLen bytes. It returns what is wrong, or "".
func field(what, v string) string {
	switch {
	case v == "":
		return "empty " + what
	case len(v) > maxFieldLen:
		return fmt.Sprintf("%s %.40q... is longer than %d bytes", what, v, maxFieldLen)
	case textsafe.Line(v) != v || strings.ContainsRune(v, '\t'):
		return fmt.Sprintf("%s %q holds a line break or control character", what, v)
	}
	return ""
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// split cuts a SKILL.md into its front matter and its body. The file must
// start with a line "---"; the front matter ends at the next line "---".
// Trailing white space on those lines and CR LF line ends are accepted.
func split(s string) (fm, body string, ok bool) {
	line, rest, _ := strings.Cut(s, "\n")
	if strings.TrimRight(line, " \t\r") != "---" {
		return "", "", false
	}
	for off := 0; off < len(rest); {
		line, _, found := strings.Cut(rest[off:], "\n")
		if strings.TrimRight(line, " \t\r") == "---" {
			end := off + len(line)
			if found {
				end++
			}
			return rest[:off], rest[end:], true
		}
		if !found {
			break
		}
		off += len(line) + 1
	}
	return "", "", false
}
