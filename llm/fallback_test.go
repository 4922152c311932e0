package llm_test

import (
	"bytes"
	"context"
	"errors"
	"iter"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valetkit/valet/clock/clocktest"
	"github.com/valetkit/valet/llm"
)

// stubModel answers with its name, or fails with the errors queued.
type stubModel struct {
	name   string
	mu     sync.Mutex
	errs   []error // returned by the next calls, in order; then it answers
	always error   // returned when errs is empty, if set
	calls  int
	// chunks: a stream yields these texts before failing with the queued error.
	chunks []string
}

func (s *stubModel) Model() string { return s.name }

func (s *stubModel) result() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if len(s.errs) > 0 {
		err := s.errs[0]
		s.errs = s.errs[1:]
		return err
	}
	return s.always
}

func (s *stubModel) Complete(ctx context.Context, req llm.Request) (*llm.Response, error) {
	if err := s.result(); err != nil {
		return nil, err
	}
	return &llm.Response{Message: llm.AssistantMessage("from " + s.name)}, nil
}

func (s *stubModel) Stream(ctx context.Context, req llm.Request) iter.Seq2[llm.Chunk, error] {
	return func(yield func(llm.Chunk, error) bool) {
		for _, c := range s.chunks {
			if !yield(llm.Chunk{Text: c}, nil) {
				return
			}
		}
		if err := s.result(); err != nil {
			yield(llm.Chunk{}, err)
			return
		}
		yield(llm.Chunk{Text: "from " + s.name}, nil)
		yield(llm.Chunk{Response: &llm.Response{Message: llm.AssistantMessage("from " + s.name)}}, nil)
	}
}

func (s *stubModel) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

var (
	errDown    = &llm.Error{Kind: llm.KindUnavailable, StatusCode: 529, Message: "overloaded"}
	errAuth    = &llm.Error{Kind: llm.KindAuth, StatusCode: 401}
	errBad     = &llm.Error{Kind: llm.KindBadRequest, StatusCode: 400}
	errLongRL  = &llm.Error{Kind: llm.KindRateLimited, StatusCode: 429, RetryAfter: time.Minute}
	errShortRL = &llm.Error{Kind: llm.KindRateLimited, StatusCode: 429, RetryAfter: time.Second}
)

