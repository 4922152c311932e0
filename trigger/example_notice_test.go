package trigger_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/valetkit/valet/trigger"
)

// A Notifier that shows each notice once, however often it is delivered
// (at least once: after a retry, or by another replica after a restart),
// keeps the IdempotencyKeys it showed. A product keeps them in its own
// database, beside what it sent.
func ExampleNotificationKey() {
	var mu sync.Mutex
	shown := map[string]bool{}
	chat := trigger.NotifierFunc(func(ctx context.Context, n trigger.Notification) error {
		mu.Lock()
		defer mu.Unlock()
		if shown[n.IdempotencyKey] {
			return nil // delivered before
		}
		shown[n.IdempotencyKey] = true
		fmt.Printf("to %s: %s\n", n.Target, n.Text)
		return nil
	})
	n := trigger.Notification{Kind: trigger.NotifyResult, RunID: "digest@2026-05-01T09:00:00Z", Target: "user-1",
		Text: "3 new invoices", IdempotencyKey: trigger.NotificationKey("digest@2026-05-01T09:00:00Z", trigger.NotifyResult)}
	for range 2 { // a second delivery of the same notice
		_ = chat.Notify(context.Background(), n)
	}
	fmt.Println(n.IdempotencyKey)
	// Output:
	// to user-1: 3 new invoices
	// digest@2026-05-01T09:00:00Z/result
}
