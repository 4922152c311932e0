package skill_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"testing/fstest"

	"github.com/valetkit/valet/agent/skill"
)

// goodFS holds a valet-style skill, a published Agent Skills file and a
// directory of resources that is not a skill.
var goodFS = fstest.MapFS{
	"hotel-research/SKILL.md": {Data: []byte(`---
name: hotel-research
description: >
  Finds and compares hotels.
  Use when the user asks where to stay.
triggers: [hotel, "where to stay"]
tools:
  - web_search
  - fetch_page
  - web_search
model: smart
---

# Hotel research

Compare at least three hotels.
`)},
	"hotel-research/references/SKILL.md": {Data: []byte("not a skill: a resource of hotel-research\n")},
	"team/pdf-processing/SKILL.md": {Data: []byte("---\r\n" +
		"name: pdf-processing\r\n" +
		"description: Extract PDF text, fill forms, merge files. Use when handling PDFs.\r\n" +
		"license: Apache-2.0\r\n" +
		"compatibility: Requires Python 3.14+ and uv\r\n" +
		"metadata:\r\n  author: example-org\r\n  version: \"1.0\"\r\n" +
		"allowed-tools: Bash(git log:*) Read, Grep\r\n" +
		"---\r\n" +
		"Run scripts/extract.py.\r\n")},
	"team/pdf-processing/scripts/extract.py": {Data: []byte("print('hi')\n")},
	"writer/SKILL.md": {Data: []byte(`---
name: writer
description: Writes emails and short texts.
allowed-tools:
  - draft_email
---
Write plainly.`)},
	"README.md": {Data: []byte("skills live here\n")},
}

func TestLoadReadsEverySkill(t *testing.T) {
	set, err := skill.Load(goodFS)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range set.All() {
		names = append(names, s.Name)
	}
	if want := []string{"hotel-research", "pdf-processing", "writer"}; !slices.Equal(names, want) {
		t.Fatalf("All() names = %q, want %q", names, want)
	}

	h, ok := set.Get("hotel-research")
	if !ok {
		t.Fatal("Get(hotel-research) not found")
	}
	want := skill.Skill{
		Name:        "hotel-research",
		Description: "Finds and compares hotels. Use when the user asks where to stay.",
		Triggers:    []string{"hotel", "where to stay"},
		Tools:       []string{"web_search", "fetch_page"},
		Model:       "smart",
		Body:        "# Hotel research\n\nCompare at least three hotels.",
		Path:        "hotel-research/SKILL.md",
	}
	if !equal(h, want) {
		t.Fatalf("Get(hotel-research) = %#v\nwant %#v", h, want)
	}
}

func TestLoadAcceptsPublishedAgentSkillsFiles(t *testing.T) {
	set, err := skill.Load(goodFS)
	if err != nil {
		t.Fatal(err)
	}
	p, ok := set.Get("pdf-processing")
	if !ok {
		t.Fatal("the published-format skill did not load")
	}
	// The string form splits at spaces and commas, but not inside
	// parentheses; CR LF line ends are read as LF.
	if want := []string{"Bash(git log:*)", "Read", "Grep"}; !slices.Equal(p.Tools, want) {
		t.Fatalf("allowed-tools string = %q, want %q", p.Tools, want)
	}
	if p.Body != "Run scripts/extract.py." || p.Path != "team/pdf-processing/SKILL.md" {
		t.Fatalf("body %q path %q", p.Body, p.Path)
	}
	w, _ := set.Get("writer")
	if !slices.Equal(w.Tools, []string{"draft_email"}) {
		t.Fatalf("allowed-tools list = %q", w.Tools)
	}
	if w.Model != "" || w.Triggers != nil {
		t.Fatalf("writer has model %q triggers %q, want none", w.Model, w.Triggers)
	}
}

func TestLoadReadsOneSkillAtTheRoot(t *testing.T) {
	set, err := skill.Load(fstest.MapFS{
		"SKILL.md":            {Data: []byte("---\nname: any-name\ndescription: d\n---\n")},
		"other/SKILL.md":      {Data: []byte("belongs to the root skill, never parsed")},
		"references/notes.md": {Data: []byte("x")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if all := set.All(); len(all) != 1 || all[0].Name != "any-name" || all[0].Path != "SKILL.md" {
		t.Fatalf("All() = %#v", all)
	}
}

func TestLoadReadsADirectoryOnDisk(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "writer"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "writer", "SKILL.md"), goodFS["writer/SKILL.md"].Data, 0o644); err != nil {
		t.Fatal(err)
	}
	set, err := skill.Load(os.DirFS(dir))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := set.Get("writer"); !ok {
		t.Fatal("writer not loaded from disk")
	}
}

func TestLoadOfNoSkillsIsEmpty(t *testing.T) {
	set, err := skill.Load(fstest.MapFS{"README.md": {Data: []byte("x")}})
	if err != nil {
		t.Fatal(err)
	}
	if len(set.All()) != 0 || set.Index() != "" {
		t.Fatalf("All() = %v, Index() = %q", set.All(), set.Index())
	}
	if _, err := skill.Load(nil); !errors.Is(err, skill.ErrInvalid) {
		t.Fatalf("Load(nil) error = %v, want ErrInvalid", err)
	}
}

func TestGetAndAllReturnCopies(t *testing.T) {
	set, err := skill.Load(goodFS)
	if err != nil {
		t.Fatal(err)
	}
	h, _ := set.Get("hotel-research")
	h.Tools[0] = "shell"
	all := set.All()
	all[0].Tools[0] = "shell"
	again, _ := set.Get("hotel-research")
	if again.Tools[0] != "web_search" {
		t.Fatalf("a caller's change reached the Set: tools %q", again.Tools)
	}
	if _, ok := set.Get("nope"); ok {
		t.Fatal("Get of an unknown name found something")
	}
	var nilSet *skill.Set
	if _, ok := nilSet.Get("writer"); ok || nilSet.All() != nil || nilSet.Index() != "" || nilSet.Check(nil, nil) != nil {
		t.Fatal("a nil *Set is not empty")
	}
}

func equal(a, b skill.Skill) bool {
	return a.Name == b.Name && a.Description == b.Description && slices.Equal(a.Triggers, b.Triggers) &&
		slices.Equal(a.Tools, b.Tools) && a.Model == b.Model && a.Body == b.Body && a.Path == b.Path
}

func TestLoadToleratesUnknownKeysAndScalarAliases(t *testing.T) {
	set, err := skill.Load(fstest.MapFS{"w/SKILL.md": file(`---
name: w
description: &d Writes.
license: MIT
metadata: {author: someone, version: "2"}
x-vendor: &a ["lol", "lol"]
x-bomb: &b [*a, *a, *a, *a, *a, *a, *a, *a]
x-bomb2: [*b, *b, *b, *b, *b, *b, *b, *b]
triggers: [*d, write]
---
`)})
	if err != nil {
		t.Fatal(err)
	}
	w, _ := set.Get("w")
	if !slices.Equal(w.Triggers, []string{"Writes.", "write"}) {
		t.Fatalf("triggers %q", w.Triggers)
	}
}
