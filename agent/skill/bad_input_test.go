package skill_test

import (
	"errors"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/valetkit/valet/agent/skill"
)

func file(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }

// TestLoadRefusesBadInput loads one bad SKILL.md at a time, beside a good
// one, and checks the error names the file and says what is wrong.
func TestLoadRefusesBadInput(t *testing.T) {
	const p = "bad/SKILL.md"
	tests := []struct {
		name, data string
		want       string // in the error text
	}{
		{"no front matter", "# just markdown\n", "no front matter"},
		{"front matter not at the start", "\n---\nname: bad\ndescription: d\n---\n", "no front matter"},
		{"front matter never closed", "---\nname: bad\ndescription: d\n", "no closing line"},
		{"alias bomb in a field", "---\nname: bad\ndescription: d\nx: &a [\"lol\", \"lol\"]\ny: &b [*a, *a, *a, *a]\ntriggers: *b\n---\n", "a list item is not a string"},
		{"empty front matter", "---\n---\nbody\n", "empty front matter"},
		{"blank front matter", "---\n  \n\n---\nbody\n", "empty front matter"},
		{"broken YAML", "---\nname: bad\ndescription: [unclosed\n---\n", "broken YAML"},
		{"tab-indented YAML", "---\nname: bad\n\tdescription: d\n---\n", "broken YAML"},
		{"duplicate key", "---\nname: bad\nname: bad\ndescription: d\n---\n", "broken YAML"},
		{"front matter is a list", "---\n- name\n- bad\n---\n", "not a YAML mapping"},
		{"front matter is a string", "---\nhello\n---\n", "not a YAML mapping"},
		{"missing name", "---\ndescription: d\n---\n", "no name"},
		{"null name", "---\nname:\ndescription: d\n---\n", "no name"},
		{"missing description", "---\nname: bad\n---\n", "no description"},
		{"blank description", "---\nname: bad\ndescription: \"  \"\n---\n", "no description"},
		{"name is a map", "---\nname: {a: b}\ndescription: d\n---\n", "front matter"},
		{"uppercase name", "---\nname: Bad\ndescription: d\n---\n", `name "Bad" is not`},
		{"name with a space", "---\nname: bad one\ndescription: d\n---\n", "is not lowercase"},
		{"name starting with a hyphen", "---\nname: -bad\ndescription: d\n---\n", "is not lowercase"},
		{"name with a double hyphen", "---\nname: b--ad\ndescription: d\n---\n", "is not lowercase"},
		{"name with a slash", "---\nname: ../bad\ndescription: d\n---\n", "is not lowercase"},
		{"name with a newline", "---\nname: \"bad\\nX\"\ndescription: d\n---\n", "is not lowercase"},
		{"name too long", "---\nname: " + strings.Repeat("a", 65) + "\ndescription: d\n---\n", "is not lowercase"},
		{"name not its directory", "---\nname: other\ndescription: d\n---\n", `does not match its directory "bad"`},
		{"description too long", "---\nname: bad\ndescription: " + strings.Repeat("é", 1025) + "\n---\n", "more than 1024"},
		{"tools and allowed-tools", "---\nname: bad\ndescription: d\ntools: [a]\nallowed-tools: b\n---\n", "both tools and allowed-tools"},
		{"tools is a map", "---\nname: bad\ndescription: d\ntools: {a: b}\n---\n", "not a string or a list"},
		{"tool list item is a map", "---\nname: bad\ndescription: d\ntools:\n  - {a: b}\n---\n", "not a string"},
		{"empty tool in a list", "---\nname: bad\ndescription: d\ntools: [a, \"\"]\n---\n", "empty tool"},
		{"tool with a control character", "---\nname: bad\ndescription: d\ntools: [\"a\\u001b[2Jb\"]\n---\n", "control character"},
		{"empty trigger", "---\nname: bad\ndescription: d\ntriggers: [\" \"]\n---\n", "empty trigger"},
		{"model with a newline", "---\nname: bad\ndescription: d\nmodel: \"fast\\nsmart\"\n---\n", "model"},
		{"empty model", "---\nname: bad\ndescription: d\nmodel: \"\"\n---\n", "empty model"},
		{"model too long", "---\nname: bad\ndescription: d\nmodel: " + strings.Repeat("m", 300) + "\n---\n", "longer than"},
		{"not UTF-8", "---\nname: bad\ndescription: \xff\xfe\n---\n", "not valid UTF-8"},
		{"body too large", "---\nname: bad\ndescription: d\n---\n" + strings.Repeat("x", skill.MaxBodySize+1), "body is"},
		{"file too large", "---\nname: bad\ndescription: d\n---\n" + strings.Repeat("x", skill.MaxFileSize), "larger than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := fstest.MapFS{p: file(tt.data), "writer/SKILL.md": goodFS["writer/SKILL.md"]}
			set, err := skill.Load(fsys)
			if err == nil {
				t.Fatalf("Load accepted it: %#v", set.All())
			}
			if set != nil {
				t.Fatal("Load returned a Set with its error")
			}
			if !errors.Is(err, skill.ErrInvalid) {
				t.Fatalf("error %v is not ErrInvalid", err)
			}
			var se *skill.Error
			if !errors.As(err, &se) || se.Path != p {
				t.Fatalf("error %v does not name %s", err, p)
			}
			if !strings.Contains(err.Error(), "skill: "+p+": ") || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not say %q", err, tt.want)
			}
			if strings.ContainsAny(err.Error(), "\n\x1b") {
				t.Fatalf("one problem's error spans lines or carries an escape: %q", err)
			}
		})
	}
}

func TestLoadReportsEveryProblem(t *testing.T) {
	_, err := skill.Load(fstest.MapFS{
		"a/SKILL.md": file("---\nname: A\n---\n"), // bad name and no description
		"b/SKILL.md": file("no front matter"),     // and another file
		"c/SKILL.md": file("---\nname: c\ndescription: fine\n---\n"),
	})
	var paths []string
	for _, e := range joined(err) {
		var se *skill.Error
		if errors.As(e, &se) {
			paths = append(paths, se.Path)
		}
	}
	if strings.Join(paths, " ") != "a/SKILL.md a/SKILL.md b/SKILL.md" {
		t.Fatalf("problems reported for %q, want two for a and one for b; error: %v", paths, err)
	}
}

func TestLoadRefusesDuplicateNames(t *testing.T) {
	_, err := skill.Load(fstest.MapFS{
		"one/writer/SKILL.md": goodFS["writer/SKILL.md"],
		"two/writer/SKILL.md": goodFS["writer/SKILL.md"],
	})
	if !errors.Is(err, skill.ErrDuplicate) {
		t.Fatalf("error %v, want ErrDuplicate", err)
	}
	if !strings.Contains(err.Error(), "two/writer/SKILL.md") || !strings.Contains(err.Error(), "one/writer/SKILL.md") {
		t.Fatalf("error %q does not name both files", err)
	}
}

// failFS fails to open one SKILL.md.
type failFS struct{ fstest.MapFS }

var errDisk = errors.New("disk on fire")

func (f failFS) Open(name string) (fs.File, error) {
	if name == "broken/SKILL.md" {
		return nil, errDisk
	}
	return f.MapFS.Open(name)
}

func TestLoadReportsUnreadableFiles(t *testing.T) {
	_, err := skill.Load(failFS{fstest.MapFS{"broken/SKILL.md": goodFS["writer/SKILL.md"]}})
	if !errors.Is(err, errDisk) || !strings.Contains(err.Error(), "broken/SKILL.md") {
		t.Fatalf("error %v, want the fs error naming broken/SKILL.md", err)
	}
}

func joined(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
