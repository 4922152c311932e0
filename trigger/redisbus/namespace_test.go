package redisbus_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/redisbus"
)

// The stream is named from the prefix and the namespace unless
// Config.Stream chooses it; the Bus reports its namespace to trigger.New (trigger.Namespaced).
// No Redis needed: New does not connect.
func TestNamespaceNamesTheStream(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	for _, c := range []struct {
		cfg              redisbus.Config
		stream, ns, dead string
	}{
		{redisbus.Config{}, redisbus.DefaultStream, "", redisbus.DefaultStream + redisbus.DeadSuffix},
		{redisbus.Config{Namespace: "prod/public"}, "valet:prod/public:events", "prod/public", "valet:prod/public:events:dead"},
		{redisbus.Config{Namespace: "prod/public", Stream: "mine"}, "mine", "prod/public", "mine:dead"},
		{redisbus.Config{Prefix: "acme:"}, "acme:events", "", "acme:events:dead"},
		{redisbus.Config{Prefix: "acme:", Namespace: "prod/public"}, "acme:prod/public:events", "prod/public", "acme:prod/public:events:dead"},
	} {
		b := newBus(t, rdb, c.cfg)
		var n trigger.Namespaced = b
		if b.Stream() != c.stream || n.Namespace() != c.ns || b.DeadStream() != c.dead {
			t.Errorf("%+v: stream %q, namespace %q, dead %q", c.cfg, b.Stream(), n.Namespace(), b.DeadStream())
		}
		if got := redisbus.StreamFor(c.cfg.Prefix, c.cfg.Namespace); got != c.stream && c.cfg.Stream == "" {
			t.Errorf("StreamFor(%q, %q) = %q", c.cfg.Prefix, c.cfg.Namespace, got)
		}
	}
}
