package credtest

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/valetkit/valet/credentials"
)

// NewStore makes an empty store for one subtest. It isolates the store
// from every other one it makes (a schema, a key prefix) and removes what
// it leaves behind with t.Cleanup. Subtests run in parallel, so it is
// called concurrently.
type NewStore = func(t *testing.T) credentials.Store

// Run checks that the stores newStore makes behave as [credentials.Store]
// documents, with the optional [credentials.Updater] and
// [credentials.TenantDeleter] when they implement them. Each check is a
// parallel subtest with a store of its own.
func Run(t *testing.T, newStore NewStore) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s credentials.Store)
	}{
		{"RoundTrip", testRoundTrip},
		{"PrimaryAccount", testPrimary},
		{"SaveReplaces", testReplace},
		{"List", testList},
		{"Delete", testDelete},
		{"TenantIsolation", testIsolation},
		{"Names", testNames},
		{"Copies", testCopies},
		{"ConcurrentSaves", testConcurrentSaves},
		{"Update", testUpdate},
		{"UpdateRace", testUpdateRace},
		{"UpdateCancelled", testUpdateCancelled},
		{"DeleteTenant", testDeleteTenant},
		{"InvalidNames", testInvalidNames},
		{"InvalidCreds", testInvalidCreds},
		{"CancelledContext", testCancelled},
		{"ForTenant", testForTenant},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newStore(t))
		})
	}
}

// value is what the suite stores. Owner and Writer are not secret and
// name a value in failure messages; Token is the secret, derived from
// them (tokenFor), so a value is intact when its Token matches. Token is
// never printed.
type value struct {
	Owner  string `json:"owner"`
	Writer int    `json:"writer"`
	Count  int    `json:"count"`
	Token  string `json:"token"`
	Pad    string `json:"pad,omitempty"`
}

// secrets is one subtest's secret marker: every Token contains it, so a
// search for it finds any leaked Token.
type secrets struct{ marker string }

func newSecrets() secrets { return secrets{marker: "credtest-secret-" + rand.Text()} }

func (s secrets) tokenFor(owner string, writer int) string {
	return fmt.Sprintf("%s/%s/%d", s.marker, owner, writer)
}

func (s secrets) value(owner string, writer int) value {
	return value{Owner: owner, Writer: writer, Token: s.tokenFor(owner, writer)}
}

// noLeak fails the test when text, an error message or output, contains
// the marker.
func (s secrets) noLeak(t *testing.T, what, text string) {
	t.Helper()
	if strings.Contains(text, s.marker) {
		t.Errorf("%s contains a secret (%d bytes not shown)", what, len(text))
	}
}

func (s secrets) noLeakErr(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		s.noLeak(t, what+" error", err.Error())
	}
}

var bg = context.Background()

func save(t *testing.T, s credentials.Store, tenant, service, account string, v any) {
	t.Helper()
	if err := s.Save(bg, tenant, service, account, v); err != nil {
		t.Fatalf("Save(%q, %q, %q): %v", tenant, service, account, err)
	}
}

// get reads and decodes a value, failing the test on an error.
func get(t *testing.T, s credentials.Store, tenant, service, account string) value {
	t.Helper()
	sec, err := s.Get(bg, tenant, service, account)
	if err != nil {
		t.Fatalf("Get(%q, %q, %q): %v", tenant, service, account, err)
	}
	var v value
	if err := sec.Decode(&v); err != nil {
		t.Fatalf("Get(%q, %q, %q): decoding: %v", tenant, service, account, err)
	}
	return v
}

// check compares v with the value writer wrote for owner, naming the
// fields that differ but never the Token itself.
func (s secrets) check(t *testing.T, what string, v value, owner string, writer int) {
	t.Helper()
	if v.Owner != owner || v.Writer != writer {
		t.Errorf("%s: got the value of %s (writer %d), want %s (writer %d)", what, v.Owner, v.Writer, owner, writer)
		return
	}
	if v.Token != s.tokenFor(owner, writer) {
		t.Errorf("%s: the token of %s (writer %d) is not the one written", what, owner, writer)
	}
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: got error %v, want %v", what, err, want)
	}
}

