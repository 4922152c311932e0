package anthropic

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"
)

// Text is yielded as it arrives, not when the reply ends; cancelling the
// context mid-stream ends it with context.Canceled.
func TestStreamYieldsBeforeTheReplyEnds(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	c := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"m\",\"usage\":{\"input_tokens\":3}}}\n\n")
		fmt.Fprint(w, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n")
		fmt.Fprint(w, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hel\"}}\n\n")
		w.(http.Flusher).Flush()
		select { // hang until the client goes away
		case <-r.Context().Done():
		case <-release:
		}
	})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var got []string
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ch, e := range c.Stream(ctx, hi) {
			if e != nil {
				err = e
				return
			}
			got = append(got, ch.Text)
			cancel()
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second): // a failsafe, not a timing assertion
		t.Fatal("the stream yielded nothing before the reply ended")
	}
	if len(got) != 1 || got[0] != "Hel" || !errors.Is(err, context.Canceled) {
		t.Fatalf("chunks %q, err %v", got, err)
	}
}
