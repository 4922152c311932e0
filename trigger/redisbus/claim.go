package redisbus

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/valetkit/valet/trigger"
)

// OwnerSuffix makes the key of the stream's owner from the stream's name:
// the instance id of the data (trigger.InstanceIdentifier) whose engines
// use the stream (ClaimNamespace).
const OwnerSuffix = ":owner"

// claimTries bounds the claims raced by an owner key deleted between
// SET NX and GET.
const claimTries = 3

var _ trigger.NamespaceClaimer = (*Bus)(nil)

// OwnerKey returns the key holding the instance id of the data that owns
// the stream: Stream() + OwnerSuffix.
func (b *Bus) OwnerKey() string { return b.cfg.Stream + OwnerSuffix }

// ClaimNamespace implements trigger.NamespaceClaimer: it records
// instanceID as the stream's owner at OwnerKey (SET NX, no expiry) unless
// the key holds an owner already; it returns nil when instanceID owns the
// stream, and an error wrapping trigger.ErrInvalid when other data does
// (or instanceID is ""): another deployment's engines use the stream, and
// both would take each other's events. Errors from Redis come back
// wrapped. trigger.Engine.Run calls it before it starts.
func (b *Bus) ClaimNamespace(ctx context.Context, namespace, instanceID string) error {
	if instanceID == "" {
		return fmt.Errorf("%w: redisbus: claiming namespace %q with an empty instance id", trigger.ErrInvalid, namespace)
	}
	key := b.OwnerKey()
	for range claimTries {
		set, err := b.rdb.SetNX(ctx, key, instanceID, 0).Result()
		if err != nil {
			return fmt.Errorf("redisbus: claiming namespace %q at %s: %w", namespace, key, err)
		}
		if set {
			b.log.Info("redisbus: claimed the stream for this database", "namespace", namespace, "owner_key", key)
			return nil
		}
		owner, err := b.rdb.Get(ctx, key).Result()
		if errors.Is(err, redis.Nil) {
			continue // deleted meanwhile: claim again
		}
		if err != nil {
			return fmt.Errorf("redisbus: reading the owner of namespace %q at %s: %w", namespace, key, err)
		}
		if owner == instanceID {
			return nil
		}
		return fmt.Errorf("%w: redisbus: namespace %q (stream %s) is used by another database (instance %s; this "+
			"store's is %s): two deployments whose namespaces collide, such as databases of one name on two servers, "+
			"would take each other's events; set rivertrigger.Config.Namespace and redisbus.Config.Namespace per "+
			"environment (if this deployment moved to new data on purpose, delete %s)",
			trigger.ErrInvalid, namespace, b.cfg.Stream, owner, instanceID, key)
	}
	return fmt.Errorf("redisbus: claiming namespace %q at %s: the owner key keeps being deleted", namespace, key)
}