func wantGone(t *testing.T, s credentials.Store, tenant, service, account string) {
	t.Helper()
	_, err := s.Get(bg, tenant, service, account)
	if !errors.Is(err, credentials.ErrNotFound) {
		t.Errorf("Get(%q, %q, %q): got error %v, want ErrNotFound", tenant, service, account, err)
	}
}

func list(t *testing.T, s credentials.Store, tenant, service string) []credentials.Info {
	t.Helper()
	infos, err := s.List(bg, tenant, service)
	if err != nil {
		t.Fatalf("List(%q, %q): %v", tenant, service, err)
	}
	return infos
}

func names(infos []credentials.Info) []string {
	var out []string
	for _, in := range infos {
		out = append(out, in.TenantID+"|"+in.Service+"|"+in.Account)
	}
	return out
}

func testRoundTrip(t *testing.T, s credentials.Store) {
	sec := newSecrets()
	want := sec.value("t/google/primary", 1)
	save(t, s, "t", "google", "", want)
	sec.check(t, "struct", get(t, s, "t", "google", ""), want.Owner, 1)

	// Other forms of a JSON object: a map, a json.RawMessage, a Secret.
	m := map[string]any{"owner": "t/github/primary", "writer": 2, "token": sec.tokenFor("t/github/primary", 2)}
	save(t, s, "t", "github", "", m)
	sec.check(t, "map", get(t, s, "t", "github", ""), "t/github/primary", 2)

	raw, _ := json.Marshal(sec.value("t/slack/primary", 3))
	save(t, s, "t", "slack", "", json.RawMessage(raw))
	sec.check(t, "json.RawMessage", get(t, s, "t", "slack", ""), "t/slack/primary", 3)

	got, err := s.Get(bg, "t", "slack", "")
	if err != nil {
		t.Fatal(err)
	}
	save(t, s, "t", "copy", "", got) // a Secret saved again
	sec.check(t, "Secret", get(t, s, "t", "copy", ""), "t/slack/primary", 3)
	sec.noLeak(t, "a Secret printed", fmt.Sprintf("%v %+v %#v %s", got, got, got, got))

	// Unicode and JSON escapes survive.
	odd := value{Owner: "ünïcødé ✓ \"quoted\" <tag> & \\ \u2028", Writer: 4, Token: sec.tokenFor("odd", 4)}
	save(t, s, "t", "odd", "", odd)
	if v := get(t, s, "t", "odd", ""); v.Owner != odd.Owner || v.Token != odd.Token {
		t.Error("a value with unicode and escapes did not round-trip")
	}

	if _, err := s.Get(bg, "t", "absent", ""); !errors.Is(err, credentials.ErrNotFound) {
		t.Errorf("Get of nothing: %v, want ErrNotFound", err)
	}
	sec.noLeakErr(t, "Get of nothing", err)
}

func testPrimary(t *testing.T, s credentials.Store) {
	sec := newSecrets()
	save(t, s, "t", "google", "", sec.value("v1", 1))
	sec.check(t, `"primary" after Save("")`, get(t, s, "t", "google", credentials.PrimaryAccount), "v1", 1)
	save(t, s, "t", "google", credentials.PrimaryAccount, sec.value("v2", 2))
	sec.check(t, `"" after Save("primary")`, get(t, s, "t", "google", ""), "v2", 2)
	infos := list(t, s, "t", "")
	if got := names(infos); !slices.Equal(got, []string{"t|google|primary"}) {
		t.Errorf("List = %q, want one row with account %q", got, credentials.PrimaryAccount)
	}
	save(t, s, "t", "google", "work", sec.value("work", 3))
	if err := s.Delete(bg, "t", "google", ""); err != nil {
		t.Fatal(err)
	}
	wantGone(t, s, "t", "google", credentials.PrimaryAccount)
	sec.check(t, "another account", get(t, s, "t", "google", "work"), "work", 3)
}

