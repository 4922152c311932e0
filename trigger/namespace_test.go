package trigger_test

import (
	"errors"
	"testing"

	"github.com/valetkit/valet/trigger"
)

// nsStore and nsBus report the deployment they belong to, as
// rivertrigger.Store and redisbus.Bus do.
type nsStore struct {
	trigger.MemoryStore
	ns string
}

func (s *nsStore) Namespace() string { return s.ns }

type nsBus struct {
	trigger.MemoryBus
	ns string
}

func (b *nsBus) Namespace() string { return b.ns }

var (
	_ trigger.Namespaced = (*nsStore)(nil)
	_ trigger.Namespaced = (*nsBus)(nil)
)

// A Store of one deployment and a Bus of another would cross-wire two
// environments (staging's engine taking production's events): New refuses
// them with ErrInvalid. Agreeing ones, and a store or bus that reports no
// namespace, are fine.
func TestNewRefusesStoreAndBusOfDifferentNamespaces(t *testing.T) {
	exec := map[string]trigger.Executor{trigger.DefaultExecutor: &fakeExec{}}
	_, err := trigger.New(trigger.Config{Store: &nsStore{ns: "prod/public"}, Bus: &nsBus{ns: "staging/public"}, Executors: exec})
	if !errors.Is(err, trigger.ErrInvalid) {
		t.Fatalf("store prod/public, bus staging/public: %v, want ErrInvalid", err)
	}
	if _, err := trigger.New(trigger.Config{Store: &nsStore{ns: "prod/public"}, Bus: &nsBus{}, Executors: exec}); !errors.Is(err, trigger.ErrInvalid) {
		t.Fatalf("store prod/public, bus with the default namespace: %v, want ErrInvalid", err)
	}
	for name, cfg := range map[string]trigger.Config{
		"same":         {Store: &nsStore{ns: "prod/public"}, Bus: &nsBus{ns: "prod/public"}},
		"plain bus":    {Store: &nsStore{ns: "prod/public"}, Bus: &trigger.MemoryBus{}},
		"plain store":  {Store: &trigger.MemoryStore{}, Bus: &nsBus{ns: "staging/public"}},
		"default bus":  {Store: &nsStore{ns: "prod/public"}},
		"no namespace": {},
	} {
		cfg.Executors = exec
		if _, err := trigger.New(cfg); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
