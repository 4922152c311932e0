package delegate_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/valetkit/valet/agent/delegate"
	"github.com/valetkit/valet/budget"
)

func specs(pairs ...string) []delegate.TaskSpec {
	// pairs: "id:dep1,dep2"
	var out []delegate.TaskSpec
	for _, p := range pairs {
		id, deps, _ := strings.Cut(p, ":")
		s := delegate.TaskSpec{ID: id, Task: "do " + id}
		if deps != "" {
			s.DependsOn = strings.Split(deps, ",")
		}
		out = append(out, s)
	}
	return out
}

func TestCheckRefusesBadGraphs(t *testing.T) {
	long := strings.Repeat("x", delegate.MaxIDLen+1)
	cases := map[string]struct {
		tenant string
		specs  []delegate.TaskSpec
		cycle  bool
	}{
		"no tasks":          {"t", nil, false},
		"no tenant":         {"", specs("a"), false},
		"tenant newline":    {"t\nx", specs("a"), false},
		"upper-case id":     {"t", specs("A"), false},
		"id with newline":   {"t", specs("a\nb"), false},
		"id too long":       {"t", specs(long), false},
		"duplicate id":      {"t", specs("a", "a"), false},
		"unknown dep":       {"t", specs("a:b"), false},
		"dep twice":         {"t", specs("a", "b:a,a"), false},
		"self dep":          {"t", specs("a:a"), true},
		"two-cycle":         {"t", specs("a:b", "b:a"), true},
		"long cycle":        {"t", specs("a", "b:a,e", "c:b", "d:c", "e:d"), true},
		"empty task":        {"t", []delegate.TaskSpec{{ID: "a", Task: "  \n"}}, false},
		"task too big":      {"t", []delegate.TaskSpec{{ID: "a", Task: strings.Repeat("x", delegate.MaxTaskBytes+1)}}, false},
		"context not utf8":  {"t", []delegate.TaskSpec{{ID: "a", Task: "x", Context: "\xff"}}, false},
		"task with NUL":     {"t", []delegate.TaskSpec{{ID: "a", Task: "x\x00"}}, false},
		"ref not a dep":     {"t", []delegate.TaskSpec{{ID: "a", Task: "x"}, {ID: "b", Task: "use [agent_result:a]"}}, false},
		"skill with escape": {"t", []delegate.TaskSpec{{ID: "a", Task: "x", Skill: "r\x1b[2J"}}, false},
	}
	for name, c := range cases {
		_, err := delegate.NewGraph(c.tenant, "conv", c.specs)
		if !errors.Is(err, delegate.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
		if errors.Is(err, delegate.ErrCycle) != c.cycle {
			t.Errorf("%s: ErrCycle %v, want %v (%v)", name, errors.Is(err, delegate.ErrCycle), c.cycle, err)
		}
	}
}

func TestCheckCycleNamesATaskOnIt(t *testing.T) {
	_, err := delegate.NewGraph("t", "c", specs("root", "a:root,d", "b:a", "c:b", "d:c", "leaf:d"))
	if !errors.Is(err, delegate.ErrCycle) {
		t.Fatalf("err %v, want ErrCycle", err)
	}
	named := false
	for _, id := range []string{`"a"`, `"b"`, `"c"`, `"d"`} {
		named = named || strings.Contains(err.Error(), id)
	}
	if !named || strings.Contains(err.Error(), `"root"`) || strings.Contains(err.Error(), `"leaf"`) {
		t.Errorf("error %q should name a task on the cycle, and no other", err)
	}
}

func TestCheckAcceptsLargeGraphs(t *testing.T) {
	// 1,000 tasks: 10 chains of 100, each chain's last task joining the
	// previous chain's; and a 10,000-task chain (no deep recursion).
	var s []delegate.TaskSpec
	for c := range 10 {
		for i := range 100 {
			sp := delegate.TaskSpec{ID: fmt.Sprintf("c%d-%d", c, i), Task: "x"}
			if i > 0 {
				sp.DependsOn = []string{fmt.Sprintf("c%d-%d", c, i-1)}
			}
			if i == 99 && c > 0 {
				sp.DependsOn = append(sp.DependsOn, fmt.Sprintf("c%d-99", c-1))
			}
			s = append(s, sp)
		}
	}
	if _, err := delegate.NewGraph("t", "c", s); err != nil {
		t.Fatalf("1,000 tasks: %v", err)
	}
	s = s[:0]
	for i := range delegate.MaxTasks {
		sp := delegate.TaskSpec{ID: fmt.Sprint(i), Task: "x"}
		if i > 0 {
			sp.DependsOn = []string{fmt.Sprint(i - 1)}
		}
		s = append(s, sp)
	}
	if _, err := delegate.NewGraph("t", "c", s); err != nil {
		t.Fatalf("MaxTasks chain: %v", err)
	}
	s = append(s, delegate.TaskSpec{ID: "one-more", Task: "x"})
	if _, err := delegate.NewGraph("t", "c", s); !errors.Is(err, delegate.ErrInvalid) {
		t.Errorf("MaxTasks+1: %v, want ErrInvalid", err)
	}
}

func TestCheckAcceptsRefsToDependenciesAndOtherResults(t *testing.T) {
	g, err := delegate.NewGraph("t", "c", []delegate.TaskSpec{
		{ID: "a", Task: "research"},
		{ID: "b", Task: "write", Context: "notes: [agent_result:a], earlier: [agent_result:0f3c.x]", DependsOn: []string{"a"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if g.Status != delegate.GraphRunning || g.Tasks[1].Status != delegate.TaskPending || len(g.ID) != 32 {
		t.Errorf("NewGraph = %+v", g)
	}
	g.Budget = budget.Limits{MaxTokens: -1}
	if err := g.Check(); !errors.Is(err, delegate.ErrInvalid) {
		t.Errorf("negative budget: %v, want ErrInvalid", err)
	}
}

func TestRefs(t *testing.T) {
	text := "see [agent_result:a1] and [agent_result:G.b-2], again [agent_result:a1]; " +
		"not [agent_result:] nor [agent_result:x y] nor [agent_result:\n] nor [agent_result:" + strings.Repeat("z", 200) + "] [agent_result:tail"
	want := []string{"a1", "G.b-2"}
	if got := delegate.Refs(text); !reflect.DeepEqual(got, want) {
		t.Errorf("Refs = %q, want %q", got, want)
	}
	if got := delegate.Refs("nothing"); got != nil {
		t.Errorf("Refs of no reference = %q", got)
	}
}

func TestOutputClean(t *testing.T) {
	big := strings.Repeat("é", delegate.MaxResultBytes) // 2 bytes a rune
	o := delegate.Output{Text: big}.Clean()
	if len(o.Text) > delegate.MaxResultBytes || o.Status != delegate.ResultPartial || !strings.HasSuffix(o.Text, "é") {
		t.Errorf("an overlong output: %d bytes, %s", len(o.Text), o.Status)
	}
	o = delegate.Output{Text: "a\xffb", Status: "weird", Usage: budget.Consumed{Tokens: -3}}.Clean()
	if o.Text != "a\uFFFDb" || o.Status != delegate.ResultFailed || o.Usage.Tokens != 0 {
		t.Errorf("Clean = %+v", o)
	}
}
