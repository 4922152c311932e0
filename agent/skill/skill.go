package skill

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/valetkit/valet/internal/textsafe"
)

// FileName is the name of the file that makes a directory a skill.
const FileName = "SKILL.md"

// Skill is one SKILL.md.
type Skill struct {
	// Name is the skill's name: lowercase letters, digits and single
	// hyphens, at most [MaxNameLen] bytes, the name of the directory that
	// holds the file (for a SKILL.md at the root of the fs.FS, any name).
	Name string
	// Description says what the skill does and when to use it (at most
	// [MaxDescriptionLen] characters, line breaks written as "\n", control
	// characters replaced). [Set.Index] shows it on one line.
	Description string
	// Triggers are phrases that suggest the skill (front matter
	// "triggers", a list or a single string); nil when none.
	Triggers []string
	// Tools are the only tools a specialist running the skill has, in the
	// order listed, without repeats (front matter "tools" or its synonym
	// "allowed-tools", a list or a string of names separated by spaces
	// or commas). None listed means the specialist has no tools.
	Tools []string
	// Model names the model the skill runs on, as an agent.ModelRouter
	// knows it; "" for the coordinator's default.
	Model string
	// Body is the markdown after the front matter, trimmed, at most
	// [MaxBodySize] bytes, line breaks written as "\n".
	Body string
	// Path is the SKILL.md's path in the fs.FS given to [Load].
	Path string
}

// clone returns s with its own slices.
func (s Skill) clone() Skill {
	s.Triggers = slices.Clone(s.Triggers)
	s.Tools = slices.Clone(s.Tools)
	return s
}

// Set is the skills Load found, by name. A nil *Set is empty. A Set is
// not changed after Load and is safe for concurrent use.
type Set struct {
	skills []Skill // sorted by name
}

// Load reads every SKILL.md in fsys and returns the skills, or every
// problem found, joined (each an [*Error] naming its file).
//
// A directory holding a SKILL.md is a skill, laid out as the Agent Skills
// format does (<name>/SKILL.md, with its scripts/, references/ and
// assets/ beside it); its subdirectories belong to it and are not
// searched. Other directories are searched at any depth. A SKILL.md at
// the root of fsys makes fsys one skill. Symbolic links to directories
// are not followed. An fs.FS without a SKILL.md gives an empty Set.
func Load(fsys fs.FS) (*Set, error) {
	if fsys == nil {
		return nil, fmt.Errorf("%w: nil fs.FS", ErrInvalid)
	}
	var (
		set  Set
		errs []error
		seen = map[string]string{} // name → path
	)
	walkErr := fs.WalkDir(fsys, ".", func(dir string, d fs.DirEntry, err error) error {
		if err != nil {
			errs = append(errs, &Error{Path: dir, Msg: "reading", Cause: err})
			if d != nil && d.IsDir() && dir != "." {
				return fs.SkipDir
			}
			return nil
		}
		if !d.IsDir() {
			return nil
		}
		p := path.Join(dir, FileName)
		info, err := fs.Stat(fsys, p)
		if err != nil || !info.Mode().IsRegular() {
			return nil // not a skill: search its subdirectories
		}
		s, problems := read(fsys, p)
		errs = append(errs, problems...)
		if len(problems) == 0 {
			if first, dup := seen[s.Name]; dup {
				errs = append(errs, &Error{Path: p, Kind: ErrDuplicate, Msg: fmt.Sprintf("name %q is also the name of %s", s.Name, first)})
			} else {
				seen[s.Name] = p
				set.skills = append(set.skills, s)
			}
		}
		return fs.SkipDir
	})
	if walkErr != nil {
		errs = append(errs, &Error{Path: ".", Msg: "reading", Cause: walkErr})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	slices.SortFunc(set.skills, func(a, b Skill) int { return strings.Compare(a.Name, b.Name) })
	return &set, nil
}

// read reads and parses the SKILL.md at p, reading at most one byte more
// than MaxFileSize.
func read(fsys fs.FS, p string) (Skill, []error) {
	f, err := fsys.Open(p)
	if err != nil {
		return Skill{}, []error{&Error{Path: p, Msg: "reading", Cause: err}}
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return Skill{}, []error{&Error{Path: p, Msg: "reading", Cause: err}}
	}
	return parse(p, data)
}

// Get returns the skill called name.
func (s *Set) Get(name string) (Skill, bool) {
	if s == nil {
		return Skill{}, false
	}
	i, ok := slices.BinarySearchFunc(s.skills, name, func(k Skill, n string) int { return strings.Compare(k.Name, n) })
	if !ok {
		return Skill{}, false
	}
	return s.skills[i].clone(), true
}

// All returns every skill, sorted by name.
func (s *Set) All() []Skill {
	if s == nil {
		return nil
	}
	out := make([]Skill, len(s.skills))
	for i, k := range s.skills {
		out[i] = k.clone()
	}
	return out
}

// Index returns what a coordinator is told of the skills: a line
// "- <name>: <description>" for each, sorted by name, the description on
// one line (line breaks and runs of white space become one space). A
// description cannot add a line of its own. "" for an empty Set.
func (s *Set) Index() string {
	if s == nil {
		return ""
	}
	var b strings.Builder
	for _, k := range s.skills {
		b.WriteString("- ")
		b.WriteString(k.Name)
		b.WriteString(": ")
		b.WriteString(strings.Join(strings.Fields(textsafe.Line(k.Description)), " "))
		b.WriteByte('\n')
	}
	return b.String()
}

// Check reports every tool a skill lists that toolExists says does not
// exist ([ErrUnknownTool]) and every model a skill names that modelExists
// says does not exist ([ErrUnknownModel]), joined, each an [*Error]
// naming the skill's file. A nil function knows no names: every tool (or
// model) named is reported. Check is meant for the code that runs skills
// (agent.NewOrchestrator) to refuse a skill it cannot run as written.
func (s *Set) Check(toolExists func(name string) bool, modelExists func(name string) bool) error {
	if s == nil {
		return nil
	}
	var errs []error
	for _, k := range s.skills {
		for _, t := range k.Tools {
			if toolExists == nil || !toolExists(t) {
				errs = append(errs, &Error{Path: k.Path, Kind: ErrUnknownTool, Msg: fmt.Sprintf("skill %q lists tool %q, which does not exist", k.Name, t)})
			}
		}
		if k.Model != "" && (modelExists == nil || !modelExists(k.Model)) {
			errs = append(errs, &Error{Path: k.Path, Kind: ErrUnknownModel, Msg: fmt.Sprintf("skill %q names model %q, which does not exist", k.Name, k.Model)})
		}
	}
	return errors.Join(errs...)
}
