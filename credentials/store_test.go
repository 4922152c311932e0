package credentials_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/valetkit/valet/credentials"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const marker = "s3cr3t-marker-value"

func TestEncode(t *testing.T) {
	type tok struct {
		AccessToken string `json:"access_token"`
	}
	good := map[string]any{
		"struct":      tok{marker},
		"pointer":     &tok{marker},
		"map":         map[string]string{"access_token": marker},
		"raw":         json.RawMessage(" {\n \"access_token\" : \"" + marker + "\" } "),
		"secret":      credentials.NewSecret(json.RawMessage(`{"access_token":"` + marker + `"}`)),
		"secret ptr":  ptr(credentials.NewSecret(json.RawMessage(`{"access_token":"` + marker + `"}`))),
		"empty obj":   map[string]int{},
		"raw compact": json.RawMessage(`{"access_token":"` + marker + `"}`),
	}
	for name, v := range good {
		s, err := credentials.Encode(v)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		var raw json.RawMessage
		if err := s.Decode(&raw); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if name != "empty obj" && string(raw) != `{"access_token":"`+marker+`"}` {
			t.Errorf("%s: not compacted to the expected object", name)
		}
	}
	bad := map[string]any{
		"nil":            nil,
		"array":          []string{marker},
		"raw array":      json.RawMessage(`["` + marker + `"]`),
		"string":         marker,
		"raw string":     json.RawMessage(`"` + marker + `"`),
		"number":         42,
		"bool":           true,
		"nil pointer":    (*tok)(nil),
		"nil map":        map[string]string(nil),
		"raw null":       json.RawMessage(`null`),
		"raw garbage":    json.RawMessage(`{"access_token":` + marker),
		"bytes":          []byte(`{"access_token":"` + marker + `"}`), // base64 string
		"zero secret":    credentials.Secret{},
		"nil secret ptr": (*credentials.Secret)(nil),
		"bad secret":     credentials.NewSecret(json.RawMessage(`[` + marker + `]`)),
		"chan":           make(chan int),
		"NaN":            map[string]float64{"x": math.NaN()},
		"marshaler":      leakyMarshaler{},
	}
	for name, v := range bad {
		_, err := credentials.Encode(v)
		if !errors.Is(err, credentials.ErrInvalid) {
			t.Errorf("%s: got %v, want ErrInvalid", name, err)
			continue
		}
		if strings.Contains(err.Error(), marker) || strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("%s: the error shows the value", name)
		}
	}
	_, err := credentials.Encode([]int{1})
	if err == nil || !strings.Contains(err.Error(), "JSON array") {
		t.Errorf("array error does not say what it got: %v", err)
	}
}

type leakyMarshaler struct{}

func (leakyMarshaler) MarshalJSON() ([]byte, error) { return nil, errors.New("cannot: " + marker) }

func ptr[T any](v T) *T { return &v }

func TestNormalize(t *testing.T) {
	if a, err := credentials.Normalize("t", "s", ""); err != nil || a != credentials.PrimaryAccount {
		t.Errorf(`Normalize("") = %q, %v`, a, err)
	}
	if a, err := credentials.Normalize("t", "s", "work"); err != nil || a != "work" {
		t.Errorf(`Normalize("work") = %q, %v`, a, err)
	}
	long := strings.Repeat("x", credentials.MaxNameLen+1)
	for _, c := range [][3]string{
		{"", "s", ""}, {"t", "", ""}, {long, "s", ""}, {"t", long, ""}, {"t", "s", long},
		{"t\x00", "s", ""}, {"t", "s\x00", ""}, {"t", "s", "a\x00"},
		{"\xff", "s", ""}, {"t", "\xfe", ""}, {"t", "s", "\xc3"},
	} {
		if _, err := credentials.Normalize(c[0], c[1], c[2]); !errors.Is(err, credentials.ErrInvalid) {
			t.Errorf("Normalize(%q) = %v, want ErrInvalid", c, err)
		}
	}
	if err := credentials.CheckList("t", ""); err != nil {
		t.Errorf("CheckList(t, \"\") = %v", err)
	}
	if err := credentials.CheckList("", "s"); !errors.Is(err, credentials.ErrInvalid) {
		t.Errorf("CheckList(\"\", s) = %v", err)
	}
}