func newFallback(t *testing.T, cfg llm.FallbackConfig) *llm.Fallback {
	t.Helper()
	if cfg.RetryDelay == 0 {
		cfg.RetryDelay = time.Nanosecond
	}
	f, err := llm.NewFallback(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestFallbackRefusesItsOwnPrimary(t *testing.T) {
	a, b := &stubModel{name: "a"}, &stubModel{name: "b"}
	cases := map[string]llm.FallbackConfig{
		"primary in the list": {Primary: a, Fallbacks: []llm.Client{b, a}},
		"a client twice":      {Primary: a, Fallbacks: []llm.Client{b, b}},
	}
	for name, cfg := range cases {
		if _, err := llm.NewFallback(cfg); !errors.Is(err, llm.ErrFallbackSelf) {
			t.Errorf("%s: err = %v, want ErrFallbackSelf", name, err)
		}
	}
	for name, cfg := range map[string]llm.FallbackConfig{
		"no fallbacks":   {Primary: a},
		"no primary":     {Fallbacks: []llm.Client{b}},
		"names mismatch": {Primary: a, Fallbacks: []llm.Client{b}, Names: []string{"x"}},
		"negative tries": {Primary: a, Fallbacks: []llm.Client{b}, Tries: -1},
	} {
		if _, err := llm.NewFallback(cfg); !errors.Is(err, llm.ErrFallbackConfig) {
			t.Errorf("%s: err = %v, want ErrFallbackConfig", name, err)
		}
	}
}

func TestFallbackSwitchesOnDefaultKindsOnly(t *testing.T) {
	cases := []struct {
		name    string
		err     error
		switch_ bool
	}{
		{"unavailable after retries", errDown, true},
		{"rate limit past the wait bound", errLongRL, true},
		{"rate limit within the wait bound", errShortRL, false},
		{"auth", errAuth, false},
		{"bad request", errBad, false},
		{"context overflow", &llm.Error{Kind: llm.KindContextOverflow}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, b := &stubModel{name: "a", always: c.err}, &stubModel{name: "b"}
			var got []llm.Switch
			f := newFallback(t, llm.FallbackConfig{Primary: a, Fallbacks: []llm.Client{b}})
			ctx := llm.WithSwitchHook(context.Background(), func(s llm.Switch) { got = append(got, s) })
			resp, err := f.Complete(ctx, llm.Request{})
			if !c.switch_ {
				if llm.KindOf(err) != llm.KindOf(c.err) || b.Calls() != 0 || len(got) != 0 {
					t.Fatalf("err = %v, fallback calls %d, switches %v; want the primary's error and no switch", err, b.Calls(), got)
				}
				return
			}
			if err != nil || resp.Model != "b" {
				t.Fatalf("resp = %+v, err = %v; want b's answer", resp, err)
			}
			if len(got) != 1 || got[0].From != "a" || got[0].To != "b" || !errors.Is(got[0].Err, c.err) {
				t.Fatalf("switches = %+v, want one a→b with the primary's error", got)
			}
		})
	}
}

func TestFallbackRetriesAnUnavailablePrimaryBeforeSwitching(t *testing.T) {
	a, b := &stubModel{name: "a", errs: []error{errDown}}, &stubModel{name: "b"}
	f := newFallback(t, llm.FallbackConfig{Primary: a, Fallbacks: []llm.Client{b}})
	resp, err := f.Complete(context.Background(), llm.Request{})
	if err != nil || resp.Model != "a" || a.Calls() != 2 || b.Calls() != 0 {
		t.Fatalf("resp %+v err %v, calls a=%d b=%d; want a's answer on its second try", resp, err, a.Calls(), b.Calls())
	}
}

func TestFallbackCustomSwitchNeverOverridesAuth(t *testing.T) {
	a, b := &stubModel{name: "a", always: errAuth}, &stubModel{name: "b"}
	f := newFallback(t, llm.FallbackConfig{Primary: a, Fallbacks: []llm.Client{b}, Switch: func(error) bool { return true }})
	if _, err := f.Complete(context.Background(), llm.Request{}); llm.KindOf(err) != llm.KindAuth || b.Calls() != 0 {
		t.Fatalf("err = %v, b calls %d; an auth failure must not switch", err, b.Calls())
	}
}

func TestFallbackReturnsTheLastErrorWhenAllFail(t *testing.T) {
	a, b := &stubModel{name: "a", always: errDown}, &stubModel{name: "b", always: errLongRL}
	f := newFallback(t, llm.FallbackConfig{Primary: a, Fallbacks: []llm.Client{b}, Logger: slog.New(slog.DiscardHandler)})
	_, err := f.Complete(context.Background(), llm.Request{})
	if !errors.Is(err, errLongRL) {
		t.Fatalf("err = %v, want the last client's", err)
	}
}

func TestFallbackLogsASwitchWithoutAHook(t *testing.T) {
	var buf bytes.Buffer
	a, b := &stubModel{name: "a", always: errDown}, &stubModel{name: "b"}
	f := newFallback(t, llm.FallbackConfig{Primary: a, Fallbacks: []llm.Client{b}, Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	if _, err := f.Complete(context.Background(), llm.Request{}); err != nil {
		t.Fatal(err)
	}
	if out := buf.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "from=a") || !strings.Contains(out, "to=b") {
		t.Fatalf("log = %q, want a WARN line naming a and b", out)
	}
}

func TestFallbackStreamSwitchesOnlyBeforeTheFirstChunk(t *testing.T) {
	a, b := &stubModel{name: "a", always: errDown}, &stubModel{name: "b"}
	f := newFallback(t, llm.FallbackConfig{Primary: a, Fallbacks: []llm.Client{b}, Logger: slog.New(slog.DiscardHandler)})
	resp, err := llm.Collect(f.Stream(context.Background(), llm.Request{}))
	if err != nil || resp.Model != "b" {
		t.Fatalf("resp %+v err %v, want b's answer", resp, err)
	}

	a2, b2 := &stubModel{name: "a", always: errDown, chunks: []string{"half"}}, &stubModel{name: "b"}
	f2 := newFallback(t, llm.FallbackConfig{Primary: a2, Fallbacks: []llm.Client{b2}, Logger: slog.New(slog.DiscardHandler)})
	var text string
	var last error
	for c, err := range f2.Stream(context.Background(), llm.Request{}) {
		text += c.Text
		last = err
	}
	if !errors.Is(last, errDown) || text != "half" || b2.Calls() != 0 {
		t.Fatalf("text %q err %v b calls %d; a stream that yielded must end with its error", text, last, b2.Calls())
	}
}

func TestFallbackConversationStaysOnTheModelThatAnswered(t *testing.T) {
	clk := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	a, b := &stubModel{name: "a", errs: []error{errLongRL}}, &stubModel{name: "b"}
	f := newFallback(t, llm.FallbackConfig{Primary: a, Fallbacks: []llm.Client{b}, Clock: clk, StickFor: time.Hour, Logger: slog.New(slog.DiscardHandler)})
	conv := llm.WithConversation(context.Background(), "t1/c1")
	if r, _ := f.Complete(conv, llm.Request{}); r.Model != "b" {
		t.Fatalf("first turn answered by %q, want b", r.Model)
	}
	// a has recovered, but the conversation stays on b ...
	if r, _ := f.Complete(conv, llm.Request{}); r.Model != "b" || a.Calls() != 1 {
		t.Fatalf("second turn answered by %q (a calls %d), want b without asking a", r.Model, a.Calls())
	}
	// ... another conversation starts at the primary ...
	if r, _ := f.Complete(llm.WithConversation(context.Background(), "t1/c2"), llm.Request{}); r.Model != "a" {
		t.Fatalf("other conversation answered by %q, want a", r.Model)
	}
	// ... and after StickFor the conversation is back on the primary.
	clk.Advance(time.Hour)
	if r, _ := f.Complete(conv, llm.Request{}); r.Model != "a" {
		t.Fatalf("after StickFor answered by %q, want a", r.Model)
	}
}

func TestFallbackNoStickStartsEveryCallAtThePrimary(t *testing.T) {
	a, b := &stubModel{name: "a", errs: []error{errLongRL}}, &stubModel{name: "b"}
	f := newFallback(t, llm.FallbackConfig{Primary: a, Fallbacks: []llm.Client{b}, NoStick: true, Logger: slog.New(slog.DiscardHandler)})
	conv := llm.WithConversation(context.Background(), "t1/c1")
	f.Complete(conv, llm.Request{})
	if r, _ := f.Complete(conv, llm.Request{}); r.Model != "a" {
		t.Fatalf("answered by %q, want a", r.Model)
	}
}

func TestFallbackStickyMemoryIsBounded(t *testing.T) {
	a, b := &stubModel{name: "a", always: errLongRL}, &stubModel{name: "b"}
	f := newFallback(t, llm.FallbackConfig{Primary: a, Fallbacks: []llm.Client{b}, StickyMax: 2, Logger: slog.New(slog.DiscardHandler)})
	for _, k := range []string{"c1", "c2", "c3"} {
		f.Complete(llm.WithConversation(context.Background(), k), llm.Request{})
	}
	a.mu.Lock()
	a.always, a.calls = nil, 0
	a.mu.Unlock()
	// c1 was forgotten (the oldest of three with room for two): it starts at a.
	if r, _ := f.Complete(llm.WithConversation(context.Background(), "c1"), llm.Request{}); r.Model != "a" {
		t.Fatalf("c1 answered by %q, want a (forgotten)", r.Model)
	}
	if r, _ := f.Complete(llm.WithConversation(context.Background(), "c3"), llm.Request{}); r.Model != "b" {
		t.Fatalf("c3 answered by %q, want b (remembered)", r.Model)
	}
}

// Calls from many goroutines, on many conversations, share the sticky
// memory safely (go test -race) and each conversation ends on b.
func TestFallbackConcurrentConversations(t *testing.T) {
	a, b := &stubModel{name: "a", always: errLongRL}, &stubModel{name: "b"}
	f := newFallback(t, llm.FallbackConfig{Primary: a, Fallbacks: []llm.Client{b}, StickyMax: 4, Logger: slog.New(slog.DiscardHandler)})
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 8 {
				ctx := llm.WithConversation(context.Background(), string(rune('a'+g))+string(rune('0'+i%3)))
				r, err := f.Complete(ctx, llm.Request{})
				if err != nil || r.Model != "b" {
					errs <- errors.New("a call did not end on b")
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// Two clients of one model (two endpoints, two accounts) are told apart in
// the switch.
func TestFallbackNamesTwoClientsOfOneModelApart(t *testing.T) {
	a, b := &stubModel{name: "gpt-4o", always: errDown}, &stubModel{name: "gpt-4o"}
	f := newFallback(t, llm.FallbackConfig{Primary: a, Fallbacks: []llm.Client{b}})
	var got llm.Switch
	ctx := llm.WithSwitchHook(context.Background(), func(s llm.Switch) { got = s })
	if _, err := f.Complete(ctx, llm.Request{}); err != nil {
		t.Fatal(err)
	}
	if got.From != "gpt-4o" || got.To != "gpt-4o#1" {
		t.Fatalf("switch %s → %s, want gpt-4o → gpt-4o#1", got.From, got.To)
	}
}
