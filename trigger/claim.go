package trigger

import (
	"context"
	"errors"
	"fmt"
)

// InstanceIdentifier is implemented by a Store whose data has an identity
// of its own: InstanceID returns an id made once for the data (for
// rivertrigger.Store, by Migrate, kept in a table beside the tasks), the
// same from every process and whatever host name, proxy or address
// reaches the data, and different for any other data, also when it is in
// a database and schema of the same names on another server. It fails
// when the id cannot be read (the store not migrated, the database
// unreachable).
//
// With a Bus that implements NamespaceClaimer, Engine.Run claims the
// store's namespace for this id before it starts.
type InstanceIdentifier interface {
	InstanceID(ctx context.Context) (string, error)
}

// NamespaceClaimer is implemented by an EventBus that one deployment's
// data owns (redisbus.Bus: its stream). ClaimNamespace records instanceID,
// an InstanceIdentifier's id, as the owner of the bus's namespace when it
// has none, and returns nil when instanceID owns it, whether it just did
// or did earlier. When other data owns it, the bus is another
// deployment's — two environments whose namespaces collide, such as
// databases of one name on two servers sharing one Redis — and
// ClaimNamespace returns an error wrapping ErrInvalid; other errors are
// the bus's failures to record or read the owner. namespace is the
// Store's (Namespaced), "" when it has none; the claim is the bus's
// namespace's, which New checked to be the same.
type NamespaceClaimer interface {
	ClaimNamespace(ctx context.Context, namespace, instanceID string) error
}

// claimNamespace has a Store that identifies its data claim the bus for
// it, when the bus takes claims; nil when either does not.
func (e *Engine) claimNamespace(ctx context.Context) error {
	ider, ok := e.store.(InstanceIdentifier)
	if !ok {
		return nil
	}
	claimer, ok := e.bus.(NamespaceClaimer)
	if !ok {
		return nil
	}
	id, err := ider.InstanceID(ctx)
	if err != nil {
		return fmt.Errorf("trigger: engine: reading the store's instance id to claim its namespace: %w", err)
	}
	if id == "" {
		return errors.New("trigger: engine: the store reports an empty instance id")
	}
	var ns string
	if n, ok := e.store.(Namespaced); ok {
		ns = n.Namespace()
	}
	if err := claimer.ClaimNamespace(ctx, ns, id); err != nil {
		return fmt.Errorf("trigger: engine: %w", err)
	}
	return nil
}