func TestMemoryBasics(t *testing.T) {
	ctx := context.Background()
	m := credentials.NewMemory()
	in := map[string]string{"access_token": marker}
	if err := m.Save(ctx, "alice", "google", "", in); err != nil {
		t.Fatal(err)
	}
	in["access_token"] = "changed" // the store keeps its own copy
	s, err := m.Get(ctx, "alice", "google", credentials.PrimaryAccount)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]string
	if err := s.Decode(&out); err != nil || out["access_token"] != marker {
		t.Fatal("Get did not return what was saved")
	}
	out["access_token"] = "mutated"
	s2, _ := m.Get(ctx, "alice", "google", "")
	var again map[string]string
	if err := s2.Decode(&again); err != nil || again["access_token"] != marker {
		t.Fatal("mutating a decoded secret changed the store")
	}
	infos, err := m.List(ctx, "alice", "")
	if err != nil || len(infos) != 1 || infos[0].Account != credentials.PrimaryAccount || infos[0].TenantID != "alice" {
		t.Fatalf("List = %+v, %v", infos, err)
	}
	if _, err := m.Get(ctx, "bob", "google", ""); !errors.Is(err, credentials.ErrNotFound) {
		t.Errorf("bob reads alice: %v", err)
	}
	n, err := m.DeleteTenant(ctx, "alice")
	if err != nil || n != 1 {
		t.Errorf("DeleteTenant = %d, %v", n, err)
	}
	if _, err := m.Get(ctx, "alice", "google", ""); !errors.Is(err, credentials.ErrNotFound) {
		t.Errorf("after DeleteTenant: %v", err)
	}
}

