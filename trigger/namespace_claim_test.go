package trigger_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/valetkit/valet/trigger"
)

// idStore is a store whose data has an identity, as rivertrigger.Store's
// database and schema have.
type idStore struct {
	trigger.MemoryStore
	ns, id string
	err    error
}

func (s *idStore) Namespace() string { return s.ns }

func (s *idStore) InstanceID(context.Context) (string, error) { return s.id, s.err }

// claimBus is a bus whose namespace one store's data may claim, as
// redisbus.Bus's stream is claimed: the first instance to claim it owns
// it, another is refused.
type claimBus struct {
	trigger.MemoryBus
	ns string

	mu     sync.Mutex
	owner  string
	claims []string // "namespace=instance", in order
}

func (b *claimBus) Namespace() string { return b.ns }

func (b *claimBus) ClaimNamespace(_ context.Context, namespace, instanceID string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.claims = append(b.claims, namespace+"="+instanceID)
	if b.owner == "" {
		b.owner = instanceID
	}
	if b.owner != instanceID {
		return fmt.Errorf("%w: namespace %q is used by another database", trigger.ErrInvalid, namespace)
	}
	return nil
}

func (b *claimBus) Claims() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.claims...)
}

var (
	_ trigger.InstanceIdentifier = (*idStore)(nil)
	_ trigger.NamespaceClaimer   = (*claimBus)(nil)
)

// An engine whose store's data is not the data that claimed the bus's
// namespace (staging's database, its namespace colliding with
// production's) does not start: Run returns the bus's refusal at once
// and handles none of the events waiting on the bus. The engine of the
// owning data runs them.
func TestRunRefusedWhenTheNamespaceBelongsToOtherData(t *testing.T) {
	ctx := context.Background()
	bus := &claimBus{ns: "valet/public"}
	bus.owner = "prod-id"
	staging := newHarness(t, trigger.Config{Store: &idStore{ns: "valet/public", id: "staging-id"}, Bus: bus})
	staging.create(t, eventTask("t1", "mail", trigger.Trigger{Source: "gmail"}))
	if err := staging.e.Publish(ctx, trigger.Event{ID: "m1", TenantID: "t1", Source: "gmail", Type: "message"}); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second) // would run until then
	defer cancel()
	err := staging.e.Run(rctx) // returns at once: the engine does not start
	if !errors.Is(err, trigger.ErrInvalid) {
		t.Fatalf("Run on another database's namespace: %v, want ErrInvalid", err)
	}
	if got := bus.Claims(); len(got) != 1 || got[0] != "valet/public=staging-id" {
		t.Fatalf("claims %q, want the store's namespace claimed with its id", got)
	}
	if n := len(staging.exec.Calls()); n != 0 {
		t.Fatalf("the refused engine ran %d times", n)
	}
	if runs := staging.runs(t, "t1", "mail"); len(runs) != 0 {
		t.Fatalf("the refused engine recorded runs %+v", runs)
	}

	// The owner's engine starts and takes the event.
	prod := newHarness(t, trigger.Config{Store: &idStore{ns: "valet/public", id: "prod-id"}, Bus: bus})
	prod.create(t, eventTask("t1", "mail", trigger.Trigger{Source: "gmail"}))
	prod.start()
	waitFor(t, "the owner's run of m1", prod.finished(t, "t1", "mail", 1, trigger.RunSucceeded))
	if err := prod.stop(); err != nil {
		t.Fatalf("the owner's Run: %v", err)
	}
}

// A store that cannot tell its id (not migrated, unreachable) keeps the
// engine from starting: the claim cannot be checked.
func TestRunFailsWhenTheStoreCannotTellItsInstance(t *testing.T) {
	boom := errors.New("relation valet_trigger_instance does not exist")
	bus := &claimBus{ns: "valet/public"}
	h := newHarness(t, trigger.Config{Store: &idStore{ns: "valet/public", err: boom}, Bus: bus})
	rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.e.Run(rctx); !errors.Is(err, boom) {
		t.Fatalf("Run: %v, want the store's error", err)
	}
	if got := bus.Claims(); len(got) != 0 {
		t.Fatalf("claimed %q without an instance id", got)
	}
}

// Without both interfaces nothing is claimed and the engine runs as
// before: a store with an id on a bus that claims nothing, a plain store
// on a claiming bus, and the in-memory pair.
func TestRunWithoutClaimRuns(t *testing.T) {
	ctx := context.Background()
	for name, cfg := range map[string]trigger.Config{
		"store with an id, plain bus": {Store: &idStore{ns: "valet/public", id: "a"}, Bus: &trigger.MemoryBus{}},
		"plain store, claiming bus":   {Store: &trigger.MemoryStore{}, Bus: &claimBus{owner: "someone else"}},
		"in memory":                   {},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, cfg)
			h.create(t, eventTask("t1", "mail", trigger.Trigger{Source: "gmail"}))
			h.start()
			if err := h.e.Publish(ctx, trigger.Event{ID: "m1", TenantID: "t1", Source: "gmail", Type: "message"}); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the run of m1", h.finished(t, "t1", "mail", 1, trigger.RunSucceeded))
			if err := h.stop(); err != nil {
				t.Fatalf("Run: %v", err)
			}
			if b, ok := cfg.Bus.(*claimBus); ok && len(b.Claims()) != 0 {
				t.Fatalf("a plain store claimed %q", b.Claims())
			}
		})
	}
}