func testReplace(t *testing.T, s credentials.Store) {
	sec := newSecrets()
	save(t, s, "t", "google", "", sec.value("first", 1))
	before := list(t, s, "t", "google")
	save(t, s, "t", "google", "", sec.value("second", 2))
	sec.check(t, "after the second Save", get(t, s, "t", "google", ""), "second", 2)
	after := list(t, s, "t", "google")
	if len(before) != 1 || len(after) != 1 {
		t.Fatalf("List: %d rows, then %d; want 1 and 1", len(before), len(after))
	}
	if !after[0].CreatedAt.Equal(before[0].CreatedAt) {
		t.Errorf("Save changed CreatedAt from %v to %v", before[0].CreatedAt, after[0].CreatedAt)
	}
	if after[0].UpdatedAt.Before(before[0].UpdatedAt) {
		t.Errorf("UpdatedAt went back from %v to %v", before[0].UpdatedAt, after[0].UpdatedAt)
	}
}

func testList(t *testing.T, s credentials.Store) {
	sec := newSecrets()
	for _, n := range [][2]string{{"b", "2"}, {"a", "z"}, {"b", "1"}, {"c", ""}, {"a", "y"}, {"B", "x"}} {
		save(t, s, "t", n[0], n[1], sec.value(n[0]+"/"+n[1], 1))
	}
	save(t, s, "other", "a", "x", sec.value("other", 1))
	infos := list(t, s, "t", "")
	want := []string{"t|B|x", "t|a|y", "t|a|z", "t|b|1", "t|b|2", "t|c|primary"}
	if got := names(infos); !slices.Equal(got, want) {
		t.Errorf("List(t, \"\") = %q, want %q (sorted by service, then account, byte order)", got, want)
	}
	for _, in := range infos {
		if in.CreatedAt.IsZero() || in.UpdatedAt.IsZero() || in.UpdatedAt.Before(in.CreatedAt) {
			t.Errorf("%s/%s: CreatedAt %v, UpdatedAt %v", in.Service, in.Account, in.CreatedAt, in.UpdatedAt)
		}
	}
	if got := names(list(t, s, "t", "b")); !slices.Equal(got, []string{"t|b|1", "t|b|2"}) {
		t.Errorf("List(t, b) = %q", got)
	}
	if got := list(t, s, "t", "none"); len(got) != 0 {
		t.Errorf("List of an unknown service = %q", names(got))
	}
	if got := list(t, s, "nobody", ""); len(got) != 0 {
		t.Errorf("List of an unknown tenant = %q", names(got))
	}
	// Metadata only: no rendering of the list holds a secret.
	j, err := json.Marshal(infos)
	if err != nil {
		t.Fatal(err)
	}
	sec.noLeak(t, "List as JSON", string(j))
	sec.noLeak(t, "List printed", fmt.Sprintf("%+v %#v", infos, infos))
}

func testDelete(t *testing.T, s credentials.Store) {
	sec := newSecrets()
	save(t, s, "t", "google", "", sec.value("g", 1))
	save(t, s, "t", "google", "work", sec.value("w", 1))
	if err := s.Delete(bg, "t", "google", ""); err != nil {
		t.Fatal(err)
	}
	wantGone(t, s, "t", "google", "")
	sec.check(t, "the other account", get(t, s, "t", "google", "work"), "w", 1)
	if err := s.Delete(bg, "t", "google", ""); err != nil {
		t.Errorf("deleting what is absent: %v", err)
	}
	if err := s.Delete(bg, "nobody", "x", "y"); err != nil {
		t.Errorf("deleting in an unknown tenant: %v", err)
	}
	if got := names(list(t, s, "t", "")); !slices.Equal(got, []string{"t|google|work"}) {
		t.Errorf("List after Delete = %q", got)
	}
	save(t, s, "t", "google", "", sec.value("again", 2))
	sec.check(t, "saved after Delete", get(t, s, "t", "google", ""), "again", 2)
}

