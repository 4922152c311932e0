package llmtest_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
)

// fakeT records what a strict Script reports; end runs its cleanups as
// the testing package does at the end of a test (last registered first).
type fakeT struct {
	cleanups []func()
	errors   []string
}

func (f *fakeT) Helper()           {}
func (f *fakeT) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }
func (f *fakeT) Errorf(format string, args ...any) {
	f.errors = append(f.errors, fmt.Sprintf(format, args...))
}

func (f *fakeT) end() []string {
	for _, fn := range slices.Backward(f.cleanups) {
		fn()
	}
	return f.errors
}

var _ llmtest.TestingT = (*testing.T)(nil)

func play(t *testing.T, s *llmtest.Script, calls int) {
	t.Helper()
	for range calls {
		_, _ = s.Complete(t.Context(), llm.Request{Messages: []llm.Message{llm.UserMessage("hi")}})
	}
}

func TestStrictScript(t *testing.T) {
	three := func() []llmtest.Reply {
		return []llmtest.Reply{llmtest.Text("a"), llmtest.Text("b"), llmtest.Text("c")}
	}
	tests := []struct {
		name  string
		calls int
		want  []string
	}{
		{"exact", 3, nil},
		{"one short", 4, []string{"llmtest: script exhausted: call 4 had no reply (3 scripted)"}},
		{"two short", 5, []string{
			"llmtest: script exhausted: call 4 had no reply (3 scripted)",
			"llmtest: script exhausted: call 5 had no reply (3 scripted)",
		}},
		{"one left over", 2, []string{"llmtest: 1 scripted reply was never used"}},
		{"two left over", 1, []string{"llmtest: 2 scripted replies were never used"}},
		{"none used", 0, []string{"llmtest: 3 scripted replies were never used"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, mk := range []struct {
				how string
				new func(*fakeT) *llmtest.Script
			}{
				{"NewStrictScript", func(f *fakeT) *llmtest.Script { return llmtest.NewStrictScript(f, three()...) }},
				{"Strict", func(f *fakeT) *llmtest.Script { return llmtest.NewScript(three()...).Strict(f) }},
			} {
				f := &fakeT{}
				s := mk.new(f)
				play(t, s, tt.calls)
				if len(f.errors) != 0 {
					t.Fatalf("%s: reported before the test ended: %q", mk.how, f.errors)
				}
				if got := f.end(); !slices.Equal(got, tt.want) {
					t.Errorf("%s: reported %q, want %q", mk.how, got, tt.want)
				}
			}
		})
	}
}

func TestStrictScriptReportsMismatchedReplies(t *testing.T) {
	f := &fakeT{}
	s := llmtest.NewStrictScript(f, llmtest.Text("hello"), llmtest.ApproveAll())
	play(t, s, 2)
	got := f.end()
	if len(got) != 1 || !strings.HasPrefix(got[0], "llmtest: reply does not fit the request: call 2: ApproveAll(): the request has no resolve_approvals tool") {
		t.Fatalf("reported %q", got)
	}
}

func TestStrictScriptFunc(t *testing.T) {
	f := &fakeT{}
	s := llmtest.NewScriptFunc(func(llm.Request) llmtest.Reply { return llmtest.Text("ok") }).Strict(f)
	play(t, s, 3)
	if got := f.end(); len(got) != 0 {
		t.Fatalf("a func script has nothing left over: reported %q", got)
	}
}

func TestScriptErr(t *testing.T) {
	s := llmtest.NewScript(llmtest.Text("a"), llmtest.Decide(llmtest.Approve(0)))
	if s.Err() != nil || s.Remaining() != 2 {
		t.Fatalf("fresh: Err %v, Remaining %d", s.Err(), s.Remaining())
	}
	play(t, s, 1)
	if s.Err() != nil || s.Remaining() != 1 {
		t.Fatalf("one used: Err %v, Remaining %d", s.Err(), s.Remaining())
	}
	play(t, s, 2)
	err := s.Err()
	if !errors.Is(err, llmtest.ErrReplyMismatch) || !errors.Is(err, llmtest.ErrScriptExhausted) {
		t.Fatalf("Err = %v", err)
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "call 2: Decide(Approve(0))") ||
		lines[1] != "llmtest: script exhausted: call 3 had no reply (2 scripted)" {
		t.Fatalf("Err = %q", lines)
	}
	s.Reset()
	if s.Err() != nil || s.Remaining() != 2 {
		t.Fatalf("after Reset: Err %v, Remaining %d", s.Err(), s.Remaining())
	}
}
