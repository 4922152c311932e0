package skill_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/valetkit/valet/agent/skill"
)

func TestCheckReportsUnknownToolsAndModels(t *testing.T) {
	set, err := skill.Load(goodFS)
	if err != nil {
		t.Fatal(err)
	}
	tools := []string{"web_search", "fetch_page", "Bash(git log:*)", "Read", "Grep", "draft_email"}
	models := []string{"smart"}
	known := func(names []string) func(string) bool {
		return func(n string) bool { return slices.Contains(names, n) }
	}
	if err := set.Check(known(tools), known(models)); err != nil {
		t.Fatalf("Check with every name known: %v", err)
	}

	err = set.Check(known([]string{"fetch_page", "Read", "Grep", "draft_email"}), known(nil))
	if !errors.Is(err, skill.ErrUnknownTool) || !errors.Is(err, skill.ErrUnknownModel) {
		t.Fatalf("Check error %v, want ErrUnknownTool and ErrUnknownModel", err)
	}
	var got []string
	for _, e := range joined(err) {
		var se *skill.Error
		if !errors.As(e, &se) {
			t.Fatalf("problem %v is not a *skill.Error", e)
		}
		got = append(got, se.Path+" "+e.Error()[strings.LastIndex(e.Error(), ": ")+2:])
	}
	want := []string{
		`hotel-research/SKILL.md skill "hotel-research" lists tool "web_search", which does not exist`,
		`hotel-research/SKILL.md skill "hotel-research" names model "smart", which does not exist`,
		`team/pdf-processing/SKILL.md skill "pdf-processing" lists tool "Bash(git log:*)", which does not exist`,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Check problems\n%q\nwant\n%q", got, want)
	}
}

func TestCheckWithNilFunctionsKnowsNoNames(t *testing.T) {
	set, err := skill.Load(goodFS)
	if err != nil {
		t.Fatal(err)
	}
	// 2 + 3 + 1 tools, 1 model.
	if n := len(joined(set.Check(nil, nil))); n != 7 {
		t.Fatalf("Check(nil, nil) reported %d problems, want 7", n)
	}
}