func testIsolation(t *testing.T, s credentials.Store) {
	sec := newSecrets()
	for _, tenant := range []string{"alice", "bob"} {
		save(t, s, tenant, "google", "", sec.value(tenant, 1))
	}
	save(t, s, "alice", "github", "", sec.value("alice-gh", 1))
	sec.check(t, "alice", get(t, s, "alice", "google", ""), "alice", 1)
	sec.check(t, "bob", get(t, s, "bob", "google", ""), "bob", 1)
	wantGone(t, s, "bob", "github", "")
	if got := names(list(t, s, "bob", "")); !slices.Equal(got, []string{"bob|google|primary"}) {
		t.Errorf("bob lists %q", got)
	}
	if err := s.Delete(bg, "bob", "github", ""); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(bg, "alice", "google", ""); err != nil {
		t.Fatal(err)
	}
	sec.check(t, "bob after alice's delete", get(t, s, "bob", "google", ""), "bob", 1)
	sec.check(t, "alice's github after bob's delete", get(t, s, "alice", "github", ""), "alice-gh", 1)
	// Tenant IDs that are prefixes of each other, or differ in case.
	for _, tenant := range []string{"al", "alice2", "Alice", "alice "} {
		wantGone(t, s, tenant, "github", "")
		if got := list(t, s, tenant, ""); len(got) != 0 {
			t.Errorf("tenant %q lists %q", tenant, names(got))
		}
	}
}

// testNames: names with separators, unicode and at the length limit are
// kept exactly, and names that concatenate alike stay apart.
func testNames(t *testing.T, s credentials.Store) {
	sec := newSecrets()
	long := strings.Repeat("n", credentials.MaxNameLen)
	triples := [][3]string{
		{"a", "bc", "d"}, {"ab", "c", "d"}, {"a", "b", "cd"}, {"a", "bcd", "primary"},
		{"t:1", "svc/x", "acct|y"}, {"t", "1:svc", "x/acct"}, {"{t}", "s*", "a?"},
		{"ünï", "サービス", "✓ account"}, {"t t", " s", "a "}, {"%", "_", "\\"},
		{long, long, long},
	}
	for i, n := range triples {
		save(t, s, n[0], n[1], n[2], sec.value(fmt.Sprintf("name%d", i), i))
	}
	for i, n := range triples {
		sec.check(t, fmt.Sprintf("names %d", i), get(t, s, n[0], n[1], n[2]), fmt.Sprintf("name%d", i), i)
	}
	if got := names(list(t, s, "a", "")); !slices.Equal(got, []string{"a|b|cd", "a|bc|d", "a|bcd|primary"}) {
		t.Errorf("List(a) = %q", got)
	}
	if got := names(list(t, s, long, long)); len(got) != 1 || got[0] != long+"|"+long+"|"+long {
		t.Errorf("List of the longest names = %d rows", len(got))
	}
	if got := list(t, s, "%", ""); len(got) != 1 {
		t.Errorf(`List("%%") = %q; a LIKE pattern?`, names(got))
	}
	if got := list(t, s, "a", "b%"); len(got) != 0 {
		t.Errorf(`List(a, "b%%") = %q; a LIKE pattern?`, names(got))
	}
}

