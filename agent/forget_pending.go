package agent

import (
	"context"
	"errors"
	"fmt"

	"github.com/valetkit/valet/pool"
)

// forgetPending removes the conversation's pooled Agent-Tools — those
// waiting for input or approval, a parked sub-agent's among them — so a
// decision arriving after Forget finds nothing (approval.ErrNotFound) and
// nothing of the forgotten conversation runs.
func (o *Orchestrator) forgetPending(ctx context.Context, tenantID, conversationID string) error {
	if o.pool == nil {
		return nil
	}
	entries, err := o.pool.List(ctx, tenantID)
	if err != nil {
		return fmt.Errorf("agent: forgetting the conversation's pending agents: %w", err)
	}
	for _, e := range entries {
		if conversationOf(e.ConversationID) != conversationID {
			continue
		}
		if err := o.pool.Delete(ctx, tenantID, e.ID); err != nil && !errors.Is(err, pool.ErrNotFound) {
			return fmt.Errorf("agent: forgetting the conversation's pending agent %s: %w", e.ID, err)
		}
	}
	return nil
}
