package skill_test

import (
	"strings"
	"testing"
	"testing/fstest"
	"unicode/utf8"

	"github.com/valetkit/valet/agent/skill"
)

// FuzzLoad feeds arbitrary SKILL.md text to Load: it never panics, and a
// skill it accepts keeps every promise Skill documents.
func FuzzLoad(f *testing.F) {
	for _, m := range goodFS {
		f.Add(string(m.Data))
	}
	f.Add("---\nname: x\ndescription: d\ntools: a,b c(d e)\n---\nbody")
	f.Add("---\nname: x\ndescription: \"a\\u2028b\"\nallowed-tools: [\"a\", *x]\n---\n")
	f.Add("---\r\nname: x\r\ndescription: |\r\n  two\r\n  lines\r\n---")
	f.Fuzz(func(t *testing.T, data string) {
		set, err := skill.Load(fstest.MapFS{"x/SKILL.md": file(data)})
		if err != nil {
			if set != nil {
				t.Fatal("a Set with an error")
			}
			if !strings.HasPrefix(err.Error(), "skill: x/SKILL.md: ") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		all := set.All()
		if len(all) != 1 {
			t.Fatalf("%d skills", len(all))
		}
		s := all[0]
		if s.Name != "x" || s.Description == "" || len(s.Body) > skill.MaxBodySize || !utf8.ValidString(s.Body) {
			t.Fatalf("accepted %#v", s)
		}
		for _, v := range append(append([]string{s.Model}, s.Tools...), s.Triggers...) {
			if strings.ContainsAny(v, "\n\r\t\x1b\u2028\u0085") {
				t.Fatalf("a field holds a break or control: %q", v)
			}
		}
		if idx := set.Index(); strings.Count(idx, "\n") != 1 {
			t.Fatalf("Index() %q is not one line", idx)
		}
	})
}