func testCopies(t *testing.T, s credentials.Store) {
	sec := newSecrets()
	m := map[string]any{"owner": "m", "writer": 1, "token": sec.tokenFor("m", 1)}
	save(t, s, "t", "map", "", m)
	m["token"] = "changed"
	sec.check(t, "after changing the saved map", get(t, s, "t", "map", ""), "m", 1)

	raw, _ := json.Marshal(sec.value("r", 1))
	save(t, s, "t", "raw", "", json.RawMessage(raw))
	for i := range raw {
		raw[i] = ' '
	}
	sec.check(t, "after overwriting the saved bytes", get(t, s, "t", "raw", ""), "r", 1)

	var dst json.RawMessage
	got, err := s.Get(bg, "t", "raw", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := got.Decode(&dst); err != nil {
		t.Fatal(err)
	}
	for i := range dst {
		dst[i] = ' '
	}
	sec.check(t, "after overwriting decoded bytes", get(t, s, "t", "raw", ""), "r", 1)
}

// testConcurrentSaves: writers race to save one credential, new and then
// existing; the value left is exactly one writer's, intact.
func testConcurrentSaves(t *testing.T, s credentials.Store) {
	sec := newSecrets()
	const writers, rounds = 16, 3
	for _, account := range []string{"new", "new"} { // the first round creates the row
		var wg sync.WaitGroup
		start := make(chan struct{})
		for w := range writers {
			wg.Go(func() {
				<-start
				for range rounds {
					v := sec.value("race", w)
					v.Pad = strings.Repeat(string(rune('a'+w%26)), 2000+w)
					if err := s.Save(bg, "t", "race", account, v); err != nil {
						t.Errorf("writer %d: %v", w, err)
						return
					}
				}
			})
		}
		close(start)
		wg.Wait()
		v := get(t, s, "t", "race", account)
		if v.Writer < 0 || v.Writer >= writers {
			t.Fatalf("the value left names writer %d of %d", v.Writer, writers)
		}
		sec.check(t, "the value left", v, "race", v.Writer)
		if v.Pad != strings.Repeat(string(rune('a'+v.Writer%26)), 2000+v.Writer) {
			t.Errorf("the value left by writer %d is torn", v.Writer)
		}
		if got := list(t, s, "t", "race"); len(got) != 1 {
			t.Errorf("List after racing saves = %q, want one row", names(got))
		}
	}
}

func updater(t *testing.T, s credentials.Store) credentials.Updater {
	t.Helper()
	u, ok := s.(credentials.Updater)
	if !ok {
		t.Skipf("%T does not implement credentials.Updater", s)
	}
	return u
}

func testUpdate(t *testing.T, s credentials.Store) {
	u := updater(t, s)
	sec := newSecrets()
	called := false
	err := u.Update(bg, "t", "google", "", func(context.Context, credentials.Secret) (any, error) {
		called = true
		return sec.value("x", 1), nil
	})
	wantErr(t, "Update of nothing", err, credentials.ErrNotFound)
	if called {
		t.Error("Update of nothing called fn")
	}
	wantGone(t, s, "t", "google", "")

	save(t, s, "t", "google", "", sec.value("v", 1))
	save(t, s, "other", "google", "", sec.value("other", 1))
	before := list(t, s, "t", "google")

	// fn sees the stored value; "primary" is "".
	err = u.Update(bg, "t", "google", credentials.PrimaryAccount, func(_ context.Context, old credentials.Secret) (any, error) {
		var v value
		if err := old.Decode(&v); err != nil {
			return nil, err
		}
		sec.check(t, "fn's old value", v, "v", 1)
		return sec.value("v", 2), nil
	})
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	sec.check(t, "after Update", get(t, s, "t", "google", ""), "v", 2)
	sec.check(t, "the other tenant", get(t, s, "other", "google", ""), "other", 1)
	after := list(t, s, "t", "google")
	if len(after) != 1 || !after[0].CreatedAt.Equal(before[0].CreatedAt) || after[0].UpdatedAt.Before(before[0].UpdatedAt) {
		t.Errorf("times after Update: %+v, before: %+v", after, before)
	}

	// fn's error is returned as is, and nothing is written.
	boom := errors.New("refresh failed")
	err = u.Update(bg, "t", "google", "", func(context.Context, credentials.Secret) (any, error) { return sec.value("v", 3), boom })
	if err != boom {
		t.Errorf("fn's error: got %v, want it as is", err)
	}
	sec.check(t, "after fn failed", get(t, s, "t", "google", ""), "v", 2)

	// What fn returns must be a JSON object.
	for name, bad := range map[string]any{"array": []string{sec.marker}, "string": sec.marker, "nil": nil, "number": 7} {
		err := u.Update(bg, "t", "google", "", func(context.Context, credentials.Secret) (any, error) { return bad, nil })
		wantErr(t, "fn returning "+name, err, credentials.ErrInvalid)
		sec.noLeakErr(t, "fn returning "+name, err)
	}
	sec.check(t, "after fn returned bad values", get(t, s, "t", "google", ""), "v", 2)

	// Returning old keeps the value.
	if err := u.Update(bg, "t", "google", "", func(_ context.Context, old credentials.Secret) (any, error) { return old, nil }); err != nil {
		t.Fatal(err)
	}
	sec.check(t, "after fn returned old", get(t, s, "t", "google", ""), "v", 2)
}

// testUpdateRace: racing Updates, each a token refresh that increments
// Count and rotates the token, lose nothing.
func testUpdateRace(t *testing.T, s credentials.Store) {
	u := updater(t, s)
	sec := newSecrets()
	const n = 20
	save(t, s, "t", "google", "", sec.value("refresh", 0))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range n {
		wg.Go(func() {
			<-start
			err := u.Update(bg, "t", "google", "", func(_ context.Context, old credentials.Secret) (any, error) {
				var v value
				if err := old.Decode(&v); err != nil {
					return nil, err
				}
				if v.Token != sec.tokenFor("refresh", v.Count) {
					return nil, fmt.Errorf("refresh %d found a token it did not rotate to", v.Count)
				}
				v.Count++
				v.Writer = v.Count
				v.Token = sec.tokenFor("refresh", v.Count) // the rotated refresh token
				return v, nil
			})
			if err != nil {
				t.Errorf("Update: %v", err)
			}
		})
	}
	close(start)
	wg.Wait()
	v := get(t, s, "t", "google", "")
	if v.Count != n {
		t.Fatalf("after %d racing Updates the count is %d: an update was lost", n, v.Count)
	}
	sec.check(t, "the last refresh", v, "refresh", n)
}

// testUpdateCancelled: a ctx that ends while fn runs writes nothing.
func testUpdateCancelled(t *testing.T, s credentials.Store) {
	u := updater(t, s)
	sec := newSecrets()
	save(t, s, "t", "google", "", sec.value("v", 1))
	ctx, cancel := context.WithCancel(bg)
	err := u.Update(ctx, "t", "google", "", func(context.Context, credentials.Secret) (any, error) {
		cancel()
		return sec.value("v", 2), nil
	})
	wantErr(t, "Update whose ctx ended in fn", err, context.Canceled)
	sec.check(t, "after the cancelled Update", get(t, s, "t", "google", ""), "v", 1)
	// The credential is not left locked.
	ctx2, cancel2 := context.WithCancel(bg)
	defer cancel2()
	if err := u.Update(ctx2, "t", "google", "", func(context.Context, credentials.Secret) (any, error) { return sec.value("v", 3), nil }); err != nil {
		t.Fatalf("Update after a cancelled one: %v", err)
	}
	sec.check(t, "after the next Update", get(t, s, "t", "google", ""), "v", 3)
}

func testDeleteTenant(t *testing.T, s credentials.Store) {
	d, ok := s.(credentials.TenantDeleter)
	if !ok {
		t.Skipf("%T does not implement credentials.TenantDeleter", s)
	}
	sec := newSecrets()
	for _, n := range [][3]string{{"a", "google", ""}, {"a", "google", "work"}, {"a", "github", ""}, {"b", "google", ""}, {"ab", "x", ""}} {
		save(t, s, n[0], n[1], n[2], sec.value(n[0]+n[1]+n[2], 1))
	}
	n, err := d.DeleteTenant(bg, "a")
	if err != nil || n != 3 {
		t.Fatalf("DeleteTenant(a) = %d, %v; want 3", n, err)
	}
	wantGone(t, s, "a", "google", "")
	wantGone(t, s, "a", "github", "")
	if got := list(t, s, "a", ""); len(got) != 0 {
		t.Errorf("a still lists %q", names(got))
	}
	sec.check(t, "b", get(t, s, "b", "google", ""), "bgoogle", 1)
	sec.check(t, "ab", get(t, s, "ab", "x", ""), "abx", 1)
	if n, err := d.DeleteTenant(bg, "a"); err != nil || n != 0 {
		t.Errorf("second DeleteTenant(a) = %d, %v; want 0", n, err)
	}
	_, err = d.DeleteTenant(bg, "")
	wantErr(t, "DeleteTenant(\"\")", err, credentials.ErrInvalid)
}

func testInvalidNames(t *testing.T, s credentials.Store) {
	sec := newSecrets()
	save(t, s, "t", "s", "", sec.value("kept", 1))
	long := strings.Repeat("x", credentials.MaxNameLen+1)
	bad := [][3]string{
		{"", "s", ""}, {"t", "", ""}, {"", "", ""},
		{long, "s", ""}, {"t", long, ""}, {"t", "s", long},
		{"t\x00", "s", ""}, {"t", "s\x00", ""}, {"t", "s", "a\x00b"},
		{"\xff", "s", ""}, {"t", "\xc3", ""}, {"t", "s", "\xfe"},
	}
	u, _ := s.(credentials.Updater)
	for _, n := range bad {
		what := fmt.Sprintf("%q", n)
		wantErr(t, "Save"+what, s.Save(bg, n[0], n[1], n[2], sec.value("bad", 1)), credentials.ErrInvalid)
		_, err := s.Get(bg, n[0], n[1], n[2])
		wantErr(t, "Get"+what, err, credentials.ErrInvalid)
		wantErr(t, "Delete"+what, s.Delete(bg, n[0], n[1], n[2]), credentials.ErrInvalid)
		if u != nil {
			err := u.Update(bg, n[0], n[1], n[2], func(context.Context, credentials.Secret) (any, error) {
				t.Errorf("Update%s called fn", what)
				return sec.value("bad", 1), nil
			})
			wantErr(t, "Update"+what, err, credentials.ErrInvalid)
		}
		// List takes no account, and its service may be "".
		if badName(n[0], true) || badName(n[1], false) {
			_, err = s.List(bg, n[0], n[1])
			wantErr(t, "List"+what, err, credentials.ErrInvalid)
		}
	}
	if d, ok := s.(credentials.TenantDeleter); ok {
		for _, tenant := range []string{"", long, "t\x00", "\xff"} {
			_, err := d.DeleteTenant(bg, tenant)
			wantErr(t, fmt.Sprintf("DeleteTenant(%q)", tenant), err, credentials.ErrInvalid)
		}
	}
	if got := names(list(t, s, "t", "")); !slices.Equal(got, []string{"t|s|primary"}) {
		t.Errorf("after bad calls List = %q", got)
	}
	sec.check(t, "after bad calls", get(t, s, "t", "s", ""), "kept", 1)
}

// badName reports whether a name breaks the rules of credentials.Store.
func badName(name string, required bool) bool {
	return name == "" && required || len(name) > credentials.MaxNameLen ||
		!utf8.ValidString(name) || strings.ContainsRune(name, 0)
}

func testInvalidCreds(t *testing.T, s credentials.Store) {
	sec := newSecrets()
	save(t, s, "t", "kept", "", sec.value("kept", 1))
	bad := map[string]any{
		"nil":               nil,
		"JSON array":        []string{sec.marker},
		"raw array":         json.RawMessage(`["` + sec.marker + `"]`),
		"string":            sec.marker,
		"raw string":        json.RawMessage(`"` + sec.marker + `"`),
		"number":            42,
		"float":             3.5,
		"bool":              true,
		"nil pointer":       (*value)(nil),
		"nil map":           map[string]string(nil),
		"raw null":          json.RawMessage(`null`),
		"invalid JSON":      json.RawMessage(`{"token":"` + sec.marker),
		"bytes":             []byte(`{"token":"` + sec.marker + `"}`),
		"zero Secret":       credentials.Secret{},
		"unencodable":       make(chan int),
		"unencodable field": map[string]any{"token": sec.marker, "f": func() {}},
	}
	for name, creds := range bad {
		for _, service := range []string{"new", "kept"} {
			err := s.Save(bg, "t", service, "", creds)
			wantErr(t, "Save of "+name, err, credentials.ErrInvalid)
			sec.noLeakErr(t, "Save of "+name, err)
		}
	}
	wantGone(t, s, "t", "new", "")
	sec.check(t, "after bad Saves over it", get(t, s, "t", "kept", ""), "kept", 1)
	if got := names(list(t, s, "t", "")); !slices.Equal(got, []string{"t|kept|primary"}) {
		t.Errorf("after bad Saves List = %q", got)
	}
}

func testCancelled(t *testing.T, s credentials.Store) {
	sec := newSecrets()
	save(t, s, "t", "there", "", sec.value("there", 1))
	ctx, cancel := context.WithCancel(bg)
	cancel()
	wantErr(t, "Save (new)", s.Save(ctx, "t", "new", "", sec.value("new", 1)), context.Canceled)
	wantErr(t, "Save (existing)", s.Save(ctx, "t", "there", "", sec.value("there", 2)), context.Canceled)
	_, err := s.Get(ctx, "t", "there", "")
	wantErr(t, "Get", err, context.Canceled)
	_, err = s.List(ctx, "t", "")
	wantErr(t, "List", err, context.Canceled)
	wantErr(t, "Delete", s.Delete(ctx, "t", "there", ""), context.Canceled)
	if u, ok := s.(credentials.Updater); ok {
		err := u.Update(ctx, "t", "there", "", func(context.Context, credentials.Secret) (any, error) { return sec.value("there", 3), nil })
		wantErr(t, "Update", err, context.Canceled)
	}
	if d, ok := s.(credentials.TenantDeleter); ok {
		_, err := d.DeleteTenant(ctx, "t")
		wantErr(t, "DeleteTenant", err, context.Canceled)
	}
	wantGone(t, s, "t", "new", "")
	sec.check(t, "after calls with a cancelled ctx", get(t, s, "t", "there", ""), "there", 1)
}

// testForTenant: the store credentials.ForTenant makes of s holds its
// tenant whatever a tool passes.
func testForTenant(t *testing.T, s credentials.Store) {
	sec := newSecrets()
	save(t, s, "alice", "google", "", sec.value("alice", 1))
	save(t, s, "bob", "google", "", sec.value("bob", 1))
	a := credentials.ForTenant(s, "alice")

	sec.check(t, "alice through her store", get(t, a, "alice", "google", ""), "alice", 1)
	save(t, a, "alice", "github", "", sec.value("alice-gh", 1))
	sec.check(t, "alice's new credential", get(t, s, "alice", "github", ""), "alice-gh", 1)
	if got := names(list(t, a, "alice", "")); !slices.Equal(got, []string{"alice|github|primary", "alice|google|primary"}) {
		t.Errorf("alice lists %q", got)
	}

	for _, other := range []string{"bob", "nobody", "Alice", "alice "} {
		_, err := a.Get(bg, other, "google", "")
		wantErr(t, "Get "+other, err, credentials.ErrNotFound)
		sec.noLeakErr(t, "Get "+other, err)
		wantErr(t, "Delete "+other, a.Delete(bg, other, "google", ""), credentials.ErrNotFound)
		wantErr(t, "Save "+other, a.Save(bg, other, "google", "", sec.value("forged", 9)), credentials.ErrTenantMismatch)
		if got, err := a.List(bg, other, ""); err != nil || len(got) != 0 {
			t.Errorf("List %s = %q, %v; want nothing", other, names(got), err)
		}
	}
	_, err := a.Get(bg, "", "google", "")
	wantErr(t, "Get with an empty tenant", err, credentials.ErrInvalid)

	_, isUpdater := s.(credentials.Updater)
	u, ok := a.(credentials.Updater)
	if ok != isUpdater {
		t.Errorf("the bound store implements Updater: %v; the store: %v", ok, isUpdater)
	}
	if ok {
		err := u.Update(bg, "bob", "google", "", func(context.Context, credentials.Secret) (any, error) {
			t.Error("Update for bob called fn")
			return sec.value("forged", 9), nil
		})
		wantErr(t, "Update bob", err, credentials.ErrNotFound)
		err = u.Update(bg, "alice", "google", "", func(context.Context, credentials.Secret) (any, error) { return sec.value("alice", 2), nil })
		if err != nil {
			t.Errorf("Update alice: %v", err)
		}
		sec.check(t, "alice after her Update", get(t, s, "alice", "google", ""), "alice", 2)
	}
	if _, ok := a.(credentials.TenantDeleter); ok {
		t.Error("the bound store implements TenantDeleter: a tool could erase its tenant")
	}
	if _, ok := a.(credentials.Rotator); ok {
		t.Error("the bound store implements Rotator")
	}
	sec.check(t, "bob after alice's calls", get(t, s, "bob", "google", ""), "bob", 1)
	if got := names(list(t, s, "bob", "")); !slices.Equal(got, []string{"bob|google|primary"}) {
		t.Errorf("bob lists %q", got)
	}
}