func TestMemoryUpdate(t *testing.T) {
	ctx := context.Background()
	m := credentials.NewMemory()
	if err := m.Update(ctx, "t", "s", "", func(context.Context, credentials.Secret) (any, error) { return map[string]int{}, nil }); !errors.Is(err, credentials.ErrNotFound) {
		t.Fatalf("Update of nothing = %v", err)
	}
	if err := m.Save(ctx, "t", "s", "", map[string]int{"n": 0}); err != nil {
		t.Fatal(err)
	}
	const n = 50
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			err := m.Update(ctx, "t", "s", "", func(_ context.Context, old credentials.Secret) (any, error) {
				var v map[string]int
				if err := old.Decode(&v); err != nil {
					return nil, err
				}
				v["n"]++
				return v, nil
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	s, _ := m.Get(ctx, "t", "s", "")
	var v map[string]int
	if err := s.Decode(&v); err != nil || v["n"] != n {
		t.Fatalf("count = %d, want %d (%v)", v["n"], n, err)
	}

	// A Save between the read and the write makes fn run again on it.
	calls := 0
	err := m.Update(ctx, "t", "s", "", func(_ context.Context, old credentials.Secret) (any, error) {
		calls++
		var v map[string]int
		if err := old.Decode(&v); err != nil {
			return nil, err
		}
		if calls == 1 {
			if err := m.Save(ctx, "t", "s", "", map[string]int{"n": 1000}); err != nil {
				return nil, err
			}
		}
		v["n"]++
		return v, nil
	})
	s, _ = m.Get(ctx, "t", "s", "")
	v = nil
	if err != nil || calls != 2 || s.Decode(&v) != nil || v["n"] != 1001 {
		t.Fatalf("Update racing a Save: err %v, calls %d, n %d", err, calls, v["n"])
	}

	// A Save landing every time gives up with ErrConflict.
	i := 0
	err = m.Update(ctx, "t", "s", "", func(context.Context, credentials.Secret) (any, error) {
		i++
		return map[string]int{"n": -1}, m.Save(ctx, "t", "s", "", map[string]int{"n": i})
	})
	if !errors.Is(err, credentials.ErrConflict) {
		t.Fatalf("endless race: %v", err)
	}

	// An Update waiting for another gives up when its ctx ends.
	hold := make(chan struct{})
	held := make(chan struct{})
	var wg2 sync.WaitGroup
	wg2.Go(func() {
		_ = m.Update(ctx, "t", "s", "", func(_ context.Context, old credentials.Secret) (any, error) {
			close(held)
			<-hold
			return old, nil
		})
	})
	<-held
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := m.Update(cctx, "t", "s", "", func(_ context.Context, old credentials.Secret) (any, error) { return old, nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("waiting Update with a cancelled ctx: %v", err)
	}
	close(hold)
	wg2.Wait()
	if err := m.Update(ctx, "t", "s", "", nil); !errors.Is(err, credentials.ErrInvalid) {
		t.Errorf("nil fn: %v", err)
	}
}

func TestForTenant(t *testing.T) {
	ctx := context.Background()
	m := credentials.NewMemory()
	for _, tenant := range []string{"alice", "bob"} {
		if err := m.Save(ctx, tenant, "google", "", map[string]string{"owner": tenant}); err != nil {
			t.Fatal(err)
		}
	}
	a := credentials.ForTenant(m, "alice")
	if _, ok := a.(credentials.Updater); !ok {
		t.Error("the bound store of an Updater is no Updater")
	}
	if _, ok := a.(credentials.TenantDeleter); ok {
		t.Error("the bound store lets a tool erase its tenant")
	}
	s, err := a.Get(ctx, "alice", "google", "")
	var v map[string]string
	if err != nil || s.Decode(&v) != nil || v["owner"] != "alice" {
		t.Fatalf("own tenant: %v", err)
	}
	if _, err := a.Get(ctx, "bob", "google", ""); !errors.Is(err, credentials.ErrNotFound) {
		t.Errorf("Get bob: %v", err)
	}
	if err := a.Delete(ctx, "bob", "google", ""); !errors.Is(err, credentials.ErrNotFound) {
		t.Errorf("Delete bob: %v", err)
	}
	called := false
	if err := a.(credentials.Updater).Update(ctx, "bob", "google", "", func(context.Context, credentials.Secret) (any, error) {
		called = true
		return map[string]string{"owner": "alice"}, nil
	}); !errors.Is(err, credentials.ErrNotFound) || called {
		t.Errorf("Update bob: %v (fn called: %v)", err, called)
	}
	if err := a.Save(ctx, "bob", "google", "", map[string]string{"owner": "alice"}); !errors.Is(err, credentials.ErrTenantMismatch) {
		t.Errorf("Save bob: %v", err)
	}
	if infos, err := a.List(ctx, "bob", ""); err != nil || len(infos) != 0 {
		t.Errorf("List bob = %v, %v", infos, err)
	}
	if _, err := a.Get(ctx, "", "google", ""); !errors.Is(err, credentials.ErrInvalid) {
		t.Errorf("Get with no tenant: %v", err)
	}
	s, _ = m.Get(ctx, "bob", "google", "")
	v = nil
	if err := s.Decode(&v); err != nil || v["owner"] != "bob" {
		t.Error("bob's credential changed through alice's store")
	}
	if credentials.ForTenant(nil, "alice") != nil {
		t.Error("ForTenant(nil) is not nil")
	}
	// A store that is no Updater gives a bound store that is none.
	if _, ok := credentials.ForTenant(struct{ credentials.Store }{m}, "alice").(credentials.Updater); ok {
		t.Error("bound store claims Update its store lacks")
	}
}

// so the stale fn result overwrites the newly saved credential (ABA).
func TestMemoryUpdateAfterDeleteAndSaveKeepsTheNewSave(t *testing.T) {
	ctx := context.Background()
	m := credentials.NewMemory()
	if err := m.Save(ctx, "t", "google", "", map[string]string{"tok": "old"}); err != nil {
		t.Fatal(err)
	}
	calls := 0
	err := m.Update(ctx, "t", "google", "", func(_ context.Context, old credentials.Secret) (any, error) {
		calls++
		var v map[string]string
		_ = old.Decode(&v)
		if calls == 1 {
			// the user disconnects and reconnects while a refresh is in flight
			_ = m.Delete(ctx, "t", "google", "")
			_ = m.Save(ctx, "t", "google", "", map[string]string{"tok": "NEW"})
		}
		return map[string]string{"tok": v["tok"] + "-refreshed"}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := m.Get(ctx, "t", "google", "")
	var v map[string]string
	_ = s.Decode(&v)
	if v["tok"] != "NEW-refreshed" && v["tok"] != "NEW" {
		t.Errorf("stored %q after fn ran %d times: the Save of NEW was lost", v["tok"], calls)
	}
}

// Decode's error quotes numeric secret values.
func TestDecodeErrorHoldsNoSecret(t *testing.T) {
	ctx := context.Background()
	m := credentials.NewMemory()
	_ = m.Save(ctx, "t", "bank", "", map[string]any{"pin": 918273})
	s, _ := m.Get(ctx, "t", "bank", "")
	var v struct {
		Pin string `json:"pin"`
	}
	err := s.Decode(&v)
	if err != nil && strings.Contains(err.Error(), "918273") {
		t.Errorf("Decode error holds the secret: %v", err)
	}
}

// A tenant-bound store answers a done ctx with the ctx's error for any
// tenant, as every Store does, not with not-found.
func TestForTenantHonoursCtxForOtherTenants(t *testing.T) {
	s := credentials.ForTenant(credentials.NewMemory(), "t1")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Get(ctx, "t2", "google", ""); !errors.Is(err, context.Canceled) {
		t.Errorf("Get: %v", err)
	}
	if _, err := s.List(ctx, "t2", ""); !errors.Is(err, context.Canceled) {
		t.Errorf("List: %v", err)
	}
	if err := s.Delete(ctx, "t2", "google", ""); !errors.Is(err, context.Canceled) {
		t.Errorf("Delete: %v", err)
	}
	if err := s.Save(ctx, "t2", "google", "", map[string]string{"k": "v"}); !errors.Is(err, context.Canceled) {
		t.Errorf("Save: %v", err)
	}
}
