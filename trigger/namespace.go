package trigger

import "fmt"

// Namespaced is implemented by a Store or an EventBus that belongs to one
// deployment (an environment: production, staging, a developer's): its
// Namespace names it. rivertrigger.Store reports its PostgreSQL database
// and schema; redisbus.Bus reports its Config.Namespace, from which its
// stream is named.
//
// New refuses a Store and a Bus that both implement Namespaced and report
// different namespaces (ErrInvalid): an engine on one environment's tasks
// reading another's events would run staging's tasks on production's
// events, and take those events from production's engines. A Store or a
// Bus that does not implement it is not checked.
type Namespaced interface {
	Namespace() string
}

// checkNamespaces refuses a Store and a Bus of different deployments.
func checkNamespaces(s Store, b EventBus) error {
	sn, ok := s.(Namespaced)
	if !ok {
		return nil
	}
	bn, ok := b.(Namespaced)
	if !ok {
		return nil
	}
	if st, bu := sn.Namespace(), bn.Namespace(); st != bu {
		return fmt.Errorf("%w: engine: the Store belongs to namespace %q but the Bus to %q: "+
			"their engines would share another deployment's events; give the bus the store's namespace "+
			"(redisbus.Config{Namespace: store.Namespace()})", ErrInvalid, st, bu)
	}
	return nil
}
